"""The aggregated layout MILP, built and solved with HiGHS.

Variables (all integer):

* ``k[c]``: GPUs of class ``c`` that keep their current target (``0..|c|``).
* ``m[K, t]``: GPUs of pool ``K`` (same kept instances) that change to candidate ``t``.
* ``Z[t]``: GPUs with target ``t`` that are *used* (hold a demanded or in-use instance).
* ``y[t, p]``, ``yb[t, p]``: instances of profile ``p`` counted towards demand on GPUs with
  target ``t`` without and with in-use instances (``yb`` exists where busy GPUs can have
  ``t``).

Constraints:

* pool balance: ``sum_t m[K, t] + sum_{c in K} k[c] = |K|``;
* used GPUs exist: ``Z[t] <= T[t]`` where ``T[t] = sum_{c: cur(c)=t} k[c] + sum_K m[K, t]``;
* busy GPUs are used: ``Z[t] >= B[t]``, the busy part of ``T[t]``;
* coverage fits: ``y[t, p] <= count_t(p) * (Z[t] - B[t])``, ``yb[t, p] <= count_t(p) * B[t]``;
* a used GPU without in-use instances holds a demanded one: ``sum_p y[t, p] >= Z[t] - B[t]``
  (redundant at the optimum; it makes ``Z`` count exactly the GPUs the plan reports used);
* no over-counting: ``sum_t (y[t, p] + yb[t, p]) <= D[p]``.

Objective (``W`` = :class:`~migscope.analyzer.plan.pool.Weights`, ``g_p`` compute slices
of ``p``, ``C`` of the GPU), with the constants folded into HiGHS's objective offset::

    W.unmet    * sum_p g_p (D[p] - sum_t (y[t, p] + yb[t, p]))
  + W.change   * sum_c (|c| - k[c])
  + W.busy     * sum_{c busy} (|c| - k[c])
  + W.stranded * (C * sum_t Z[t] - sum_{t,p} g_p (y[t, p] + yb[t, p]))
  + W.used     * sum_t Z[t]

**Staged solve.** Lexicographic weights span nine orders of magnitude at 10,000 GPUs, which
HiGHS's tolerances cannot honour (it warns, and stalls at the root). When ``W.unmet``
dominates every other term (as :meth:`Weights.lexicographic` makes it), the same optimum is
reached in two well-scaled solves: first maximise covered compute slices, then fix that
coverage with a constraint and minimise the rest of the objective. The reported objective and
bound are those of the weighted sum.

**Warm starts.** Constructive plans (:mod:`._heuristics`) are completed into full solutions
(the model with their layouts fixed) and handed to HiGHS, so the result is never worse than
the best of them, even when the time limit stops the search.

The same model with ``k`` and ``m`` fixed gives the best coverage of given layouts, which is
how the baselines are scored.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from migscope.analyzer.plan._engine import PoolKey, Prepared, Usage
from migscope.analyzer.plan._heuristics import Choice
from migscope.analyzer.plan._highs import INF, new_highs
from migscope.analyzer.plan.pool import Target, Weights

__all__ = ["MilpResult", "solve"]

_INTEGER = 1  # HighsVarType.kInteger
_FEASIBLE = 2  # SolutionStatus.kSolutionStatusFeasible
_COMPLETE_S = 5.0  # budget for completing one warm start (typically tens of milliseconds)


@dataclass
class MilpResult:
    """What HiGHS found (``keep``/``moves`` in the terms of :class:`Choice`)."""

    status: str
    keep: dict[int, int]
    moves: dict[tuple[PoolKey, Target], int]
    usage: dict[Target, Usage]
    objective: float | None
    best_bound: float | None
    gap: float | None
    solver_s: float
    variables: int
    constraints: int


@dataclass
class _Model:
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
        self.cover.append(cover)
        self.rest.append(rest)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.rest) - 1

    def row(self, lower: float, upper: float, terms: list[tuple[int, float]]) -> None:
        self.starts.append(len(self.index))
        self.rows_lower.append(lower)
        self.rows_upper.append(upper)
        for col, coef in terms:
            self.index.append(col)
            self.value.append(coef)

    def load(self, solver: Any, *, integer: bool) -> None:
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
class _Columns:
    """Where each variable lives."""

    keep: dict[int, int] = field(default_factory=dict)
    move: dict[tuple[PoolKey, Target], int] = field(default_factory=dict)
    used: dict[Target, int] = field(default_factory=dict)
    cover: dict[tuple[Target, str, bool], int] = field(default_factory=dict)


@dataclass
class _Outcome:
    """One (possibly staged) optimisation of the loaded model."""

    values: list[float] | None
    status: str
    objective: float | None
    bound: float | None


def _order(target: Target) -> tuple[bool, tuple[tuple[str, int], ...]]:
    return (not target.mig_enabled, target.layout.counts)


def _build(prep: Prepared, weights: Weights, extra: Sequence[Choice]) -> tuple[_Model, _Columns]:
    model = prep.model
    compute = model.compute_slices
    lp = _Model()
    cols = _Columns()
    lp.demanded_compute = float(
        sum(model.profile(p).compute_slices * d for p, d in prep.demand.items())
    )
    for group in prep.classes:
        size = len(group.members)
        cost = weights.change + (weights.busy_change if group.busy else 0.0)
        lp.rest_offset += cost * size
        cols.keep[group.id] = lp.col(-cost, 0.0, float(size))

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


def _dominant(prep: Prepared, weights: Weights) -> bool:
    """Whether one unmet compute slice outweighs every other term's largest total.

    Then maximising coverage first and optimising the rest second is the same optimum as
    the weighted sum, and far better conditioned.
    """
    n = len(prep.gpus)
    busy = prep.busy_gpus
    rest = (
        weights.change * n
        + weights.busy_change * busy
        + weights.stranded * prep.model.compute_slices * n
        + weights.used * n
    )
    return weights.unmet > rest and min(weights.as_dict().values()) >= 0


class _Session:
    """One HiGHS model and the state the planner changes between runs.

    Every solution HiGHS returns is checked here against the model (bounds, integrality,
    rows) and its objective recomputed from the values: HiGHS 1.16's presolve has been seen
    to report an objective that its own solution does not have, or to postsolve a point
    that violates a row. Such a run is repeated without presolve.
    """

    def __init__(self, lp: _Model, *, integer: bool, seed: int, mip_rel_gap: float) -> None:
        self.lp = lp
        self.integer = integer
        self.solver = new_highs(time_limit_s=1.0, mip_rel_gap=mip_rel_gap, mip_abs_gap=0, seed=seed)
        lp.load(self.solver, integer=integer)
        self.lower = np.array(lp.lower, dtype=np.float64)
        self.upper = np.array(lp.upper, dtype=np.float64)
        self.row_lower = np.array(lp.rows_lower, dtype=np.float64)
        self.row_upper = np.array(lp.rows_upper, dtype=np.float64)
        ends = [*lp.starts[1:], len(lp.index)]
        counts = [end - begin for begin, end in zip(lp.starts, ends, strict=True)]
        self.row_of = np.repeat(np.arange(len(lp.rows_lower)), counts)
        self.index = np.array(lp.index, dtype=np.int64)
        self.value = np.array(lp.value, dtype=np.float64)
        self.costs = np.zeros(len(lp.rest), dtype=np.float64)
        self.offset = 0.0
        self.cover = -np.array(lp.cover, dtype=np.float64)  # compute slices per cover column
        self.cover_min: float | None = None

    # -- model changes --------------------------------------------------------------------

    def pin(self, cols: list[int], lower: list[float], upper: list[float]) -> None:
        self.lower[cols] = lower
        self.upper[cols] = upper
        self.solver.changeColsBounds(
            len(cols),
            np.array(cols, dtype=np.int32),
            np.array(lower, dtype=np.float64),
            np.array(upper, dtype=np.float64),
        )

    def set_costs(self, costs: Sequence[float], offset: float) -> None:
        self.costs = np.array(costs, dtype=np.float64)
        self.offset = offset
        n = len(costs)
        self.solver.changeColsCost(n, np.arange(n, dtype=np.int32), self.costs)
        self.solver.changeObjectiveOffset(offset)

    def require_cover(self, least: float) -> None:
        """Add the row "covered compute slices >= least" (stage 2)."""
        cols = np.flatnonzero(self.cover)
        self.solver.addRow(
            least, INF, len(cols), cols.astype(np.int32), self.cover[cols].astype(np.float64)
        )
        self.cover_min = least

    def drop_cover(self) -> None:
        last = self.solver.getNumRow() - 1
        self.solver.deleteRows(1, np.array([last], dtype=np.int32))
        self.cover_min = None

    # -- running -------------------------------------------------------------------------

    def valid(self, x: np.ndarray[Any, np.dtype[np.float64]]) -> bool:
        """Whether ``x`` satisfies the model as the planner built it."""
        tol = 1e-6
        if np.any(x < self.lower - tol) or np.any(x > self.upper + tol):
            return False
        if self.integer and np.any(np.abs(x - np.round(x)) > tol):
            return False
        rows = np.bincount(
            self.row_of, weights=self.value * x[self.index], minlength=len(self.row_lower)
        )
        if np.any(rows < self.row_lower - tol) or np.any(rows > self.row_upper + tol):
            return False
        return self.cover_min is None or float(self.cover @ x) >= self.cover_min - tol

    def run(self, *, deadline: float, abs_gap: float, start: list[float] | None) -> _Outcome:
        """One run within the deadline: a checked solution, its objective, HiGHS's bound."""
        solver = self.solver
        outcome = _Outcome(None, "no_solution", None, None)
        for presolve in ("choose", "off"):
            solver.setOptionValue("time_limit", max(deadline - time.perf_counter(), 0.0))
            solver.setOptionValue("mip_abs_gap", abs_gap)
            solver.setOptionValue("presolve", presolve)
            if start is not None:
                n = len(start)
                solver.setSolution(
                    n, np.arange(n, dtype=np.int32), np.array(start, dtype=np.float64)
                )
            solver.run()
            info = solver.getInfo()
            status = _status(solver)
            values: list[float] | None = None
            objective: float | None = None
            if info.primal_solution_status == _FEASIBLE:
                x = np.array(solver.getSolution().col_value, dtype=np.float64)
                if self.valid(x):
                    if self.integer:
                        x = np.round(x)
                    values = [float(v) for v in x]
                    objective = float(self.costs @ x) + self.offset
            bound = float(info.mip_dual_bound) if self.integer else objective
            if bound is not None and not math.isfinite(bound):
                bound = None
            if objective is not None and bound is not None:
                bound = min(bound, objective)  # no bound can beat a feasible point
            outcome = _Outcome(values, status, objective, bound)
            consistent = objective is not None and (
                status != "optimal" or bound is None or objective - bound < max(abs_gap, 1e-6)
            )
            sound = values is not None or status in ("time_limit", "infeasible")
            if (consistent or values is None) and sound:
                break
        solver.setOptionValue("presolve", "choose")
        if outcome.status == "optimal" and (
            outcome.objective is None
            or outcome.bound is None
            or outcome.objective - outcome.bound >= max(abs_gap, 1e-6)
        ):
            outcome.status = "time_limit" if outcome.objective is not None else "no_solution"
        return outcome


