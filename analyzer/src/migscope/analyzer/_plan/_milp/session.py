"""One HiGHS model of the MILP, run within a deadline, every solution it returns checked.

HiGHS cannot be taken at its word: :class:`Session` holds the loaded
model and the changes the planner makes between runs (pinned columns, costs, a coverage
row), checks each solution against the model as the planner built it and recomputes its
objective, and runs again without presolve when HiGHS's answer does not hold.
:class:`Outcome` is what one run gives back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from migscope.analyzer._plan._highs import INF, new_highs
from migscope.analyzer._plan._milp.model import LinearModel

_FEASIBLE = 2  # SolutionStatus.kSolutionStatusFeasible


@dataclass
class Outcome:
    """One (possibly staged) optimisation of the loaded model."""

    values: list[float] | None
    status: str
    objective: float | None
    bound: float | None


class Session:
    """One HiGHS model and the state the planner changes between runs.

    Every solution HiGHS returns is checked here against the model (bounds, integrality,
    rows) and its objective recomputed from the values: HiGHS 1.16's presolve has been seen
    to report an objective that its own solution does not have, or to postsolve a point
    that violates a row. Such a run is repeated without presolve.
    """

    def __init__(self, lp: LinearModel, *, integer: bool, seed: int, mip_rel_gap: float) -> None:
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
        """Set the bounds of ``cols``, here and in HiGHS."""
        self.lower[cols] = lower
        self.upper[cols] = upper
        self.solver.changeColsBounds(
            len(cols),
            np.array(cols, dtype=np.int32),
            np.array(lower, dtype=np.float64),
            np.array(upper, dtype=np.float64),
        )

    def set_costs(self, costs: Sequence[float], offset: float) -> None:
        """Set the objective: a cost per column and a constant offset."""
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
        """Remove the row :meth:`require_cover` added (the last one)."""
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

    def run(self, *, deadline: float, abs_gap: float, start: list[float] | None) -> Outcome:
        """One run within the deadline: a checked solution, its objective, HiGHS's bound."""
        solver = self.solver
        outcome = Outcome(None, "no_solution", None, None)
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
            outcome = Outcome(values, status, objective, bound)
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


def _status(solver: Any) -> str:
    """HiGHS's model status in the planner's words."""
    lowered = str(solver.modelStatusToString(solver.getModelStatus())).lower()
    if lowered == "optimal":
        return "optimal"
    if "time limit" in lowered:
        return "time_limit"
    return lowered.replace(" ", "_")
