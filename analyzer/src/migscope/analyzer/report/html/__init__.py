"""The HTML report: one self-contained file with charts, for a browser or an e-mail attachment.

Everything is drawn from the validated report contract (:class:`~migscope.core.spec.v1.ReportV1`,
docs/report-schema.md) as inline SVG generated here: no JavaScript charting library, no
external CSS, fonts or images, and a Content-Security-Policy that forbids the page from
loading anything. This module assembles the page; each part has its own module:

* :mod:`.summary`: the headline cards, and the warning when the report is a snapshot.
* :mod:`.heatmap`: **slice activity**, one row per current slice, per hour of the window
  when every slice has hourly activity, else its p50, p95 and max (the caption says which).
* :mod:`.tables`: **idle and unallocated slices** with every owner that held them.
* :mod:`.bars`: **waste per namespace**, stacked bars of idle and oversized GPU-hours.
* :mod:`.layouts_svg`: **layouts per GPU**, the memory slices as a row of boxes and each GPU
  instance as a span at its placement, now (coloured by status) and as proposed.
* :mod:`.format`: escaping and number formats shared by all of them.

Every string taken from the report is escaped (pod and namespace names are user input).
A one-line script records any script error into a hidden element (``#js-errors``) so that
automated checks can prove the page renders cleanly.
"""

from __future__ import annotations

from migscope.analyzer.report.html.bars import waste_bars
from migscope.analyzer.report.html.format import STATUS_COLOURS, escape, hours
from migscope.analyzer.report.html.heatmap import heatmap
from migscope.analyzer.report.html.layouts_svg import (
    LAYOUT_LEFT_PX,
    LAYOUT_ROW_PX,
    LAYOUT_SLICE_PX,
    layouts_section,
)
from migscope.analyzer.report.html.summary import summary_section
from migscope.analyzer.report.html.tables import idle_table
from migscope.core.spec.v1 import ReportV1, SliceV1

__all__ = [
    "LAYOUT_LEFT_PX",
    "LAYOUT_ROW_PX",
    "LAYOUT_SLICE_PX",
    "STATUS_COLOURS",
    "render_html",
]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_ERROR_HOOK = (
    "window.addEventListener('error',function(e){var n=document.getElementById('js-errors');"
    "if(n){n.textContent+=String(e.message)+'\\n';}});"
)
_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#222;
max-width:1200px}
h1{margin-bottom:4px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
.muted{color:#666}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:140px}
.card b{display:block;font-size:1.5em}
table{border-collapse:collapse;font-size:0.9em;margin:8px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5}.badge{display:inline-block;padding:1px 6px;border-radius:4px;color:#fff}
.gpu{display:inline-block;margin:6px 18px 6px 0}svg text{font-family:inherit}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
"""


def _sort_key(s: SliceV1) -> tuple[str, int, int, int]:
    """Node, GPU, placement (unknown last) and GI id: the order of the heatmap's rows."""
    start = s.placement_start if s.placement_start is not None else 99
    return (s.node, s.gpu, start, s.gpu_instance_id)


def _current_slices(report: ReportV1) -> list[SliceV1]:
    """The slices that exist at the end of the window (history-only ones are not drawn)."""
    return sorted((s for s in report.slices if s.current), key=_sort_key)


def render_html(report: ReportV1, *, title: str = "migscope report") -> str:
    """The whole report as one self-contained HTML page.

    Args:
        report: The validated report (``validate_report(result.to_json())``, or a parsed
            report.json through :func:`~migscope.core.spec.v1.validate_report`).
        title: Page title and heading.

    Returns:
        The HTML document: inline CSS and SVG only; it loads nothing from anywhere.
    """
    window = report.window
    slices = _current_slices(report)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<script>{_ERROR_HOOK}</script>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">Window: {escape(window.start)} → {escape(window.end)} '
        f"({hours(window.hours)} h, {escape(window.step_seconds)} s step). "
        f"Schema version {escape(report.schema_version)}.</p>",
        '<div id="js-errors" hidden></div>',
        "<h2>Summary</h2>",
        summary_section(report),
        '<h2 id="activity">Slice activity</h2>',
        heatmap(slices),
        "<h2>Idle and unallocated slices</h2>",
        idle_table(slices),
        '<h2 id="waste">Waste per namespace</h2>',
        waste_bars(report.savings.by_namespace),
        '<h2 id="layouts">Layouts per GPU: now and proposed</h2>',
        layouts_section(report, slices),
    ]
    if report.notes:
        parts += ["<h2>Notes</h2>", "<ul>"] + [f"<li>{escape(n)}</li>" for n in report.notes]
        parts += ["</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
