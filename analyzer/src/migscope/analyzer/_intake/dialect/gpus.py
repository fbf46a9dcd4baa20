"""What a file's series say of each GPU (model, driver, own profile table), in either dialect.

Why a module of its own: the slices are built from the per-slice families, the GPU facts
from the per-GPU ones (:mod:`migscope.analyzer._intake.gpu_facts` reads the label sets); the file
reader asks this module, the Prometheus source asks the server the same questions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from migscope.analyzer._intake.dialect.detect import Dialect
from migscope.analyzer._intake.dialect.grouping import NodeMoves
from migscope.analyzer._intake.dialect.identity import node_of
from migscope.analyzer._intake.dialect.names import GPU_INFO, GPU_PROFILE_INFO
from migscope.analyzer._intake.gpu_facts import GpuFacts, dcgm_gpu_facts, migscope_gpu_facts
from migscope.analyzer._intake.openmetrics import SeriesSet


def _dcgm_label_sets(series: SeriesSet) -> Iterator[Mapping[str, str]]:
    for kept in series.series.values():
        for one in kept:
            yield one.labels
    for sets in series.label_sets.values():
        yield from sets


def file_gpu_facts(
    series: SeriesSet, dialect: Dialect, default_node: str, moves: NodeMoves | None = None
) -> list[GpuFacts]:
    """Each GPU of the file, as its own series describe it.

    A GPU whose node label changed in the window is under its newest node name
    (:class:`~migscope.analyzer._intake.dialect.grouping.NodeMoves`).
    """

    def node(labels: Mapping[str, str]) -> str:
        found = node_of(labels, default=default_node)
        if moves is None:
            return found
        uuid = labels.get("gpu_uuid") or labels.get("UUID") or labels.get("uuid") or ""
        return moves.node(uuid, found)

    if dialect is Dialect.MIGSCOPE:
        return migscope_gpu_facts(
            (s.labels for s in series.get(GPU_INFO)),
            (s.labels for s in series.get(GPU_PROFILE_INFO)),
            node_of=node,
        )
    return dcgm_gpu_facts(_dcgm_label_sets(series), node_of=node)
