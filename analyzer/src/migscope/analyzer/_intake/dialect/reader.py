"""The file path's entry point: a set of series in, one :class:`SliceSeries` per slice out.

Why a module of its own: it is what the embedded source calls; it detects the dialect, hands
the series to that dialect's reader (:mod:`.from_migscope` or :mod:`.from_dcgm`) and carries
the reader's notes along with the slices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from migscope.analyzer._intake.dialect.detect import Dialect, detect_dialect
from migscope.analyzer._intake.dialect.from_dcgm import dcgm_moves, dcgm_slices
from migscope.analyzer._intake.dialect.from_migscope import migscope_moves, migscope_slices
from migscope.analyzer._intake.dialect.gpus import file_gpu_facts
from migscope.analyzer._intake.dialect.identity import DEFAULT_NODE
from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._intake.openmetrics import SeriesSet
from migscope.analyzer._intake.stats_local import SliceSeries


class SliceReader(Iterator[SliceSeries]):
    """A file's slices, built one at a time, and what reading them had to leave out.

    Attributes:
        dialect: The dialect read.
        notes: One sentence per thing left out or guessed (series without a usable id,
            slices seen only through the presence family) and one per kind of number held
            to its range (:mod:`migscope.analyzer._intake.stats_local.quality`); put them in the
            report's
            notes.
        gpus: What the file says of each GPU: model, driver, own profile table.
    """

    def __init__(
        self,
        dialect: Dialect,
        items: Iterator[SliceSeries],
        notes: Sequence[str],
        gpus: Sequence[GpuFacts] = (),
    ):
        self.dialect = dialect
        self.notes: tuple[str, ...] = tuple(notes)
        self.gpus: tuple[GpuFacts, ...] = tuple(gpus)
        self._items = items

    def __next__(self) -> SliceSeries:
        return next(self._items)

    def __iter__(self) -> SliceReader:
        return self


def iter_slice_series(
    series: SeriesSet,
    *,
    dialect: Dialect | None = None,
    default_node: str = DEFAULT_NODE,
) -> SliceReader:
    """Group a file's series into one :class:`SliceSeries` per slice, in key order.

    The dialect is detected and the series are grouped here, before the first slice is
    asked for, so that a file of the wrong kind fails at once with :class:`NoMigSeriesError`
    and the notes are known. Slices are then built one at a time: only the current slice's
    arrays are concatenated and converted.

    Args:
        series: What the exposition reader returned (read with ``keep=keeps`` and
            ``index=indexes``; ``keep=DIALECT_METRICS`` also works, without other letter
            cases and without the presence family).
        dialect: Force a dialect instead of detecting it.
        default_node: Node name for series without a node label.

    Raises:
        NoMigSeriesError: no per-slice series of the dialect.
    """
    chosen = detect_dialect(series) if dialect is None else dialect
    if chosen is Dialect.MIGSCOPE:
        items, notes = migscope_slices(series, default_node)
        moves = migscope_moves(series, default_node)
    else:
        items, notes = dcgm_slices(series, default_node)
        moves = dcgm_moves(series, default_node)
    gpus = file_gpu_facts(series, chosen, default_node, moves)
    return SliceReader(chosen, items, notes, gpus)
