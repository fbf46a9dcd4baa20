"""Turning a choice of layouts into a :class:`~migscope.analyzer._plan.result.Plan`.

It is the planner's second half, the same whatever chose the
layouts (the MILP, a heuristic, a baseline): given a target per GPU and per target the
coverage the solver counted (:class:`Usage`), :func:`realize` places the instances, decides
which of them count towards demand on which GPU, and builds the stranded slices, the
mig-parted config and the node plans.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from migscope.analyzer._plan._engine.prepare import Prepared, PreparedGpu, check_layout
from migscope.analyzer._plan.pool import PlanInputError, Target, Weights
from migscope.analyzer._plan.result import (
    GpuPlan,
    NodePlan,
    Plan,
    SolveInfo,
    build_mig_parted,
    score,
)
from migscope.core import PlacedInstance


@dataclass
class Usage:
    """Coverage of one target: GPUs used, demanded instances per profile on its GPUs.

    Attributes:
        used: GPUs with this target that are used (all busy ones included).
        on_busy: Demanded instances on its GPUs that hold in-use instances.
        on_free: Demanded instances on its other used GPUs; each holds at least one.
    """

    used: int = 0
    on_busy: dict[str, int] = field(default_factory=dict)
    on_free: dict[str, int] = field(default_factory=dict)


def realize(
    prep: Prepared,
    targets: Sequence[Target],
    usage: Mapping[Target, Usage],
    *,
    weights: Weights,
    solve: SolveInfo,
    notes: Sequence[str] = (),
) -> Plan:
    """Build the :class:`Plan` for per-GPU ``targets`` and per-target coverage ``usage``.

    Within a target, GPUs holding in-use instances are always used and count their in-use
    instances first; of the others, changed GPUs are used before unchanged ones (they change
    to serve demand), in node order, and each gets one demanded instance before any gets a
    second, so that every GPU counted as used really is. With ``park_free``, GPUs left
    holding nothing demanded or in use are then parked.

    Args:
        prep: The prepared pool.
        targets: Target per GPU position (``prep.gpus`` order).
        usage: Per target, how many of its GPUs are used and how many instances of each
            profile count towards demand on its busy and other GPUs; missing targets
            cover nothing.
        weights: For :attr:`Plan.objective`.
        solve: How the targets were found.
        notes: Free-form remarks for the report.
    """
    model = prep.model
    demanded = _distribute(prep, targets, usage)
    if prep.park_free:
        targets = [
            prep.parked if not gpu.busy and not wanted and not target.empty else target
            for gpu, target, wanted in zip(prep.gpus, targets, demanded, strict=True)
        ]
    placements: list[tuple[PlacedInstance, ...]] = []
    moved: list[tuple[tuple[str, int], ...]] = []
    for gpu, target in zip(prep.gpus, targets, strict=True):
        if target == gpu.current:
            placements.append(gpu.placements)
            moved.append(())
            continue
        placed, lost = _place(prep, gpu, target)
        placements.append(placed)
        moved.append(lost)
    rows: list[GpuPlan] = []
    for gpu, target, placed, lost, wanted in zip(
        prep.gpus, targets, placements, moved, demanded, strict=True
    ):
        changed = target != gpu.current
        now = Counter((p.profile.name, p.start) for p in placed)
        destroyed = []
        for inst in gpu.instances:
            key = (inst.profile, inst.start)
            if now[key] > 0:
                now[key] -= 1
            else:
                destroyed.append(inst)
        used = gpu.busy or sum(wanted.values()) > 0
        covered_compute = sum(model.profile(n).compute_slices * c for n, c in wanted.items())
        rows.append(
            GpuPlan(
                node=gpu.node,
                index=gpu.index,
                current=gpu.current,
                proposed=target,
                placements=placed,
                changed=changed,
                kept=gpu.kept,
                destroyed=tuple(destroyed),
                moved=lost,
                disruptive=changed and gpu.busy,
                demanded=dict(sorted(wanted.items())),
                used=used,
                stranded_compute_slices=model.compute_slices - covered_compute if used else 0,
            )
        )
    config, node_config = build_mig_parted(model, [(r.node, r.index, r.proposed) for r in rows])
    rows = [replace(r, mig_config=node_config[r.node]) for r in rows]
    nodes = _node_plans(rows, node_config)
    covered: Counter[str] = Counter()
    for row in rows:
        covered.update(row.demanded)
    unmet = {name: prep.demand[name] - covered[name] for name in prep.demand}
    value = score(
        weights=weights,
        unmet_compute=sum(model.profile(n).compute_slices * c for n, c in unmet.items()),
        changed=sum(r.changed for r in rows),
        busy_changed=sum(r.disruptive for r in rows),
        stranded=sum(r.stranded_compute_slices for r in rows),
        used=sum(r.used for r in rows),
    )
    return Plan(
        model=model,
        demand=dict(prep.demand),
        covered={name: covered[name] for name in prep.demand},
        unmet=unmet,
        gpus=tuple(rows),
        nodes=nodes,
        mig_parted=config,
        weights=weights,
        objective=value,
        solve=solve,
        notes=tuple(notes),
    )


def _place(
    prep: Prepared, gpu: PreparedGpu, target: Target
) -> tuple[tuple[PlacedInstance, ...], tuple[tuple[str, int], ...]]:
    """Placements for a changed GPU, kept instances at their starts; and what had to move."""
    if target.empty:
        return (), ()
    check = check_layout(prep.model, target.layout, gpu.kept)
    if check.ok:
        return check.placements, ()
    if not prep.allow_move:
        raise PlanInputError(  # pragma: no cover - candidates are checked with the same keep
            f"{gpu.node}/{gpu.index}: {target} cannot keep {gpu.kept}: {check.reason}"
        )
    free = check_layout(prep.model, target.layout, ())
    now = Counter((p.profile.name, p.start) for p in free.placements)
    lost = []
    for key in gpu.kept:
        if now[key] > 0:
            now[key] -= 1
        else:
            lost.append(key)
    return free.placements, tuple(lost)


def _distribute(
    prep: Prepared,
    targets: Sequence[Target],
    usage: Mapping[Target, Usage],
) -> list[dict[str, int]]:
    """Which instances of each GPU count towards demand (see :func:`realize`)."""
    demanded: list[dict[str, int]] = [{} for _ in prep.gpus]
    by_target: dict[Target, list[int]] = {}
    for pos, target in enumerate(targets):
        if not target.empty:
            by_target.setdefault(target, []).append(pos)
    for target, members in by_target.items():
        plan = usage.get(target, Usage())
        counts = target.layout.as_dict()
        busy = [p for p in members if prep.gpus[p].busy]
        others = [p for p in members if not prep.gpus[p].busy]
        changed = [p for p in others if prep.gpus[p].current != target]
        kept = [p for p in others if prep.gpus[p].current == target]
        free = (changed + kept)[: max(plan.used - len(busy), 0)]
        left = dict(plan.on_busy)
        for pos in busy:  # an in-use instance serves its own pod first
            for name, _ in prep.gpus[pos].kept:
                if left.get(name, 0) > 0:
                    demanded[pos][name] = demanded[pos].get(name, 0) + 1
                    left[name] -= 1
        _fill(demanded, busy, counts, left)
        left = dict(plan.on_free)
        for pos in free:  # one each first: every used GPU is used for something
            first = next((n for n in sorted(left) if left[n] > 0), None)
            if first is None:
                break
            demanded[pos][first] = 1
            left[first] -= 1
        _fill(demanded, free, counts, left)
    return demanded


def _fill(
    demanded: list[dict[str, int]],
    positions: Sequence[int],
    counts: Mapping[str, int],
    left: dict[str, int],
) -> None:
    """Count further instances on ``positions``, in order, up to each GPU's own count."""
    for name in sorted(left):
        for pos in positions:
            if left[name] <= 0:
                break
            take = min(counts.get(name, 0) - demanded[pos].get(name, 0), left[name])
            if take > 0:
                demanded[pos][name] = demanded[pos].get(name, 0) + take
                left[name] -= take


def _node_plans(rows: Sequence[GpuPlan], node_config: Mapping[str, str]) -> tuple[NodePlan, ...]:
    by_node: dict[str, list[GpuPlan]] = {}
    for row in rows:
        by_node.setdefault(row.node, []).append(row)
    return tuple(
        NodePlan(
            node=node,
            mig_config=node_config[node],
            changed=any(r.changed for r in members),
            disruptive=any(r.disruptive for r in members),
            gpus=tuple(r.index for r in members),
        )
        for node, members in sorted(by_node.items())
    )
