"""Per-node progress, recorded on the node itself, and the pure decisions about a node.

A run can be killed at any moment (a CronJob's deadline, an eviction of the applier's own
pod, a crash). Every step that changes the cluster therefore writes, *in the same patch*,
the step it reached into the node's ``migscope.io/apply`` annotation: the label change and
the annotation saying "waiting for MIG Manager" land together or not at all. The next run
reads the annotation and continues from there, or rolls back; nothing is left half applied
because nothing is ever half recorded.

The decisions here take data and return data (which pods a change endangers, whether the
node's advertised resources match the plan, what the change history allows) so that they
are tested without a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

from migscope.applier.plan import NodeChange

__all__ = [
    "CHANGES_ANNOTATION",
    "CONFIG_LABEL",
    "STATE_ANNOTATION",
    "STATE_LABEL",
    "NodeProgress",
    "Step",
    "advertised",
    "changes_within",
    "is_ready",
    "pods_at_risk",
    "read_progress",
]

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
STATE_ANNOTATION = "migscope.io/apply"
"""JSON :class:`NodeProgress`: where this node's change stands."""
CHANGES_ANNOTATION = "migscope.io/changes"
"""JSON list of the UTC times of changes completed on this node (the last 30 days)."""

MIG_RESOURCE = "nvidia.com/mig-"


class Step(str, Enum):
    """Where a node's change stands (recorded in :data:`STATE_ANNOTATION`)."""

    CONFIGMAP = "configmap"  # intent recorded; writing the ConfigMap
    DRAIN = "drain"  # cordoned (if we did); evicting
    WAIT = "wait"  # label set; waiting for MIG Manager
    VERIFY = "verify"  # MIG Manager said success; checking the device plugin
    ROLLBACK = "rollback"  # restoring the previous label
    DONE = "done"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        """Nothing left to do for this change."""
        return self in (Step.DONE, Step.FAILED)


@dataclass(frozen=True)
class NodeProgress:
    """The content of :data:`STATE_ANNOTATION`.

    Attributes:
        run: The run that started the change.
        actor: Who started it.
        step: Where it stands.
        target: The config being applied.
        previous: The label's value before (None: it had none), for rollback.
        cordoned: Whether *we* cordoned the node (and so must uncordon it).
        labelled_at: When the label was set (Unix seconds), the start of the timeout.
        message: The last thing that happened, for humans.
    """

    run: str
    actor: str
    step: Step
    target: str
    previous: str | None
    cordoned: bool = False
    labelled_at: float | None = None
    message: str = ""

    def to_json(self) -> str:
        """The annotation's value."""
        data = asdict(self)
        data["step"] = self.step.value
        return json.dumps(data, sort_keys=True)

    def at(self, step: Step, message: str = "", **changes: Any) -> NodeProgress:
        """The same change at another step."""
        return replace(self, step=step, message=message or self.message, **changes)


def read_progress(node: Mapping[str, Any]) -> NodeProgress | None:
    """The node's recorded progress, or None (none, or unreadable: treated as none)."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(STATE_ANNOTATION)
    if not text:
        return None
    try:
        data = json.loads(text)
        return NodeProgress(
            run=str(data["run"]),
            actor=str(data.get("actor", "")),
            step=Step(data["step"]),
            target=str(data["target"]),
            previous=data.get("previous"),
            cordoned=bool(data.get("cordoned", False)),
            labelled_at=data.get("labelled_at"),
            message=str(data.get("message", "")),
        )
    except (ValueError, KeyError, TypeError):
        return None


def is_ready(node: Mapping[str, Any]) -> bool:
    """The node's Ready condition is True."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _requests(pod: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = container.get("resources") or {}
        for part in (res.get("limits") or {}, res.get("requests") or {}):
            names.update(k for k, v in part.items() if str(v) not in ("0", ""))
    return names


def pods_at_risk(change: NodeChange, pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """``namespace/pod`` of the node's pods that may hold a device the change destroys.

    MIG Manager re-creates every instance of a GPU whose layout changes, so any pod holding
    a MIG device of a profile present on a changed GPU is at risk (the API does not say
    which GPU a pod's device is on; erring on the side of the pod is the safe way). A pod
    with ``nvidia.com/gpu`` is at risk when a GPU's MIG mode changes. Without per-GPU
    layouts in the plan every pod holding a MIG device or a GPU is at risk. The pods the
    analyzer named (``pods_to_move``) are added when they are on the node.
    """
    destroyed = change.destroyed_profiles()
    mode_change = any(g.current_mig != g.proposed_mig for g in change.changed_gpus)
    unknown = not change.gpus
    out: set[str] = set()
    named = set(change.pods_to_move)
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        asked = _requests(pod)
        mig = {r.removeprefix(MIG_RESOURCE) for r in asked if r.startswith(MIG_RESOURCE)}
        whole = "nvidia.com/gpu" in asked
        if (
            name in named
            or mig & destroyed
            or (whole and (mode_change or unknown))
            or (unknown and mig)
        ):
            out.add(name)
    return sorted(out)


def advertised(node: Mapping[str, Any]) -> dict[str, int]:
    """The node's allocatable ``nvidia.com/mig-*`` counts (zeros left out)."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    out: dict[str, int] = {}
    for name, value in alloc.items():
        if name.startswith(MIG_RESOURCE):
            try:
                count = int(str(value))
            except ValueError:
                continue
            if count:
                out[name] = count
    return out


def change_times(node: Mapping[str, Any]) -> list[datetime]:
    """When changes completed on this node (from :data:`CHANGES_ANNOTATION`)."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(CHANGES_ANNOTATION)
    try:
        stamps = json.loads(text) if text else []
        return [datetime.fromisoformat(str(s).replace("Z", "+00:00")) for s in stamps]
    except (ValueError, TypeError):
        return []


def changes_within(nodes: Sequence[Mapping[str, Any]], now: datetime, hours: float = 24) -> int:
    """Changes completed on these nodes in the last ``hours``."""
    since = now - timedelta(hours=hours)
    return sum(1 for n in nodes for t in change_times(n) if t >= since)


def with_change(node: Mapping[str, Any], now: datetime, keep_days: int = 30) -> str:
    """The :data:`CHANGES_ANNOTATION` value with ``now`` added and old entries dropped."""
    since = now - timedelta(days=keep_days)
    kept = [t for t in change_times(node) if t >= since] + [now]
    return json.dumps([t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") for t in kept])
