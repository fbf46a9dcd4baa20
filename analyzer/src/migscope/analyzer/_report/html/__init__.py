"""The HTML report: one self-contained page that a platform team reads and acts on.

Everything is drawn from the validated report contract (:class:`~migscope.core._spec.v1.ReportV1`,
docs/report-schema.md): no external CSS, fonts, images or scripts, and a
Content-Security-Policy that forbids the page from loading anything (links to Grafana are
navigation, which the reader chooses). It scales: a 5,000-slice fleet is a few MB that a
browser opens in seconds, because slices are aggregated per node, drill-downs are collapsed
and heatmaps are images. This module assembles the page from its parts, one module each:

* :mod:`.summary`: the headline cards (waste, cost, GPUs freeable, change since the last
  run), the teams that waste most, the next step (the command to apply the plan), and the
  warning when the report is a snapshot.
* :mod:`.requests`: **request changes**: the profile each workload should ask for, and the
  workloads holding idle slices to scale down before applying.
* :mod:`.trend_svg`: **waste across runs**, from the earlier reports the job kept.
* :mod:`.waste`: **waste per namespace**, sortable, with cost and the change since last run.
* :mod:`.tables`: **idle and unallocated**, **mis-sized** and **every slice**: sortable and
  groupable by node pool, node, namespace, status or profile, most waste first.
* :mod:`.pools`: **pools** (what each wastes and what its plan does) and the **replay** of
  the window's demand against the current, proposed and what-if layouts.
* :mod:`.heatmap`: **activity and memory**, per pool one row per node, per node (collapsed)
  one row per slice; hours of the window with dates (:mod:`.timeaxis`), as PNGs (:mod:`.png`).
* :mod:`.layouts_svg`: **layouts per GPU**, now and as proposed, per node.
* :mod:`.scripts`: the inline style and the small script (sort, group, find, tooltips).
* :mod:`.format`: escaping and number formats shared by all of them.

Every string taken from the report is escaped (pod and namespace names are user input).
"""

from __future__ import annotations

from migscope.analyzer._report.grafana import DASHBOARD_TITLES, DashboardLinks
from migscope.analyzer._report.html.format import escape, hours, utc_time
from migscope.analyzer._report.html.heatmap import activity_section
from migscope.analyzer._report.html.layouts_svg import (
    LAYOUT_LEFT_PX,
    LAYOUT_SLICE_PX,
    layouts_section,
)
from migscope.analyzer._report.html.pools import pools_table, replay_section
from migscope.analyzer._report.html.requests import requests_section
from migscope.analyzer._report.html.scripts import CSS, ERROR_HOOK, SCRIPT
from migscope.analyzer._report.html.summary import made_at, summary_section
from migscope.analyzer._report.html.tables import (
    all_slices_table,
    idle_table,
    mis_sized_table,
)
from migscope.analyzer._report.html.trend_svg import trend_section
from migscope.analyzer._report.html.waste import waste_table
from migscope.core import ReportV1, SliceV1

__all__ = [
    "LAYOUT_LEFT_PX",
    "LAYOUT_SLICE_PX",
    "render_html",
]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_SECTIONS = (
    ("summary-section", "Summary"),
    ("requests", "Request changes"),
    ("trend", "Trend"),
    ("waste", "Waste per namespace"),
    ("idle", "Idle and unallocated"),
    ("mis-sized-section", "Mis-sized"),
    ("pools", "Pools"),
    ("replay-section", "Replay"),
    ("activity", "Activity"),
    ("layouts", "Layouts"),
    ("slices", "Every slice"),
)


def _sort_key(s: SliceV1) -> tuple[str, int, int, int]:
    """Node, GPU, placement (unknown last) and GI id: the order of a node's slices."""
    start = s.placement_start if s.placement_start is not None else 99
    return (s.node, s.gpu, start, s.gpu_instance_id)


def _current_slices(report: ReportV1) -> list[SliceV1]:
    """The slices that exist at the end of the window (history-only ones are not drawn)."""
    return sorted((s for s in report.slices if s.current), key=_sort_key)


