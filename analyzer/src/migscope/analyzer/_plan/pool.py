"""What the layout planner is given: a pool of GPUs as they are now, and how to weigh a plan.

A pool is every GPU of one model the plan may touch. Each GPU comes with the instances it has
now, at their start slots, and which of them are *in use* (held by a pod that is busy). The
planner never destroys or moves an in-use instance unless told it may move them, so it needs
their exact placements, not just the layout's multiset.

The types here are plain frozen dataclasses, so a caller builds them from whatever it read
(Prometheus series, NVML, a test table) and the planner stays pure: data in, data out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from migscope.core import (
    GpuModel,
    Layout,
    LayoutError,
    PlacedInstance,
    UnknownProfileError,
    UserError,
    find_model,
    is_valid,
)


class PlanInputError(UserError, ValueError):
    """The planner's input is inconsistent: unknown profile, impossible layout, duplicate GPU."""


@dataclass(frozen=True, order=True)
class Instance:
    """One GPU instance that exists on a GPU now.

    Attributes:
        profile: Profile name (aliases and the ``"MIG "`` prefix are accepted on input).
        start: First memory slice it occupies, as NVML's placement reports it.
        in_use: Held by a pod and busy. In-use instances are kept exactly where they are.
    """

    profile: str
    start: int
    in_use: bool = False


@dataclass(frozen=True, order=True)
class Target:
    """What one GPU is set to: a MIG layout, or MIG disabled.

    Two GPUs whose targets are equal need the same mig-parted entry, and a GPU whose proposed
    target equals its current one is left alone (mig-parted compares the multiset of profiles
    per GPU and skips a GPU that already matches).

    Attributes:
        layout: The instances; empty for "MIG on, no instances" and for MIG disabled.
        mig_enabled: False only for MIG disabled (then ``layout`` is empty).
    """

    layout: Layout
    mig_enabled: bool = True

    @property
    def empty(self) -> bool:
        """No instances: the GPU holds nothing (parked, or MIG disabled)."""
        return not self.layout.counts

    def __str__(self) -> str:
        if not self.mig_enabled:
            return "MIG disabled"
        return str(self.layout)

    def as_dict(self) -> dict[str, object]:
        """JSON shape: ``{"mig_enabled": bool, "layout": {profile: count}}``."""
        return {"mig_enabled": self.mig_enabled, "layout": self.layout.as_dict()}


@dataclass(frozen=True)
class GpuState:
    """One GPU of the pool as it is now.

    Attributes:
        node: Kubernetes node name.
        index: GPU index on the node (NVML index, what mig-parted's ``devices`` lists).
        instances: The GPU instances that exist now, with their starts.
        mig_enabled: Whether MIG mode is on. A GPU with MIG off has no instances.
        frozen: The GPU must keep its exact layout: a slice on it pins it (unknown, too little
            history, busy with no pod known; see :mod:`migscope.analyzer._judge.safety`). Keeping
            its in-use instances is not enough, since mig-parted re-creates every instance of
            a GPU whose layout changes. Its instances still count towards demand.
    """

    node: str
    index: int
    instances: tuple[Instance, ...] = ()
    mig_enabled: bool = True
    frozen: bool = False

    @classmethod
    def from_layout(
        cls,
        model: GpuModel | str,
        *,
        node: str,
        index: int,
        layout: Mapping[str, int] | Iterable[str] = (),
        in_use: Sequence[tuple[str, int]] = (),
        mig_enabled: bool = True,
    ) -> GpuState:
        """Build a GPU from a layout, placing its instances the way the catalogue would.

        Tables in tests and benchmarks name layouts, not starts; this finds a placement
        (with the in-use instances at their given starts) so the state is realistic.

        Args:
            model: GPU model or catalogue key.
            node: Node name.
            index: GPU index on the node.
            layout: ``{profile: count}`` or profile names; the in-use instances included.
            in_use: ``(profile, start)`` of the instances held by busy pods.
            mig_enabled: False for a GPU with MIG off (``layout`` must then be empty).

        Raises:
            PlanInputError: the layout cannot hold the in-use instances at those starts.
        """
        gpu = resolve_model(model)
        check = is_valid(gpu, layout, keep=in_use)
        if not check.ok:
            raise PlanInputError(f"{node}/{index}: {check.reason}")
        busy = Counter((gpu.profile(name).name, start) for name, start in in_use)
        instances = []
        for placed in check.placements:
            key = (placed.profile.name, placed.start)
            used = busy[key] > 0
            busy[key] -= used
            instances.append(Instance(placed.profile.name, placed.start, used))
        return cls(node, index, tuple(instances), mig_enabled)


