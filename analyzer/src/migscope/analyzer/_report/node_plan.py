"""``node-plan.json``: every planned node, the config its label should name, and whether it moves.

The nodes come from the pools' plans (unchanged ones included); whether a change is
disruptive, and the pods it moves, from the report's recommendations (every pod on a
re-created GPU counts), so the plan never recomputes them. The provenance travels with it so
that the applier can refuse simulated data.
"""

from __future__ import annotations

from typing import Any

from migscope.analyzer._result import AnalysisResult
from migscope.core import SCHEMA_VERSION, ReportV1


def node_plan(result: AnalysisResult, report: ReportV1) -> dict[str, Any]:
    """The node → config plan of ``result``, with ``report``'s recommendations.

    Args:
        result: The analysis (its pools' per-node plans).
        report: Its report (:func:`~.data.build_report`).
    """
    recs = {r.node: r for r in report.recommendations}
    nodes = []
    for n in (n for p in result.pools for n in p.plan.nodes):
        entry = n.as_dict()
        rec = recs.get(n.node)
        if rec is not None:
            entry["disruptive"] = rec.disruptive
            entry["pods_to_move"] = list(rec.pods_to_move)
        nodes.append(entry)
    provenance = report.provenance
    return {
        "schema_version": SCHEMA_VERSION,
        "nodes": sorted(nodes, key=lambda n: n["node"]),
        "provenance": (
            provenance.model_dump(exclude_unset=True) if provenance is not None else None
        ),
    }
