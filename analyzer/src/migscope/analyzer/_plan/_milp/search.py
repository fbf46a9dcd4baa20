"""The planner's use of the MILP: warm starts, the staged solve, and the answer in its terms.

This is the search strategy, apart from the model (:mod:`.model`)
and from running HiGHS (:mod:`.session`): :func:`solve` completes the constructive plans
into warm starts, decides whether the weights allow the two-stage solve
(:func:`_dominant`), never returns worse than its best start, and reads the solution back
as a :class:`MilpResult`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from migscope.analyzer._plan._engine import PoolKey, Prepared, Usage
from migscope.analyzer._plan._heuristics import Choice
from migscope.analyzer._plan._milp.model import Columns, build
from migscope.analyzer._plan._milp.session import Outcome, Session
from migscope.analyzer._plan.pool import Target, Weights

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
    lp, cols = build(prep, weights, [*starts, *([fixed] if fixed else [])])
    session = Session(lp, integer=not relax, seed=seed, mip_rel_gap=mip_rel_gap)
    size = (len(lp.rest), len(lp.rows_lower))
    staged = _dominant(prep, weights) and not relax
    integral = weights.integral() and not relax
    if relax:
        outcome = _optimise(session, weights, staged=False, integral=False, deadline=deadline)
        value = outcome.objective
        return MilpResult(
            outcome.status, {}, {}, {}, value, value, 0.0, time.perf_counter() - began, *size
        )

    def optimise(until: float, start: list[float] | None = None) -> Outcome:
        return _optimise(
            session, weights, staged=staged, integral=integral, deadline=until, start=start
        )

    layout_cols = [*cols.keep.values(), *cols.move.values()]
    if fixed is not None:
        session.pin(layout_cols, *_pinned(cols, fixed))
        outcome = optimise(deadline)
    else:
        best: Outcome | None = None
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
            outcome = Outcome(best.values, "time_limit", best.objective, None)
        elif (
            best is not None
            and outcome.objective is not None
            and best.objective is not None
            and best.objective < outcome.objective  # never return worse than a start
        ):
            outcome = Outcome(best.values, "time_limit", best.objective, outcome.bound)
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


def _pinned(cols: Columns, choice: Choice) -> tuple[list[float], list[float]]:
    """Bounds pinning the layout columns (keep, then move) to ``choice``."""
    values = [float(choice.keep.get(c, 0)) for c in cols.keep]
    values += [float(choice.moves.get(key, 0)) for key in cols.move]
    return values, values


def _optimise(
    session: Session,
    weights: Weights,
    *,
    staged: bool,
    integral: bool,
    deadline: float,
    start: list[float] | None = None,
) -> Outcome:
    """Minimise the weighted objective, in one run or in two stages (see the package docstring)."""
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
        return Outcome(first.values, "time_limit", unmet + rest, unmet_floor)
    rest_bound = second.bound if second.bound is not None else 0.0
    if integral:
        rest_bound = float(math.ceil(rest_bound - 1e-6))
    # Unless coverage is proven maximal, a better one may exist at any cost for the rest.
    proven = first.status == "optimal"
    bound = unmet + max(rest_bound, 0.0) if proven else unmet_floor
    final = "optimal" if proven and second.status == "optimal" else "time_limit"
    return Outcome(second.values, final, unmet + second.objective, bound)
