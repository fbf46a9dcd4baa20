"""The Grafana dashboards, built from code so that every query names a metric that exists.

Why code and not hand-edited JSON: a dashboard is a contract with the exporter's series,
and the metric contract (:mod:`migscope.core._metrics`) is the single place those are
declared. Building panels here lets the tests check every query against that contract and a
real Prometheus, and keeps the three dashboards consistent (same variables, same matchers).
``scripts/gen-dashboards`` writes ``dashboards/*.json``; a test keeps them in sync.

What they fix relative to dcgm-exporter's dashboard on MIG nodes: utilisation comes from the
per-GPU-instance activity (never an empty panel), and power is the board's reading counted
once per GPU plus migscope's per-slice *estimate*, never the board power summed once per
slice.

Series carry ``node`` (set by migscope's ServiceMonitor relabelling) and optionally
``cluster`` (an external label); ``cluster=~"$cluster"`` also matches series without it.
Kube-state-metrics' ``kube_node_labels`` feeds the MIG Manager panels (it must export the
``nvidia.com/mig.config*`` labels, see docs/rules.md).

One module per job: :mod:`.grafana` (Grafana's JSON model), :mod:`.promql` (series names,
matchers and the idle test the dashboards share), and one module per dashboard
(:mod:`.fleet`, :mod:`.node`, :mod:`.namespaces`).
"""

from __future__ import annotations

from collections.abc import Callable

from migscope.core._dashboards.fleet import fleet_dashboard
from migscope.core._dashboards.grafana import Json, panel_queries
from migscope.core._dashboards.namespaces import namespaces_dashboard
from migscope.core._dashboards.node import node_dashboard
from migscope.core._thresholds import IDLE_ACTIVITY_BELOW

__all__ = [
    "DASHBOARDS",
    "IDLE_ACTIVITY_BELOW",
    "panel_queries",
]

DASHBOARDS: dict[str, Callable[[], Json]] = {
    "migscope-fleet.json": fleet_dashboard,
    "migscope-node.json": node_dashboard,
    "migscope-namespaces.json": namespaces_dashboard,
}
"""File name → builder of each dashboard in ``dashboards/``."""
