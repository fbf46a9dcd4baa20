"""Baselines the exact planner is measured against: greedy first-fit and a static layout.

Both return the same :class:`Plan` as :func:`~migscope.analyzer._plan.solver.plan_layouts`
and are scored with the same weights, so a benchmark or a report can put them side by side.
Their *layouts* are heuristic; the coverage of those layouts (which instances count towards
demand, which GPUs are used) is then chosen optimally by the same MILP with the layouts
fixed, so the comparison isolates the layout decision.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from migscope.analyzer._plan._engine import (
    ANYWHERE,
    PoolKey,
    Prepared,
    balanced_layout,
    prepare,
    realize,
)
from migscope.analyzer._plan._heuristics import choice_of, first_fit_targets
from migscope.analyzer._plan._milp import solve
from migscope.analyzer._plan.pool import GpuState, PlanInputError, Target, Weights, resolve_model
from migscope.analyzer._plan.result import Plan, SolveInfo
from migscope.analyzer._plan.solver import Parked
from migscope.core import GpuModel, Layout, LayoutError, is_valid


def greedy_first_fit(
    model: GpuModel | str,
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    *,
    weights: Weights | None = None,
    parked: Parked = "empty",
    park_free: bool = False,
    allow_move: bool = False,
) -> Plan:
    """First-fit decreasing: pack demanded instances into GPUs, opening GPUs as needed.

    In-use instances count towards demand first and stay on their GPUs, which are open from
    the start. The remaining instances go largest first (memory slices, then compute) into
    the first open GPU, in opening order, whose layout plus the instance is still valid (with
    the kept instances at their starts); when none fits, the next GPU in node/index order is
    opened. An opened GPU's layout is exactly what was packed into it. GPUs never opened keep
    their current layout (or are parked with ``park_free``).
    """
    began = time.perf_counter()
    gpu_model = resolve_model(model)
    prep = prepare(
        gpu_model, gpus, demand, parked=parked, allow_move=allow_move, park_free=park_free
    )
    targets = first_fit_targets(prep)
    return _finish(prep, targets, "greedy-first-fit", weights, began)


def static_layout(
    model: GpuModel | str,
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    *,
    layout: Mapping[str, int] | Iterable[str] | None = None,
    weights: Weights | None = None,
    allow_move: bool = False,
) -> Plan:
    """Give every GPU the same layout, mig-parted's ``all-balanced`` by default.

    A GPU whose in-use instances the layout cannot hold (at their starts) keeps its current
    layout: a static policy still may not destroy running work.

    Raises:
        PlanInputError: ``layout`` is not a valid layout of the model.
    """
    began = time.perf_counter()
    gpu_model = resolve_model(model)
    prep = prepare(gpu_model, gpus, demand, parked="empty", allow_move=allow_move, park_free=False)
    try:
        fixed = balanced_layout(gpu_model) if layout is None else Layout.of(gpu_model, layout)
    except LayoutError as exc:
        raise PlanInputError(str(exc)) from exc
    check = is_valid(gpu_model, fixed)
    if not check.ok:
        raise PlanInputError(f"static layout: {check.reason}")
    target = Target(fixed)
    fits: dict[PoolKey, bool] = {}
    targets = []
    for gpu in prep.gpus:
        if gpu.pool not in fits:
            fits[gpu.pool] = _holds(prep, fixed, gpu.pool)
        targets.append(target if fits[gpu.pool] and not gpu.frozen else gpu.current)
    return _finish(prep, targets, "static", weights, began)


def _holds(prep: Prepared, layout: Layout, pool: PoolKey) -> bool:
    counts = layout.as_dict()
    if any(counts.get(n, 0) < c for n, c in Counter(n for n, _ in pool).items()):
        return False
    keep = [(n, s) for n, s in pool if s != ANYWHERE]
    return is_valid(prep.model, layout, keep=keep).ok


def _finish(
    prep: Prepared, targets: list[Target], method: str, weights: Weights | None, began: float
) -> Plan:
    """Score given layouts: optimal coverage by the MILP with the layouts fixed."""
    chosen = weights or Weights.lexicographic(
        gpus=len(prep.gpus), busy_gpus=prep.busy_gpus, compute_slices=prep.model.compute_slices
    )
    result = solve(prep, chosen, time_limit_s=60.0, fixed=choice_of(prep, targets))
    info = SolveInfo(
        method=method,
        status="heuristic",
        solver_s=result.solver_s,
        classes=len(prep.classes),
        variables=result.variables,
        constraints=result.constraints,
    )
    plan = realize(prep, targets, result.usage, weights=chosen, solve=info)
    return replace(plan, solve=replace(plan.solve, wall_s=time.perf_counter() - began))
