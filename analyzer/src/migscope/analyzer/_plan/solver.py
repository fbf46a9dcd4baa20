"""The exact layout planner: a MILP over GPU classes, solved by HiGHS, and its lower bound.

Given a pool of GPUs of one model (current layouts, in-use instances) and a demand in
instances per profile, :func:`plan_layouts` chooses a placement-valid layout for every GPU
that, in this order (see ``docs/planner.md`` for the weights that make it strict):

1. covers the demand, or as much of it as the pool can (weighted by compute slices);
2. changes as few GPUs as possible (a GPU holding in-use instances counts twice: mig-parted
   recreates every instance of a GPU it reconfigures, so that change needs a drain);
3. strands as few compute slices as possible on the GPUs it uses;
4. and so frees as many whole GPUs as possible.

In-use instances stay at their exact start (unless ``allow_move``). GPUs are aggregated
into classes (same current layout, same kept instances) so that 10,000 GPUs are a model of a
few thousand integer variables; HiGHS, warm-started from two constructive plans and run in
two well-scaled stages (coverage, then the rest), proves the result optimal or reports its
gap.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from migscope.analyzer._plan._engine import PoolKey, Prepared, prepare, realize
from migscope.analyzer._plan._heuristics import (
    Choice,
    choice_of,
    first_fit_targets,
    grown,
    keep_then_pack_targets,
)
from migscope.analyzer._plan._highs import INF, new_highs
from migscope.analyzer._plan._milp import MilpResult, solve
from migscope.analyzer._plan.pool import (
    GpuState,
    Target,
    Weights,
    normalise_demand,
    resolve_model,
)
from migscope.analyzer._plan.result import Plan, SolveInfo
from migscope.core import GpuModel, valid_layouts

Parked = Literal["empty", "disabled"]


def plan_layouts(
    model: GpuModel | str,
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    *,
    time_limit_s: float = 5.0,
    weights: Weights | None = None,
    parked: Parked = "empty",
    park_free: bool = False,
    allow_move: bool = False,
    mip_rel_gap: float = 0.0,
) -> Plan:
    """Choose a layout for every GPU of a pool that covers ``demand`` (exact MILP).

    Args:
        model: The pool's GPU model (a :class:`GpuModel` or catalogue key).
        gpus: Every GPU of the pool, as it is now.
        demand: Instances wanted per profile, headroom included.
        time_limit_s: Budget for HiGHS's search; past it the best plan found (never worse
            than the warm starts) is returned with status ``"time_limit"`` and its proven
            gap. Preparation, warm starts and placement are not part of it.
        weights: Objective weights; default :meth:`Weights.lexicographic` for this pool.
        parked: What a GPU that the plan empties becomes: ``"empty"`` (MIG on, no
            instances: ready for the next layout) or ``"disabled"`` (a whole GPU again).
        park_free: After planning, park every GPU left free (holding nothing demanded or
            in use) that would keep a stale layout. Each such parking is a change the
            objective did not ask for: the plan is optimal without this step, and the step
            only changes GPUs nobody uses.
        allow_move: In-use instances may be recreated at another start (their pods must
            then be drained; such GPUs are reported as disruptive and ``moved``).
        mip_rel_gap: Let HiGHS stop at this proven relative gap (default 0: optimal).

    Returns:
        The :class:`Plan`; ``plan.solve`` holds the status, objective, bound and gap.

    Raises:
        PlanInputError: the input is inconsistent (unknown profile, overlapping instances, ...).
    """
    began = time.perf_counter()
    gpu_model = resolve_model(model)
    prep = prepare(
        gpu_model, gpus, demand, parked=parked, allow_move=allow_move, park_free=park_free
    )
    chosen = weights or Weights.lexicographic(
        gpus=len(prep.gpus), busy_gpus=prep.busy_gpus, compute_slices=gpu_model.compute_slices
    )
    starts = [
        choice_of(prep, grown(prep, keep_then_pack_targets(prep))),
        choice_of(prep, grown(prep, first_fit_targets(prep))),
    ]
    result = solve(prep, chosen, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap, starts=starts)
    notes: list[str] = []
    status = result.status
    if result.status == "no_solution":
        notes.append(f"HiGHS found no plan within {time_limit_s:g} s; every GPU keeps its layout")
        keep_all = Choice({c.id: len(c.members) for c in prep.classes}, {})
        fallback = solve(prep, chosen, time_limit_s=max(time_limit_s, 1.0), fixed=keep_all)
        result = replace(fallback, objective=None, best_bound=None, gap=None)
        status = "fallback"
    targets = _assign(prep, result.keep, result.moves)
    for gpu, target in zip(prep.gpus, targets, strict=True):
        if gpu.frozen and target != gpu.current:
            raise AssertionError(f"planner changed frozen GPU {gpu.node}/{gpu.index}")
    info = _info("milp", status, result, prep)
    plan = realize(prep, targets, result.usage, weights=chosen, solve=info, notes=notes)
    return replace(plan, solve=replace(plan.solve, wall_s=time.perf_counter() - began))


def _info(method: str, status: str, result: MilpResult, prep: Prepared) -> SolveInfo:
    return SolveInfo(
        method=method,
        status=status,
        objective=result.objective,
        best_bound=result.best_bound,
        gap=result.gap,
        solver_s=result.solver_s,
        classes=len(prep.classes),
        variables=result.variables,
        constraints=result.constraints,
    )


def _target_order(target: Target) -> tuple[bool, tuple[tuple[str, int], ...]]:
    return (not target.mig_enabled, target.layout.counts)


def _assign(
    prep: Prepared, keep: Mapping[int, int], moves: Mapping[tuple[PoolKey, Target], int]
) -> list[Target]:
    """Per-GPU targets from per-class and per-pool counts, deterministically.

    Which GPUs of a class change is free for the MILP; here changes are packed onto as few
    nodes as possible (a node whose label changes has its GPU operands paused, even for GPUs
    that keep their layout), taking nodes that already change first, then nodes with the
    most GPUs of the class. Within a pool, a changing GPU whose current target is among the
    pool's chosen targets takes it (and so does not change after all); the rest take targets
    in a fixed order along node and index order, so that a node's GPUs get the same layout
    where counts allow, which keeps per-node configs uniform.
    """
    targets: list[Target | None] = [None] * len(prep.gpus)
    node_changes: Counter[str] = Counter()
    changing: dict[PoolKey, list[int]] = {}
    by_work = sorted(prep.classes, key=lambda c: (-(len(c.members) - keep.get(c.id, 0)), c.id))
    for group in by_work:
        count = len(group.members) - keep.get(group.id, 0)
        by_node: dict[str, list[int]] = {}
        for pos in group.members:
            by_node.setdefault(prep.gpus[pos].node, []).append(pos)
        picked: list[int] = []
        for node in sorted(by_node, key=lambda n: (-node_changes[n], -len(by_node[n]), n)):
            if len(picked) == count:
                break
            take = by_node[node][: count - len(picked)]
            picked += take
            node_changes[node] += len(take)
        chosen = set(picked)
        for pos in group.members:
            if pos not in chosen:
                targets[pos] = group.current
        changing.setdefault(group.pool, []).extend(picked)
    for pool, positions in changing.items():
        wanted: Counter[Target] = Counter({t: n for (k, t), n in moves.items() if k == pool})
        rest: list[int] = []
        for pos in sorted(positions):
            current = prep.gpus[pos].current
            if wanted[current] > 0:
                targets[pos] = current
                wanted[current] -= 1
            else:
                rest.append(pos)
        sequence = [t for t in sorted(wanted, key=_target_order) for _ in range(wanted[t])]
        for pos, target in zip(rest, sequence, strict=True):
            targets[pos] = target
    return [t if t is not None else prep.gpus[i].current for i, t in enumerate(targets)]


@dataclass(frozen=True)
class LowerBound:
    """Lower bounds on the GPUs any plan needs to cover a demand in full.

    Attributes:
        compute: ``ceil(demanded compute slices / compute slices per GPU)``.
        memory: ``ceil(demanded memory slices / memory slices per GPU)``.
        configuration_lp: Optimum of the LP relaxation of the configuration ILP: minimise
            GPUs ``sum_l x_l`` over valid layouts ``l`` (of demanded profiles) subject to
            ``sum_l count_l(p) x_l >= D[p]``, ``x >= 0``. It accounts for placement rules
            and per-GPU instance limits the slice counts ignore, and is never below them.
        gpus: The best of the three, rounded up: the bin-packing bound.
        pool_lp: With a pool: the LP relaxation of the planner's own model minimising used
            GPUs (plus 2 per unmet compute slice, which the LP never prefers while demand
            can be covered), with the pool's in-use instances held where they are. Busy GPUs
            count as used whatever they hold, so this is the bound that plans keeping
            in-use instances can reach. None without a pool.
        pool_gpus: ``max(gpus, ceil(pool_lp))``, or None without a pool.
    """

    compute: int
    memory: int
    configuration_lp: float
    gpus: int
    pool_lp: float | None = None
    pool_gpus: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of the bound."""
        return {
            "compute": self.compute,
            "memory": self.memory,
            "configuration_lp": round(self.configuration_lp, 6),
            "gpus": self.gpus,
            "pool_lp": None if self.pool_lp is None else round(self.pool_lp, 6),
            "pool_gpus": self.pool_gpus,
        }


