"""The report's data: the analysis' own JSON plus what only the report writer knows.

Why a step of its own: :meth:`~migscope.analyzer.result.AnalysisResult.to_json` is the
analysis; the report adds what a reader acts on and the analysis cannot know or should not
compute per slice: each slice's node pool and wasted GPU-hours (from
:func:`~migscope.analyzer.savings.slice_wasted_gpu_hours`, the function the headline total
is summed from), the trend of earlier runs (:mod:`.trend`) and where Grafana is
(:mod:`.grafana`). Every format that renders from the contract (JSON, Markdown, HTML) gets
the same data, so whatever the HTML page shows is in ``report.json`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migscope.analyzer.report.grafana import grafana_section
from migscope.analyzer.report.trend import Trend
from migscope.analyzer.result import AnalysisResult
from migscope.analyzer.savings import slice_wasted_gpu_hours

__all__ = ["ReportExtras", "report_data"]


@dataclass(frozen=True)
class ReportExtras:
    """What the report writer adds besides the analysis (all optional).

    Attributes:
        trend: Earlier runs (``--previous-reports``), read by :func:`.trend.read_trend`.
        grafana_url: Grafana's root (``--grafana-url``); checked when the data is built.
    """

    trend: Trend | None = None
    grafana_url: str | None = None


def report_data(result: AnalysisResult, extras: ReportExtras | None = None) -> dict[str, Any]:
    """``result.to_json()`` with the per-slice pool and waste, the trend and Grafana.

    Raises:
        GrafanaUrlError: ``extras.grafana_url`` is not a plain http(s) address.
    """
    extras = extras or ReportExtras()
    data = result.to_json()
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
    return data
