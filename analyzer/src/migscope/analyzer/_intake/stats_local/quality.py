"""The range every number read must lie in, what becomes of one outside it, and the notes.

An exporter bug, a relabelling or a hand-edited file can hand the
analyzer ``+Inf``, ``1e308``, a 700 % activity or more memory in use than the slice has. Left
alone they crash the report (JSON has no infinity) or, worse, change verdicts silently: a
negative activity reads as idle, an infinite memory total makes any use look small. Both
sources (the file readers of :mod:`migscope.analyzer._intake.dialect` with :func:`slice_stats`, and
the PromQL of :mod:`migscope.analyzer._intake.stats_promql`) apply the same rules, so that a
report does not change with its source, and each says what it changed in *one* note per kind
(:class:`QualityCounts`).

The rules, one for each direction:

- **Not finite, or below the floor, is dropped**: ``±Inf`` and negative activity or memory use
  become NaN, which the statistics already count as missing (coverage drops; a slice with
  nothing left is ``unknown`` and pins its GPU). Clamping them instead would invent an idle
  reading out of a broken one. NaN itself is missing data, as before, and is not noted.
- **Above the ceiling is clamped to it**: an activity above 1 counts as 1 (a busy engine),
  memory use above the slice's total counts as the total (a full framebuffer). Both readings
  saturate rather than disappear, which keeps a busy slice busy. Activity is clamped sample
  by sample; memory is clamped in the statistics (peak and p95 capped at the total), because
  the total is only known per slice and the server cannot clamp each sample to it.
- **A memory total that is not a size is ignored**: not finite, not positive, or larger than
  the whole GPU's framebuffer; the catalogue's profile size is used instead, where known.
- **An energy counter with a negative or infinite sample in the window has no increase**: the
  slice's energy is unknown rather than computed around the bad sample, which PromQL's
  ``increase()`` cannot do on the server.
- **A statistic that still comes out non-finite (an overflow) is unknown** (None).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from migscope.analyzer._intake.stats_local.series import FloatArray, TimeSeries

ACTIVITY_CEILING = 1.0
"""The largest activity ratio: the engine was busy all the time."""

TOTAL_TOLERANCE = 1.01
"""How far a slice's reported memory total may exceed the whole GPU's (MiB rounding)."""


class Kind(str, Enum):
    """What was wrong with a number, and so which note reports it."""

    ACTIVITY_DROPPED = "activity_dropped"
    ACTIVITY_CLAMPED = "activity_clamped"
    MEMORY_DROPPED = "memory_dropped"
    MEMORY_ABOVE_TOTAL = "memory_above_total"
    TOTAL_IGNORED = "total_ignored"
    ENERGY_UNKNOWN = "energy_unknown"


@dataclass(frozen=True)
class Cleaned:
    """A series after the rules, and how many of its samples they changed.

    Attributes:
        series: The samples, timestamps unchanged (a dropped value becomes NaN, so that a
            pod seen holding the slice at that time still counts).
        dropped: Samples made NaN (not finite, or negative).
        clamped: Samples lowered to the ceiling.
    """

    series: TimeSeries
    dropped: int = 0
    clamped: int = 0


def _drop_invalid(values: FloatArray) -> tuple[FloatArray, int]:
    """``values`` with non-finite and negative ones made NaN; NaN stays NaN, uncounted."""
    with np.errstate(invalid="ignore"):
        bad = np.isinf(values) | (values < 0)
    count = int(bad.sum())
    if not count:
        return values, 0
    out = values.copy()
    out[bad] = math.nan
    return out, count


def clean_activity(series: TimeSeries) -> Cleaned:
    """Activity after the rules: not finite or negative dropped, above 1 clamped to 1.

    Returns ``series`` itself when nothing is wrong with it (no copy).
    """
    values, dropped = _drop_invalid(series.values)
    with np.errstate(invalid="ignore"):
        high = values > ACTIVITY_CEILING
    clamped = int(high.sum())
    if clamped:
        values = values.copy() if values is series.values else values
        values[high] = ACTIVITY_CEILING
    if not dropped and not clamped:
        return Cleaned(series)
    return Cleaned(_same_times(series, values), dropped, clamped)


def clean_memory(series: TimeSeries) -> Cleaned:
    """Memory use after the rules: not finite or negative dropped (the cap comes later)."""
    values, dropped = _drop_invalid(series.values)
    if not dropped:
        return Cleaned(series)
    return Cleaned(_same_times(series, values), dropped)


def _same_times(series: TimeSeries, values: FloatArray) -> TimeSeries:
    values.setflags(write=False)
    return TimeSeries(series.timestamps_ms, values)


def bad_counter(values: FloatArray) -> int:
    """How many counter samples are negative or infinite (NaN is missing, not bad)."""
    with np.errstate(invalid="ignore"):
        return int((np.isinf(values) | (values < 0)).sum())


def usable_total(total: float | None, *, gpu_bytes: float | None = None) -> bool:
    """Whether a slice's memory total is a size: finite, positive, at most the whole GPU's.

    Args:
        total: The total read, bytes.
        gpu_bytes: The whole GPU's framebuffer, bytes, when the catalogue knows the model.
    """
    if total is None or not math.isfinite(total) or total <= 0:
        return False
    return gpu_bytes is None or total <= gpu_bytes * TOTAL_TOLERANCE


def finite(value: float | None) -> float | None:
    """``value``, or None when it is missing or not finite (a statistic that overflowed)."""
    return value if value is not None and math.isfinite(value) else None


def cap(value: float | None, total: float | None) -> float | None:
    """A memory statistic capped at the slice's total (None stays None; no total: as is)."""
    if value is None or total is None:
        return finite(value)
    return min(value, total) if not math.isnan(value) else None


