"""What a node change destroys, and the safety contract every recommended change must keep.

One module, so the report (JSON, Markdown, HTML diagrams) and the applier compute "GPUs
re-created" and "pods that lose their device" the same way, and so the planner's promise is
re-checked by the applier on the plan it is handed rather than trusted.

The MIG fact this rests on: MIG Manager (mig-parted) compares each GPU's layout with the
config and, for a GPU that differs, destroys *every* instance on it and creates the new
layout, placements chosen by NVML. An instance a plan "keeps" on a changed GPU is destroyed
and re-created all the same, so every pod holding a device on a changed GPU loses it; an
unchanged GPU is left alone.

The contract (docs/planner.md), checked on the report's recommendation data by
:func:`violations`:

1. A GPU is re-created only if every instance on it was seen (one slice entry per instance)
   and no slice on it is *pinned*: ``unknown``, below the minimum history, busy with no pod
   known, idle on memory alone, or not placeable.
2. Every pod that held any slice of a re-created GPU is named in ``pods_to_move`` and the
   recommendation is marked ``disruptive``. A non-disruptive change touches only GPUs whose
   slices are ``idle`` or ``unallocated`` and that no pod held.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CHANGEABLE_STATUSES = frozenset({"idle", "unallocated"})
"""Verdicts whose slices a plan may destroy without moving a pod (when no pod held them)."""


@dataclass(frozen=True)
class GpuLayouts:
    """One GPU's layout now and as proposed, as ``{profile: count}`` with MIG mode."""

    index: int
    current: Mapping[str, int]
    proposed: Mapping[str, int]
    current_mig: bool = True
    proposed_mig: bool = True


@dataclass(frozen=True)
class SliceOnGpu:
    """One current slice as the contract sees it.

    Attributes:
        gpu: GPU index on the node.
        profile: Its profile.
        status: Its verdict (``idle``, ``healthy``, ...).
        pods: ``namespace/pod`` of every pod seen holding it in the window.
        pin: Why it pins its GPU (None: it does not).
    """

    gpu: int
    profile: str
    status: str
    pods: tuple[str, ...] = ()
    pin: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of a recommendation's ``slices[]`` entry."""
        return {
            "gpu": self.gpu,
            "profile": self.profile,
            "status": self.status,
            "pods": list(self.pods),
            "pin": self.pin,
        }


def gpu_recreated(gpu: GpuLayouts) -> bool:
    """Whether MIG Manager touches this GPU (and so destroys every instance on it).

    mig-parted compares MIG mode and the multiset of profiles per GPU; zero counts are no
    instances.
    """
    now = {p: n for p, n in gpu.current.items() if n}
    then = {p: n for p, n in gpu.proposed.items() if n}
    return (gpu.current_mig, now) != (gpu.proposed_mig, then)


def recreated_gpus(gpus: Iterable[GpuLayouts]) -> tuple[int, ...]:
    """Indices of the GPUs a change re-creates, ascending."""
    return tuple(sorted(g.index for g in gpus if gpu_recreated(g)))


def pods_losing_device(recreated: Iterable[int], slices: Iterable[SliceOnGpu]) -> tuple[str, ...]:
    """Every pod that held a slice on a re-created GPU, sorted (each once)."""
    changed = set(recreated)
    return tuple(sorted({pod for s in slices if s.gpu in changed for pod in s.pods}))


def violations(recommendation: Mapping[str, Any]) -> list[str]:
    """Where a recommendation (a report's ``recommendations[]`` entry) breaks the contract.

    Returns:
        One line per problem; empty when the change is safe to hand to the applier.
    """
    node = recommendation.get("node", "?")
    try:
        layouts = _layouts(recommendation)
        slices = _slices(recommendation)
    except (KeyError, TypeError, ValueError) as exc:
        return [f"{node}: recommendation lacks the per-GPU layouts and slices ({exc})"]
    problems: list[str] = []
    recreated = recreated_gpus(layouts)
    named = set(recommendation.get("pods_to_move") or ())
    disruptive = bool(recommendation.get("disruptive"))
    by_gpu: dict[int, list[SliceOnGpu]] = {}
    for s in slices:
        by_gpu.setdefault(s.gpu, []).append(s)
    current = {g.index: g for g in layouts}
    for index in recreated:
        on_gpu = by_gpu.get(index, [])
        layout = current[index]
        instances = sum(n for n in layout.current.values() if n) if layout.current_mig else 0
        seen = Counter(s.profile for s in on_gpu)
        if instances != len(on_gpu) or +Counter(dict(layout.current)) != seen:
            problems.append(
                f"{node}/gpu {index}: re-created, but its {instances} instance(s) are not all "
                f"accounted for by the {len(on_gpu)} slice(s) analysed"
            )
        for s in on_gpu:
            if s.pin is not None:
                problems.append(
                    f"{node}/gpu {index}: re-created although {s.profile} pins it: {s.pin}"
                )
            elif s.status not in CHANGEABLE_STATUSES and not s.pods:
                problems.append(
                    f"{node}/gpu {index}: re-created although {s.profile} is {s.status} "
                    "and no pod is known to hold it"
                )
            missing = [p for p in s.pods if p not in named]
            if missing:
                problems.append(
                    f"{node}/gpu {index}: re-created, but {', '.join(missing)} (on "
                    f"{s.profile}) is not in pods_to_move"
                )
            if s.pods and not disruptive:
                problems.append(
                    f"{node}/gpu {index}: re-created with pods on it, but not marked disruptive"
                )
    return problems


def _layouts(rec: Mapping[str, Any]) -> list[GpuLayouts]:
    current = {int(g["gpu"]): g for g in rec["current"]}
    proposed = {int(g["gpu"]): g for g in rec["proposed"]}
    out = []
    for index in sorted(set(current) | set(proposed)):
        now, then = current.get(index, {}), proposed.get(index, {})
        out.append(
            GpuLayouts(
                index,
                _counts(now.get("layout")),
                _counts(then.get("layout")),
                bool(now.get("mig_enabled", True)),
                bool(then.get("mig_enabled", True)),
            )
        )
    return out


def _counts(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"layout must map profiles to counts, got {type(value).__name__}")
    out = {}
    for name, count in value.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"layout count for {name!r} must be an integer >= 0")
        out[str(name)] = count
    return out


def _slices(rec: Mapping[str, Any]) -> Sequence[SliceOnGpu]:
    raw = rec["slices"]
    if not isinstance(raw, list):
        raise TypeError("slices must be a list")
    return [
        SliceOnGpu(
            gpu=int(s["gpu"]),
            profile=str(s["profile"]),
            status=str(s["status"]),
            pods=tuple(str(p) for p in s.get("pods") or ()),
            pin=None if s.get("pin") is None else str(s["pin"]),
        )
        for s in raw
    ]
