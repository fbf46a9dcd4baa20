"""The slice activity heatmap of the HTML report: when (or how much) each slice worked.

One row per current slice. When every slice carries per-hour activity (``hourly.activity``;
the analyzer adds it whenever the window is whole hours on the hour grid) the columns are
the hours of the window; otherwise they are activity p50, p95 and max over the window, and
the caption says which.
"""

from __future__ import annotations

from collections.abc import Sequence

from migscope.analyzer.report.html.format import (
    escape,
    number,
    pct,
    slice_label,
    status_colour,
)
from migscope.core.spec.v1 import SliceV1

__all__ = ["heat_colour", "heatmap"]

_CELL_W = 56
_HOUR_W = 4
_CELL_H = 18
_LABEL_W = 330


def heat_colour(value: float | None) -> str:
    """White (0) to dark blue (1); grey for unknown."""
    if value is None:
        return "#e0e0e0"
    v = min(max(value, 0.0), 1.0)
    r = round(247 + (8 - 247) * v)
    g = round(251 + (48 - 251) * v)
    b = round(255 + (107 - 255) * v)
    return f"rgb({r},{g},{b})"


def _hourly(s: SliceV1) -> list[float | None] | None:
    """The slice's activity per hour, or None when the report has none for it.

    Older reports kept it in the evidence (``activity_hourly``); it is read there too.
    """
    series = s.hourly.activity if s.hourly is not None else s.evidence.get("activity_hourly")
    if not isinstance(series, list) or not series:
        return None
    return [number(v) for v in series]


def heatmap(slices: Sequence[SliceV1]) -> str:
    """The heatmap of ``slices`` as a caption and an inline SVG.

    Args:
        slices: The current slices, in the order of the rows.

    Returns:
        HTML: a caption paragraph and the ``<svg class="chart heatmap">`` (its
        ``data-kind`` is ``hourly`` or ``window-stats``), or a sentence when there are none.
    """
    if not slices:
        return "<p>No current slices.</p>"
    hourly = [_hourly(s) for s in slices]
    if all(h is not None for h in hourly):
        kind = "hourly"
        n_cols = max(len(h or []) for h in hourly)
        columns = [f"hour {i}" for i in range(n_cols)]
        cell_w = _HOUR_W
        rows: list[list[float | None]] = [list(h or []) for h in hourly]
        caption = "Activity per hour of the window, one row per slice (0% white, 100% dark)."
    else:
        kind = "window-stats"
        columns = ["p50", "p95", "max"]
        cell_w = _CELL_W
        rows = [[number(s.evidence.get(f"activity_{c}")) for c in columns] for s in slices]
        caption = (
            "Activity p50, p95 and max over the window, one row per slice (0% white, 100% "
            "dark, grey unknown). The report holds window statistics, not per-hour activity."
        )
    top = 22
    width = _LABEL_W + cell_w * len(columns) + 10
    height = top + _CELL_H * len(rows) + 4
    out = [
        f'<p class="muted">{escape(caption)}</p>',
        f'<svg class="chart heatmap" data-kind="{kind}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="slice activity heatmap">',
    ]
    if kind == "window-stats":
        for j, col in enumerate(columns):
            x = _LABEL_W + j * cell_w + cell_w / 2
            out.append(f'<text x="{x:g}" y="15" text-anchor="middle" font-size="12">{col}</text>')
    else:
        out.append(f'<text x="{_LABEL_W}" y="15" font-size="12">hours 0..{len(columns) - 1}</text>')
    for i, (s, values) in enumerate(zip(slices, rows, strict=True)):
        y = top + i * _CELL_H
        label = escape(slice_label(s))
        out.append(
            f'<text x="{_LABEL_W - 6}" y="{y + 13}" text-anchor="end" font-size="11">{label}</text>'
        )
        out.append(
            f'<rect x="0" y="{y + 4}" width="6" height="{_CELL_H - 6}" '
            f'fill="{status_colour(s.status)}"><title>{escape(s.status)}</title></rect>'
        )
        for j, value in enumerate(values):
            x = _LABEL_W + j * cell_w
            out.append(
                f'<rect class="cell" x="{x}" y="{y}" width="{cell_w}" height="{_CELL_H}" '
                f'fill="{heat_colour(value)}" stroke="#fff" stroke-width="0.5">'
                f"<title>{label} {escape(columns[j])}: {pct(value)}</title></rect>"
            )
            if kind == "window-stats":
                colour = "#fff" if value is not None and value > 0.55 else "#222"
                out.append(
                    f'<text x="{x + cell_w / 2:g}" y="{y + 13}" text-anchor="middle" '
                    f'font-size="10" fill="{colour}">{pct(value)}</text>'
                )
    out.append("</svg>")
    return "\n".join(out)
