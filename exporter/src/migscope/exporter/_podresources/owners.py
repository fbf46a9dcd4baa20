"""Turn a kubelet PodResources ``List`` answer into "which pod holds which GPU device".

The NVIDIA device plugin hands the kubelet device IDs that NVML itself reports
(``nvmlDeviceGetUUID``), so the exporter can join them to the instances it samples without any
Kubernetes client: ``MIG-<uuid>`` for MIG instances, ``GPU-<uuid>`` for whole GPUs, and on
R450-era drivers the old MIG form ``MIG-GPU-<gpu-uuid>/<gi>/<ci>``. Two plugin features bend
that rule and are undone here:

* time-slicing and MPS replicas advertise one physical device several times as
  ``<id>::<n>``; the suffix is stripped, so several containers may hold the same device and all
  of them are kept (the mapping's values are tuples, never a single owner);
* ``DEVICE_ID_STRATEGY=index`` advertises GPU indices (``"0"``, or ``"0:1"`` for a MIG device);
  those are kept verbatim for the caller to join by index.

What one answer may cost is capped (:func:`collect_owners`): at most ``MAX_DEVICES`` devices
and ``MAX_OWNERS_PER_DEVICE`` owners of each are taken, the first in sorted order, so that a
kubelet answer listing one device for 100,000 containers neither fills the exporter's memory
nor turns every scrape into megabytes. The cut is reported, never silent.

Everything here is pure (no I/O), so it is tested without a kubelet and reused by the watcher.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeAlias

from . import api_pb2

#: Resource names attributed by default: ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>``,
#: including the ``.shared`` variants the device plugin advertises for time-sliced replicas
#: (``nvidia.com/gpu.shared``, ``nvidia.com/mig-1g.10gb.shared``). Narrower than all of
#: ``nvidia.com/`` on purpose: other NVIDIA resources (VFIO passthrough, NICs) use IDs that are
#: not NVML UUIDs and, with index IDs, could collide with a GPU index.
DEFAULT_RESOURCE_PREFIXES: tuple[str, ...] = ("nvidia.com/gpu", "nvidia.com/mig-")

#: Devices one answer may attribute. A node has at most a few dozen GPUs and MIG slices (8 GPUs x
#: 7 slices + 8 GPUs = 64 keys; 16 GPUs, 128); more means a broken or hostile answer.
MAX_DEVICES = 256

#: Containers attributed per device. Kubernetes supports 110 pods per node, so a real device
#: (time-sliced or MPS-shared) is held by fewer; the cap bounds ``*_pod_info`` series per device.
MAX_OWNERS_PER_DEVICE = 128

_REPLICA = re.compile(r"^(?P<base>.+?)::(?P<replica>\d+)$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_MIG = re.compile(rf"^MIG-{_UUID}$")
_GPU = re.compile(rf"^GPU-{_UUID}$")
_MIG_LEGACY = re.compile(rf"^MIG-(?P<gpu>GPU-{_UUID})/(?P<gi>\d+)/(?P<ci>\d+)$")


@dataclass(frozen=True, order=True, slots=True)
class PodOwner:
    """One container holding a device, as the kubelet reports it.

    Frozen and ordered so owner tuples can be sorted into a stable order: a device's labels must
    not flip between scrapes just because the kubelet listed pods in another order. Slotted:
    an answer may create many of them.
    """

    namespace: str
    pod: str
    container: str
    resource_name: str


#: Normalised device ID → every container holding it (usually one; several for replicas).
OwnerMap: TypeAlias = Mapping[str, tuple[PodOwner, ...]]


@dataclass(frozen=True)
class DeviceId:
    """A device-plugin device ID taken apart.

    Attributes:
        raw: The ID exactly as the kubelet listed it.
        key: The ID the mapping is keyed by: ``raw`` without a replica suffix. For UUID forms
            this is what NVML reports for the device, so it joins to NVML directly.
        kind: ``"mig"`` (``MIG-<uuid>`` or the legacy form), ``"gpu"`` (``GPU-<uuid>``) or
            ``"other"`` (an index or anything else, kept verbatim).
        replica: The time-slicing/MPS replica number, or None when the ID had no suffix.
        parent_gpu: For the legacy ``MIG-GPU-<uuid>/<gi>/<ci>`` form, the parent GPU's UUID
            (``GPU-<uuid>``); None otherwise. Lets a caller join by (GPU, GI, CI) when NVML
            reports the modern MIG UUID for the same instance.
        gi: GPU instance ID from the legacy form, else None.
        ci: Compute instance ID from the legacy form, else None.
    """

    raw: str
    key: str
    kind: Literal["mig", "gpu", "other"]
    replica: int | None = None
    parent_gpu: str | None = None
    gi: int | None = None
    ci: int | None = None


def parse_device_id(raw: str) -> DeviceId:
    """Normalise one device ID from the kubelet.

    Only the replica suffix is removed and surrounding whitespace trimmed; case is kept, because
    the plugin and NVML read the same driver and so already agree on spelling.

    Args:
        raw: A device ID from ``ContainerDevices.device_ids``.

    Returns:
        The parsed ID; ``kind == "other"`` for IDs that are not NVIDIA UUIDs (kept verbatim).
    """
    text = raw.strip()
    replica: int | None = None
    match = _REPLICA.match(text)
    if match:
        text, replica = match.group("base"), int(match.group("replica"))
    legacy = _MIG_LEGACY.match(text)
    if legacy:
        return DeviceId(
            raw=raw,
            key=text,
            kind="mig",
            replica=replica,
            parent_gpu=legacy.group("gpu"),
            gi=int(legacy.group("gi")),
            ci=int(legacy.group("ci")),
        )
    if _MIG.match(text):
        return DeviceId(raw=raw, key=text, kind="mig", replica=replica)
    if _GPU.match(text):
        return DeviceId(raw=raw, key=text, kind="gpu", replica=replica)
    return DeviceId(raw=raw, key=text, kind="other", replica=replica)


def _wanted(resource_name: str, prefixes: Iterable[str]) -> bool:
    return any(resource_name.startswith(prefix) for prefix in prefixes)


@dataclass(frozen=True)
class CollectedOwners:
    """The owner map of one answer, and what the caps cut from it.

    Attributes:
        owners: Device key → the first owners of that device (see `build_owner_map`).
        devices_cut: The answer listed more than ``max_devices`` devices; only the first by
            key are in ``owners``.
        crowded: Keys, sorted, of the devices in ``owners`` that more than ``max_owners``
            containers hold; only the first ``max_owners`` of each are kept.
        max_devices: The device cap that applied.
        max_owners: The owners-per-device cap that applied.
    """

    owners: OwnerMap
    devices_cut: bool = False
    crowded: tuple[str, ...] = ()
    max_devices: int = MAX_DEVICES
    max_owners: int = MAX_OWNERS_PER_DEVICE

    @property
    def note(self) -> str | None:
        """One line saying what was cut, or None when the answer was taken whole."""
        parts = []
        if self.devices_cut:
            parts.append(
                f"more than {self.max_devices} devices listed; attributing the first "
                f"{self.max_devices} by device ID"
            )
        if self.crowded:
            count = len(self.crowded)
            named = ", ".join(self.crowded[:3]) + (", ..." if count > 3 else "")
            parts.append(
                f"{count} device{'s' if count > 1 else ''} held by more than "
                f"{self.max_owners} containers ({named}); attributing the first "
                f"{self.max_owners} of each by namespace, pod and container"
            )
        return "; ".join(parts) or None


class _Holders:
    """The first ``cap`` owners of one device, in bounded memory whatever the answer's size.

    Owners accumulate up to ``2 * cap``, then only the first ``cap`` are kept and anything
    sorting after the last of them is refused from then on: the result is the first ``cap`` of
    every owner offered, with at most ``2 * cap`` held at any time.
    """

    __slots__ = ("cut", "limit", "owners")

    def __init__(self) -> None:
        self.owners: set[PodOwner] = set()
        self.limit: PodOwner | None = None
        self.cut = False

    def add(self, owner: PodOwner, cap: int) -> None:
        if self.limit is not None and owner > self.limit:
            self.cut = True
            return
        self.owners.add(owner)
        if len(self.owners) > 2 * cap:
            self.first(cap)

    def first(self, cap: int) -> tuple[PodOwner, ...]:
        kept = sorted(self.owners)
        if len(kept) > cap:
            kept = kept[:cap]
            self.owners, self.limit, self.cut = set(kept), kept[-1], True
        return tuple(kept)


def _first_keys(found: dict[str, _Holders], cap: int) -> str:
    """Keep the first ``cap`` keys of ``found`` (in place); return the last one kept."""
    keys = sorted(found)
    for key in keys[cap:]:
        del found[key]
    return keys[cap - 1]


def collect_owners(
    pods: Iterable[api_pb2.PodResources],
    *,
    resource_prefixes: Iterable[str] = DEFAULT_RESOURCE_PREFIXES,
    max_devices: int = MAX_DEVICES,
    max_owners: int = MAX_OWNERS_PER_DEVICE,
) -> CollectedOwners:
    """Index the devices held by containers, within the caps, and say what the caps cut.

    Which devices and owners survive a cap does not depend on the kubelet's order (it lists
    pods in Go map order, which changes from call to call): the first ``max_devices`` device
    keys in sorted order, and of each the first ``max_owners`` owners in the owners' order.
    Memory stays bounded by twice the caps however long the answer is.

    Args:
        pods: ``ListPodResourcesResponse.pod_resources``.
        resource_prefixes: Resource names to keep, matched as prefixes.
        max_devices: Device keys kept.
        max_owners: Owners kept per device.

    Raises:
        ValueError: A cap below 1.
    """
    if max_devices < 1 or max_owners < 1:
        raise ValueError(f"caps must be >= 1, got {max_devices} devices, {max_owners} owners")
    prefixes = tuple(resource_prefixes)
    found: dict[str, _Holders] = {}
    key_limit: str | None = None  # once devices were cut, keys after it are refused
    for pod in pods:
        for container in pod.containers:
            for devices in container.devices:
                if not _wanted(devices.resource_name, prefixes):
                    continue
                # Each read of a protobuf string field makes a new str; names that repeat
                # across containers are shared instead (a third of a kept owner's memory).
                owner = PodOwner(
                    namespace=sys.intern(pod.namespace),
                    pod=pod.name,
                    container=sys.intern(container.name),
                    resource_name=sys.intern(devices.resource_name),
                )
                for raw in devices.device_ids:
                    key = parse_device_id(raw).key
                    if not key or (key_limit is not None and key > key_limit):
                        continue
                    holders = found.get(key)
                    if holders is None:
                        holders = found[key] = _Holders()
                        if len(found) > 2 * max_devices:
                            key_limit = _first_keys(found, max_devices)
                            if key > key_limit:
                                continue
                    holders.add(owner, max_owners)
    devices_cut = key_limit is not None or len(found) > max_devices
    if len(found) > max_devices:
        _first_keys(found, max_devices)
    owners = {key: found[key].first(max_owners) for key in sorted(found)}
    return CollectedOwners(
        owners=MappingProxyType(owners),
        devices_cut=devices_cut,
        crowded=tuple(key for key in owners if found[key].cut),
        max_devices=max_devices,
        max_owners=max_owners,
    )


def build_owner_map(
    pods: Iterable[api_pb2.PodResources],
    *,
    resource_prefixes: Iterable[str] = DEFAULT_RESOURCE_PREFIXES,
    max_devices: int = MAX_DEVICES,
    max_owners: int = MAX_OWNERS_PER_DEVICE,
) -> OwnerMap:
    """Index the devices held by containers, keeping only the resources of interest.

    Devices allocated through DRA (``dynamic_resources``) are not attributed: the kubelet
    reports them by driver/pool/device name and CDI name, none of which is an NVML UUID.

    Args:
        pods: ``ListPodResourcesResponse.pod_resources``.
        resource_prefixes: Resource names to keep, matched as prefixes.
        max_devices: Device keys kept (the first by key); see `collect_owners`, which also
            says what was cut.
        max_owners: Owners kept per device (the first in order).

    Returns:
        A read-only mapping from device key (see `DeviceId.key`) to the sorted, de-duplicated
        owners of that device. A container listing the same device twice, or an init container
        whose device the kubelet reuses for an app container, does not duplicate an owner.
    """
    return collect_owners(
        pods, resource_prefixes=resource_prefixes, max_devices=max_devices, max_owners=max_owners
    ).owners
