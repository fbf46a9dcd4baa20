"""The one interface every source of slice history implements: :class:`Source`.

A source answers three questions, in this order: which window to analyse (it knows its
newest sample, or that it is live), the statistics of each slice in that window, and what the
report should say about how it read them (notes, complete once the slices were iterated).
It also says where the data came from, which the report carries as provenance and the
applier checks: simulated data never reaches a cluster.

A source of raw series (a file, the simulator: a :class:`SeriesSource`) computes their
statistics with :func:`local_stats`, the same way a server computes them in PromQL, so the
analysis takes one kind of item, whatever the source.

Sources are context managers, because some hold resources for the run (an HTTP client, a
Prometheus started for it); :func:`migscope.analyzer.run` enters and leaves them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._intake.stats_local import (
    HOURLY_PERIOD_SECONDS,
    SliceSeries,
    iter_slice_stats,
)
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import DEFAULT_STEP_SECONDS
from migscope.core import UserError

Window = tuple[float, float]
"""``(start, end)`` Unix seconds."""

Slices = Iterable[SliceStats]
"""Per-slice statistics of the window: computed from raw series (:func:`local_stats`) or by a
server in PromQL."""

Origin = dict[str, object]
"""Where the data came from, as the report's ``provenance.source`` says it (``kind``, ...)."""


class SourceError(UserError):
    """A source cannot be used as asked (the message says why and what to try)."""


@runtime_checkable
class Source(Protocol):
    """Where a window of slice history comes from."""

    simulated: bool
    """True for data that no real GPU produced: plans from it are never applied."""

    def origin(self) -> Origin:
        """Where the data comes from, for the report's provenance (no credentials in it)."""
        ...

    def window(self, length_s: float, end: float | None, step_s: float) -> Window:
        """The window of ``length_s`` to analyse, ending at ``end`` or the source's default.

        A server-side source moves it onto its ``step_s`` grid (what PromQL can evaluate).
        """
        ...

    def slices(self, window: Window, step_s: float) -> Slices:
        """The statistics of each slice of ``window``, one at a time (iterate once)."""
        ...

    def gpus(self) -> Sequence[GpuFacts]:
        """What the data says of each GPU: model, driver, its own profile table.

        Asked after :meth:`slices` returned and before its slices are iterated: a source
        reads what identifies its GPUs when it is asked for the slices (the file's label
        sets, the server's discovery), so this costs at most one more query.
        """
        ...

    def notes(self) -> Sequence[str]:
        """What the report should say about how the data was read (after :meth:`slices`)."""
        ...

    def __enter__(self) -> Source: ...

    def __exit__(self, *exc_info: object) -> None: ...


@runtime_checkable
class SeriesSource(Source, Protocol):
    """A source whose slices are raw series at hand (a file, the simulator).

    Its :meth:`slices` are :func:`local_stats` of its :meth:`series`; the series themselves
    are what ``--prometheus-embedded`` replays into a Prometheus.
    """

    def series(self, window: Window, step_s: float) -> Iterable[SliceSeries]:
        """The raw series of the slices of ``window``, one at a time (iterate once)."""
        ...


def local_stats(
    series: Iterable[SliceSeries], window: Window, step_s: float = DEFAULT_STEP_SECONDS
) -> Iterator[SliceStats]:
    """The window statistics of raw series, computed here as the server computes them in PromQL.

    What a :class:`SeriesSource` yields as its slices, and how tests and benchmarks with series
    at hand feed :func:`~migscope.analyzer._pipeline.analyze`: one slice's samples held at a
    time (:func:`~migscope.analyzer._intake.stats_local.iter_slice_stats`).

    Args:
        series: The slices' raw series (a generator is fine).
        window: ``(start, end)`` Unix seconds.
        step_s: The step the analysis counts coverage and allocation in.
    """
    return iter_slice_stats(series, start=window[0], end=window[1], step=step_s)


_R = TypeVar("_R", bound="Resourceless")


class Resourceless:
    """For sources that hold nothing for the run: entering and leaving them does nothing."""

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


def window_ending(end: float, length_s: float) -> Window:
    """The window of ``length_s`` that holds ``end`` (the newest sample, or now).

    Whole-hour windows lie on the hour grid, which per-hour use needs (the heatmap, the
    what-if replay): the end moves *forward* to the next full hour, so the newest samples,
    a single scrape's only one included, are always inside (moving it back would leave out
    the data the user gave). The part after ``end`` holds no samples and lowers coverage by
    less than an hour's worth.
    """
    if length_s % HOURLY_PERIOD_SECONDS == 0 and end - length_s > 0:
        hour = HOURLY_PERIOD_SECONDS
        top = math.ceil(end / hour) * hour
        return (top - length_s, top)
    return (end - length_s, end)
