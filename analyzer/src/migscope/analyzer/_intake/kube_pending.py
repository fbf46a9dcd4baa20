"""Pods waiting for MIG slices, read from the Kubernetes API: demand the history cannot show.

A pod that could not be scheduled never held a slice, so no exporter ever saw it; yet it is
the most urgent demand there is. Under the device plugin's ``mixed`` strategy each pod asks
for ``nvidia.com/mig-<profile>`` by name, so the profile and count are in its spec. This
module lists the pods in phase ``Pending`` that no node has taken yet (``spec.nodeName``
empty: a pod already bound is only pulling images) and adds up their MIG requests.

What a pod asks for is what the scheduler sees: the larger of the sum over its containers
and the largest init container, per resource (Kubernetes' effective request); for extended
resources ``limits`` must equal ``requests``, and ``requests`` may be left out, so either is
read. Pods of the ``single`` strategy ask for ``nvidia.com/gpu`` and say nothing about the
profile: they are counted and reported, not planned.

The API is read through :mod:`migscope.kube` (the one package that imports the ``kubernetes``
client); its lists are paginated so that a cluster with many pending pods is read in bounded
pieces.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from migscope.kube import Kube

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
PAGE_SIZE = 500


@dataclass(frozen=True)
class PendingDemand:
    """What the unscheduled pods ask for.

    Attributes:
        profiles: ``{profile: instances}`` over all unscheduled pods (``mixed`` strategy).
        pods: ``namespace/pod`` of every unscheduled pod asking for a MIG profile.
        whole_gpu_pods: ``namespace/pod`` of those asking for ``nvidia.com/gpu`` only
            (``single`` strategy, or a full GPU): their profile is unknown.
    """

    profiles: Mapping[str, int] = field(default_factory=dict)
    pods: tuple[str, ...] = ()
    whole_gpu_pods: tuple[str, ...] = ()

    def as_pending(self) -> list[tuple[str, int]]:
        """``(profile, count)`` pairs, as :func:`~migscope.analyzer._pipeline.analyze` takes."""
        return sorted(self.profiles.items())

    def notes(self) -> list[str]:
        """Lines for the report."""
        out = []
        if self.pods:
            asked = ", ".join(f"{p}×{n}" for p, n in sorted(self.profiles.items()))
            out.append(f"{len(self.pods)} unscheduled pod(s) ask for MIG slices: {asked}")
        if self.whole_gpu_pods:
            out.append(
                f"{len(self.whole_gpu_pods)} unscheduled pod(s) ask for nvidia.com/gpu: not "
                "planned (under the single strategy the profile is not in the request)"
            )
        return out


def _quantity(value: Any) -> int:
    """An extended-resource quantity (a whole number; ``"2"``, ``2``)."""
    try:
        number = float(str(value))
    except ValueError:
        return 0
    return int(number) if number > 0 else 0


def _container_requests(container: Mapping[str, Any]) -> Counter[str]:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    out: Counter[str] = Counter()
    for name in set(requests) | set(limits):
        if name.startswith(MIG_RESOURCE_PREFIX) or name == WHOLE_GPU_RESOURCE:
            out[name] = _quantity(requests.get(name, limits.get(name)))
    return out


def pod_mig_requests(pod: Mapping[str, Any]) -> Counter[str]:
    """A pod's effective GPU requests: ``{resource name: count}`` (API JSON form of the pod).

    The effective request per resource is the larger of the containers' sum and the largest
    init container (sidecars, restartable init containers, are counted with the containers).
    """
    spec = pod.get("spec") or {}
    total: Counter[str] = Counter()
    for container in spec.get("containers") or []:
        total.update(_container_requests(container))
    init_peak: Counter[str] = Counter()
    for container in spec.get("initContainers") or []:
        asked = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            total.update(asked)
            continue
        for name, count in asked.items():
            init_peak[name] = max(init_peak[name], count)
    for name, count in init_peak.items():
        total[name] = max(total[name], count)
    return +total


def _unscheduled(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return not spec.get("nodeName") and not meta.get("deletionTimestamp")


def pending_demand(pods: Iterable[Mapping[str, Any]]) -> PendingDemand:
    """Add up the MIG requests of the unscheduled pods among ``pods``."""
    profiles: Counter[str] = Counter()
    mig_pods: list[str] = []
    whole: list[str] = []
    for pod in pods:
        if not _unscheduled(pod):
            continue
        meta = pod.get("metadata") or {}
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        asked = pod_mig_requests(pod)
        mig = {
            k.removeprefix(MIG_RESOURCE_PREFIX): n
            for k, n in asked.items()
            if k != WHOLE_GPU_RESOURCE
        }
        if mig:
            profiles.update(mig)
            mig_pods.append(name)
        elif asked.get(WHOLE_GPU_RESOURCE):
            whole.append(name)
    return PendingDemand(dict(profiles), tuple(sorted(mig_pods)), tuple(sorted(whole)))


def list_pending_pods(kube: Kube) -> Iterator[Mapping[str, Any]]:
    """Every pod in phase Pending, all namespaces, a page at a time, as API JSON dicts.

    Raises:
        KubeError: the API refused (status and reason) or could not be reached.
    """
    yield from kube.list_pods(field_selector="status.phase=Pending", page_size=PAGE_SIZE)
