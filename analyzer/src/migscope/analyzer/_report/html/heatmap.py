"""Activity and memory heatmaps: one row per node in each pool, one row per slice on drill-down.

Why aggregated: a fleet of 5,000 slices is 150-odd nodes; a page of 5,000 rows shows
nothing and took minutes to open. Each pool gets one heatmap whose rows are its nodes (the
share of the node's MIG compute that worked each hour: every slice's activity weighted by
its compute slices), and each node a collapsed ``<details>`` with one row per slice.
Next to activity, memory: the slices' p95 memory held as a share of their memory (the
report has memory over the window, not per hour), so an idle slice that holds a loaded
model shows as white activity beside dark memory.

The columns are the hours of the window when the report has per-hour activity
(``hourly.activity``) with dates on the axis (:mod:`.timeaxis`), else p50, p95 and max
over the window (the caption says which). Cells are pixels of a PNG (:mod:`.png`); the
page's script shows a cell's time and value under the pointer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from migscope.analyzer._report.html.format import (
    anchor,
    escape,
    gib,
    hours,
    number,
    owner_text,
    pct,
    status_counts_text,
)
from migscope.analyzer._report.html.png import (
    ACTIVITY_SCALE,
    MEMORY_SCALE,
    heat_png,
    png_data_uri,
)
from migscope.analyzer._report.html.timeaxis import AXIS_HEIGHT_PX, time_axis
from migscope.core import CatalogueError, ReportV1, SliceV1, find_model

ROW_PX = 14
"""Height of one heatmap row (a node or a slice), pixels; the labels use the same."""
_STATS = ("p50", "p95", "max")
_STATS_CELL_PX = 48
_MEMORY_PX = 22
_WIDTH_PX = 680


@dataclass(frozen=True)
class Columns:
    """The heatmaps' columns: hours of the window, or window statistics."""

    kind: Literal["hourly", "window-stats"]
    count: int
    start_unix: float
    period_s: float
    cell_px: int


def _hourly(s: SliceV1) -> list[float | None] | None:
    """The slice's activity per hour, or None when the report has none for it.

    Older reports kept it in the evidence (``activity_hourly``); it is read there too.
    """
    series = s.hourly.activity if s.hourly is not None else s.evidence.activity_hourly
    if not series:
        return None
    return [number(v) for v in series]


