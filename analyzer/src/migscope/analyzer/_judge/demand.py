"""Demand per node pool: how many instances of each profile the pool must offer.

The planner (:mod:`migscope.analyzer._plan`) covers a demand; this module says what that
demand is, from what the slices were seen doing. It is decision code like the classifier:
data in, data out, no I/O, so every rule is held by a table in the tests.

Demand of a pool = right-sized busy slices + pending pods + headroom:

- **Busy slices**: a slice whose verdict is ``healthy``, ``saturated`` or ``oversized``
  counts once whether or not a pod is known to hold it (busy without a pod means pod
  attribution is missing, not the work: it counts at its current profile). Held by a pod,
  it counts at the profile :func:`migscope.analyzer._judge.classify.right_size` gives it (an
  oversized 3g whose pod would fit a 1g counts as a 1g; a saturated 1g as the next larger
  profile). An ``unknown`` slice held by a pod counts at its current profile:
  what cannot be judged is not taken away. ``idle`` and ``unallocated`` slices count nothing:
  that is the capacity the plan gives back.
- **Pending pods**: ``(profile, count)`` pairs of ``nvidia.com/mig-<profile>`` requests that
  are waiting for a slice (the Kubernetes reader supplies them; here they are a parameter).
- **Headroom**: ``fraction × count`` more of each profile already demanded, rounded to the
  nearest whole instance (halves up), so that the next pod of the same kind does not wait
  for a re-partition. Not rounded up: with ``ceil`` every profile of a small pool would get
  a spare instance however few it runs (a pool of four GPUs would keep a spare 1g, 2g, 3g
  and 4g, which is a whole GPU of headroom); rounded, a profile gets its first spare at
  five instances (10 %).

A pool is the set of nodes whose GPUs share one catalogue model, because a layout is only
valid on one model; :func:`pool_key` takes an optional hook to split pools further (by a
node label, when the Kubernetes reader provides labels).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from migscope.analyzer._judge.classify import Classification, Status, right_size
from migscope.analyzer._judge.policy import Policy, default_policy
from migscope.analyzer._model import JsonValue, SliceInfo, SliceStats
from migscope.analyzer._options import DEFAULT_HEADROOM, PoolSelector
from migscope.core import GpuModel, UnknownProfileError

BUSY_STATUSES = frozenset({Status.HEALTHY, Status.SATURATED, Status.OVERSIZED})
"""Verdicts whose slices are doing work and therefore need an instance after the plan."""


def is_held(stats: SliceStats, *, policy: Policy) -> bool:
    """Whether a pod held the slice long enough to count as allocated (the classifier's rule)."""
    return stats.allocated_fraction >= policy.allocated.min_fraction


def pool_key(info: SliceInfo, *, selector: PoolSelector | None = None) -> str | None:
    """The pool a slice belongs to: its GPU model key, refined by ``selector`` if given.

    Args:
        info: The slice.
        selector: Optional hook returning a sub-pool name (a node label value, say); the pool
            key becomes ``"<model>/<sub-pool>"``.

    Returns:
        The pool key, or None when the GPU model is not catalogued: no layout can be planned
        for a model the catalogue does not know.
    """
    if info.model is None:
        return None
    extra = selector(info) if selector is not None else None
    return info.model if not extra else f"{info.model}/{extra}"


@dataclass(frozen=True)
class Contribution:
    """What one slice adds to its pool's demand, and why.

    Attributes:
        info: The slice.
        status: Its verdict.
        profile: The profile it is counted at, or None when it counts nothing.
        reason: Why (for the report and for tests).
    """

    info: SliceInfo
    status: Status
    profile: str | None
    reason: str


def slice_contribution(
    stats: SliceStats,
    verdict: Classification,
    *,
    model: GpuModel | None,
    policy: Policy | None = None,
) -> Contribution:
    """What one classified slice adds to demand (see the module docstring for the rules).

    Args:
        stats: The slice's window statistics.
        verdict: Its classification.
        model: Its GPU model, or None when uncatalogued (the slice then counts as is).
        policy: Thresholds; the packaged default when None.
    """
    policy = policy or default_policy()
    status = verdict.status
    held = is_held(stats, policy=policy)
    if status in (Status.IDLE, Status.UNALLOCATED):
        return Contribution(stats.info, status, None, f"{status.value}: gives its slice back")
    if status is Status.UNKNOWN:
        if not held:
            return Contribution(stats.info, status, None, "unknown and held by no pod")
        return Contribution(
            stats.info, status, stats.info.profile, "unknown but held: kept at its profile"
        )
    if not held:
        # Busy without a known pod: attribution is missing (dcgm-exporter often attaches no
        # pod on MIG, #272), not the work. It is demand, at the profile it runs on.
        return Contribution(
            stats.info, status, stats.info.profile, f"{status.value}, no pod known: kept"
        )
    sized = right_size(stats, model=model, policy=policy)
    why = "busy" if sized == stats.info.profile else f"busy, right-sized to {sized}"
    return Contribution(stats.info, status, sized, why)


@dataclass(frozen=True)
class PoolDemand:
    """A pool's demand in instances per profile, split by where it comes from.

    Attributes:
        pool: Pool key.
        model: The pool's GPU model.
        busy: Right-sized busy slices per profile.
        pending: Pending pods' requests per profile.
        headroom: Headroom added per profile.
        contributions: Per slice, what it added (or why it added nothing).
        notes: Pending requests that could not be counted (unknown profile), and the like.
    """

    pool: str
    model: GpuModel
    busy: Mapping[str, int]
    pending: Mapping[str, int]
    headroom: Mapping[str, int]
    contributions: tuple[Contribution, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def total(self) -> dict[str, int]:
        """Busy + pending + headroom per profile: what the planner must cover."""
        out: Counter[str] = Counter()
        for part in (self.busy, self.pending, self.headroom):
            out.update(part)
        return {name: count for name, count in sorted(out.items()) if count > 0}

    def as_dict(self) -> dict[str, JsonValue]:
        """JSON shape: the parts and the total, profile → count."""
        return {
            "pool": self.pool,
            "model": self.model.key,
            "busy": dict(sorted(self.busy.items())),
            "pending": dict(sorted(self.pending.items())),
            "headroom": dict(sorted(self.headroom.items())),
            "total": dict(self.total),
            "notes": list(self.notes),
        }


def pool_demand(
    slices: Iterable[tuple[SliceStats, Classification]],
    *,
    pool: str,
    model: GpuModel,
    pending: Sequence[tuple[str, int]] = (),
    headroom: float = DEFAULT_HEADROOM,
    policy: Policy | None = None,
) -> PoolDemand:
    """The demand of one pool.

    Args:
        slices: The pool's *current* slices with their verdicts (a slice a re-partition
            removed during the window must not be counted next to the one that replaced it).
        pool: The pool key (for the result).
        model: The pool's GPU model.
        pending: ``(profile, count)`` of pods waiting for ``nvidia.com/mig-<profile>``.
        headroom: Fraction added per demanded profile, rounded to the nearest instance
            (halves up; 0 for none).
        policy: Thresholds; the packaged default when None.

    Returns:
        The demand, with every slice's contribution.

    Raises:
        ValueError: ``headroom`` is negative or not finite, or a pending count is negative.
    """
    if not math.isfinite(headroom) or headroom < 0:
        raise ValueError(f"headroom must be a fraction >= 0, got {headroom}")
    policy = policy or default_policy()
    busy: Counter[str] = Counter()
    contributions = []
    for stats, verdict in slices:
        part = slice_contribution(stats, verdict, model=model, policy=policy)
        contributions.append(part)
        if part.profile is not None:
            busy[_canonical(model, part.profile) or part.profile] += 1
    waiting: Counter[str] = Counter()
    notes: list[str] = []
    for profile, count in pending:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"pending count for {profile} must be an integer >= 0, got {count}")
        name = _canonical(model, profile)
        if name is None:
            notes.append(f"pending {profile} x{count}: not a profile of {model.key}")
            continue
        waiting[name] += count
    extra: Counter[str] = Counter()
    for name, count in (busy + waiting).items():
        extra[name] = math.floor(count * headroom + 0.5 + 1e-9)
    return PoolDemand(
        pool=pool,
        model=model,
        busy=dict(busy),
        pending=dict(waiting),
        headroom={k: v for k, v in extra.items() if v > 0},
        contributions=tuple(contributions),
        notes=tuple(notes),
    )


def _canonical(model: GpuModel, profile: str) -> str | None:
    """The catalogue's name for ``profile`` on ``model`` (``mig-`` prefix accepted), or None."""
    name = profile.removeprefix("nvidia.com/").removeprefix("mig-")
    try:
        return model.profile(name).name
    except UnknownProfileError:
        return None
