"""MIG slices held through Kubernetes DRA: which pods hold them, and who manages the node.

Under Dynamic Resource Allocation a pod holds a MIG slice through a ResourceClaim, not through
``resources.limits``: the claim's ``status.allocation.devices.results`` name the device as
``driver/pool/device``, and the node's ResourceSlices describe it (docs/dra-sources.md §1-2).
Reading only the pods' requests, the applier saw none of these pods, and MIG Manager would
re-create their GPUs under them. Here, from plain API objects (no client, tested with tables):

* :func:`claim_names` finds the claims a pod holds (``spec.resourceClaims``, the names the
  scheduler generated from templates in ``status.resourceClaimStatuses``, and the claim of a
  DRA-backed extended resource in ``status.extendedResourceClaimStatus``);
* :func:`claimed_devices` resolves each allocated device of NVIDIA's driver to what it is
  (a MIG device of a profile, a whole GPU, or unknown), from the ResourceSlice's attributes,
  else from the driver's canonical device name;
* :func:`dra_pods_at_risk` applies the same rule as for the device plugin: a pod is at risk
  when it may hold a device of a GPU the change re-creates;
* :func:`node_management` tells a node whose MIG slices the DRA driver creates per claim
  (DynamicMIG: it destroys partitions it did not create and forbids mig-parted beside it,
  so the applier must never relabel it) from one with pre-created slices (static MIG);
* :func:`published_resources` counts the static MIG devices a node's slices publish, which is
  how a change is verified on a DRA node (it advertises no ``nvidia.com/mig-*`` allocatable).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from migscope.applier.plan import NodeChange
from migscope.core.dra_names import NVIDIA_DRIVER, parse_device_name, profile_key

__all__ = [
    "DRA_PLUGIN_LABELS",
    "ClaimedDevice",
    "claim_names",
    "claimed_devices",
    "dra_pods_at_risk",
    "node_management",
    "published_resources",
]


DRA_PLUGIN_LABELS: tuple[tuple[str, str], ...] = (
    ("dra-driver-nvidia-gpu-component", "kubelet-plugin"),  # the driver's Helm chart
    ("nvidia-dra-driver-gpu-component", "kubelet-plugin"),  # its chart before the rename
    ("app", "nvidia-dra-driver-kubelet-plugin"),  # GPU Operator 26.7 (GPUCluster)
)
"""Labels of the GPU kubelet plugin's pods (docs/dra-sources.md §5a, §5b)."""

Kind = Literal["mig", "gpu", "unknown"]