def _link(url: str | None, text: str, title: str) -> str:
    if url is None:
        return ""
    return (
        f' <a class="gf" href="{escape(url)}" target="_blank" rel="noopener noreferrer" '
        f'title="{escape(title)}">{escape(text)}</a>'
    )


class _Grafana(DashboardLinks):
    """The dashboards' links as the page shows them."""

    def header(self) -> str:
        if self.base is None:
            return ""
        links = [
            _link(self.url(name), title, f"Grafana: {title} over the report's window")
            for name, title in DASHBOARD_TITLES.items()
        ]
        return f'<p id="grafana">Grafana dashboards over this window:{"".join(links)}</p>'

    def nodes(self, names: set[str]) -> dict[str, str]:
        return {n: _link(self.url("node", node=n), "Grafana", f"{n} in Grafana") for n in names}

    def namespaces(self, names: list[str]) -> dict[str, str]:
        return {
            n: _link(self.url("namespaces", namespace=n), "Grafana", f"{n} in Grafana")
            for n in names
        }


def _source(report: ReportV1) -> str:
    provenance = report.provenance
    if provenance is None:
        return ""
    source = provenance.source
    where = source.url or source.path or ", ".join(source.scenarios or [])
    return f" Source: {escape(source.kind)} {escape(where)}."


def render_html(report: ReportV1, *, title: str = "migscope report") -> str:
    """The whole report as one self-contained HTML page.

    Args:
        report: The report (``build_report(result)``, or a parsed
            report.json through :func:`~migscope.core._spec.v1.validate_report`).
        title: Page title and heading.

    Returns:
        The HTML document: inline CSS, SVG, PNG and one small script; it loads nothing.
    """
    window = report.window
    slices = _current_slices(report)
    grafana = _Grafana(report)
    nav = " ".join(f'<a href="#{k}">{escape(v)}</a>' for k, v in _SECTIONS)
    price = report.savings.price_per_gpu_hour
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<script>{ERROR_HOOK}</script>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted" id="window">Window: {escape(utc_time(window.start_unix))} → '
        f"{escape(utc_time(window.end_unix))} ({hours(window.hours)} h, "
        f"{escape(window.step_seconds)} s step; {escape(window.start)} → "
        f"{escape(window.end)}).{_source(report)}{made_at(report)} "
        f"Schema version {escape(report.schema_version)}.</p>",
        grafana.header(),
        f"<nav>{nav}</nav>",
        '<div id="js-errors" hidden></div>',
        '<h2 id="summary-section">Summary</h2>',
        summary_section(report),
        '<h2 id="requests">Request changes</h2>',
        requests_section(report),
        '<h2 id="trend">Waste across runs</h2>',
        trend_section(report),
        '<h2 id="waste">Waste per namespace</h2>',
        waste_table(
            report,
            namespace_link=grafana.namespaces([r.namespace for r in report.savings.by_namespace]),
        ),
        '<h2 id="idle">Idle and unallocated slices</h2>',
        '<p class="muted">Capacity to give back: the pods that hold idle slices, and the '
        "slices no pod holds. Click a column to sort, group by pool, namespace or status.</p>",
        idle_table(slices, price=price),
        '<h2 id="mis-sized-section">Mis-sized slices</h2>',
        '<p class="muted">Oversized slices would fit a smaller profile (the plan counts them '
        "at it and the pod must move); saturated ones need a larger one.</p>",
        mis_sized_table(slices),
        '<h2 id="pools">Node pools</h2>',
        pools_table(report, slices),
        '<h2 id="replay-section">Replay of the window\'s demand</h2>',
        replay_section(report),
        '<h2 id="activity">Activity and memory</h2>',
        activity_section(report, slices, node_link=grafana.nodes({s.node for s in slices})),
        '<h2 id="layouts">Layouts per GPU: now and proposed</h2>',
        layouts_section(report, slices),
        '<h2 id="slices">Every slice</h2>',
        f"<details><summary>{len(slices)} current slices: sort, group or find</summary>",
        all_slices_table(slices),
        "</details>",
    ]
    if report.notes:
        parts += ['<h2 id="notes">Notes</h2>', "<ul>"]
        parts += [f"<li>{escape(n)}</li>" for n in report.notes]
        parts += ["</ul>"]
    parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
