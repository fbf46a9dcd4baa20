"""The file path's entry point: a set of series in, one :class:`SliceSeries` per slice out.

It is what the embedded source calls; it detects the dialect, hands the series to that
dialect's reader (:mod:`.from_migscope` or :mod:`.from_dcgm`) and carries the reader's notes
along with the slices, and what the file's per-GPU families say of each GPU (model, driver,
own profile table: :func:`file_gpu_facts`; :mod:`migscope.analyzer._intake.gpu_facts` reads
the label sets, and the Prometheus source asks the server the same questions).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from migscope.analyzer._intake.dialect.detect import Dialect, detect_dialect
from migscope.analyzer._intake.dialect.from_dcgm import dcgm_moves, dcgm_slices
from migscope.analyzer._intake.dialect.from_migscope import migscope_moves, migscope_slices
from migscope.analyzer._intake.dialect.grouping import NodeMoves
from migscope.analyzer._intake.dialect.identity import DEFAULT_NODE, node_of
from migscope.analyzer._intake.dialect.names import GPU_INFO, GPU_PROFILE_INFO
from migscope.analyzer._intake.gpu_facts import GpuFacts, dcgm_gpu_facts, migscope_gpu_facts
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