@dataclass
class QualityCounts:
    """Samples and slices per :class:`Kind`, gathered over a whole run, for one note each.

    Attributes:
        samples: Samples changed per kind (on the Prometheus path: step intervals whose last
            sample was, which is the samples at the expected one per step).
        slices: The slices affected per kind.
    """

    samples: dict[Kind, int] = field(default_factory=dict)
    slices: dict[Kind, set[Hashable]] = field(default_factory=dict)

    def add(self, kind: Kind, slice_id: Hashable, samples: int = 0) -> None:
        """Count ``samples`` of ``kind`` on ``slice_id`` (a slice counts once per kind)."""
        self.samples[kind] = self.samples.get(kind, 0) + samples
        self.slices.setdefault(kind, set()).add(slice_id)

    def __bool__(self) -> bool:
        return bool(self.slices)

    def notes(self, where: str, names: Mapping[Kind, str]) -> list[str]:
        """One sentence per kind found, in :class:`Kind` order.

        Args:
            where: The file or server, as other notes name it.
            names: The metric each kind is about, as the source spells it.
        """
        out = []
        for kind in Kind:
            slices = len(self.slices.get(kind, ()))
            if slices:
                out.append(_sentence(kind, where, names.get(kind, ""), self.samples[kind], slices))
        return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _sentence(kind: Kind, where: str, metric: str, samples: int, slices: int) -> str:
    on = f"on {_plural(slices, 'slice')}"
    n, was = _plural(samples, "sample"), "was" if samples == 1 else "were"
    if kind in (Kind.ACTIVITY_DROPPED, Kind.MEMORY_DROPPED):
        return (
            f"{where}: {n} of {metric} {was} negative or infinite and {was} dropped (counted "
            f"as missing) {on}"
        )
    if kind is Kind.ACTIVITY_CLAMPED:
        return f"{where}: {n} of {metric} above 1 (outside [0, 1]) {was} clamped to 1 {on}"
    if kind is Kind.MEMORY_ABOVE_TOTAL:
        return (
            f"{where}: {n} of {metric} above the slice's memory total {was} clamped to it "
            f"(peak and p95 memory capped at the total) {on}"
        )
    if kind is Kind.TOTAL_IGNORED:
        return (
            f"{where}: the memory total ({metric}) of {_plural(slices, 'slice')} was not a "
            "usable size (infinite, not positive or larger than the GPU) and was ignored: the "
            "catalogue's profile size is used where known"
        )
    return (
        f"{where}: {metric} counters hold negative or infinite samples {on}: their energy "
        "is unknown over a window that holds one"
    )
