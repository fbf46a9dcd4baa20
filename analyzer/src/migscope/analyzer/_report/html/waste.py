"""Waste per namespace: the teams to talk to, with GPU-hours, cost and the change since last run.

Why a table with bars and not a chart: it sorts (by waste, cost, change), it scales to a
few hundred namespaces, and each row links to the namespace's Grafana dashboard. The bar is
the namespace's waste against the largest, split into idle (red) and oversized (orange).
Unallocated slices have no team and are grouped under "(unallocated)" by the analyzer.
"""

from __future__ import annotations

from collections.abc import Mapping

from migscope.analyzer._report.html.format import STATUS_COLOURS, escape, hours, money
from migscope.analyzer._report.html.tables import Cell, Column, sortable_table
from migscope.analyzer._report.trend import per_week
from migscope.core import ReportV1

_BAR_PX = 160


def _bar(idle: float, oversized: float, biggest: float) -> str:
    w_idle = _BAR_PX * max(idle, 0.0) / biggest
    w_over = _BAR_PX * max(oversized, 0.0) / biggest
    return (
        f'<span class="bar" style="width:{w_idle:.0f}px;background:{STATUS_COLOURS["idle"]}">'
        f'</span><span class="bar" style="width:{w_over:.0f}px;'
        f'background:{STATUS_COLOURS["oversized"]}"></span>'
    )


def _change(now: float, before: float | None, scale_now: float, scale_before: float) -> Cell:
    if before is None:
        return ("new", 1e18)  # sorts above every change
    delta = now * scale_now - before * scale_before
    if round(delta, 1) == 0:
        delta = 0.0  # no "-0.0"
    return (f"{delta:+,.1f}", delta)


def waste_table(report: ReportV1, *, namespace_link: Mapping[str, str]) -> str:
    """``savings.by_namespace`` as a sortable table (``#waste-by-namespace``).

    Args:
        report: The validated report (its savings, and its trend for the change column).
        namespace_link: ``{namespace: HTML}`` of a Grafana link per namespace (may be empty).

    Returns:
        HTML: the table and its legend, or a sentence when nothing was wasted.
    """
    rows = report.savings.by_namespace
    if not rows:
        return "<p>No waste found.</p>"
    price = report.savings.price_per_gpu_hour
    last = report.trend[-1] if report.trend else None
    previous = last.by_namespace if last is not None else None
    # Windows of other lengths compare per week of window (trend_svg.per_week).
    same = last is not None and round(last.window_hours, 1) == round(report.window.hours, 1)
    scale_now = 1.0 if same else per_week(1.0, report.window.hours)
    scale_before = 1.0 if same or last is None else per_week(1.0, last.window_hours)
    biggest = max(r.wasted_gpu_hours for r in rows) or 1.0
    columns = [
        Column("namespace"),
        Column("slices", numeric=True),
        Column("idle GPU-h", numeric=True),
        Column("unallocated GPU-h", numeric=True),
        Column("oversized GPU-h", numeric=True),
        Column("wasted GPU-h", numeric=True),
        Column(""),
    ]
    if price is not None:
        columns.append(Column("cost", numeric=True))
    if previous is not None:
        unit = "GPU-h" if same else "GPU-h per week"
        columns.append(Column(f"change since last run ({unit})", numeric=True))
    table_rows: list[list[Cell]] = []
    for r in rows:
        link = namespace_link.get(r.namespace, "") if r.namespace != "(unallocated)" else ""
        cells: list[Cell] = [
            f"{escape(r.namespace)}{link}",
            str(r.slices),
            hours(r.idle_gpu_hours),
            hours(r.unallocated_gpu_hours),
            hours(r.oversized_gpu_hours),
            hours(r.wasted_gpu_hours),
            _bar(r.idle_gpu_hours + r.unallocated_gpu_hours, r.oversized_gpu_hours, biggest),
        ]
        if price is not None:
            cells.append(money(r.wasted_gpu_hours * price))
        if previous is not None:
            before = previous.get(r.namespace)
            cells.append(_change(r.wasted_gpu_hours, before, scale_now, scale_before))
        table_rows.append(cells)
    legend = (
        '<p class="legend">'
        f'<span><i style="background:{STATUS_COLOURS["idle"]}"></i>idle and unallocated '
        "(unallocated slices under “(unallocated)”)</span>"
        f'<span><i style="background:{STATUS_COLOURS["oversized"]}"></i>oversized: the part '
        "a smaller profile would give back</span></p>"
    )
    return sortable_table("waste-by-namespace", columns, table_rows) + "\n" + legend
