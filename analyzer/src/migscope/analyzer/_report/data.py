"""The report, built once: the analysis as the typed contract, plus what only the writer knows.

:func:`build_report` is the one place a run's report is made: it computes the
recommendations once (:meth:`~migscope.analyzer._result.AnalysisResult.recommendations`),
adds what a reader acts on and the analysis cannot know or should not compute per slice
(each slice's node pool and wasted GPU-hours, from
:func:`~migscope.analyzer._savings.slice_wasted_gpu_hours`, the function the headline total is
summed from; the trend of earlier runs, :mod:`.trend`; where Grafana is, :mod:`.grafana`),
and validates it against :class:`~migscope.core._spec.v1.ReportV1`. Every writer (JSON,
Markdown, HTML, CSV, the node plan, the mig-parted file, the request changes, the CLI's
summary) reads that model, so whatever the HTML page shows is in ``report.json`` too.
"""

from __future__ import annotations

from dataclasses import dataclass

from migscope.analyzer._report.grafana import grafana_section
from migscope.analyzer._report.trend import Trend
from migscope.analyzer._result import AnalysisResult
from migscope.analyzer._savings import slice_wasted_gpu_hours
from migscope.core import ReportV1, validate_report


@dataclass(frozen=True)
class ReportExtras:
    """What the report writer adds besides the analysis (all optional).

    Attributes:
        trend: Earlier runs (``--previous-reports``), read by :func:`.trend.read_trend`.
        grafana_url: Grafana's root (``--grafana-url``); checked when the report is built.
    """

    trend: Trend | None = None
    grafana_url: str | None = None


def build_report(result: AnalysisResult, extras: ReportExtras | None = None) -> ReportV1:
    """The run's report: the analysis with the per-slice pool and waste, the trend and Grafana.

    The recommendations are computed here, once, and every writer reads them from the
    returned model.

    Raises:
        GrafanaUrlError: ``extras.grafana_url`` is not a plain http(s) address.
        pydantic.ValidationError: the analysis breaks the report contract (a bug: it fails
            here, in the analyzer, not in the applier or a team's script days later).
    """
    extras = extras or ReportExtras()
    data = result.to_json(result.recommendations())
    pool_of = {(g.node, g.index): p.pool for p in result.pools for g in p.gpus}
    hours = result.window_hours
    for entry, s in zip(data["slices"], result.slices, strict=True):
        key = s.stats.info.key
        entry["pool"] = pool_of.get((key.node, key.gpu))
        waste = slice_wasted_gpu_hours(s, hours) if s.current else 0.0
        entry["wasted_gpu_hours"] = round(waste, 4)
    if extras.trend is not None:
        data["trend"] = [dict(p) for p in extras.trend.points]
        data["notes"] = [*data["notes"], *extras.trend.notes]
    if extras.grafana_url is not None:
        data["grafana"] = grafana_section(extras.grafana_url)
    return validate_report(data)
