"""Which step intervals of the window each series has a sample in, cell by cell: pure counting.

The fast path (:mod:`.fast`) must count step intervals of a *slice*
(coverage, allocation, owners, the hours of the heatmap) from reads of each *series* alone,
because aggregating series per step on the server is what made the exact path slow. A
slice's series (activity and memory, the pods that held it, one per pod label set) are
combined here, exactly, in Python.

The window's step intervals are cut into cells of ``period`` (an hour): per series and cell
the server says how many intervals hold a sample (one cheap range query), and for the few
cells where counts cannot settle a union (two series present, neither in every interval of
the cell) it says which ones, as bit masks (:func:`mask_bits`). A union is settled by counts
when no member is present, one member alone is, or one member fills the cell.

Intervals are numbered from the oldest, ``0 .. intervals - 1``; interval ``i`` is
``(end - (intervals - i) * step, end - (intervals - 1 - i) * step]``, cell ``h`` holds intervals
``h * per .. h * per + per - 1``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from migscope.core import MigscopeError

MAX_MASK_BITS = 52
"""The most intervals one mask value may hold: a float64 holds integers exactly to 2^53."""


@dataclass(frozen=True)
class Grid:
    """The window's step intervals, its cells, and the blocks the masks come in.

    Attributes:
        end_ms: Window end, Unix ms (a multiple of ``period_ms``).
        step_ms: Step interval, ms (whole seconds: the masks' ``time()`` arithmetic).
        period_ms: Cell length, ms (a whole number of steps).
        cells: Cells in the window.
        block: Intervals per mask value: the largest divisor of :attr:`per` up to
            :data:`MAX_MASK_BITS`, so that blocks tile cells and end on multiples of
            ``block * step`` since the epoch.
    """

    end_ms: int
    step_ms: int
    period_ms: int
    cells: int
    block: int

    @classmethod
    def of(cls, start: float, end: float, step: float, period: float) -> Grid | None:
        """The grid of a window, or None when the fast path cannot cut it into cells.

        It can when the window is a whole number of periods ending on the period grid, the
        period a whole number of steps, and the step whole seconds.
        """
        start_ms, end_ms = round(start * 1000), round(end * 1000)
        step_ms, period_ms = round(step * 1000), round(period * 1000)
        if step_ms <= 0 or step_ms % 1000 or period_ms <= 0 or period_ms % step_ms:
            return None
        if end_ms % period_ms or end_ms <= start_ms or (end_ms - start_ms) % period_ms:
            return None
        per = period_ms // step_ms
        block = max(d for d in range(1, min(per, MAX_MASK_BITS) + 1) if per % d == 0)
        return cls(end_ms, step_ms, period_ms, (end_ms - start_ms) // period_ms, block)

    @property
    def per(self) -> int:
        """Step intervals per cell."""
        return self.period_ms // self.step_ms

    @property
    def intervals(self) -> int:
        """Step intervals in the window."""
        return self.cells * self.per

    def cell_end(self, h: int) -> float:
        """Unix seconds at which cell ``h`` ends."""
        return (self.end_ms - (self.cells - 1 - h) * self.period_ms) / 1000.0

    def cell_of(self, t: float) -> int:
        """The cell ending at ``t`` (Unix seconds), as range queries at ``period`` report it."""
        return self.cells - 1 - round((self.end_ms - round(t * 1000)) / self.period_ms)

    def interval_end(self, i: int) -> float:
        """Unix seconds at which interval ``i`` ends."""
        return (self.end_ms - (self.intervals - 1 - i) * self.step_ms) / 1000.0

    def block_ends(self, h: int) -> list[float]:
        """Unix seconds at which each mask block of cell ``h`` ends, oldest first."""
        cell_end = round(self.cell_end(h) * 1000)
        blocks = self.per // self.block
        span = self.block * self.step_ms
        return [(cell_end - (blocks - 1 - b) * span) / 1000.0 for b in range(blocks)]


def mask_bits(value: float, block: int) -> NDArray[np.bool_]:
    """The intervals of one block, oldest first, that a mask value says hold a sample.

    The mask query weights the interval ending at ``t`` by ``2 ^ ((t % span) / step)`` with
    ``span = block * step``: the block's newest interval (``t`` a multiple of ``span``) is bit
    0 and the one ending ``r + 1`` steps into the block is bit ``r + 1``.

    Raises:
        ValueError: ``value`` is not a whole number in ``[0, 2^block)`` (an engine that
            summed something else).
    """
    if not math.isfinite(value) or value != int(value) or not 0 <= value < 2**block:
        raise ValueError(f"not a mask of {block} intervals: {value!r}")
    bits = int(value)
    return np.array([(bits >> ((r + 1) % block)) & 1 for r in range(block)], dtype=bool)


@dataclass
class Presence:
    """One series: intervals with a sample per cell, and for some cells which ones.

    Attributes:
        counts: Intervals holding a sample, per cell (oldest cell first).
        masks: For the cells asked (:class:`Unsettled`), which intervals, oldest first.
    """

    counts: NDArray[np.int64]
    masks: dict[int, NDArray[np.bool_]] = field(default_factory=dict)

    @classmethod
    def empty(cls, cells: int) -> Presence:
        """A series with no sample in the window."""
        return cls(np.zeros(cells, dtype=np.int64))

    @property
    def total(self) -> int:
        """Intervals holding a sample in the whole window."""
        return int(self.counts.sum())


class Unsettled(MigscopeError):
    """Counts cannot settle a union or a newest interval: these cells need masks.

    Attributes:
        cells: The cells whose masks (of every member present in them) are missing.
    """

    def __init__(self, cells: Iterable[int]) -> None:
        self.cells = frozenset(cells)
        super().__init__(f"masks needed for cells {sorted(self.cells)}")


def _matrix(members: Sequence[Presence], cells: int) -> NDArray[np.int64]:
    if not members:
        return np.zeros((0, cells), dtype=np.int64)
    return np.stack([m.counts for m in members])


def union(members: Sequence[Presence], per: int, cells: int) -> NDArray[np.int64]:
    """Intervals per cell in which any member has a sample.

    Counts settle a cell when no member is present (0), one member fills it (``per``) or one
    member alone is present (its count); otherwise the members' masks do.

    Raises:
        Unsettled: some cells need the members' masks.
    """
    counts = _matrix(members, cells)
    present = counts > 0
    out = np.where((counts >= per).any(axis=0), per, counts.max(axis=0, initial=0))
    open_cells = np.flatnonzero((present.sum(axis=0) > 1) & (out < per))
    missing: list[int] = []
    for h in open_cells.tolist():
        here = [m for m in members if m.counts[h]]
        if all(h in m.masks for m in here):
            out[h] = int(np.logical_or.reduce([m.masks[h] for m in here]).sum())
        else:
            missing.append(h)
    if missing:
        raise Unsettled(missing)
    return out.astype(np.int64)


def newest(members: Sequence[Presence], grid: Grid) -> int | None:
    """The newest interval in which any member has a sample, or None when none has one.

    Raises:
        Unsettled: the newest cell with a sample is partly filled and its masks are missing.
    """
    per = grid.per
    counts = _matrix(members, grid.cells)
    busy = np.flatnonzero(counts.sum(axis=0) > 0)
    if not busy.size:
        return None
    h = int(busy[-1])
    here = [m for m in members if m.counts[h]]
    if any(m.counts[h] >= per for m in here):
        return h * per + per - 1
    if all(h in m.masks for m in here):
        held = np.logical_or.reduce([m.masks[h] for m in here])
        if held.any():
            return h * per + int(np.flatnonzero(held)[-1])
    raise Unsettled([h])
