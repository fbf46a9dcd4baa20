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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

from migscope.applier._plan import NodeChange

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
STATE_ANNOTATION = "migscope.io/apply"
"""JSON :class:`NodeProgress`: where this node's change stands."""
CHANGES_ANNOTATION = "migscope.io/changes"
"""JSON list of the UTC times of changes completed on this node (the last 30 days)."""

MIG_RESOURCE = "nvidia.com/mig-"
STRATEGY_LABEL = "nvidia.com/mig.strategy"
"""GFD's label naming the device plugin's MIG strategy (``single``, ``mixed``, ``none``)."""


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


def requests_of(pod: Mapping[str, Any]) -> set[str]:
    """The resource names a pod's containers ask for (non-zero requests or limits)."""
    return _requests(pod)


def _requests(pod: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = container.get("resources") or {}
        for part in (res.get("limits") or {}, res.get("requests") or {}):
            names.update(k for k, v in part.items() if str(v) not in ("0", ""))
    return names


DEVICE_PLUGIN_DOMAIN = "nvidia.com/"
"""The domain of every resource NVIDIA's device plugin advertises, renamed ones included.

The plugin's sharing config may rename a resource (``rename:``), but the name it takes is
always put in this domain (k8s-device-plugin ``api/config/v1``: a ``ResourceName`` without
a domain gets ``nvidia.com/``), so a renamed GPU or MIG resource is still in it.
"""
SHARED_SUFFIX = ".shared"
"""What time-slicing and MPS add to a resource name with ``renameByDefault``."""
WHOLE_GPU = "nvidia.com/gpu"

_PROFILE = re.compile(r"^(?:\d+c\.)?(?P<gi>\d+g\.\d+gb(?:[.+]me(?:\.all)?|[.+]gfx)?)$")
"""A MIG profile as a resource name spells it: ``1g.18gb``, ``1g.18gb+me`` (``.me``, as the
device plugin writes ``+`` where a resource name may not have one), ``1c.3g.40gb`` (a compute
instance of a ``3g.40gb`` GPU instance)."""


@dataclass(frozen=True)
class HeldDevice:
    """What a pod's request of one device-plugin resource says about the device it holds.

    Attributes:
        resource: The resource name as the pod asks for it.
        kind: ``mig`` (a MIG device of ``profile``), ``gpu`` (``nvidia.com/gpu`` or its
            ``.shared`` form: a whole GPU, or a MIG device under the ``single`` strategy) or
            ``unknown`` (another name in the plugin's domain: a renamed resource may be any
            device).
        profile: The GPU instance profile, ``+me`` spelt with ``+`` (``mig`` only).
    """

    resource: str
    kind: str
    profile: str = ""


def held_device(resource: str) -> HeldDevice | None:
    """The device a request of ``resource`` may hold, or None (not a device-plugin resource).

    ``nvidia.com/mig-<profile>`` and ``nvidia.com/mig-<profile>.shared`` (time-slicing and MPS
    replicas) hold a device of that profile; ``nvidia.com/gpu`` and ``nvidia.com/gpu.shared``
    a whole GPU, or under the ``single`` strategy a MIG device; any other name in
    :data:`DEVICE_PLUGIN_DOMAIN` may be a renamed GPU or MIG resource, so it is ``unknown``
    and counts against every change (never destroy what cannot be seen to be free).
    """
    if not resource.startswith(DEVICE_PLUGIN_DOMAIN):
        return None
    base = resource.removesuffix(SHARED_SUFFIX)
    if base == WHOLE_GPU:
        return HeldDevice(resource, "gpu")
    if base.startswith(MIG_RESOURCE):
        match = _PROFILE.match(base.removeprefix(MIG_RESOURCE))
        if match:
            return HeldDevice(resource, "mig", _canonical_profile(match["gi"]))
    return HeldDevice(resource, "unknown")


def _canonical_profile(profile: str) -> str:
    """``1g.18gb.me`` and ``1g.18gb+me`` alike as ``1g.18gb+me`` (the catalogue's spelling)."""
    gi, dot, rest = profile.partition("gb.")
    return f"{gi}gb+{rest}" if dot else profile


def single_strategy_possible(node: Mapping[str, Any] | None) -> bool:
    """Whether ``nvidia.com/gpu`` on this node may be a MIG device (the ``single`` strategy).

    GFD's ``nvidia.com/mig.strategy`` label says which strategy the device plugin runs; a node
    that advertises ``nvidia.com/mig-*`` runs ``mixed``, where ``nvidia.com/gpu`` is only ever
    a GPU with MIG disabled. Without either, the strategy is unknown: possible.
    """
    if node is None:
        return True
    labels = (node.get("metadata") or {}).get("labels") or {}
    strategy = labels.get(STRATEGY_LABEL)
    if strategy in ("mixed", "none"):
        return False
    if strategy == "single":
        return True
    return not advertised(node)


def pods_at_risk(
    change: NodeChange,
    pods: Iterable[Mapping[str, Any]],
    node: Mapping[str, Any] | None = None,
) -> list[str]:
    """``namespace/pod`` of the node's pods that may hold a device the change destroys.

    MIG Manager re-creates every instance of a GPU whose layout changes, so any pod holding
    a MIG device of a profile present on a changed GPU is at risk (the API does not say
    which GPU a pod's device is on; erring on the side of the pod is the safe way), whatever
    the name it asked for it by: ``nvidia.com/mig-<profile>``, its time-sliced
    ``.shared`` form, or a renamed resource (:func:`held_device`). A pod with
    ``nvidia.com/gpu`` (or ``.shared``) is at risk when a GPU's MIG mode changes, and when a
    changed GPU has MIG enabled and the node may run the ``single`` strategy
    (:func:`single_strategy_possible`), where that name is a MIG device. Without per-GPU
    layouts in the plan every pod holding a device-plugin resource is at risk. The pods the
    analyzer named (``pods_to_move``) are added when they are on the node.

    Args:
        change: The node's change.
        pods: The node's pods.
        node: The node (its strategy label and allocatable); None: strategy unknown.
    """
    destroyed = change.destroyed_profiles()
    changed = change.changed_gpus
    mode_change = any(g.current_mig != g.proposed_mig for g in changed)
    mig_recreated = any(g.current_mig for g in changed)
    unknown = not change.gpus
    single = single_strategy_possible(node)
    out: set[str] = set()
    named = set(change.pods_to_move)
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        if name in named:
            out.add(name)
            continue
        for held in filter(None, map(held_device, _requests(pod))):
            if (
                unknown
                or (held.kind == "mig" and held.profile in destroyed)
                or (held.kind == "gpu" and (mode_change or (single and mig_recreated)))
                or (held.kind == "unknown" and bool(changed))
            ):
                out.add(name)
                break
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
