"""Node pools: what each pool wastes and what its plan does, and the replay of its demand.

Why per pool: a layout is planned per pool (GPUs of one model), so that is where a plan's
effect is read: GPUs used after, freed, changed, demand left unmet, the solver's proof.
The replay table says whether a layout would have served the window's demand hour by hour
(``pools[].replay``: the current layout at the sizes pods asked for, the proposed one and,
with ``--what-if``, the what-if layout; docs/analyzer.md, "What-if").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from migscope.analyzer._report.html.format import anchor, escape, hours, pct
from migscope.analyzer._report.html.tables import Cell, Column, sortable_table
from migscope.core import ReplayV1, ReportV1, SliceV1

_REPLAYS = (("current", "current layout"), ("proposed", "proposed plan"), ("what_if", "what-if"))


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
        name = pool.pool
        mine = by_pool.get(name, [])
        counts = Counter(s.status for s in mine)
        plan, solve = pool.plan, pool.solve
        rows.append(
            [
                f'<a href="#{anchor("pool", name)}">{escape(name)}</a>',
                escape(pool.model),
                str(len({s.node for s in mine})),
                f"{pool.gpus:,}",
                str(len(mine)),
                str(counts["idle"]),
                str(counts["unallocated"]),
                str(counts["oversized"]),
                hours(sum(s.wasted_gpu_hours or 0.0 for s in mine)),
                f"{plan.gpus_used:,}",
                f"{pool.lower_bound.gpus:,}",
                f"{plan.gpus_changed:,}",
                f"{plan.unmet_total:,}",
                f"{escape(solve.status)}, gap {escape(solve.gap)}",
            ]
        )
    return sortable_table("pools-table", columns, rows, empty="<p>No pool was planned.</p>")


def _served(replay: ReplayV1 | None) -> Cell:
    if replay is None:
        return ("—", -1.0)
    share, unmet = float(replay.served_share), replay.unmet_instance_hours
    return (f"{share * 100:.1f}% <small>({unmet:,.0f} inst-h unmet)</small>", share)


def _short(replay: ReplayV1 | None) -> str:
    profiles = replay.profiles if replay is not None else []
    parts = [
        f"{escape(p.profile)}: peak {escape(p.unmet_peak)} short in {escape(p.hours_short)} h"
        for p in profiles
        if p.hours_short
    ]
    return ", ".join(parts) or "—"


def replay_section(report: ReportV1) -> str:
    """The replay of the window's demand per pool, and the what-if summary when asked.

    Returns:
        HTML: a caption and ``<table id="replay">``, or a sentence when the report has no
        per-hour data to replay.
    """
    pools = [p for p in report.pools if p.replay]
    if not pools:
        return "<p>No replay: the report has no per-hour data (the window is not whole hours).</p>"
    names = [(k, title) for k, title in _REPLAYS if any(k in p.replay for p in pools)]
    columns = [Column("pool")]
    columns += [Column(f"{title}: served", numeric=True) for _, title in names]
    columns.append(Column(f"short under the {names[-1][1]}"))
    rows: list[list[Cell]] = []
    for pool in pools:
        cells: list[Cell] = [escape(pool.pool)]
        cells += [_served(pool.replay.get(k)) for k, _ in names]
        cells.append(_short(pool.replay.get(names[-1][0])))
        rows.append(cells)
    out = [
        '<p class="muted">Each hour of the window, the demand (busy slices held by a pod: at '
        "the size the pod asked for against the current layout, at the right size against "
        "the others) against the instances of each profile the layout offers in the pool.</p>",
        sortable_table("replay", columns, rows),
    ]
    what_if = report.what_if
    if what_if is not None:
        configs = ", ".join(f"{k}={v}" for k, v in what_if.configs.items())
        proposed = what_if.proposed.served_share if what_if.proposed is not None else None
        out.append(
            f'<p id="what-if">What-if <code>{escape(configs)}</code>: serves '
            f"{pct(what_if.served_share)} of the window's demand, "
            f"{hours(what_if.unmet_instance_hours)} instance-hours unmet "
            f"(proposed plan: {pct(proposed)}).</p>"
        )
    return "\n".join(out)
