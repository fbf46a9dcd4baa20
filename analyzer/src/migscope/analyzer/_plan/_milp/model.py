"""The aggregated layout MILP as columns and rows: the formulation of the package docstring.

Building the model is pure bookkeeping, apart from running it:
:func:`build` turns a :class:`~migscope.analyzer._plan._engine.Prepared` pool into a
:class:`LinearModel` (bounds, rows and two costs per column, so that it can be solved as one
weighted sum or in two stages) and the :class:`Columns` that say which column is which
variable, for reading a solution back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from migscope.analyzer._plan._engine import PoolKey, Prepared
from migscope.analyzer._plan._heuristics import Choice
from migscope.analyzer._plan._highs import INF
from migscope.analyzer._plan.pool import Target, Weights

_INTEGER = 1  # HighsVarType.kInteger


@dataclass
class LinearModel:
    """Columns and rows, collected before one bulk hand-over to HiGHS.

    Each column carries two costs: ``cover`` (minus its compute slices, for coverage
    columns) and ``rest`` (every other weighted term), so the model can be solved either as
    one weighted sum or in two stages.
    """

    cover: list[float] = field(default_factory=list)
    rest: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    rows_lower: list[float] = field(default_factory=list)
    rows_upper: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    demanded_compute: float = 0.0
    rest_offset: float = 0.0

    def col(self, rest: float, lower: float, upper: float, cover: float = 0.0) -> int:
        """Add a column with its costs and bounds; returns its index."""
        self.cover.append(cover)
        self.rest.append(rest)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.rest) - 1

    def row(self, lower: float, upper: float, terms: list[tuple[int, float]]) -> None:
        """Add the row ``lower <= sum(coef * x[col]) <= upper`` over ``terms``."""
        self.starts.append(len(self.index))
        self.rows_lower.append(lower)
        self.rows_upper.append(upper)
        for col, coef in terms:
            self.index.append(col)
            self.value.append(coef)

    def load(self, solver: Any, *, integer: bool) -> None:
        """Hand every column and row to ``solver`` (costs are set per run, zero here)."""
        n = len(self.rest)
        solver.addCols(
            n,
            np.zeros(n, dtype=np.float64),
            np.array(self.lower, dtype=np.float64),
            np.array(self.upper, dtype=np.float64),
            0,
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.float64),
        )
        if integer:
            solver.changeColsIntegrality(
                n, np.arange(n, dtype=np.int32), np.full(n, _INTEGER, dtype=np.uint8)
            )
        solver.addRows(
            len(self.rows_lower),
            np.array(self.rows_lower, dtype=np.float64),
            np.array(self.rows_upper, dtype=np.float64),
            len(self.index),
            np.array(self.starts, dtype=np.int32),
            np.array(self.index, dtype=np.int32),
            np.array(self.value, dtype=np.float64),
        )


@dataclass
class Columns:
    """Where each variable lives."""

    keep: dict[int, int] = field(default_factory=dict)
    move: dict[tuple[PoolKey, Target], int] = field(default_factory=dict)
    used: dict[Target, int] = field(default_factory=dict)
    cover: dict[tuple[Target, str, bool], int] = field(default_factory=dict)


def _order(target: Target) -> tuple[bool, tuple[tuple[str, int], ...]]:
    return (not target.mig_enabled, target.layout.counts)


def build(prep: Prepared, weights: Weights, extra: Sequence[Choice]) -> tuple[LinearModel, Columns]:
    """The MILP of the package docstring for ``prep``, and where each variable lives.

    Args:
        prep: The prepared pool.
        weights: Objective weights.
        extra: Plans whose layouts must be columns too (warm starts, a fixed choice), even
            where they are not among a pool's candidates.
    """
    model = prep.model
    compute = model.compute_slices
    lp = LinearModel()
    cols = Columns()
    lp.demanded_compute = float(
        sum(model.profile(p).compute_slices * d for p, d in prep.demand.items())
    )
    for group in prep.classes:
        size = len(group.members)
        cost = weights.change + (weights.busy_change if group.busy else 0.0)
        lp.rest_offset += cost * size
        # A frozen class keeps every GPU: the bound, not the candidates, enforces it, since
        # its pool's move columns may serve free classes with the same in-use instances.
        cols.keep[group.id] = lp.col(-cost, float(size) if group.frozen else 0.0, float(size))

    for pool in sorted(prep.pools):
        size = prep.pool_size(pool)
        options = list(prep.candidates[pool])
        added = {t for choice in extra for (k, t) in choice.moves if k == pool}
        options += sorted(added - set(options), key=_order)
        terms = []
        for target in options:
            col = lp.col(0.0, 0.0, float(size))
            cols.move[(pool, target)] = col
            terms.append((col, 1.0))
        terms += [(cols.keep[c], 1.0) for c in prep.pools[pool]]
        lp.row(float(size), float(size), terms)

    supply: dict[Target, list[tuple[int, bool]]] = {}
    for group in prep.classes:
        supply.setdefault(group.current, []).append((cols.keep[group.id], group.busy))
    for (pool, target), col in cols.move.items():
        supply.setdefault(target, []).append((col, bool(pool)))

    for target in sorted(supply, key=_order):
        if target.empty:
            continue
        counts = target.layout.as_dict()
        every = [(col, 1.0) for col, _ in supply[target]]
        busy = [(col, 1.0) for col, is_busy in supply[target] if is_busy]
        z = lp.col(weights.stranded * compute + weights.used, 0.0, float(len(prep.gpus)))
        cols.used[target] = z
        lp.row(-INF, 0.0, [(z, 1.0), *_scaled(every, -1.0)])
        if busy:
            lp.row(0.0, INF, [(z, 1.0), *_scaled(busy, -1.0)])
        free_cover: list[tuple[int, float]] = []
        for name, wanted in prep.demand.items():
            per_gpu = float(counts.get(name, 0))
            if not per_gpu:
                continue
            g = float(model.profile(name).compute_slices)
            y = lp.col(-weights.stranded * g, 0.0, float(wanted), cover=-g)
            cols.cover[(target, name, False)] = y
            free_cover.append((y, 1.0))
            lp.row(-INF, 0.0, [(y, 1.0), (z, -per_gpu), *_scaled(busy, per_gpu)])
            if busy:
                yb = lp.col(-weights.stranded * g, 0.0, float(wanted), cover=-g)
                cols.cover[(target, name, True)] = yb
                lp.row(-INF, 0.0, [(yb, 1.0), *_scaled(busy, -per_gpu)])
        lp.row(0.0, INF, [*free_cover, (z, -1.0), *busy])
    for name, wanted in prep.demand.items():
        terms = [(col, 1.0) for (_, n, _), col in cols.cover.items() if n == name]
        if terms:
            lp.row(-INF, float(wanted), terms)
    return lp, cols


def _scaled(terms: list[tuple[int, float]], factor: float) -> list[tuple[int, float]]:
    return [(col, coef * factor) for col, coef in terms]
