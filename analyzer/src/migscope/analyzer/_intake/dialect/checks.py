"""The data-quality pass of both file readers: every number of a slice held to its range.

migscope's and dcgm-exporter's readers read different series but
must apply the same rules (:mod:`migscope.analyzer._intake.stats_local.quality`) and report them
the same
way, one note per kind for the whole file. The pass runs while the readers group the series,
before the first slice is built, so that the notes are known with the slices (the file
source hands them over at once); it touches each kept sample once and copies only the series
it changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from migscope.analyzer._intake.dialect.identity import SliceId, profile_bytes
from migscope.analyzer._intake.openmetrics import Series
from migscope.analyzer._intake.stats_local import TimeSeries
from migscope.analyzer._intake.stats_local.quality import (
    Kind,
    QualityCounts,
    bad_counter,
    clean_activity,
    clean_memory,
    usable_total,
)
from migscope.core import GpuModel


def _with(series: Series, samples: TimeSeries) -> Series:
    return series if samples is series.samples else Series(series.name, series.labels, samples)


class SliceChecks:
    """Cleans each slice's series as a reader groups them, and counts what it changed.

    Args:
        source: The file, as the notes name it.
        names: The metric each kind of note is about, as the dialect spells it.
    """

    def __init__(self, source: str, names: Mapping[Kind, str]) -> None:
        self.source = source
        self.names = dict(names)
        self.counts = QualityCounts()

    def activity(self, ident: SliceId, parts: Iterable[Series]) -> list[Series]:
        """Activity series with infinite or negative samples dropped and those above 1 at 1."""
        out = []
        for s in parts:
            cleaned = clean_activity(s.samples)
            if cleaned.dropped:
                self.counts.add(Kind.ACTIVITY_DROPPED, ident, cleaned.dropped)
            if cleaned.clamped:
                self.counts.add(Kind.ACTIVITY_CLAMPED, ident, cleaned.clamped)
            out.append(_with(s, cleaned.series))
        return out

    def memory(self, ident: SliceId, parts: Iterable[Series]) -> list[Series]:
        """Memory-use series with infinite or negative samples dropped."""
        out = []
        for s in parts:
            cleaned = clean_memory(s.samples)
            if cleaned.dropped:
                self.counts.add(Kind.MEMORY_DROPPED, ident, cleaned.dropped)
            out.append(_with(s, cleaned.series))
        return out

    def total(
        self, ident: SliceId, measured: float | None, model: GpuModel | None, profile: str
    ) -> float | None:
        """The slice's memory total: the measured one if it is a size, else the catalogue's.

        Args:
            ident: The slice.
            measured: The total the series give, bytes (None: none).
            model: The slice's GPU model, which bounds the total and knows profile sizes.
            profile: The slice's profile.
        """
        if measured is None:
            return profile_bytes(model, profile)
        gpu = float(model.memory_total_bytes) if model is not None else None
        if usable_total(measured, gpu_bytes=gpu):
            return measured
        self.counts.add(Kind.TOTAL_IGNORED, ident)
        return profile_bytes(model, profile)

    def above_total(
        self, ident: SliceId, parts: Iterable[Series], total: float | None, *, scale: float = 1.0
    ) -> None:
        """Count memory-use samples above the slice's total (the statistics cap them)."""
        if total is None:
            return
        with np.errstate(invalid="ignore"):
            above = sum(int((s.samples.values * scale > total).sum()) for s in parts)
        if above:
            self.counts.add(Kind.MEMORY_ABOVE_TOTAL, ident, above)

    def energy(self, ident: SliceId, parts: Iterable[Series]) -> None:
        """Count energy counters' negative or infinite samples (a window with one has none)."""
        bad = sum(bad_counter(s.samples.values) for s in parts)
        if bad:
            self.counts.add(Kind.ENERGY_UNKNOWN, ident, bad)

    def notes(self) -> list[str]:
        """One sentence per kind found in the file."""
        return self.counts.notes(self.source, self.names)
