"""Node pools: what each pool wastes and what its plan does, and the replay of its demand.

Why per pool: a layout is planned per pool (GPUs of one model), so that is where a plan's
effect is read: GPUs used after, freed, changed, demand left unmet, the solver's proof.
The replay table says whether a layout would have served the window's demand hour by hour
(``pools[].replay``: the current layout at the sizes pods asked for, the proposed one and,
with ``--what-if``, the what-if layout; docs/analyzer.md, "What-if").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from migscope.analyzer.report.html.format import anchor, escape, hours, number, pct
from migscope.analyzer.report.html.tables import Cell, Column, sortable_table
from migscope.core.spec.v1 import ReportV1, SliceV1

__all__ = ["pools_table", "replay_section"]

_REPLAYS = (("current", "current layout"), ("proposed", "proposed plan"), ("what_if", "what-if"))


def _int(value: object) -> str:
    v = number(value)
    return f"{v:,.0f}" if v is not None else "n/a"


def pools_table(report: ReportV1, slices: Sequence[SliceV1]) -> str:
    """One row per pool: size, slices by status, waste, and the plan (``#pools-table``).

    Args:
        report: The validated report (``pools``).
        slices: The current slices (their ``pool`` and ``wasted_gpu_hours``).
    """
    by_pool: dict[str, list[SliceV1]] = defaultdict(list)
    for s in slices:
        if s.pool is not None:
            by_pool[s.pool].append(s)
    columns = [
        Column("pool"),
        Column("model", group="model"),
        Column("nodes", numeric=True),
        Column("GPUs", numeric=True),
        Column("slices", numeric=True),
        Column("idle", numeric=True),
        Column("unallocated", numeric=True),
        Column("oversized", numeric=True),
        Column("wasted GPU-h", numeric=True, sums=True),
        Column("GPUs used after", numeric=True),
        Column("bound", numeric=True),
        Column("GPUs changed", numeric=True),
        Column("unmet", numeric=True),
        Column("solver"),
    ]
    rows: list[list[Cell]] = []
    for pool in report.pools:
        name = str(pool.get("pool", ""))
        mine = by_pool.get(name, [])
        counts = Counter(s.status for s in mine)
        plan: Mapping[str, Any] = pool.get("plan") or {}
        solve: Mapping[str, Any] = pool.get("solve") or {}
        bound: Mapping[str, Any] = pool.get("lower_bound") or {}
        rows.append(
            [
                f'<a href="#{anchor("pool", name)}">{escape(name)}</a>',
                escape(pool.get("model", "")),
                str(len({s.node for s in mine})),
                _int(pool.get("gpus")),
                str(len(mine)),
                str(counts["idle"]),
                str(counts["unallocated"]),
                str(counts["oversized"]),
                hours(sum(s.wasted_gpu_hours or 0.0 for s in mine)),
                _int(plan.get("gpus_used")),
                _int(bound.get("gpus")),
                _int(plan.get("gpus_changed")),
                _int(plan.get("unmet_total")),
                f"{escape(solve.get('status', 'n/a'))}, gap {escape(solve.get('gap', 'n/a'))}",
            ]
        )
    return sortable_table("pools-table", columns, rows, empty="<p>No pool was planned.</p>")


def _served(replay: Mapping[str, Any] | None) -> Cell:
    if not replay:
        return ("—", -1.0)
    share = number(replay.get("served_share"))
    unmet = number(replay.get("unmet_instance_hours")) or 0.0
    if share is None:
        return ("n/a", -1.0)
    return (f"{share * 100:.1f}% <small>({unmet:,.0f} inst-h unmet)</small>", share)


def _short(replay: Mapping[str, Any] | None) -> str:
    profiles = replay.get("profiles", []) if replay else []
    parts = [
        f"{escape(p.get('profile'))}: peak {escape(p.get('unmet_peak'))} short in "
        f"{escape(p.get('hours_short'))} h"
        for p in profiles
        if isinstance(p, Mapping) and p.get("hours_short")
    ]
    return ", ".join(parts) or "—"


def replay_section(report: ReportV1) -> str:
    """The replay of the window's demand per pool, and the what-if summary when asked.

    Returns:
        HTML: a caption and ``<table id="replay">``, or a sentence when the report has no
        per-hour data to replay.
    """
    pools = [p for p in report.pools if p.get("replay")]
    if not pools:
        return "<p>No replay: the report has no per-hour data (the window is not whole hours).</p>"
    names = [(k, title) for k, title in _REPLAYS if any(k in p["replay"] for p in pools)]
    columns = [Column("pool")]
    columns += [Column(f"{title}: served", numeric=True) for _, title in names]
    columns.append(Column(f"short under the {names[-1][1]}"))
    rows: list[list[Cell]] = []
    for pool in pools:
        replays: Mapping[str, Any] = pool["replay"]
        cells: list[Cell] = [escape(pool.get("pool", ""))]
        cells += [_served(replays.get(k)) for k, _ in names]
        cells.append(_short(replays.get(names[-1][0])))
        rows.append(cells)
    out = [
        '<p class="muted">Each hour of the window, the demand (busy slices held by a pod: at '
        "the size the pod asked for against the current layout, at the right size against "
        "the others) against the instances of each profile the layout offers in the pool.</p>",
        sortable_table("replay", columns, rows),
    ]
    what_if = report.what_if
    if what_if:
        configs = ", ".join(f"{k}={v}" for k, v in (what_if.get("configs") or {}).items())
        proposed = (what_if.get("proposed") or {}).get("served_share")
        out.append(
            f'<p id="what-if">What-if <code>{escape(configs)}</code>: serves '
            f"{pct(what_if.get('served_share'))} of the window's demand, "
            f"{hours(what_if.get('unmet_instance_hours'))} instance-hours unmet "
            f"(proposed plan: {pct(proposed)}).</p>"
        )
    return "\n".join(out)
