"""The input of the window statistics: one series' samples, and everything about one slice.

Every other part of :mod:`migscope.analyzer._intake.stats_local` (and the dialect readers,
the history writer, the sources) works on these containers: :class:`TimeSeries`
keeps timestamps as whole milliseconds, as Prometheus stores them, and
:meth:`TimeSeries.between` selects the samples a range selector would, with the window edges
of the engine named by :data:`RangeSemantics`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from migscope.analyzer._model import Holder, SliceInfo

RangeSemantics: TypeAlias = Literal["prometheus3", "prometheus2", "victoriametrics"]
"""Which engine to copy: window edges ``(start, end]`` (Prometheus 3, VictoriaMetrics) or
``[start, end]`` (Prometheus 2), and how ``increase()`` extrapolates (see
:func:`~migscope.analyzer._intake.stats_local.prometheus_increase`)."""

Int64Array: TypeAlias = NDArray[np.int64]
"""Millisecond timestamps, and step-interval indices computed from them."""

FloatArray: TypeAlias = NDArray[np.float64]
"""Sample values."""


def to_ms(seconds: float) -> int:
    """Unix seconds to whole milliseconds, the resolution Prometheus stores."""
    return round(seconds * 1000.0)


@dataclass(frozen=True, eq=False)
class TimeSeries:
    """One series' samples: millisecond timestamps, ascending and unique, and values.

    Build it with :meth:`of`, which sorts, drops duplicate timestamps (keeping the last value
    written, as a re-sent scrape would) and makes the arrays read-only. NaN values are kept
    here and ignored by the statistics, which count them as missing.

    Attributes:
        timestamps_ms: Unix time of each sample in whole milliseconds (int64).
        values: The sample values (float64).
    """

    timestamps_ms: Int64Array
    values: FloatArray

    @classmethod
    def of(cls, timestamps: ArrayLike, values: ArrayLike) -> TimeSeries:
        """Build a series from timestamps in Unix *seconds* and values.

        Raises:
            ValueError: the arrays are not one-dimensional, differ in length, or a timestamp
                is not finite.
        """
        seconds = np.asarray(timestamps, dtype=np.float64)
        if seconds.ndim != 1 or not np.all(np.isfinite(seconds)):
            raise ValueError("timestamps must be a one-dimensional array of finite seconds")
        return cls.of_ms(np.round(seconds * 1000.0).astype(np.int64), values)

    @classmethod
    def of_ms(cls, timestamps_ms: ArrayLike, values: ArrayLike) -> TimeSeries:
        """Build a series from timestamps in Unix *milliseconds* and values.

        Raises:
            ValueError: the arrays are not one-dimensional or differ in length.
        """
        stamps = np.asarray(timestamps_ms, dtype=np.int64)
        vals = np.asarray(values, dtype=np.float64)
        if stamps.ndim != 1 or vals.ndim != 1 or stamps.shape != vals.shape:
            raise ValueError(
                f"timestamps and values must be one-dimensional and of equal length, "
                f"got shapes {stamps.shape} and {vals.shape}"
            )
        order = np.argsort(stamps, kind="stable")
        stamps, vals = stamps[order], vals[order]
        if stamps.size > 1:
            keep = np.empty(stamps.size, dtype=bool)
            keep[:-1] = stamps[1:] != stamps[:-1]
            keep[-1] = True
            stamps, vals = stamps[keep], vals[keep]
        stamps.setflags(write=False)
        vals.setflags(write=False)
        return cls(stamps, vals)

    @classmethod
    def concat(cls, parts: Iterable[TimeSeries]) -> TimeSeries | None:
        """Join series of the same quantity (one slice seen under several label sets).

        dcgm-exporter starts a new series whenever the pod holding a slice changes, because
        the pod is a label; the slice's activity is the union of them. Returns None when
        ``parts`` is empty.
        """
        pieces = list(parts)
        if not pieces:
            return None
        if len(pieces) == 1:
            return pieces[0]
        return cls.of_ms(
            np.concatenate([p.timestamps_ms for p in pieces]),
            np.concatenate([p.values for p in pieces]),
        )

    def __len__(self) -> int:
        return int(self.timestamps_ms.size)

    def between(
        self, start_ms: int, end_ms: int, *, semantics: RangeSemantics = "prometheus3"
    ) -> TimeSeries:
        """The samples a range selector ending at ``end_ms`` would see (NaN included)."""
        side: Literal["left", "right"] = "left" if semantics == "prometheus2" else "right"
        lo = int(np.searchsorted(self.timestamps_ms, start_ms, side=side))
        hi = int(np.searchsorted(self.timestamps_ms, end_ms, side="right"))
        return TimeSeries(self.timestamps_ms[lo:hi], self.values[lo:hi])

    def dropna(self) -> TimeSeries:
        """The same series without its NaN samples."""
        keep = ~np.isnan(self.values)
        if bool(keep.all()):
            return self
        return TimeSeries(self.timestamps_ms[keep], self.values[keep])

    def last_value(self) -> float | None:
        """The most recent non-NaN value, or None."""
        clean = self.dropna()
        return float(clean.values[-1]) if len(clean) else None


@dataclass(frozen=True, eq=False)
class SliceSeries:
    """Everything recorded about one slice, in the units of the migscope metrics.

    This is the input of :func:`~migscope.analyzer._intake.stats_local.slice_stats`, produced by
    ``migscope.analyzer._intake.dialect`` from either dialect (dcgm-exporter's MiB already turned
    into
    bytes) or built directly by a source that has the data in hand (the simulator).

    Attributes:
        info: Which slice, and its profile.
        activity: Graphics-engine activity ratio 0..1, or None when the source has none
            (Ampere without DCGM). Never invent zeros for it.
        memory_used: Framebuffer in use, bytes, or None.
        memory_total_bytes: The slice's framebuffer size, bytes, or None if unknown.
        holders: For each holder (``(namespace, pod)``, or ``(namespace, pod, claim)``
            under DRA, see :data:`~migscope.analyzer._model.Holder`) the millisecond
            timestamps at which it was seen holding the slice.
        energy: Per-slice energy counters in joules (several when the counter's labels
            changed within the window); empty when the source has no per-slice estimate.
    """

    info: SliceInfo
    activity: TimeSeries | None = None
    memory_used: TimeSeries | None = None
    memory_total_bytes: float | None = None
    holders: Mapping[Holder, Int64Array] = field(default_factory=dict)
    energy: tuple[TimeSeries, ...] = ()
