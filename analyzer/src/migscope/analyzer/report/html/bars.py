"""The HTML report's waste per namespace: stacked bars of idle and oversized GPU-hours.

Why per namespace: waste is a conversation with the teams that hold it; unallocated slices
have no team and are grouped under "(unallocated)" by the analyzer.
"""

from __future__ import annotations

from collections.abc import Sequence

from migscope.analyzer.report.html.format import STATUS_COLOURS, escape, hours
from migscope.core.spec.v1 import NamespaceWasteV1

__all__ = ["waste_bars"]

_LABEL_W = 160
_BAR_W = 520
_BAR_H = 20


def waste_bars(rows: Sequence[NamespaceWasteV1]) -> str:
    """The namespaces' wasted GPU-hours as an inline SVG bar chart with its legend.

    Args:
        rows: ``savings.by_namespace``, biggest waste first.

    Returns:
        HTML: the ``<svg class="chart waste">`` and a legend, or a sentence when empty.
    """
    if not rows:
        return "<p>No waste found.</p>"
    biggest = max(r.wasted_gpu_hours for r in rows) or 1.0
    top = 4
    width = _LABEL_W + _BAR_W + 220
    height = top + len(rows) * (_BAR_H + 6) + 4
    out = [
        f'<svg class="chart waste" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="wasted GPU-hours per namespace">'
    ]
    for i, r in enumerate(rows):
        y = top + i * (_BAR_H + 6)
        idle = max(r.idle_gpu_hours, 0.0)
        over = max(r.oversized_gpu_hours, 0.0)
        w_idle = _BAR_W * idle / biggest
        w_over = _BAR_W * over / biggest
        name = escape(r.namespace)
        out.append(
            f'<text x="{_LABEL_W - 6}" y="{y + 14}" text-anchor="end" font-size="12">{name}</text>'
        )
        out.append(
            f'<rect class="bar idle" x="{_LABEL_W}" y="{y}" width="{w_idle:.1f}" '
            f'height="{_BAR_H}" fill="{STATUS_COLOURS["idle"]}"><title>{name}: idle '
            f"{hours(idle)} GPU-h</title></rect>"
        )
        out.append(
            f'<rect class="bar oversized" x="{_LABEL_W + w_idle:.1f}" y="{y}" '
            f'width="{w_over:.1f}" height="{_BAR_H}" fill="{STATUS_COLOURS["oversized"]}">'
            f"<title>{name}: oversized {hours(over)} GPU-h</title></rect>"
        )
        out.append(
            f'<text x="{_LABEL_W + w_idle + w_over + 6:.1f}" y="{y + 14}" font-size="12">'
            f"{hours(r.wasted_gpu_hours)} GPU-h ({escape(r.slices)} slices)</text>"
        )
    out.append("</svg>")
    legend = (
        '<p class="legend">'
        f'<span><i style="background:{STATUS_COLOURS["idle"]}"></i>idle (unallocated slices '
        "under “(unallocated)”)</span>"
        f'<span><i style="background:{STATUS_COLOURS["oversized"]}"></i>oversized</span></p>'
    )
    return "\n".join(out) + "\n" + legend