def columns_of(report: ReportV1, slices: Sequence[SliceV1]) -> Columns:
    """Hours when any slice has per-hour activity, else p50/p95/max."""
    lengths = [len(h) for h in (_hourly(s) for s in slices) if h is not None]
    if lengths:
        count = max(lengths)
        period = next(
            (s.hourly.period_seconds for s in slices if s.hourly is not None),
            report.window.hours * 3600.0 / count,
        )
        cell = max(1, min(8, _WIDTH_PX // count))
        return Columns("hourly", count, report.window.start_unix, period, cell)
    return Columns("window-stats", len(_STATS), report.window.start_unix, 0.0, _STATS_CELL_PX)


def slice_activity(s: SliceV1, cols: Columns) -> list[float | None]:
    """The slice's row: activity per hour, or its p50, p95 and max (None where unknown)."""
    if cols.kind == "window-stats":
        e = s.evidence
        return [number(v) for v in (e.activity_p50, e.activity_p95, e.activity_max)]
    series = _hourly(s) or []
    return (series + [None] * cols.count)[: cols.count]


def memory_share(s: SliceV1) -> float | None:
    """p95 memory held as a share of the slice's memory, or None when unknown."""
    used = number(s.evidence.memory_p95_bytes)
    total = number(s.evidence.memory_total_bytes)
    if used is None or total is None or total <= 0:
        return None
    return used / total


def _compute_weight(s: SliceV1) -> float:
    """The slice's compute slices (1 when the catalogue does not know its profile)."""
    if s.model is not None:
        try:
            return float(find_model(s.model).profile(s.profile).compute_slices)
        except (CatalogueError, ValueError):
            pass
    return 1.0


def node_activity(slices: Sequence[SliceV1], cols: Columns) -> list[float | None]:
    """A node's row: per column, its slices' activity weighted by compute slices."""
    sums = [0.0] * cols.count
    weights = [0.0] * cols.count
    for s in slices:
        w = _compute_weight(s)
        for j, v in enumerate(slice_activity(s, cols)):
            if v is not None:
                sums[j] += w * v
                weights[j] += w
    return [sums[j] / weights[j] if weights[j] > 0 else None for j in range(cols.count)]


def node_memory(slices: Sequence[SliceV1]) -> float | None:
    """A node's p95 memory held over its slices' memory, or None when unknown."""
    used = total = 0.0
    for s in slices:
        u = number(s.evidence.memory_p95_bytes)
        t = number(s.evidence.memory_total_bytes)
        if u is not None and t is not None and t > 0:
            used, total = used + u, total + t
    return used / total if total > 0 else None


def _axis(cols: Columns) -> str:
    if cols.kind == "hourly":
        return time_axis(
            start_unix=cols.start_unix,
            period_s=cols.period_s,
            columns=cols.count,
            cell_px=cols.cell_px,
        )
    width = cols.count * cols.cell_px
    labels = "".join(
        f'<text x="{(j + 0.5) * cols.cell_px:g}" y="{AXIS_HEIGHT_PX - 8}" '
        f'text-anchor="middle">{name}</text>'
        for j, name in enumerate(_STATS)
    )
    return (
        f'<svg class="axis" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{AXIS_HEIGHT_PX}" viewBox="0 0 {width} {AXIS_HEIGHT_PX}">{labels}</svg>'
    )


def heat_grid(
    labels: Sequence[str],
    activity: Sequence[Sequence[float | None]],
    memory: Sequence[float | None],
    cols: Columns,
    *,
    what: str,
) -> str:
    """Labels, the activity image under its axis, and the memory strip, row for row.

    Args:
        labels: One HTML fragment per row (already escaped): each becomes a ``<div>``.
        activity: One row of values per label.
        memory: One memory share per label.
        cols: The columns.
        what: What a row is ("node" or "slice"), for the image's alternative text.
    """
    n = len(labels)
    height = max(1, n) * ROW_PX
    width = cols.count * cols.cell_px
    act = png_data_uri(heat_png(activity, cols.count, ACTIVITY_SCALE))
    mem = png_data_uri(heat_png([[m] for m in memory], 1, MEMORY_SCALE))
    period = f' data-period="{cols.period_s:g}"' if cols.kind == "hourly" else ""
    return (
        f'<div class="hm" data-kind="{cols.kind}" data-rows="{n}" data-cols="{cols.count}" '
        f'data-start="{cols.start_unix:.3f}"{period}>'
        f'<div></div>{_axis(cols)}<div class="mh">mem</div>'
        f'<div class="hl">{"".join(labels)}</div>'
        f'<img class="heat act" src="{act}" width="{width}" height="{height}" '
        f'alt="activity of {n} {what}(s)">'
        f'<img class="heat mem" src="{mem}" width="{_MEMORY_PX}" height="{height}" '
        f'alt="memory held by {n} {what}(s)"></div>'
    )


def _slice_label(s: SliceV1) -> str:
    tip = (
        f"{s.status} · held by {owner_text(s)} · p95 activity "
        f"{pct(s.evidence.activity_p95)} · p95 memory "
        f"{gib(s.evidence.memory_p95_bytes)} of {gib(s.evidence.memory_total_bytes)}"
    )
    who = f" · {s.namespace}/{s.pod}" if s.pod is not None else ""
    text = f"GPU {s.gpu} · GI {s.gpu_instance_id} · {s.profile}{who}"
    return f'<div class="st-{escape(s.status)}" title="{escape(tip)}">{escape(text)}</div>'


def _wasted(slices: Sequence[SliceV1]) -> float:
    return sum(s.wasted_gpu_hours or 0.0 for s in slices)


def _node_label(node: str, slices: Sequence[SliceV1]) -> str:
    tip = f"{node}: {len(slices)} slices ({status_counts_text(slices)})"
    return (
        f'<div title="{escape(tip)}"><a href="#{anchor("node", node)}" class="drill">'
        f"{escape(node)}</a></div>"
    )


def _caption(cols: Columns) -> str:
    if cols.kind == "hourly":
        what = (
            "Activity per hour (dates in UTC): per node, the share of its MIG compute that "
            "worked (each slice's mean activity weighted by its compute slices); per slice, "
            "its mean activity."
        )
    else:
        what = (
            "Activity p50, p95 and max over the window: the report holds window statistics, "
            "not per-hour activity."
        )
    return (
        f'<p class="muted">{what} White 0 %, dark blue 100 % (on a square-root scale, so '
        "that a little work shows), grey: no data. "
        "<b>mem</b>: p95 memory held as a share of the slices' memory (dark: full). "
        "Click a node for its slices; hover a cell for its time and value.</p>"
    )


def activity_section(
    report: ReportV1,
    slices: Sequence[SliceV1],
    *,
    node_link: dict[str, str],
) -> str:
    """The activity section: per pool a heatmap of its nodes, per node its slices.

    Args:
        report: The validated report (window, for the columns).
        slices: The current slices, ordered as they should be listed within a node.
        node_link: ``{node: HTML}`` of a Grafana link per node (empty without Grafana).

    Returns:
        HTML: the caption, then per pool an ``<h3>``, the nodes' grid and one
        ``<details class="node">`` per node with its slices' grid.
    """
    if not slices:
        return "<p>No current slices.</p>"
    cols = columns_of(report, slices)
    pools: dict[str, dict[str, list[SliceV1]]] = defaultdict(lambda: defaultdict(list))
    for s in slices:
        pools[s.pool or "(not planned)"][s.node].append(s)
    out = [_caption(cols)]
    for pool in sorted(pools, key=lambda p: (p == "(not planned)", p)):
        nodes = pools[pool]
        names = sorted(nodes)
        members = [s for n in names for s in nodes[n]]
        out.append(
            f'<h3 id="{anchor("pool", pool)}">Pool {escape(pool)}: {len(names)} node(s), '
            f"{len(members)} slices, {hours(_wasted(members))} GPU-hours wasted</h3>"
        )
        out.append(
            heat_grid(
                [_node_label(n, nodes[n]) for n in names],
                [node_activity(nodes[n], cols) for n in names],
                [node_memory(nodes[n]) for n in names],
                cols,
                what="node",
            )
        )
        for n in names:
            mine = nodes[n]
            out.append(
                f'<details class="node" id="{anchor("node", n)}"><summary><b>{escape(n)}</b>'
                f" · {len(mine)} slices ({escape(status_counts_text(mine))}) · "
                f"{hours(_wasted(mine))} GPU-h wasted{node_link.get(n, '')}</summary>"
            )
            out.append(
                heat_grid(
                    [_slice_label(s) for s in mine],
                    [slice_activity(s, cols) for s in mine],
                    [memory_share(s) for s in mine],
                    cols,
                    what="slice",
                )
            )
            out.append("</details>")
    return "\n".join(out)
