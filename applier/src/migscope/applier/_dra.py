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
* :func:`dra_pods_at_risk` names the pods that may hold a device of a GPU the change
  re-creates: by the device's GPU where the slices and the plan both say which GPU that is
  (by UUID), else by the device plugin's rule (a profile present on any changed GPU);
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

from migscope.applier._plan import GpuChange, NodeChange
from migscope.core import NVIDIA_DRIVER, parse_device_name, profile_key

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
        gpu_uuid: The UUID of the GPU it is on (``GPU-...``): the slice's ``parentUUID`` of a
            MIG device or ``uuid`` of a whole GPU; for a device the slices do not list, the
            GPU the slices give its canonical name's minor (:func:`_minor_gpus`). Empty when
            that cannot be told for sure.
        gpu_source: How ``gpu_uuid`` was told: ``resourceslice`` (the device's own
            attributes), ``device-name`` (its name's minor) or ``""``.
    """

    claim: str
    driver: str
    pool: str
    device: str
    kind: Kind
    profile: str = ""
    source: str = "none"
    gpu_uuid: str = ""
    gpu_source: str = ""


@dataclass(frozen=True)
class DraRisk:
    """What :func:`dra_pods_at_risk` judged, so that no caller judges it again.

    Attributes:
        pods: ``{namespace/pod: the devices that put it at risk}``.
        on_changed_gpu: Those of ``pods`` holding a device whose GPU UUID is a changed GPU's
            (even where the plan pairs that UUID with two GPUs): what the cluster shows now,
            which outweighs where the report saw the pod
            (:func:`migscope.applier._workflow.at_risk_now`).
    """

    pods: dict[str, list[ClaimedDevice]]
    on_changed_gpu: frozenset[str]


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


def _gpu_of(device: Mapping[str, Any]) -> str:
    """The UUID of the GPU a published device is on, from its attributes ("" when none says).

    A MIG device names its GPU in ``parentUUID``; a whole GPU is its own ``uuid``. Any other
    device's ``uuid`` is not a GPU's (a MIG device's is ``MIG-...``), so it is not read.
    """
    parent = _attribute(device, "parentUUID")
    if parent:
        return parent
    if _attribute(device, "type") == "gpu":
        return _attribute(device, "uuid") or ""
    return ""


def _minor_gpus(devices: Mapping[tuple[str, str, str], Device]) -> dict[tuple[str, int], str]:
    """``{(pool, GPU minor): GPU UUID}`` from the slices' MIG devices with canonical names.

    Only canonical names (driver v25.12.0 and later) are read: their number is always the
    GPU's minor, while the older forms' number was its index in some releases
    (docs/dra-sources.md §4), so two names of different ages could give one number to two
    GPUs. A minor given two UUIDs is left out.
    """
    seen: dict[tuple[str, int], set[str]] = {}
    for (driver, pool, name), device in devices.items():
        parsed = parse_device_name(name) if driver == NVIDIA_DRIVER else None
        parent = _attribute(device, "parentUUID")
        if parsed is not None and parsed.form == "canonical" and parent:
            seen.setdefault((pool, parsed.minor), set()).add(parent)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def _gpu_of_missing(
    driver: str, pool: str, device: str, minors: Mapping[tuple[str, int], str]
) -> str:
    """The GPU of a claimed device the slices do not list: by its canonical name's minor."""
    if driver != NVIDIA_DRIVER:
        return ""
    parsed = parse_device_name(device)
    if parsed is None or parsed.form != "canonical":
        return ""
    return minors.get((pool, parsed.minor), "")


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
    minors = _minor_gpus(known)
    out: list[ClaimedDevice] = []
    for result in results:
        if not isinstance(result, Mapping):
            continue
        driver = str(result.get("driver") or "")
        pool = str(result.get("pool") or "")
        device = str(result.get("device") or "")
        found = known.get((driver, pool, device))
        kind, profile, source = _describe(driver, device, found)
        if found is not None:
            gpu = _gpu_of(found)
            told = "resourceslice" if gpu else ""
        else:
            gpu = _gpu_of_missing(driver, pool, device, minors)
            told = "device-name" if gpu else ""
        out.append(ClaimedDevice(name, driver, pool, device, kind, profile, source, gpu, told))
    return out


def _published(slices: Iterable[Mapping[str, Any]]) -> dict[str, tuple[bool, Counter[str]]]:
    """``{GPU UUID, lower case: (MIG on, {profile key: MIG devices})}`` as the slices show it.

    A whole GPU (``type: gpu``) is a GPU with MIG off; a static MIG device counts for its
    ``parentUUID`` under its profile. A MIG device without a profile, or a GPU shown both
    whole and cut (DynamicMIG's way), gets a ``""`` entry, which matches no layout.
    """
    kinds: dict[str, set[str]] = {}
    counts: dict[str, Counter[str]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != NVIDIA_DRIVER:
            continue
        for device in spec.get("devices") or []:
            if not isinstance(device, Mapping):
                continue
            kind, gpu = _attribute(device, "type"), _gpu_of(device).lower()
            if not gpu or kind not in ("gpu", "mig"):
                continue
            kinds.setdefault(gpu, set()).add(kind)
            if kind == "mig":
                profile = _attribute(device, "profile")
                counts.setdefault(gpu, Counter())[profile_key(profile) if profile else ""] += 1
    out: dict[str, tuple[bool, Counter[str]]] = {}
    for gpu, seen in kinds.items():
        shown = Counter(counts.get(gpu, Counter()))
        if len(seen) > 1:
            shown[""] += 1
        out[gpu] = ("mig" in seen, shown)
    return out


def _as_planned(gpu: GpuChange, published: Mapping[str, tuple[bool, Counter[str]]]) -> bool:
    """Whether the slices show ``gpu`` as the plan has it now (MIG mode and instances).

    mig-parted leaves a GPU alone only when it already is as the config wants it: a GPU the
    plan keeps but that someone re-cut since the plan was made would be re-created all the
    same. So a GPU is taken to be kept only when what its driver publishes agrees with the
    plan's ``current`` layout.
    """
    shown = published.get(gpu.uuid.lower())
    if shown is None:
        return False
    mig, counts = shown
    wanted: Counter[str] = Counter()
    for profile, n in gpu.current.items():
        wanted[profile_key(profile)] += n
    return mig == gpu.current_mig and +counts == +wanted


def _plan_gpus(change: NodeChange) -> dict[str, GpuChange]:
    """``{GPU UUID, lower case: the GPU's change}`` for the plan's GPUs of known UUID.

    A UUID the plan gives two GPUs is left out: which of them a device is on is then unknown.
    """
    by_uuid: dict[str, list[GpuChange]] = {}
    for gpu in change.gpus:
        if gpu.uuid:
            by_uuid.setdefault(gpu.uuid.lower(), []).append(gpu)
    return {u: gpus[0] for u, gpus in by_uuid.items() if len(gpus) == 1}


def dra_pods_at_risk(
    change: NodeChange,
    pods: Iterable[Mapping[str, Any]],
    claims: Mapping[tuple[str, str], Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
) -> DraRisk:
    """Pods of the node that may hold, through a claim, a device the change destroys.

    MIG Manager re-creates every instance of a GPU whose layout changes and touches no other
    GPU, so what matters is which GPU a claimed device is on. The node's ResourceSlice says
    it by UUID (``parentUUID`` of a MIG device, ``uuid`` of a whole GPU); the plan pairs each
    GPU index with its UUID from the report's slices (:attr:`GpuChange.uuid`). Where both
    say, a device on a changed GPU is at risk whatever its profile, and one on a GPU the
    change keeps is not, provided the slices show that GPU as the plan has it now (MIG mode
    and instances: mig-parted re-creates a GPU re-cut since the plan all the same). So a
    holder on a kept GPU is neither named nor evicted by ``--drain`` (the e2e chain of
    issue 21 named four pods of a kept GPU beside the one the report named).

    Otherwise the device keeps the device plugin's rule
    (:func:`migscope.applier._steps.pods_at_risk`), on any GPU: a MIG device of a profile
    present on a changed GPU, a whole GPU when a GPU's MIG mode changes, and a device of
    NVIDIA's driver that cannot be told apart (a MIG device known by profile id only, an
    unknown one) whenever any GPU changes. That is: a slice without the attribute, a GPU the
    report has no slice of, a UUID the plan does not list, the plan's pairing in doubt, a
    kept GPU the slices show otherwise than the plan. A device the slices do not list is
    never cleared: its canonical name's minor, tied to a UUID by the slices' other devices,
    can put it on a changed GPU, but a claim on a device the driver no longer publishes is
    a sign the slices are not the GPUs as they are. The device's name gives a minor, the
    plan an index, which may differ, so names are never matched to the plan directly. What
    cannot be seen to be on a kept GPU is counted as on a changed one.

    Args:
        change: The node's change.
        pods: The node's pods.
        claims: ``{(namespace, name): claim}`` for the claims the pods hold.
        slices: The node's ResourceSlices.

    Returns:
        The pods at risk with their devices, and which of them hold a device seen on a
        changed GPU.
    """
    changed = change.changed_gpus
    changed_uuids = {g.uuid.lower() for g in changed if g.uuid}
    unknown_layouts = not change.gpus
    destroyed = {profile_key(p) for p in change.destroyed_profiles()}
    mode_change = any(g.current_mig != g.proposed_mig for g in changed)
    on_plan = _plan_gpus(change)
    published = _published(slices)
    out: dict[str, list[ClaimedDevice]] = {}
    on_changed: set[str] = set()
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
                gpu = on_plan.get(device.gpu_uuid.lower()) if device.gpu_uuid else None
                if gpu is not None and gpu.changed:
                    risky = True  # every instance of a changed GPU is re-created
                elif (
                    gpu is not None
                    and device.gpu_source == "resourceslice"
                    and _as_planned(gpu, published)
                ):
                    risky = False  # on a GPU the change keeps, as the slices show it
                else:
                    risky = (
                        unknown_layouts
                        or (
                            device.kind == "mig"
                            and bool(device.profile)
                            and device.profile in destroyed
                        )
                        or (device.kind == "mig" and not device.profile and bool(changed))
                        or (device.kind == "gpu" and mode_change)
                        or (device.kind == "unknown" and bool(changed))
                    )
                if risky:
                    out.setdefault(key, []).append(device)
                    if device.gpu_uuid.lower() in changed_uuids:
                        on_changed.add(key)
    return DraRisk(out, frozenset(on_changed))


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
