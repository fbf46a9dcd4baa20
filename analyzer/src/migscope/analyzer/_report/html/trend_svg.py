"""The waste trend across runs: stacked bars of idle, unallocated and oversized GPU-hours.

Why: a weekly report alone cannot say whether the fleet is getting better. The earlier runs'
numbers travel in the report (``trend``, read from the reports the job kept:
:mod:`migscope.analyzer._report.trend`), so the chart needs no server and no database. One
bar per run, this run last, each at the end date of its window; a table with the numbers
sits under it (collapsed). Bars are GPU-hours per week of window (the GPU-hours themselves
for the usual 7-day window), so that runs over windows of other lengths compare.
"""

from __future__ import annotations

from dataclasses import dataclass

from migscope.analyzer._report.html.format import STATUS_COLOURS, escape, hours, money
from migscope.analyzer._report.trend import per_week
from migscope.core import ReportV1

_BAR_W = 34
_GAP = 14
_PLOT_H = 150
_TOP = 14
_LEFT = 64


@dataclass(frozen=True)
class _Run:
    label: str
    end: str
    hours_total: float
    idle: float
    unallocated: float
    oversized: float
    cost: float | None
    gpus_freed: int
    window_hours: float
    current: bool


def _runs(report: ReportV1) -> list[_Run]:
    runs = []
    for p in report.trend or []:
        idle = p.idle_gpu_hours
        unalloc = p.unallocated_gpu_hours
        over = p.oversized_gpu_hours
        if idle is None or unalloc is None or over is None:  # older reports: total only
            idle, unalloc, over = p.wasted_gpu_hours, 0.0, 0.0
        runs.append(
            _Run(
                p.run,
                p.window_end,
                p.wasted_gpu_hours,
                idle,
                unalloc,
                over,
                p.wasted_cost,
                p.gpus_freed,
                p.window_hours,
                current=False,
            )
        )
    sav = report.savings
    runs.append(
        _Run(
            "this report",
            report.window.end,
            sav.wasted_gpu_hours,
            sav.idle_gpu_hours or 0.0,
            sav.unallocated_gpu_hours or 0.0,
            sav.oversized_gpu_hours or 0.0,
            sav.wasted_cost,
            sav.gpus_freed,
            report.window.hours,
            current=True,
        )
    )
    return runs


def _chart(runs: list[_Run]) -> str:
    biggest = max((per_week(r.hours_total, r.window_hours) for r in runs), default=0.0) or 1.0
    width = _LEFT + len(runs) * (_BAR_W + _GAP) + 10
    height = _TOP + _PLOT_H + 34
    out = [
        f'<svg class="chart trend" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="wasted GPU-hours per run">',
        f'<path d="M{_LEFT - 4} {_TOP + _PLOT_H}H{width - 6}" stroke="#888"/>',
        f'<text x="{_LEFT - 8}" y="{_TOP + 4}" text-anchor="end">{hours(biggest)}</text>',
        f'<text x="{_LEFT - 8}" y="{_TOP + _PLOT_H}" text-anchor="end">0</text>',
    ]
    for i, r in enumerate(runs):
        x = _LEFT + i * (_BAR_W + _GAP)
        y = float(_TOP + _PLOT_H)
        outline = ' stroke="#222"' if r.current else ""
        for part, value in (
            ("idle", r.idle),
            ("unallocated", r.unallocated),
            ("oversized", r.oversized),
        ):
            h = _PLOT_H * max(per_week(value, r.window_hours), 0.0) / biggest
            y -= h
            out.append(
                f'<rect class="run {part}" x="{x}" y="{y:.1f}" width="{_BAR_W}" '
                f'height="{h:.1f}" fill="{STATUS_COLOURS[part]}"{outline}>'
                f"<title>{escape(r.label)} (window ending {escape(r.end)}): {part} "
                f"{hours(value)} GPU-h in {hours(r.window_hours)} h</title></rect>"
            )
        out.append(
            f'<text class="total" x="{x + _BAR_W / 2:g}" y="{y - 3:.1f}" '
            f'text-anchor="middle">{hours(per_week(r.hours_total, r.window_hours))}</text>'
        )
        out.append(
            f'<text x="{x + _BAR_W / 2:g}" y="{_TOP + _PLOT_H + 14}" text-anchor="middle">'
            f"{escape(r.end[5:10])}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _table(runs: list[_Run]) -> str:
    rows = [
        f"<tr><td>{escape(r.label)}</td><td>{escape(r.end)}</td><td>{hours(r.window_hours)}</td>"
        f"<td>{hours(r.hours_total)}</td><td>{hours(r.idle)}</td><td>{hours(r.unallocated)}"
        f"</td><td>{hours(r.oversized)}</td><td>{money(r.cost)}</td>"
        f"<td>{escape(r.gpus_freed)}</td></tr>"
        for r in reversed(runs)
    ]
    return (
        '<details><summary>The numbers</summary><table id="trend-table"><thead><tr>'
        "<th>run</th><th>window end</th><th>hours</th><th>wasted GPU-h</th><th>idle</th>"
        "<th>unallocated</th><th>oversized</th><th>cost</th><th>GPUs freeable</th></tr>"
        "</thead><tbody>" + "".join(rows) + "</tbody></table></details>"
    )


def trend_section(report: ReportV1) -> str:
    """The chart and table of waste per run, or how to get one.

    Returns:
        HTML: the ``<svg class="chart trend">`` with its legend and table, or a sentence
        when the report has no earlier runs.
    """
    if not report.trend:
        return (
            '<p class="muted">No earlier runs: <code>migscope analyze --previous-reports '
            "DIR</code> reads the reports kept in DIR (the Helm report CronJob and "
            "<code>migscope schedule</code> pass their report directory) and draws the "
            "waste of each run here.</p>"
        )
    runs = _runs(report)
    lengths = {round(r.window_hours, 1) for r in runs}
    caveat = (
        " The windows differ in length: each bar is scaled to a week (the table has the "
        "GPU-hours of each window)."
        if len(lengths) > 1
        else ""
    )
    legend = (
        '<p class="legend">'
        + "".join(
            f'<span><i style="background:{STATUS_COLOURS[k]}"></i>{k}</span>'
            for k in ("idle", "unallocated", "oversized")
        )
        + f"Wasted GPU-hours per week of window, each run at the end of its window (UTC)."
        f"{caveat}</p>"
    )
    return _chart(runs) + legend + _table(runs)