@dataclass(frozen=True)
class Weights:
    """Costs of the planner's objective, one per term; lower total is better.

    The objective is ``unmet × unmet compute slices + change × changed GPUs + busy_change ×
    changed GPUs holding in-use instances + stranded × stranded compute slices + used × used
    GPUs``. :meth:`lexicographic` picks integers that make the order strict: no amount of a
    later term can buy one unit of an earlier one. See ``docs/planner.md``.

    Attributes:
        unmet: Per compute slice of demand left uncovered (a 3g counts 3).
        change: Per GPU whose layout changes.
        busy_change: Extra per changed GPU that holds an in-use instance: mig-parted destroys
            and recreates every instance of a GPU it reconfigures, so such a change needs the
            pod drained first.
        stranded: Per compute slice of a used GPU that is in no demanded instance.
        used: Per GPU holding a demanded or in-use instance (the rest are free).
    """

    unmet: float
    change: float
    busy_change: float
    stranded: float
    used: float = 0.0

    @classmethod
    def lexicographic(cls, *, gpus: int, busy_gpus: int, compute_slices: int) -> Weights:
        """Integer weights ranking coverage > changes > stranded slices (> used GPUs).

        Each weight exceeds the largest total every later term can reach on this pool, so
        the weighted sum orders plans exactly as comparing the terms one by one would.
        ``used`` stays 0: once coverage is fixed, stranded slices are ``compute_slices ×
        used − covered compute``, so fewer stranded slices already means more GPUs freed.

        Args:
            gpus: GPUs in the pool.
            busy_gpus: GPUs holding in-use instances (bounds the busy-change term).
            compute_slices: Compute slices of one GPU (7, or 4).
        """
        stranded_max = compute_slices * gpus
        change = stranded_max + 1
        change_max = change * (gpus + busy_gpus)
        return cls(
            unmet=change_max + stranded_max + 1,
            change=change,
            busy_change=change,
            stranded=1,
            used=0,
        )

    @classmethod
    def consolidating(cls, *, gpus: int, busy_gpus: int, compute_slices: int) -> Weights:
        """Integer weights ranking coverage > stranded slices > changes: repack freely.

        For a pool being re-partitioned from scratch (a maintenance window, a new pool):
        as few GPUs used as the in-use instances allow, and among such plans the fewest
        changes. In-use instances still stay where they are.

        Args:
            gpus: GPUs in the pool.
            busy_gpus: GPUs holding in-use instances.
            compute_slices: Compute slices of one GPU (7, or 4).
        """
        change_max = gpus + busy_gpus
        stranded = change_max + 1
        stranded_max = stranded * compute_slices * gpus
        return cls(
            unmet=stranded_max + change_max + 1,
            change=1,
            busy_change=1,
            stranded=stranded,
            used=0,
        )

    def as_dict(self) -> dict[str, float]:
        """JSON shape of the weights."""
        return {
            "unmet": self.unmet,
            "change": self.change,
            "busy_change": self.busy_change,
            "stranded": self.stranded,
            "used": self.used,
        }

    def integral(self) -> bool:
        """All weights are whole numbers, so every objective value is a whole number too."""
        return all(float(w).is_integer() for w in self.as_dict().values())


def resolve_model(model: GpuModel | str) -> GpuModel:
    """The catalogue model for a model or key; a typo is a :class:`PlanInputError`."""
    if isinstance(model, GpuModel):
        return model
    try:
        return find_model(model)
    except ValueError as exc:
        raise PlanInputError(str(exc)) from exc


def normalise_demand(model: GpuModel, demand: Mapping[str, int]) -> dict[str, int]:
    """Demand keyed by canonical profile names, aliases merged, zeros kept out.

    Raises:
        PlanInputError: an unknown profile, or a count that is not an integer >= 0.
    """
    merged: Counter[str] = Counter()
    for name, count in demand.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise PlanInputError(f"demand for {name} must be an integer >= 0, got {count!r}")
        try:
            merged[model.profile(name).name] += count
        except UnknownProfileError as exc:
            raise PlanInputError(str(exc)) from exc
    return {name: count for name, count in merged.items() if count > 0}


def current_placements(model: GpuModel, gpu: GpuState) -> tuple[Target, tuple[PlacedInstance, ...]]:
    """The GPU's current target and its instances as placed instances, checked.

    Raises:
        PlanInputError: an unknown profile, a start the profile cannot take, overlapping
            instances, or instances on a GPU with MIG disabled.
    """
    where = f"{gpu.node}/{gpu.index}"
    if not gpu.mig_enabled and gpu.instances:
        raise PlanInputError(f"{where}: MIG is disabled but the GPU lists instances")
    shape = tuple((i.profile, i.start) for i in gpu.instances)
    target, placements, problem = _checked_shape(model, shape, gpu.mig_enabled)
    if problem is not None:
        raise PlanInputError(f"{where}: {problem}")
    return target, placements


@cache
def _checked_shape(
    model: GpuModel, shape: tuple[tuple[str, int], ...], mig_enabled: bool
) -> tuple[Target, tuple[PlacedInstance, ...], str | None]:
    """Check one GPU shape once: a fleet has thousands of GPUs but few distinct shapes."""
    try:
        layout = Layout.of(model, [name for name, _ in shape])
    except LayoutError as exc:
        return Target(Layout(())), (), str(exc)
    check = is_valid(model, layout, keep=shape)
    if not check.ok:
        return Target(layout), (), f"current instances are not a valid layout: {check.reason}"
    return Target(layout, mig_enabled), check.placements, None
