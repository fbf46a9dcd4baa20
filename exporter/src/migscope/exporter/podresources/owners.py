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

Everything here is pure (no I/O), so it is tested without a kubelet and reused by the watcher.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeAlias

from . import api_pb2

__all__ = [
    "DEFAULT_RESOURCE_PREFIXES",
    "DeviceId",
    "OwnerMap",
    "PodOwner",
    "build_owner_map",
    "parse_device_id",
]

#: Resource names attributed by default: ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>``,
#: including the ``.shared`` variants the device plugin advertises for time-sliced replicas
#: (``nvidia.com/gpu.shared``, ``nvidia.com/mig-1g.10gb.shared``). Narrower than all of
#: ``nvidia.com/`` on purpose: other NVIDIA resources (VFIO passthrough, NICs) use IDs that are
#: not NVML UUIDs and, with index IDs, could collide with a GPU index.
DEFAULT_RESOURCE_PREFIXES: tuple[str, ...] = ("nvidia.com/gpu", "nvidia.com/mig-")

_REPLICA = re.compile(r"^(?P<base>.+?)::(?P<replica>\d+)$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_MIG = re.compile(rf"^MIG-{_UUID}$")
_GPU = re.compile(rf"^GPU-{_UUID}$")
_MIG_LEGACY = re.compile(rf"^MIG-(?P<gpu>GPU-{_UUID})/(?P<gi>\d+)/(?P<ci>\d+)$")


@dataclass(frozen=True, order=True)
class PodOwner:
    """One container holding a device, as the kubelet reports it.

    Frozen and ordered so owner tuples can be sorted into a stable order: a device's labels must
    not flip between scrapes just because the kubelet listed pods in another order.
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


def build_owner_map(
    pods: Iterable[api_pb2.PodResources],
    *,
    resource_prefixes: Iterable[str] = DEFAULT_RESOURCE_PREFIXES,
) -> OwnerMap:
    """Index the devices held by containers, keeping only the resources of interest.

    Devices allocated through DRA (``dynamic_resources``) are not attributed: the kubelet
    reports them by driver/pool/device name and CDI name, none of which is an NVML UUID.

    Args:
        pods: ``ListPodResourcesResponse.pod_resources``.
        resource_prefixes: Resource names to keep, matched as prefixes.

    Returns:
        A read-only mapping from device key (see `DeviceId.key`) to the sorted, de-duplicated
        owners of that device. A container listing the same device twice, or an init container
        whose device the kubelet reuses for an app container, does not duplicate an owner.
    """
    prefixes = tuple(resource_prefixes)
    found: dict[str, set[PodOwner]] = {}
    for pod in pods:
        for container in pod.containers:
            for devices in container.devices:
                if not _wanted(devices.resource_name, prefixes):
                    continue
                owner = PodOwner(
                    namespace=pod.namespace,
                    pod=pod.name,
                    container=container.name,
                    resource_name=devices.resource_name,
                )
                for raw in devices.device_ids:
                    key = parse_device_id(raw).key
                    if key:
                        found.setdefault(key, set()).add(owner)
    return MappingProxyType({key: tuple(sorted(owners)) for key, owners in sorted(found.items())})
