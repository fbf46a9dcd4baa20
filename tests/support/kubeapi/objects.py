"""Builders for the objects tests seed most (test support): nodes, pods, PDBs, ConfigMaps.

They return plain dicts in API JSON form, with only the fields a real object of that kind
would have after its controllers ran (a GPU node's ``allocatable``, a running pod's
``Ready`` condition), so a test says what matters and nothing else. Pass them to
:meth:`support.kubeapi.KubeApiServer.create`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["config_map", "lease", "node", "pdb", "pod"]


def node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str | int] | None = None,
    capacity: Mapping[str, str | int] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A Node; ``capacity`` defaults to ``allocatable`` (quantities become strings)."""
    alloc = {k: str(v) for k, v in (allocatable or {"cpu": "64", "memory": "512Gi"}).items()}
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            **({"annotations": dict(annotations)} if annotations else {}),
        },
        "spec": spec,
        "status": {
            "capacity": {k: str(v) for k, v in (capacity or alloc).items()},
            "allocatable": alloc,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status"
                    if ready
                    else "container runtime is down",
                }
            ],
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    node_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    phase: str = "Running",
    ready: bool | None = None,
    requests: Mapping[str, str | int] | None = None,
) -> dict[str, Any]:
    """A Pod with one container requesting ``requests`` (also set as its limits).

    ``ready`` defaults to ``phase == "Running"``. Extended resources such as
    ``nvidia.com/mig-1g.18gb`` must be limits too, so both are set.
    """
    resources = {k: str(v) for k, v in (requests or {}).items()}
    is_ready = phase == "Running" if ready is None else ready
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": resources, "limits": dict(resources)}
                if resources
                else {},
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {"phase": phase}
    if phase in ("Running", "Succeeded", "Failed") or ready is not None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if is_ready else "False"},
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            **({"labels": dict(labels)} if labels else {}),
            **({"annotations": dict(annotations)} if annotations else {}),
        },
        "spec": spec,
        "status": status,
    }


def pdb(
    name: str,
    namespace: str = "default",
    *,
    match_labels: Mapping[str, str],
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget (ints or percentages such as ``"50%"``)."""
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def config_map(name: str, namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
    """A ConfigMap with string data."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": dict(data),
    }


def lease(
    name: str,
    namespace: str,
    *,
    holder: str | None = None,
    duration_seconds: int = 15,
) -> dict[str, Any]:
    """A coordination.k8s.io/v1 Lease, held by ``holder`` if given."""
    spec: dict[str, Any] = {"leaseDurationSeconds": duration_seconds}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
