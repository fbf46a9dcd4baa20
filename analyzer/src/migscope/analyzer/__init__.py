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
    from migscope.analyzer._analysis import run
    from migscope.analyzer._intake.base import Source
    from migscope.analyzer._intake.embedded_prometheus import EmbeddedPrometheusSource
    from migscope.analyzer._intake.file import FileSource
    from migscope.analyzer._intake.kube_pending import list_pending_pods, pending_demand
    from migscope.analyzer._intake.prometheus.client import PrometheusClient
    from migscope.analyzer._intake.prometheus.transport import header_problem
    from migscope.analyzer._intake.prometheus_source import PrometheusSource
    from migscope.analyzer._intake.simulation import SimulationSource
    from migscope.analyzer._intake.stats_promql.result import StatsMode
    from migscope.analyzer._intake.workload_owners import cluster_owners, kube_state_metrics_owners
    from migscope.analyzer._judge.policy import Policy, load_policy
    from migscope.analyzer._judge.safety import snapshot_sentence
    from migscope.analyzer._judge.workloads import OwnerLookup, PodOwners, merge_owners
    from migscope.analyzer._options import (
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
    from migscope.analyzer._report import Format, write_report, write_reports
    from migscope.analyzer._report.data import ReportExtras, build_report
    from migscope.analyzer._report.grafana import normalise_base_url
    from migscope.analyzer._report.trend import read_trend
    from migscope.analyzer._result import AnalysisResult

_HOME = {
    "AnalyzeOptions": "_options",
    "DEFAULT_HEADROOM": "_options",
    "DEFAULT_OBJECTIVE": "_options",
    "DEFAULT_STEP_SECONDS": "_options",
    "DEFAULT_TIMEOUT_SECONDS": "_options",
    "DEFAULT_TIME_LIMIT_SECONDS": "_options",
    "DEFAULT_WINDOW_SECONDS": "_options",
    "Objective": "_options",
    "STATS_MODES": "_options",
    "Policy": "_judge.policy",
    "load_policy": "_judge.policy",
    "snapshot_sentence": "_judge.safety",
    "Format": "_report",
    "write_report": "_report",
    "write_reports": "_report",
    "ReportExtras": "_report.data",
    "build_report": "_report.data",
    "normalise_base_url": "_report.grafana",
    "read_trend": "_report.trend",
    "AnalysisResult": "_result",
    "run": "_analysis",
    "Source": "_intake.base",
    "EmbeddedPrometheusSource": "_intake.embedded_prometheus",
    "FileSource": "_intake.file",
    "list_pending_pods": "_intake.kube_pending",
    "pending_demand": "_intake.kube_pending",
    "header_problem": "_intake.prometheus.transport",
    "PrometheusClient": "_intake.prometheus.client",
    "PrometheusSource": "_intake.prometheus_source",
    "StatsMode": "_intake.stats_promql.result",
    "SimulationSource": "_intake.simulation",
    "cluster_owners": "_intake.workload_owners",
    "kube_state_metrics_owners": "_intake.workload_owners",
    "OwnerLookup": "_judge.workloads",
    "PodOwners": "_judge.workloads",
    "merge_owners": "_judge.workloads",
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
    "snapshot_sentence",
    "write_report",
    "write_reports",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