def solve(
    prep: Prepared,
    weights: Weights,
    *,
    time_limit_s: float,
    mip_rel_gap: float = 0.0,
    fixed: Choice | None = None,
    starts: Sequence[Choice] = (),
    seed: int = 0,
    relax: bool = False,
) -> MilpResult:
    """Build the aggregated MILP for ``prep`` and solve it.

    Args:
        prep: The prepared pool.
        weights: Objective weights.
        time_limit_s: Wall-clock budget for the search (both stages). Completing the warm
            starts comes before it, with its own budget.
        mip_rel_gap: Relative gap at which HiGHS may stop (0: prove optimality).
        fixed: Fix the targets and only choose coverage.
        starts: Constructive plans to warm-start from (the best one is used).
        seed: HiGHS's random seed.
        relax: Solve the LP relaxation instead (for lower bounds); the result then holds
            only the objective, as ``objective`` and ``best_bound``.
    """
    began = time.perf_counter()
    deadline = began + time_limit_s  # for fixed layouts and relaxations
    lp, cols = _build(prep, weights, [*starts, *([fixed] if fixed else [])])
    session = _Session(lp, integer=not relax, seed=seed, mip_rel_gap=mip_rel_gap)
    size = (len(lp.rest), len(lp.rows_lower))
    staged = _dominant(prep, weights) and not relax
    integral = weights.integral() and not relax
    if relax:
        outcome = _optimise(session, weights, staged=False, integral=False, deadline=deadline)
        value = outcome.objective
        return MilpResult(
            outcome.status, {}, {}, {}, value, value, 0.0, time.perf_counter() - began, *size
        )

    def optimise(until: float, start: list[float] | None = None) -> _Outcome:
        return _optimise(
            session, weights, staged=staged, integral=integral, deadline=until, start=start
        )

    layout_cols = [*cols.keep.values(), *cols.move.values()]
    if fixed is not None:
        session.pin(layout_cols, *_pinned(cols, fixed))
        outcome = optimise(deadline)
    else:
        best: _Outcome | None = None
        for choice in starts:
            # Completing a start only chooses coverage for fixed layouts: fast, and kept out
            # of the search's budget so that a short limit still returns the best start.
            session.pin(layout_cols, *_pinned(cols, choice))
            done = optimise(time.perf_counter() + max(time_limit_s, _COMPLETE_S))
            if done.objective is not None and (
                best is None or best.objective is None or done.objective < best.objective
            ):
                best = done
        session.pin(
            layout_cols, [lp.lower[c] for c in layout_cols], [lp.upper[c] for c in layout_cols]
        )
        search_end = time.perf_counter() + time_limit_s
        outcome = optimise(search_end, best.values if best is not None else None)
        if outcome.values is None and best is not None:
            outcome = _Outcome(best.values, "time_limit", best.objective, None)
        elif (
            best is not None
            and outcome.objective is not None
            and best.objective is not None
            and best.objective < outcome.objective  # never return worse than a start
        ):
            outcome = _Outcome(best.values, "time_limit", best.objective, outcome.bound)
    elapsed = time.perf_counter() - began
    if outcome.values is None:
        return MilpResult("no_solution", {}, {}, {}, None, None, None, elapsed, *size)
    values = outcome.values

    def val(col: int) -> int:
        return round(values[col])

    usage: dict[Target, Usage] = {target: Usage(val(z)) for target, z in cols.used.items()}
    for (target, name, on_busy), col in cols.cover.items():
        if val(col) > 0:
            side = usage[target].on_busy if on_busy else usage[target].on_free
            side[name] = val(col)
    objective, bound = outcome.objective, outcome.bound
    gap = None
    if objective is not None and bound is not None:
        gap = max(objective - bound, 0.0) / max(abs(objective), 1.0)
    return MilpResult(
        status=outcome.status,
        keep={c: val(col) for c, col in cols.keep.items()},
        moves={key: val(col) for key, col in cols.move.items() if val(col) > 0},
        usage=usage,
        objective=objective,
        best_bound=bound,
        gap=gap,
        solver_s=elapsed,
        variables=size[0],
        constraints=size[1],
    )


