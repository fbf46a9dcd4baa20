"""What a series' labels say about a slice: node, pod, identity, model and size.

The file reader here and the Prometheus source
(:mod:`migscope.analyzer._intake.stats_promql`) must read labels the same way, or the same
history would give two different reports; both take these helpers and constants.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeAlias

from migscope.analyzer._intake.dialect.names import MIB
from migscope.analyzer._model import Holder, SliceInfo, SliceKey
from migscope.core import (
    GPU_UUID,
    GpuModel,
    UnknownGpuError,
    UnknownProfileError,
    find_model,
    model_for_name,
)

DEFAULT_NODE = "unknown"
"""Node name for series that carry no node label (a scrape saved straight from /metrics)."""

NODE_LABELS = ("node", "kubernetes_node", "Hostname", "hostname", "instance")
"""Where the node is read from, first set wins: migscope's ServiceMonitor sets ``node``;
``kubernetes_node`` is what Prometheus' Kubernetes discovery is commonly relabelled to
(``__meta_kubernetes_pod_node_name``): the node of the scraped exporter pod, named by the
cluster, so it is read before the exporter's own ``Hostname``, which an older dcgm-exporter
without ``NODE_NAME`` fills with its pod's name (:func:`exporter_pod_name`)."""

_DAEMONSET_SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"
EXPORTER_POD = re.compile(rf"(?:.*-)?dcgm-exporter-{_DAEMONSET_SUFFIX}")
"""A dcgm-exporter DaemonSet pod's name: ``<daemonset>-<5 characters>``, the DaemonSet named
``dcgm-exporter`` or ending so (``nvidia-dcgm-exporter`` of the GPU Operator, the Helm chart's
``<release>-dcgm-exporter``), the suffix from the alphabet Kubernetes draws generated names
from (no vowels, no 0, 1, 3: ``tl46n``, ``xpn6b``)."""


def exporter_pod_name(node: str) -> bool:
    """Whether a node name is really a dcgm-exporter pod's name (:data:`EXPORTER_POD`).

    Why: dcgm-exporter's ``Hostname`` is ``NODE_NAME`` when set, else the container's host
    name, which in a pod is the pod's name (``nvidia-dcgm-exporter-tl46n``); a plan for that
    "node" names a node that does not exist. The pod's own labels (``pod``,
    ``kubernetes_pod_name``) are not taken as a node either: they name pods.
    """
    return EXPORTER_POD.fullmatch(node) is not None


NAMESPACE_LABELS = ("exported_namespace", "namespace", "pod_namespace")
"""Where a pod's namespace is read from, first set wins (``exported_*`` without honor_labels)."""

POD_LABELS = ("exported_pod", "pod", "pod_name")
"""Where a pod's name is read from, first set wins."""

CLAIM_LABELS = ("exported_dra_claim_name", "dra_claim_name", "claim")
"""Where the ResourceClaim holding a slice through DRA is named, first set wins:
dcgm-exporter's ``dra_claim_name`` (4.6.0-4.8.3 and later, with ``KUBERNETES_ENABLE_DRA``),
its ``exported_`` form should a scrape config rename it, or migscope's ``claim`` on
``migscope_{mig,gpu}_pod_info``."""

CLAIM_NAMESPACE_LABELS = ("exported_dra_claim_namespace", "dra_claim_namespace", "claim_namespace")
"""Where that claim's namespace is read from, first set wins."""

HOLDER_LABELS = (*NAMESPACE_LABELS, *POD_LABELS, *CLAIM_NAMESPACE_LABELS, *CLAIM_LABELS)
"""Every label :func:`holder_of` reads: what a server aggregates by to keep holders apart."""

GPU_UUID_LABELS = (GPU_UUID, "uuid")
"""Where a migscope series names its GPU's UUID, first set wins: ``gpu_uuid`` on every family
(issue 13), or ``uuid`` on the ``migscope_gpu_*`` series an older exporter recorded, so that
history from before the rename still finds its GPUs' models."""

SliceId: TypeAlias = tuple[SliceKey, str]
"""A slice as the readers group it: its key and what tells two instances of it apart.

The second part is the MIG UUID (migscope; "" when the series do not carry one) or the
profile (dcgm-exporter). :class:`SliceKey` itself stays what the report shows. The file
reader here and the Prometheus source group the same way.
"""


def node_of(labels: Mapping[str, str], *, default: str = DEFAULT_NODE) -> str:
    """The node a series belongs to: the first of :data:`NODE_LABELS` that is set."""
    for name in NODE_LABELS:
        value = labels.get(name, "")
        if value:
            return value
    return default


def gpu_uuid_of(labels: Mapping[str, str]) -> str:
    """The GPU UUID a migscope series names (:data:`GPU_UUID_LABELS`); "" when none."""
    for name in GPU_UUID_LABELS:
        value = labels.get(name)
        if value:
            return value
    return ""


def pod_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """``(namespace, pod)`` named by a series' labels, or None when no pod is named."""
    pod = next((labels[n] for n in POD_LABELS if labels.get(n)), "")
    if not pod:
        return None
    namespace = next((labels[n] for n in NAMESPACE_LABELS if labels.get(n)), "")
    return namespace, pod


def _first(labels: Mapping[str, str], names: tuple[str, ...]) -> str:
    return next((labels[n] for n in names if labels.get(n)), "")


def holder_of(labels: Mapping[str, str]) -> Holder | None:
    """Who a series says held the slice: its pod, its DRA claim, or both; None for nobody.

    A series with a claim is held even when it names no pod (dcgm-exporter's DRA series may
    lack the pod labels, NVIDIA/dcgm-exporter#718): the holder is then
    ``(claim namespace, "", claim)``. A pod whose namespace is not the claim's is not the
    claim's holder (a pod can only use claims of its own namespace): it is the scraped
    exporter's own pod, which Prometheus adds as a target label when the workload's pod
    label is missing, and it is dropped so that no wrong pod is named.
    """
    pod = _first(labels, POD_LABELS)
    namespace = _first(labels, NAMESPACE_LABELS)
    claim = _first(labels, CLAIM_LABELS)
    if not claim:
        return (namespace, pod) if pod else None
    claim_namespace = _first(labels, CLAIM_NAMESPACE_LABELS) or namespace
    if namespace and claim_namespace != namespace:
        pod = ""
    return claim_namespace, pod, claim


def parse_int(text: str | None) -> int | None:
    """A label value as an integer, or None when it is missing, empty or not a number."""
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def catalogue_model(key: str | None, name: str | None) -> GpuModel | None:
    """The catalogue model for a migscope ``model`` key, else for an NVML name."""
    if key:
        try:
            return find_model(key)
        except UnknownGpuError:
            pass
    return model_for_name(name) if name else None


def profile_bytes(model: GpuModel | None, profile: str) -> float | None:
    """The catalogue's memory size of ``profile`` on ``model``, bytes, or None."""
    if model is None:
        return None
    try:
        return float(model.profile(profile).memory_mib * MIB)
    except UnknownProfileError:
        return None


def migscope_slice_info(
    ident: SliceId, labels: Mapping[str, str], model: GpuModel | None
) -> SliceInfo:
    """What a ``migscope_mig_info`` label set says a slice is (both sources read it so)."""
    return SliceInfo(
        key=ident[0],
        model=model.key if model is not None else None,
        profile=labels.get("profile", ""),
        mig_uuid=ident[1] or labels.get("mig_uuid") or None,
        placement_start=parse_int(labels.get("placement_start")),
    )
