"""Internals shared by the exact planner and the baselines.

* :func:`prepare` checks the input and aggregates GPUs into *classes* (same current target,
  same kept instances) and *pools* (same kept instances): the MILP decides how many GPUs of
  each class keep their layout and how many GPUs of each pool take each candidate layout,
  so its size depends on the variety of the fleet, not on its size.
* :func:`realize` turns per-GPU targets plus per-layout coverage counts into a :class:`Plan`:
  placements, which instances count towards demand, stranded slices, configs.

Nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache

from migscope.analyzer.plan.pool import (
    GpuState,
    Instance,
    PlanInputError,
    Target,
    Weights,
    current_placements,
    normalise_demand,
)
from migscope.analyzer.plan.result import (
    GpuPlan,
    NodePlan,
    Plan,
    SolveInfo,
    build_mig_parted,
    score,
)
from migscope.core.catalogue import GpuModel
from migscope.core.layout import Layout, LayoutCheck, PlacedInstance, is_valid, valid_layouts

__all__ = [
    "ANYWHERE",
    "GpuClass",
    "PoolKey",
    "Prepared",
    "PreparedGpu",
    "Usage",
    "balanced_layout",
    "parked_target",
    "prepare",
    "realize",
]

PoolKey = tuple[tuple[str, int], ...]
"""The in-use instances that constrain a GPU, as sorted ``(profile, start)``.

