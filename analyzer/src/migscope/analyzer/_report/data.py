"""The report, built once: the analysis as the typed contract, plus what only the writer knows.

:func:`build_report` is the one place a run's report is made: it lays the analysis out as
``schema_version`` 1 (docs/report-schema.md), computes the recommendations once
(:meth:`~migscope.analyzer._result.AnalysisResult.recommendations`), adds what a reader acts
on and the analysis cannot know or should not compute per slice (each slice's node pool and
wasted GPU-hours, from :func:`~migscope.analyzer._savings.slice_wasted_gpu_hours`, the
function the headline total is summed from; the trend of earlier runs, :mod:`.trend`; where
Grafana is, :mod:`.grafana`), and validates it against
:class:`~migscope.core._spec.v1.ReportV1`. Every writer (JSON, Markdown, HTML, CSV, the node
plan, the mig-parted file, the request changes, the CLI's summary) reads that model, so
whatever the HTML page shows is in ``report.json`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migscope.analyzer._judge.classify import Status
from migscope.analyzer._report.grafana import grafana_section
from migscope.analyzer._report.trend import Trend
from migscope.analyzer._result import AnalysisResult, iso_utc
from migscope.analyzer._savings import slice_wasted_gpu_hours
from migscope.core import SCHEMA_VERSION, ReportV1, validate_report


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
    data = _analysis_data(result, result.recommendations())
    if extras.trend is not None:
        data["trend"] = [dict(p) for p in extras.trend.points]
        data["notes"] = [*data["notes"], *extras.trend.notes]
    if extras.grafana_url is not None:
        data["grafana"] = grafana_section(extras.grafana_url)
    return validate_report(data)


def _analysis_data(result: AnalysisResult, recommendations: list[dict[str, Any]]) -> dict[str, Any]:
    """The analysis as report data, keys in the order ``report.json`` has them."""
    moving = [p for r in recommendations for p in r["pods_to_move"]]
    return {
        "schema_version": SCHEMA_VERSION,
        "window": {
            "start": iso_utc(result.window_start),
            "end": iso_utc(result.window_end),
            "start_unix": result.window_start,
            "end_unix": result.window_end,
            "hours": round(result.window_hours, 4),
            "step_seconds": result.step,
        },
        "summary": {
            "slices": sum(1 for s in result.slices if s.current),
            "history_only_slices": sum(1 for s in result.slices if not s.current),
            "by_status": {
                status.value: result.count(status) for status in Status if result.count(status)
            },
        },
        "slices": _slices(result),
        "pools": [
            {
                "pool": p.pool,
                "model": p.model.key,
                "gpus": len(p.gpus),
                "demand": p.demand.as_dict(),
                "plan": p.plan.summary(),
                "solve": p.plan.solve.as_dict(),
                "lower_bound": p.bound.as_dict(),
                "replay": {name: r.as_dict() for name, r in p.replays.items()},
            }
            for p in result.pools
        ],
        "recommendations": recommendations,
        "request_changes": (
            result.workloads.to_dict(moving) if result.workloads is not None else None
        ),
        "mig_parted_config": (
            result.mig_parted.model_dump(by_alias=True, exclude_none=True)
            if result.mig_parted is not None
            else None
        ),
        "node_configs": dict(sorted(result.node_configs.items())),
        "savings": dict(result.savings),
        "what_if": result.what_if_summary(),
        "evidence": result.history.as_dict() if result.history is not None else None,
        "provenance": dict(result.provenance) if result.provenance is not None else None,
        "notes": list(result.notes),
    }


def _slices(result: AnalysisResult) -> list[dict[str, Any]]:
    """Every slice's entry, with the node pool that planned its GPU and the GPU-hours it wasted."""
    pool_of = {(g.node, g.index): p.pool for p in result.pools for g in p.gpus}
    hours = result.window_hours
    entries: list[dict[str, Any]] = []
    for s in result.slices:
        key = s.stats.info.key
        waste = slice_wasted_gpu_hours(s, hours) if s.current else 0.0
        entries.append(
            {
                **s.to_dict(),
                "pool": pool_of.get((key.node, key.gpu)),
                "wasted_gpu_hours": round(waste, 4),
            }
        )
    return entries
