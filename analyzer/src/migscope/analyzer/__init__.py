"""The analyzer: slice history from a source, judged and planned into MIG layouts and a report.

The names below are this distribution's front door: the only names other distributions and the
CLI import from it. Each loads its module on first use (PEP 562), so importing the package
costs nothing: the CLI imports it to print ``--help``, which must not load pandas, numpy, HiGHS
or httpx (``tests/cli/test_lazy_commands.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migscope.core import lazy_exports

if TYPE_CHECKING:
    from migscope.analyzer.analysis import run
    from migscope.analyzer.options import (
        DEFAULT_HEADROOM,
        DEFAULT_OBJECTIVE,
        DEFAULT_STEP_SECONDS,
        DEFAULT_TIME_LIMIT_SECONDS,
        DEFAULT_TIMEOUT_SECONDS,
        DEFAULT_WINDOW_SECONDS,
        STATS_MODES,
        AnalyzeOptions,
        Objective,
    )
    from migscope.analyzer.policy import Policy, load_policy
    from migscope.analyzer.report import Format, write_report, write_reports
    from migscope.analyzer.report.data import ReportExtras, build_report
    from migscope.analyzer.report.grafana import normalise_base_url
    from migscope.analyzer.report.trend import read_trend
    from migscope.analyzer.result import AnalysisResult
    from migscope.analyzer.sources.base import Source
    from migscope.analyzer.sources.embedded_prometheus import EmbeddedPrometheusSource
    from migscope.analyzer.sources.file import FileSource
    from migscope.analyzer.sources.kube_pending import list_pending_pods, pending_demand
    from migscope.analyzer.sources.prometheus.auth import header_problem
    from migscope.analyzer.sources.prometheus.client import PrometheusClient
    from migscope.analyzer.sources.prometheus_source import PrometheusSource
    from migscope.analyzer.sources.remote_stats.result import StatsMode
    from migscope.analyzer.sources.simulation import SimulationSource
    from migscope.analyzer.sources.workload_owners import cluster_owners, kube_state_metrics_owners
    from migscope.analyzer.workloads import OwnerLookup, PodOwners, merge_owners

_HOME = {
    "AnalyzeOptions": "options",
    "DEFAULT_HEADROOM": "options",
    "DEFAULT_OBJECTIVE": "options",
    "DEFAULT_STEP_SECONDS": "options",
    "DEFAULT_TIMEOUT_SECONDS": "options",
    "DEFAULT_TIME_LIMIT_SECONDS": "options",
    "DEFAULT_WINDOW_SECONDS": "options",
    "Objective": "options",
    "STATS_MODES": "options",
    "Policy": "policy",
    "load_policy": "policy",
    "Format": "report",
    "write_report": "report",
    "write_reports": "report",
    "ReportExtras": "report.data",
    "build_report": "report.data",
    "normalise_base_url": "report.grafana",
    "read_trend": "report.trend",
    "AnalysisResult": "result",
    "run": "analysis",
    "Source": "sources.base",
    "EmbeddedPrometheusSource": "sources.embedded_prometheus",
    "FileSource": "sources.file",
    "list_pending_pods": "sources.kube_pending",
    "pending_demand": "sources.kube_pending",
    "header_problem": "sources.prometheus.auth",
    "PrometheusClient": "sources.prometheus.client",
    "PrometheusSource": "sources.prometheus_source",
    "StatsMode": "sources.remote_stats.result",
    "SimulationSource": "sources.simulation",
    "cluster_owners": "sources.workload_owners",
    "kube_state_metrics_owners": "sources.workload_owners",
    "OwnerLookup": "workloads",
    "PodOwners": "workloads",
    "merge_owners": "workloads",
}
"""Each exported name's module (under ``migscope.analyzer``)."""

__all__ = [
    "DEFAULT_HEADROOM",
    "DEFAULT_OBJECTIVE",
    "DEFAULT_STEP_SECONDS",
    "DEFAULT_TIMEOUT_SECONDS",
    "DEFAULT_TIME_LIMIT_SECONDS",
    "DEFAULT_WINDOW_SECONDS",
    "STATS_MODES",
    "AnalysisResult",
    "AnalyzeOptions",
    "EmbeddedPrometheusSource",
    "FileSource",
    "Format",
    "Objective",
    "OwnerLookup",
    "PodOwners",
    "Policy",
    "PrometheusClient",
    "PrometheusSource",
    "ReportExtras",
    "SimulationSource",
    "Source",
    "StatsMode",
    "build_report",
    "cluster_owners",
    "header_problem",
    "kube_state_metrics_owners",
    "list_pending_pods",
    "load_policy",
    "merge_owners",
    "normalise_base_url",
    "pending_demand",
    "read_trend",
    "run",
    "write_report",
    "write_reports",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