@dataclass(frozen=True)
class ClaimedDevice:
    """One device a claim holds, as far as it can be told.

    Attributes:
        claim: ``namespace/name`` of the claim.
        driver: The DRA driver.
        pool: Its pool (NVIDIA's driver: the node's name).
        device: The device name in the pool.
        kind: ``mig``, ``gpu`` (a whole GPU) or ``unknown``.
        profile: The profile in :func:`profile_key` form (``mig`` only, when known).
        source: How it was told: ``resourceslice`` (the device's attributes),
            ``device-name`` (the driver's canonical name) or ``none``.
    """

    claim: str
    driver: str
    pool: str
    device: str
    kind: Kind
    profile: str = ""
    source: str = "none"


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The names of the ResourceClaims a pod holds (in the pod's namespace), sorted.

    A claim named in ``spec.resourceClaims[].resourceClaimName`` is shared; one made from a
    ``resourceClaimTemplateName`` gets a generated name the pod's
    ``status.resourceClaimStatuses`` records; a DRA-backed extended resource
    (``nvidia.com/mig-1g.12gb`` served by the DRA driver) has its claim in
    ``status.extendedResourceClaimStatus``.
    """
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    names = {
        str(c["resourceClaimName"])
        for c in spec.get("resourceClaims") or []
        if isinstance(c, Mapping) and c.get("resourceClaimName")
    }
    names.update(
        str(c["resourceClaimName"])
        for c in status.get("resourceClaimStatuses") or []
        if isinstance(c, Mapping) and c.get("resourceClaimName")
    )
    extended = status.get("extendedResourceClaimStatus") or {}
    if isinstance(extended, Mapping) and extended.get("resourceClaimName"):
        names.add(str(extended["resourceClaimName"]))
    return sorted(names)


Device = Mapping[str, Any]


def _slice_devices(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Device]:
    out: dict[tuple[str, str, str], Device] = {}
    for item in slices:
        spec = item.get("spec") or {}
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        for device in spec.get("devices") or []:
            if isinstance(device, Mapping) and device.get("name"):
                out[(driver, pool, str(device["name"]))] = device
    return out


def _attribute(device: Mapping[str, Any], name: str) -> str | None:
    """A device attribute's value (``{string: ...}``, ``{version: ...}``...), or None."""
    attrs = device.get("attributes") or {}
    value = attrs.get(name)
    if value is None:
        value = attrs.get(f"{NVIDIA_DRIVER}/{name}")
    if isinstance(value, Mapping):
        for key in ("string", "version", "int", "bool"):
            if key in value:
                return str(value[key])
    return None


def _describe(driver: str, device: str, found: Device | None) -> tuple[Kind, str, str]:
    if found is not None:
        kind = _attribute(found, "type")
        if kind == "mig":
            profile = _attribute(found, "profile")
            return "mig", profile_key(profile) if profile else "", "resourceslice"
        if kind == "gpu":
            return "gpu", "", "resourceslice"
    if driver == NVIDIA_DRIVER:
        name = parse_device_name(device)
        if name is not None:
            # A pre-v25.12 name gives the profile by id only: a MIG device of unknown profile.
            return name.kind, name.profile or "", "device-name"
    return "unknown", "", "none"


def claimed_devices(
    claim: Mapping[str, Any], slices: Iterable[Mapping[str, Any]]
) -> list[ClaimedDevice]:
    """The devices allocated to ``claim``, each told apart as well as the node's slices allow.

    A device of another driver than NVIDIA's GPU driver is still listed, as ``unknown``: the
    caller decides (the applier counts only :data:`NVIDIA_DRIVER`'s devices, see
    :func:`dra_pods_at_risk`).
    """
    meta = claim.get("metadata") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    known = _slice_devices(slices)
    out: list[ClaimedDevice] = []
    for result in results:
        if not isinstance(result, Mapping):
            continue
        driver = str(result.get("driver") or "")
        pool = str(result.get("pool") or "")
        device = str(result.get("device") or "")
        kind, profile, source = _describe(driver, device, known.get((driver, pool, device)))
        out.append(ClaimedDevice(name, driver, pool, device, kind, profile, source))
    return out


def dra_pods_at_risk(
    change: NodeChange,
    pods: Iterable[Mapping[str, Any]],
    claims: Mapping[tuple[str, str], Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
) -> dict[str, list[ClaimedDevice]]:
    """Pods of the node that may hold, through a claim, a device the change destroys.

    The rule is the device plugin's (:func:`migscope.applier.steps.pods_at_risk`), read from
    claims: a MIG device of a profile present on a changed GPU, a whole GPU when a GPU's MIG
    mode changes, and a device of NVIDIA's driver that cannot be told apart (a MIG device
    known by profile id only, one missing from the slices) whenever any GPU changes. Which
    GPU a device is on is not compared: a device name gives the GPU's minor number, the plan
    its index, and erring on the side of the pod is the safe way.

    Args:
        change: The node's change.
        pods: The node's pods.
        claims: ``{(namespace, name): claim}`` for the claims the pods hold.
        slices: The node's ResourceSlices.

    Returns:
        ``{namespace/pod: the devices that put it at risk}``.
    """
    changed = change.changed_gpus
    unknown_layouts = not change.gpus
    destroyed = {profile_key(p) for p in change.destroyed_profiles()}
    mode_change = any(g.current_mig != g.proposed_mig for g in changed)
    out: dict[str, list[ClaimedDevice]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace"))
        key = f"{namespace}/{meta.get('name')}"
        for name in claim_names(pod):
            claim = claims.get((namespace, name))
            if claim is None:
                continue
            for device in claimed_devices(claim, slices):
                if device.driver != NVIDIA_DRIVER:
                    continue
                risky = (
                    (unknown_layouts and bool(device.kind))
                    or (device.kind == "mig" and device.profile and device.profile in destroyed)
                    or (device.kind == "mig" and not device.profile and bool(changed))
                    or (device.kind == "gpu" and mode_change)
                    or (device.kind == "unknown" and bool(changed))
                )
                if risky:
                    out.setdefault(key, []).append(device)
    return out


def node_management(slices: Iterable[Mapping[str, Any]]) -> Literal["none", "static", "dynamic"]:
    """Who makes the node's MIG slices, as its ResourceSlices from NVIDIA's driver show.

    ``dynamic``: the driver runs DynamicMIG and makes a GPU instance per claim. Its slices
    advertise every profile at every placement as abstract devices: MIG devices without a
    ``uuid`` attribute that consume a GPU's shared counters (``consumesCounters``), with
    ``sharedCounters`` in the pool (docs/dra-sources.md §1.2, §5a). ``static``: the driver
    publishes pre-created MIG devices (with their MIG UUID). ``none``: no slices of NVIDIA's
    driver with MIG devices (the device plugin's world, or DRA for whole GPUs only).
    """
    seen_static = False
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != NVIDIA_DRIVER:
            continue
        if spec.get("sharedCounters"):
            return "dynamic"
        for device in spec.get("devices") or []:
            if not isinstance(device, Mapping):
                continue
            if device.get("consumesCounters"):
                return "dynamic"
            if _attribute(device, "type") == "mig":
                if _attribute(device, "uuid") is None:
                    return "dynamic"
                seen_static = True
    return "static" if seen_static else "none"


def published_resources(slices: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``nvidia.com/mig-<profile>`` counts of the static MIG devices the slices publish.

    The same shape as the allocatable counts a device-plugin node advertises, so that a
    change is verified on a DRA node the same way: the plugin republishing the new slices.
    """
    counts: Counter[str] = Counter()
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != NVIDIA_DRIVER:
            continue
        for device in spec.get("devices") or []:
            if isinstance(device, Mapping) and _attribute(device, "type") == "mig":
                profile = _attribute(device, "profile")
                if profile:
                    counts[f"nvidia.com/mig-{profile}"] += 1
    return dict(counts)
