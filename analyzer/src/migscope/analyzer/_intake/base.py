"""The one interface every source of slice history implements: :class:`Source`.

A source answers three questions, in this order: which window to analyse (it knows its
newest sample, or that it is live), the slices in that window (raw series, or statistics a
server computed), and what the report should say about how it read them (notes, complete
once the slices were iterated). It also says where the data came from, which the report
carries as provenance and the applier checks: simulated data never reaches a cluster.

Sources are context managers, because some hold resources for the run (an HTTP client, a
Prometheus started for it); :func:`migscope.analyzer.run` enters and leaves them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._intake.stats_local import HOURLY_PERIOD_SECONDS, SliceSeries
from migscope.analyzer._model import SliceStats
from migscope.core import UserError

Window = tuple[float, float]
"""``(start, end)`` Unix seconds."""

Slices = Iterable[SliceSeries | SliceStats]
"""Raw per-slice series (file, simulator) or per-slice statistics (a server's PromQL)."""

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
        """The slices of ``window``, one at a time (iterate once)."""
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