With ``allow_move`` the starts are :data:`ANYWHERE`: only the multiset must survive.
"""

ANYWHERE = -1


@dataclass(frozen=True)
class PreparedGpu:
    """One GPU after checking: canonical names, current target, what must be kept."""

    pos: int
    node: str
    index: int
    current: Target
    placements: tuple[PlacedInstance, ...]
    instances: tuple[Instance, ...]
    kept: tuple[tuple[str, int], ...]
    pool: PoolKey
    cls: int
    frozen: bool = False

    @property
    def busy(self) -> bool:
        """Holds at least one in-use instance."""
        return bool(self.kept)


@dataclass
class GpuClass:
    """GPUs the MILP cannot tell apart: same current target, same kept instances."""

    id: int
    current: Target
    pool: PoolKey
    members: list[int] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        """Its GPUs hold in-use instances."""
        return bool(self.pool)


@dataclass
class Prepared:
    """The checked, aggregated input of one planning call."""

    model: GpuModel
    demand: dict[str, int]
    gpus: list[PreparedGpu]
    classes: list[GpuClass]
    pools: dict[PoolKey, list[int]]
    candidates: dict[PoolKey, list[Target]]
    parked: Target
    allow_move: bool
    park_free: bool

    @property
    def busy_gpus(self) -> int:
        """GPUs holding in-use instances."""
        return sum(g.busy for g in self.gpus)

    def pool_size(self, pool: PoolKey) -> int:
        """GPUs in ``pool``."""
        return sum(len(self.classes[c].members) for c in self.pools[pool])


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


def parked_target(parked: str) -> Target:
    """The target of a parked (freed) GPU: ``"empty"`` (MIG on, no instances) or ``"disabled"``.

    Raises:
        PlanInputError: anything else.
    """
    if parked not in ("empty", "disabled"):
        raise PlanInputError(f'parked must be "empty" or "disabled", got {parked!r}')
    return Target(Layout(()), parked == "empty")


def balanced_layout(model: GpuModel) -> Layout:
    """mig-parted's ``all-balanced``: 2×1g + 2g + 3g (2×1g + 2g on 4-slice GPUs).

    Base profiles only (no ``+me``/``-me``/``+gfx``), the highest-count one per size, as MIG
    Manager's generated config picks them (``reference/mig-manager.md`` §3).
    """
    wanted = {1: 2, 2: 1, 3: 1} if model.compute_slices >= 7 else {1: 2, 2: 1}
    counts: dict[str, int] = {}
    for g, n in wanted.items():
        base = [
            p
            for p in model.profiles
            if p.compute_slices == g and p.name.endswith("gb") and "+" not in p.name
        ]
        best = max(base, key=lambda p: (p.max_instances, -p.memory_slices))
        counts[best.name] = n
    return Layout.of(model, counts)


def prepare(
    model: GpuModel,
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    *,
    parked: str,
    allow_move: bool,
    park_free: bool,
) -> Prepared:
    """Check the pool and aggregate it into classes and pools.

    Raises:
        PlanInputError: an empty pool, a GPU listed twice, or any per-GPU problem
            (:func:`~migscope.analyzer.plan.pool.current_placements`).
    """
    if not gpus:
        raise PlanInputError("the pool has no GPUs")
    wanted = normalise_demand(model, demand)
    seen: set[tuple[str, int]] = set()
    for gpu in gpus:
        name = (gpu.node, gpu.index)
        if name in seen:
            raise PlanInputError(f"GPU {gpu.node}/{gpu.index} is listed twice")
        seen.add(name)
    ordered = sorted(gpus, key=lambda g: (g.node, g.index))
    classes: list[GpuClass] = []
    frozen: set[PoolKey] = set()
    class_of: dict[tuple[Target, PoolKey], int] = {}
    prepared: list[PreparedGpu] = []
    for pos, gpu in enumerate(ordered):
        current, placements = current_placements(model, gpu)
        instances = tuple(
            sorted(
                Instance(p.profile.name, p.start, i.in_use or gpu.frozen)
                for p, i in _pair(placements, gpu)
            )
        )
        kept = tuple(sorted((i.profile, i.start) for i in instances if i.in_use))
        if gpu.frozen:
            if not kept:
                raise PlanInputError(f"GPU {gpu.node}/{gpu.index} is frozen but has no instances")
            pool = kept  # every instance where it is, even when others may move
            frozen.add(pool)
        else:
            pool = tuple(sorted((n, ANYWHERE) for n, _ in kept)) if allow_move else kept
        key = (current, pool)
        if key not in class_of:
            class_of[key] = len(classes)
            classes.append(GpuClass(len(classes), current, pool))
        cls = class_of[key]
        classes[cls].members.append(pos)
        prepared.append(
            PreparedGpu(
                pos,
                gpu.node,
                gpu.index,
                current,
                placements,
                instances,
                kept,
                pool,
                cls,
                gpu.frozen,
            )
        )
    pools: dict[PoolKey, list[int]] = {}
    for group in classes:
        pools.setdefault(group.pool, []).append(group.id)
    park = parked_target(parked)
    names = frozenset(wanted)
    candidates = {
        pool: ([_as_is(model, pool)] if pool in frozen else _candidates(model, pool, names, park))
        for pool in sorted(pools)
    }
    return Prepared(
        model, wanted, prepared, classes, pools, candidates, park, allow_move, park_free
    )


def _as_is(model: GpuModel, pool: PoolKey) -> Target:
    """The only target of a frozen GPU's pool: exactly the instances it has.

    A GPU that is not frozen but holds only in-use instances at the same starts shares the
    pool, and so keeps its layout too: changing it could only add instances in its free
    slices, at the price of re-creating every busy one.
    """
    return Target(Layout.of(model, [name for name, _ in pool]))


def _pair(
    placements: Sequence[PlacedInstance], gpu: GpuState
) -> list[tuple[PlacedInstance, Instance]]:
    """Match each placed instance to the input instance it came from (same start)."""
    by_start = {i.start: i for i in gpu.instances}
    return [(p, by_start[p.start]) for p in placements]


def _candidates(
    model: GpuModel, pool: PoolKey, demanded: frozenset[str], parked: Target
) -> list[Target]:
    """The layouts a changed GPU of ``pool`` may take: full layouts of demanded profiles.

    A layout qualifies when it holds the pool's kept instances (at their starts, checked
    with :func:`is_valid`), every other instance is of a demanded profile, and no further
    instance of a demanded profile fits. Nothing is lost by these rules: an undemanded
    instance would be stranded anyway and a layout without it is valid too (a subset of a
    valid layout is valid); a layout that could take one more demanded instance covers no
    more than the full one at the same cost. What they buy is a model without equivalent
    alternatives for HiGHS to choose between arbitrarily, and changed GPUs that offer the
    most demanded instances (headroom) for the slices they strand. A pool without kept
    instances may also be parked.
    """
    kept = Counter(name for name, _ in pool)
    keep = tuple((n, s) for n, s in pool if s != ANYWHERE)
    lean: list[Layout] = []
    for layout in valid_layouts(model):
        counts = layout.as_dict()
        if any(counts.get(name, 0) < n for name, n in kept.items()):
            continue
        if any(n > kept.get(name, 0) and name not in demanded for name, n in counts.items()):
            continue
        if keep and not _check(model, layout, keep).ok:
            continue
        lean.append(layout)
    found = {tuple(sorted(layout.counts)) for layout in lean}
    full = [
        layout
        for layout in lean
        if not any(_grown(layout, name) in found for name in sorted(demanded))
    ]
    return ([parked] if not pool else []) + [Target(layout) for layout in full]


def _grown(layout: Layout, name: str) -> tuple[tuple[str, int], ...]:
    """The canonical counts of ``layout`` plus one ``name`` (to look up in a set)."""
    counts = Counter(layout.as_dict())
    counts[name] += 1
    # Layout order is the catalogue's, not alphabetical: compare as sorted multisets.
    return tuple(sorted(counts.items()))


@cache
def _check(model: GpuModel, layout: Layout, keep: tuple[tuple[str, int], ...]) -> LayoutCheck:
    """:func:`is_valid`, memoised: realizing 10,000 GPUs asks the same few questions."""
    return is_valid(model, layout, keep=keep)


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
    check = _check(prep.model, target.layout, gpu.kept)
    if check.ok:
        return check.placements, ()
    if not prep.allow_move:
        raise PlanInputError(  # pragma: no cover - candidates are checked with the same keep
            f"{gpu.node}/{gpu.index}: {target} cannot keep {gpu.kept}: {check.reason}"
        )
    free = _check(prep.model, target.layout, ())
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
