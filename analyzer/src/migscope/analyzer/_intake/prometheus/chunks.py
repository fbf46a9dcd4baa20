"""Split a long range query into requests under the points limit, and join the pieces.

Why a module of its own: Prometheus refuses a range query with more than 11,000 steps per
series ("exceeded maximum resolution of 11,000 points per timeseries"; VictoriaMetrics allows
30,000), so a week at 15 s must be several requests. The chunk boundaries are integer
millisecond arithmetic on the grid ``start + k × step`` so that no point is asked for twice
and none is skipped, and the joining keeps a point once when an engine shifted a chunk's grid.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from migscope.analyzer._intake.prometheus.results import QueryResult, QueryStats, Series
from migscope.analyzer._intake.prometheus.timestamps import step_millis

#: Prometheus refuses a range query with more than 11,000 steps per series ("exceeded maximum
#: resolution of 11,000 points per timeseries"); VictoriaMetrics allows 30,000 by default.
MAX_POINTS_PER_SERIES = 11_000

_LabelKey = tuple[tuple[str, str], ...]


def chunk_bounds(
    start_ms: int,
    end_ms: int,
    step_ms: int,
    *,
    chunk: float | timedelta | None,
    max_points: int,
) -> Iterator[tuple[int, int]]:
    """``(start, end)`` in ms of each request, in time order, never overlapping.

    Chunk ``i`` covers ``[start + i×n×step, start + ((i+1)×n − 1)×step]`` with ``n`` points:
    ``max_points``, or fewer when ``chunk`` is a shorter span.

    Raises:
        ValueError: ``max_points`` below 1 (checked before the first chunk).
    """
    points = max_points
    if chunk is not None:
        points = min(points, max(1, step_millis(chunk) // step_ms))
    if points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    return _bounds(start_ms, end_ms, step_ms, points)


def _bounds(start_ms: int, end_ms: int, step_ms: int, points: int) -> Iterator[tuple[int, int]]:
    span = points * step_ms
    chunk_start = start_ms
    while chunk_start <= end_ms:
        yield chunk_start, min(end_ms, chunk_start + (points - 1) * step_ms)
        chunk_start += span


def join_series(labels: Mapping[str, str], parts: list[Series]) -> Series:
    """One series from its pieces in time order, a point repeated at a boundary kept once."""
    if len(parts) == 1:
        return parts[0]
    ts_parts: list[npt.NDArray[np.float64]] = []
    vs_parts: list[npt.NDArray[np.float64]] = []
    last = -math.inf
    for part in parts:
        keep = part.timestamps > last
        if keep.any():
            ts_parts.append(part.timestamps[keep])
            vs_parts.append(part.values[keep])
            last = float(ts_parts[-1][-1])
    return Series(
        labels=labels,
        timestamps=np.concatenate(ts_parts) if ts_parts else np.empty(0),
        values=np.concatenate(vs_parts) if vs_parts else np.empty(0),
    )


class ChunkMerger:
    """Collect the chunk results of one range query into one :class:`QueryResult`.

    Series are kept in order of first appearance; warnings and infos are collected once
    each; stats are merged (see :meth:`QueryStats.merge`) and become ``None`` as soon as one
    chunk has none.

    Attributes:
        requests: HTTP requests of the chunks so far.
        chunk_elapsed: The chunks' own wall time so far, seconds.
    """

    def __init__(self) -> None:
        self._pieces: dict[_LabelKey, list[Series]] = {}
        self._labels: dict[_LabelKey, Mapping[str, str]] = {}
        self._warnings: list[str] = []
        self._infos: list[str] = []
        self._stats: QueryStats | None = None
        self._first = True
        self.requests = 0
        self.chunk_elapsed = 0.0

    def add(self, part: QueryResult[Series]) -> None:
        """Take one chunk's result."""
        self.requests += part.requests
        self.chunk_elapsed += part.elapsed
        self._warnings.extend(w for w in part.warnings if w not in self._warnings)
        self._infos.extend(i for i in part.infos if i not in self._infos)
        if self._first:
            self._stats = part.stats
            self._first = False
        elif self._stats is not None and part.stats is not None:
            self._stats = self._stats.merge(part.stats)
        else:
            self._stats = None
        for series in part:
            key = tuple(sorted(series.labels.items()))
            self._labels.setdefault(key, series.labels)
            self._pieces.setdefault(key, []).append(series)

    def result(self, *, started: float) -> QueryResult[Series]:
        """The merged result; its ``elapsed`` runs from ``started`` (a ``perf_counter``)."""
        merged = [join_series(self._labels[key], parts) for key, parts in self._pieces.items()]
        return QueryResult(
            merged,
            result_type="matrix",
            warnings=self._warnings,
            infos=self._infos,
            stats=self._stats,
            elapsed=time.perf_counter() - started,
            requests=self.requests,
        )
