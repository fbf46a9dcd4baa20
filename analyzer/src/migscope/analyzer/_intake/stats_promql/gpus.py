"""What the server's series say of each GPU: model, driver, and its own profile table.

The statistics are per slice, these facts per GPU, read once per
chunk of nodes with instant queries over the window (two for migscope's dialect, one for
dcgm-exporter's); :mod:`migscope.analyzer._intake.gpu_facts` reads the label sets as the file
readers do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from migscope.analyzer._intake.dialect import DEFAULT_NODE, GPU_INFO
from migscope.analyzer._intake.dialect.names import GPU_PROFILE_INFO
from migscope.analyzer._intake.gpu_facts import (
    DRIVER_LABELS,
    GPU_UUID_LABELS,
    GpuFacts,
    dcgm_gpu_facts,
    migscope_gpu_facts,
)
from migscope.analyzer._intake.stats_promql.queries import Queries


def remote_gpu_facts(q: Queries, *, chunk_nodes: int = 50) -> list[GpuFacts]:
    """Each GPU of the run's nodes, as its own series describe it."""
    run = q.run
    label = run.node_label

    def node(labels: Mapping[str, str]) -> str:
        found = (labels.get(label, "") if label else "") or DEFAULT_NODE
        if run.moves is None:
            return found
        uuid = labels.get("gpu_uuid") or labels.get("UUID") or labels.get("uuid") or ""
        return run.moves.node(uuid, found)

    chunks = [run.nodes[i : i + chunk_nodes] for i in range(0, len(run.nodes), chunk_nodes)]
    out: list[GpuFacts] = []
    for nodes in chunks:
        if q.migscope:
            out += migscope_gpu_facts(
                _labels(q, q.over("last_over_time", GPU_INFO, nodes, q.window)),
                _labels(q, q.over("last_over_time", GPU_PROFILE_INFO, nodes, q.window)),
                node_of=node,
            )
        else:
            names = dict.fromkeys(
                [*([label] if label else []), *GPU_UUID_LABELS, "modelName", *DRIVER_LABELS]
            )
            by = "by (" + ", ".join(names) + ")"
            measured = q.last([*q.activity, *q.memory], nodes)
            out += dcgm_gpu_facts(_labels(q, f"count {by} ({measured})"), node_of=node)
    return out


def _labels(q: Queries, expr: str) -> Iterator[Mapping[str, str]]:
    for sample in q.ask(expr):
        yield sample.labels
