"""Small steps both dialects' readers take when they gather a slice's series.

A slice's series (one per pod label set, per name spelling) are
merged the same way whichever exporter wrote them: its current labels are those of the
series seen last, re-created instances are ordered by their first sample, and the pods that
held it are the union of the timestamps of the series naming each pod.

A GPU's series may also change node name during the window (a ``node`` relabelling added to
the scrape: before it the node was the ``instance`` address, after it the node's name):
:func:`node_moves` finds the GPU UUIDs seen under several names, and both the file readers
and the Prometheus source report each such GPU once, under its newest name
(:class:`NodeMoves`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from migscope.analyzer._intake.openmetrics import Series
from migscope.analyzer._intake.stats_local import TimeSeries
from migscope.analyzer._model import Holder

_Int64Array: TypeAlias = NDArray[np.int64]


def latest(series: Iterable[Series]) -> Series | None:
    """The series whose last sample is the most recent (the current labels of a slice)."""
    best: Series | None = None
    best_t = -1
    for s in series:
        if len(s.samples) and int(s.samples.timestamps_ms[-1]) > best_t:
            best, best_t = s, int(s.samples.timestamps_ms[-1])
    return best


def first_seen(items: Iterable[Series]) -> float:
    """The first sample time of any of ``items``, ms (inf without samples): orders re-creations."""
    first = math.inf
    for s in items:
        if len(s.samples):
            first = min(first, float(s.samples.timestamps_ms[0]))
    return first


def holders(
    parts: Iterable[tuple[Holder, TimeSeries]],
) -> dict[Holder, _Int64Array]:
    """Timestamps at which each holder (pod, claim) was seen holding the slice, merged."""
    stamps: dict[Holder, list[_Int64Array]] = defaultdict(list)
    for owner, samples in parts:
        stamps[owner].append(samples.timestamps_ms)
    return {owner: np.unique(np.concatenate(arrays)) for owner, arrays in stamps.items()}


MAX_MOVES_NAMED = 10
"""Renamed nodes a note names before it says "and N more"."""


@dataclass(frozen=True)
class NodeMoves:
    """GPUs whose series carry several node names in the window, and the name each keeps.

    Why: the same GPU (its UUID is unique in the fleet) under two node names would be two
    GPUs with half a window each, and the fleet twice its size. Each GPU keeps the node name
    of its newest sample; every name it was seen under is one group with that name, which
    the Prometheus source reads in one chunk so that the slice's series are merged exactly.

    Attributes:
        canonical: GPU UUID -> the node name it is reported under (every GPU of the
            window: the Prometheus source groups without the node and names it from here).
        groups: Node name -> every name linked to it through a moved GPU, itself included.
        renamed: Old name -> the names its GPUs are reported under.
        merged: Slices with series under more than one name.
        gpus: GPUs seen under more than one name.
    """

    canonical: Mapping[str, str]
    groups: Mapping[str, tuple[str, ...]]
    renamed: Mapping[str, tuple[str, ...]]
    merged: int
    gpus: int

    def node(self, gpu_uuid: str, node: str) -> str:
        """The node a series of ``gpu_uuid`` read as ``node`` is reported under."""
        return self.canonical.get(gpu_uuid, node) if gpu_uuid else node

    def expand(self, nodes: Iterable[str]) -> list[str]:
        """``nodes`` and every name linked to them, sorted: what a chunk must select."""
        out: set[str] = set()
        for node in nodes:
            out.update(self.groups.get(node, (node,)))
        return sorted(out)

    def aliases_only(self, names: Iterable[str], kept: Iterable[str]) -> list[str]:
        """Of ``names``, those no slice is reported under (every GPU of theirs moved away)."""
        keep = set(kept)
        return [n for n in names if n in self.renamed and n not in keep]

    def note(self, source: str) -> str:
        """The report note: how many slices were merged, and the names old and new."""
        pairs = [f"{old} -> {', '.join(new)}" for old, new in sorted(self.renamed.items())]
        shown = "; ".join(pairs[:MAX_MOVES_NAMED])
        more = f"; and {len(pairs) - MAX_MOVES_NAMED} more" if len(pairs) > MAX_MOVES_NAMED else ""
        return (
            f"{source}: the node label of {self.gpus} GPU(s) changed during the window (a "
            f"node relabelling added or changed?): {self.merged} slice(s) seen under two or "
            f"more node names were merged, each GPU reported once under its newest name "
            f"({shown}{more})"
        )


def node_moves(
    seen: Iterable[tuple[str, str, Hashable, float]],
) -> NodeMoves | None:
    """The GPUs seen under several node names, from ``(node, gpu_uuid, slice, newest)`` rows.

    ``slice`` tells a GPU's slices apart (GI id and MIG UUID or profile), ``newest`` is the
    time of the row's newest sample (-inf when unknown). A GPU keeps the name of its newest
    sample (ties: the greater name, so that the choice does not depend on reading order).
    None when no GPU moved, or when some slice series has no GPU UUID (dcgm-exporter with
    ``UUID`` dropped): its node is then its only identity, and nothing is merged, on either
    path, so that the file and the server agree.
    """
    newest: dict[str, dict[str, float]] = defaultdict(dict)
    names_of_slice: dict[tuple[str, Hashable], set[str]] = defaultdict(set)
    for node, uuid, ident, t in seen:
        if not uuid:
            return None
        per = newest[uuid]
        per[node] = max(per.get(node, -math.inf), t)
        names_of_slice[(uuid, ident)].add(node)
    moved = {uuid: per for uuid, per in newest.items() if len(per) > 1}
    if not moved:
        return None
    canonical = {uuid: max(per, key=lambda n: (per[n], n)) for uuid, per in newest.items()}
    parent: dict[str, str] = {}

    def root(n: str) -> str:
        while parent.get(n, n) != n:
            n = parent[n]
        return n

    renamed: dict[str, set[str]] = defaultdict(set)
    for uuid, per in moved.items():
        for name in per:
            a, b = root(name), root(canonical[uuid])
            if a != b:
                parent[a] = b
            if name != canonical[uuid]:
                renamed[name].add(canonical[uuid])
    members: dict[str, list[str]] = defaultdict(list)
    for name in {n for per in moved.values() for n in per}:
        members[root(name)].append(name)
    groups = {n: tuple(sorted(ms)) for ms in members.values() for n in ms}
    merged = sum(
        1 for (uuid, _), names in names_of_slice.items() if uuid in moved and len(names) > 1
    )
    return NodeMoves(
        canonical=canonical,
        groups=groups,
        renamed={old: tuple(sorted(new)) for old, new in renamed.items()},
        merged=merged,
        gpus=len(moved),
    )


def series_moves(
    rows: Sequence[tuple[str, str, Hashable, Series]],
) -> NodeMoves | None:
    """:func:`node_moves` of a file's series: ``(node, gpu_uuid, slice, series)`` rows."""
    return node_moves(
        (node, uuid, ident, float(s.samples.timestamps_ms[-1]) if len(s.samples) else -math.inf)
        for node, uuid, ident, s in rows
    )
