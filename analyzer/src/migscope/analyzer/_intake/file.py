"""An exposition file as a source: scrapes saved from migscope's or dcgm-exporter's ``/metrics``.

:func:`read_openmetrics` reads an OpenMetrics or text exposition file (migscope's or
dcgm-exporter's series, detected automatically) with the same parser the tests check against
a real Prometheus; :class:`FileSource` is the :class:`~migscope.analyzer._intake.base.Source`
over it, whose window ends at the file's newest sample and whose slices' statistics are
computed here (:func:`~migscope.analyzer._intake.base.local_stats`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from migscope.analyzer._intake.base import (
    Origin,
    Resourceless,
    Slices,
    Window,
    local_stats,
    window_ending,
)
from migscope.analyzer._intake.dialect import indexes, iter_slice_series, keeps
from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._intake.openmetrics import read_exposition
from migscope.analyzer._intake.stats_local import SliceSeries


class FileSource(Resourceless):
    """The slices of an exposition file (``--source FILE``).

    The file is read when the window is asked for (its newest sample sets the default end).
    """

    simulated = False

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._file: ExpositionFile | None = None

    def _read(self) -> ExpositionFile:
        if self._file is None:
            self._file = read_openmetrics(self.path)
        return self._file

    def origin(self) -> Origin:
        """``{"kind": "file", "path": ...}``."""
        return {"kind": "file", "path": self.path}

    def window(self, length_s: float, end: float | None, step_s: float) -> Window:
        """``length_s`` ending at ``end``, else at the file's newest sample (to the hour)."""
        return window_ending(self._read().last if end is None else end, length_s)

    def series(self, window: Window, step_s: float) -> Iterable[SliceSeries]:
        """The file's slices, all their samples (the statistics cut them to the window)."""
        return self._read().series

    def slices(self, window: Window, step_s: float) -> Slices:
        """The statistics of the file's slices over ``window``."""
        return local_stats(self.series(window, step_s), window, step_s)

    def gpus(self) -> Sequence[GpuFacts]:
        """Each GPU of the file: model, driver, and the profile table it reported."""
        return self._read().gpus

    def notes(self) -> Sequence[str]:
        """What the dialect reader left out or could only guess."""
        return self._read().notes


@dataclass(frozen=True)
class ExpositionFile:
    """An exposition file's slices and the time span its samples cover.

    Attributes:
        path: The file.
        first: First sample time, Unix seconds.
        last: Last sample time, Unix seconds (the default window ends here).
        series: The slices, built one at a time when iterated (iterate once).
        notes: What the dialect reader left out or could only guess, one sentence each
            (:attr:`~migscope.analyzer._intake.dialect.SliceReader.notes`): for the report's notes.
        gpus: What the file says of each GPU (model, driver, own profile table).
    """

    path: str
    first: float
    last: float
    series: Iterator[SliceSeries]
    notes: tuple[str, ...] = ()
    gpus: tuple[GpuFacts, ...] = ()


def read_openmetrics(path: str | os.PathLike[str]) -> ExpositionFile:
    """Read an exposition file of either dialect into per-slice series.

    The samples of the families the dialects read are kept (dcgm-exporter's in any letter
    case); of the other dcgm-exporter families only the label sets, which tell the dialect
    and list GPU instances that have neither activity nor framebuffer series.

    Raises:
        ExpositionError: the file cannot be read or parsed (``FILE:LINE: what``).
        NoMigSeriesError: it holds no per-slice series of either dialect.
    """
    found = read_exposition(path, keep=keeps, index=indexes)
    series = iter_slice_series(found)
    span = found.time_range()
    first, last = span if span is not None else (0.0, 0.0)
    return ExpositionFile(os.fspath(path), first, last, series, series.notes, series.gpus)
