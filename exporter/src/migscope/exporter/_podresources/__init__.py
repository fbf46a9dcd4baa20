"""Pod attribution: which Kubernetes pod holds each GPU and MIG device on this node.

Reads the kubelet's PodResources v1 gRPC API on its unix socket, in the background, and maps
NVIDIA device IDs (``MIG-<uuid>``, ``GPU-<uuid>``) to namespace, pod and container. See
docs/pod-attribution.md. The protobuf stubs (``api_pb2*``) are generated from ``api.proto`` by
scripts/gen-podresources and are not part of the public API.
"""

from __future__ import annotations

from .client import LIST_METHOD, PodResourcesError, PodResourcesWatcher, list_pod_resources
from .owners import PodOwner, build_owner_map, collect_owners, parse_device_id

__all__ = [
    "LIST_METHOD",
    "PodOwner",
    "PodResourcesError",
    "PodResourcesWatcher",
    "build_owner_map",
    "collect_owners",
    "list_pod_resources",
    "parse_device_id",
]