def lower_bound(
    model: GpuModel | str,
    demand: Mapping[str, int],
    *,
    gpus: Sequence[GpuState] | None = None,
    allow_move: bool = False,
) -> LowerBound:
    """The bin-packing lower bound on GPUs needed for ``demand`` (see :class:`LowerBound`).

    Without ``gpus`` it ignores any current state: kept in-use instances can only raise the
    true minimum, so every plan that covers the demand uses at least ``gpus`` GPUs. With
    ``gpus`` it also computes the pool-aware bound ``pool_gpus``.

    Raises:
        PlanInputError: an unknown profile or a bad count in ``demand``, or a bad pool.
    """
    gpu_model = resolve_model(model)
    wanted = normalise_demand(gpu_model, demand)
    compute = sum(gpu_model.profile(p).compute_slices * d for p, d in wanted.items())
    memory = sum(gpu_model.profile(p).memory_slices * d for p, d in wanted.items())
    by_compute = math.ceil(compute / gpu_model.compute_slices)
    by_memory = math.ceil(memory / gpu_model.memory_slices)
    lp = _configuration_lp(gpu_model, wanted)
    best = max(by_compute, by_memory, math.ceil(lp - 1e-6))
    if gpus is None:
        return LowerBound(by_compute, by_memory, lp, best)
    prep = prepare(gpu_model, gpus, wanted, parked="empty", allow_move=allow_move, park_free=False)
    weights = Weights(unmet=2, change=0, busy_change=0, stranded=0, used=1)
    relaxed = solve(prep, weights, time_limit_s=60.0, relax=True)
    pool_lp = relaxed.objective if relaxed.objective is not None else 0.0
    return LowerBound(
        by_compute, by_memory, lp, best, pool_lp, max(best, math.ceil(pool_lp - 1e-6))
    )


def _configuration_lp(model: GpuModel, demand: Mapping[str, int]) -> float:
    """Solve the configuration LP (columns: valid layouts of demanded profiles only)."""
    if not demand:
        return 0.0
    layouts = [
        lay.as_dict() for lay in valid_layouts(model) if all(n in demand for n, _ in lay.counts)
    ]
    solver = new_highs(time_limit_s=60.0, mip_rel_gap=0.0, mip_abs_gap=1e-6, seed=0)
    for _ in layouts:
        solver.addVar(0.0, INF)
    for col in range(len(layouts)):
        solver.changeColCost(col, 1.0)
    for name, wanted in demand.items():
        cols = [(i, float(lay[name])) for i, lay in enumerate(layouts) if lay.get(name, 0)]
        solver.addRow(float(wanted), INF, len(cols), [c for c, _ in cols], [v for _, v in cols])
    solver.run()
    return float(solver.getInfo().objective_function_value)
