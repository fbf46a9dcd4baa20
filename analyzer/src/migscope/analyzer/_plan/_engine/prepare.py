"""The planner's input, checked and aggregated: classes, pools and their candidate layouts.

This is what both the exact planner and the baselines start from,
before any layout is chosen: :func:`prepare` checks the pool, aggregates it (so the MILP's
size depends on the variety of the fleet, not on its size) and lists each pool's candidate
layouts; :func:`parked_target` and :func:`balanced_layout` are the two fixed targets the
planner and the static baseline offer. :func:`check_layout` is the memoised validity check
that :mod:`.realize` asks again when it places instances.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from migscope.analyzer._plan.pool import (
    GpuState,
    Instance,
    PlanInputError,
    Target,
    current_placements,
    normalise_demand,
)
from migscope.core import GpuModel, Layout, LayoutCheck, PlacedInstance, is_valid, valid_layouts

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
    """GPUs the MILP cannot tell apart: same current target, kept instances and frozenness.

    Frozen GPUs get classes of their own because a pool's move columns are shared by every
    class in it: a frozen GPU and a free one with the same in-use instances would otherwise be
    interchangeable, and a plan that changes "one GPU of the pool" could change the frozen one.
    """

    id: int
    current: Target
    pool: PoolKey
    members: list[int] = field(default_factory=list)
    frozen: bool = False

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
            (:func:`~migscope.analyzer._plan.pool.current_placements`).
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
    class_of: dict[tuple[Target, PoolKey, bool], int] = {}
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
        else:
            pool = tuple(sorted((n, ANYWHERE) for n, _ in kept)) if allow_move else kept
        key = (current, pool, gpu.frozen)
        if key not in class_of:
            class_of[key] = len(classes)
            classes.append(GpuClass(len(classes), current, pool, frozen=gpu.frozen))
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
        pool: (
            []  # only frozen GPUs: nothing to move to (their classes are kept whole)
            if all(classes[c].frozen for c in members)
            else _candidates(model, pool, names, park)
        )
        for pool, members in sorted(pools.items())
    }
    return Prepared(
        model, wanted, prepared, classes, pools, candidates, park, allow_move, park_free
    )


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
        if keep and not check_layout(model, layout, keep).ok:
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
def check_layout(model: GpuModel, layout: Layout, keep: tuple[tuple[str, int], ...]) -> LayoutCheck:
    """:func:`is_valid`, memoised: realizing 10,000 GPUs asks the same few questions."""
    return is_valid(model, layout, keep=keep)