def _pinned(cols: _Columns, choice: Choice) -> tuple[list[float], list[float]]:
    """Bounds pinning the layout columns (keep, then move) to ``choice``."""
    values = [float(choice.keep.get(c, 0)) for c in cols.keep]
    values += [float(choice.moves.get(key, 0)) for key in cols.move]
    return values, values


def _status(solver: Any) -> str:
    """HiGHS's model status in the planner's words."""
    lowered = str(solver.modelStatusToString(solver.getModelStatus())).lower()
    if lowered == "optimal":
        return "optimal"
    if "time limit" in lowered:
        return "time_limit"
    return lowered.replace(" ", "_")


def _optimise(
    session: _Session,
    weights: Weights,
    *,
    staged: bool,
    integral: bool,
    deadline: float,
    start: list[float] | None = None,
) -> _Outcome:
    """Minimise the weighted objective, in one run or in two stages (see the module doc)."""
    lp = session.lp
    abs_gap = 0.999 if integral else 1e-6
    unmet_offset = weights.unmet * lp.demanded_compute
    if not staged:
        costs = [r + weights.unmet * c for r, c in zip(lp.rest, lp.cover, strict=True)]
        session.set_costs(costs, lp.rest_offset + unmet_offset)
        outcome = session.run(deadline=deadline, abs_gap=abs_gap, start=start)
        if integral and outcome.bound is not None:
            outcome.bound = float(math.ceil(outcome.bound - 1e-6))
        return outcome
    # Stage 1: cover as much demanded compute as possible.
    session.set_costs(lp.cover, 0.0)
    first = session.run(deadline=deadline, abs_gap=0.999, start=start)
    if first.values is None or first.objective is None:
        return first
    covered = -round(first.objective)
    unmet_floor = 0.0  # without a finite bound on coverage, nothing is proven about it
    if first.bound is not None:
        most = math.floor(-first.bound + 1e-6)
        unmet_floor = weights.unmet * max(lp.demanded_compute - most, 0.0)
    # Stage 2: keep that coverage, minimise the rest.
    session.require_cover(float(covered))
    session.set_costs(lp.rest, lp.rest_offset)
    second = session.run(deadline=deadline, abs_gap=abs_gap, start=first.values)
    session.drop_cover()
    unmet = weights.unmet * (lp.demanded_compute - covered)
    if second.values is None or second.objective is None:
        rest = sum(c * v for c, v in zip(lp.rest, first.values, strict=True)) + lp.rest_offset
        return _Outcome(first.values, "time_limit", unmet + rest, unmet_floor)
    rest_bound = second.bound if second.bound is not None else 0.0
    if integral:
        rest_bound = float(math.ceil(rest_bound - 1e-6))
    # Unless coverage is proven maximal, a better one may exist at any cost for the rest.
    proven = first.status == "optimal"
    bound = unmet + max(rest_bound, 0.0) if proven else unmet_floor
    final = "optimal" if proven and second.status == "optimal" else "time_limit"
    return _Outcome(second.values, final, unmet + second.objective, bound)
