"""Pod attribution: which Kubernetes pod holds each GPU and MIG device on this node.

Reads the kubelet's PodResources v1 gRPC API on its unix socket, in the background, and maps
NVIDIA device IDs (``MIG-<uuid>``, ``GPU-<uuid>``) to namespace, pod and container. See
docs/pod-attribution.md. The protobuf stubs (``api_pb2*``) are generated from ``api.proto`` by
scripts/gen-podresources and are not part of the public API.
"""

from __future__ import annotations

from .client import (
    DEFAULT_SOCKET_PATH,
    LIST_METHOD,
    MAX_ANSWER_BYTES,
    PodResourcesError,
    PodResourcesWatcher,
    WatcherStatus,
    list_pod_resources,
)
from .owners import (
    DEFAULT_RESOURCE_PREFIXES,
    MAX_DEVICES,
    MAX_OWNERS_PER_DEVICE,
    CollectedOwners,
    DeviceId,
    OwnerMap,
    PodOwner,
    build_owner_map,
    collect_owners,
    parse_device_id,
)

__all__ = [
    "DEFAULT_RESOURCE_PREFIXES",
    "DEFAULT_SOCKET_PATH",
    "LIST_METHOD",
    "MAX_ANSWER_BYTES",
    "MAX_DEVICES",
    "MAX_OWNERS_PER_DEVICE",
    "CollectedOwners",
    "DeviceId",
    "OwnerMap",
    "PodOwner",
    "PodResourcesError",
    "PodResourcesWatcher",
    "WatcherStatus",
    "build_owner_map",
    "collect_owners",
    "list_pod_resources",
    "parse_device_id",
]
