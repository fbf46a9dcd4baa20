r"""Devices a pod holds through Dynamic Resource Allocation, as the kubelet lists them.

Since Kubernetes 1.34 (GA and locked in 1.36) the kubelet's PodResources ``List`` reports the
devices of a container's ResourceClaims in ``dynamic_resources``: per claim its name and
namespace, and per allocated device ``driver_name``, ``pool_name``, ``device_name`` and the
CDI device ids the driver prepared. There is no device UUID: a consumer resolves the device
itself (docs/dra-sources.md §3). For NVIDIA's driver (``gpu.nvidia.com``) the device name
encodes where the device is, which is all the exporter needs (:func:`parse_device_name`):

* ``gpu-<minor>``: a whole GPU, by its ``/dev/nvidia<minor>`` minor number;
* ``gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>`` (driver v25.12.0 and later,
  static MIG and DynamicMIG alike: ``ToCanonicalName``), where ``<profile>`` is the profile
  name with its dots removed and made RFC 1123 (``1g.12gb`` -> ``1g12gb``,
  ``1g.10gb+me`` -> ``1g10gb-me``);
* ``gpu-<minor>-mig-<GI profile id>-<placement start>-<placement size>`` (v25.3 to v25.8,
  static MIG), e.g. ``gpu-1-mig-19-4-1``.

The two MIG forms have the same number of dash-separated parts, and the driver's own regex
(``^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$``) reads the older one as a profile called ``19``. The
form is decided here by the middle part instead: a profile name always contains a letter
(``1g12gb``), a GI profile id never does.

NVIDIA's CDI device ids are ``k8s.gpu.nvidia.com/claim=<claim UID>-<device name>``
(:func:`parse_cdi_device`): when ``device_name`` is empty or does not parse, the name is
taken from there.

Everything here is pure (no I/O, no gRPC: the collector imports it). What one answer may
cost is capped as the device-plugin map is: at most ``MAX_HOLDERS`` holders are kept, the
first in sorted order.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from migscope.core import NVIDIA_DRIVER, DeviceName, parse_device_name

if TYPE_CHECKING:  # the module itself stays free of protobuf and gRPC (runtime imports it)
    from migscope.exporter._podresources import api_pb2

#: DRA holders one answer may attribute: (container, device) pairs. A node has at most a few
#: dozen devices; a device is held by one claim, which a few containers may share.
MAX_HOLDERS = 1024

_CDI = re.compile(
    r"^k8s\.gpu\.nvidia\.com/claim="
    r"(?P<uid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"-(?P<device>.+)$"
)


def parse_cdi_device(cdi: str) -> tuple[str, str] | None:
    """``(claim UID, device name)`` of one of NVIDIA's CDI device ids; None for others."""
    match = _CDI.match(cdi.strip())
    return None if match is None else (match.group("uid"), match.group("device"))


@dataclass(frozen=True, order=True, slots=True)
class DraHolder:
    """One container holding one device through a ResourceClaim.

    Ordered so that holders sort into a stable order whatever the kubelet's.

    Attributes:
        namespace, pod, container: The container.
        claim: The ResourceClaim's name (``claim_name``).
        claim_namespace: Its namespace (the pod's).
        driver: ``driver_name`` (``gpu.nvidia.com``).
        pool: ``pool_name`` (NVIDIA's driver names the pool after the node).
        device: ``device_name``.
        cdi_devices: The claim resource's CDI device ids, sorted.
    """

    namespace: str
    pod: str
    container: str
    claim: str
    claim_namespace: str
    driver: str
    pool: str
    device: str
    cdi_devices: tuple[str, ...] = ()

    def parsed(self) -> tuple[DeviceName | None, Literal["dra-device-name", "dra-cdi"]]:
        """The device's name taken apart, and where it was read from.

        ``device_name`` first; when it is empty or does not parse, the device name inside a
        CDI id of this claim resource (a name the driver put there itself).
        """
        name = parse_device_name(self.device)
        if name is not None:
            return name, "dra-device-name"
        for cdi in self.cdi_devices:
            found = parse_cdi_device(cdi)
            if found is None:
                continue
            from_cdi = parse_device_name(found[1])
            if from_cdi is not None and (not self.device or found[1].endswith(self.device)):
                return from_cdi, "dra-cdi"
        return None, "dra-device-name"


@dataclass(frozen=True)
class DraHolders:
    """The DRA holders of one answer, sorted, and whether the cap cut some."""

    holders: tuple[DraHolder, ...] = ()
    cut: bool = False


class DraCollector:
    """Collects DRA holders pod by pod (the watcher decodes one pod at a time), within a cap.

    Args:
        drivers: DRA driver names to keep.
        max_holders: Holders kept: the first in sorted order, whatever the kubelet's order.

    Raises:
        ValueError: A cap below 1.
    """

    def __init__(
        self, *, drivers: Iterable[str] = (NVIDIA_DRIVER,), max_holders: int = MAX_HOLDERS
    ) -> None:
        if max_holders < 1:
            raise ValueError(f"max_holders must be >= 1, got {max_holders}")
        self._wanted = frozenset(drivers)
        self._max = max_holders
        self._found: set[DraHolder] = set()
        self._cut = False

    def add(self, pod: api_pb2.PodResources) -> None:
        """Take the holders of one pod."""
        for container in pod.containers:
            for claim in container.dynamic_resources:
                for res in claim.claim_resources:
                    if res.driver_name not in self._wanted:
                        continue
                    self._found.add(
                        DraHolder(
                            namespace=sys.intern(pod.namespace),
                            pod=pod.name,
                            container=sys.intern(container.name),
                            claim=claim.claim_name,
                            claim_namespace=sys.intern(claim.claim_namespace),
                            driver=sys.intern(res.driver_name),
                            pool=sys.intern(res.pool_name),
                            device=res.device_name,
                            cdi_devices=tuple(sorted(c.name for c in res.cdi_devices)),
                        )
                    )
                    if len(self._found) > 2 * self._max:
                        self._found = set(sorted(self._found)[: self._max])
                        self._cut = True

    def result(self) -> DraHolders:
        """The holders taken, sorted, and whether the cap cut some."""
        kept = sorted(self._found)
        cut = self._cut
        if len(kept) > self._max:
            kept, cut = kept[: self._max], True
        return DraHolders(tuple(kept), cut)


def collect_dra_holders(
    pods: Iterable[api_pb2.PodResources],
    *,
    drivers: Iterable[str] = (NVIDIA_DRIVER,),
    max_holders: int = MAX_HOLDERS,
) -> DraHolders:
    """Every (container, device) a ResourceClaim of ``drivers`` gives, within the cap.

    Args:
        pods: ``ListPodResourcesResponse.pod_resources``.
        drivers: DRA driver names to keep.
        max_holders: Holders kept: the first in sorted order, whatever the kubelet's order.

    Raises:
        ValueError: A cap below 1.
    """
    collector = DraCollector(drivers=drivers, max_holders=max_holders)
    for pod in pods:
        collector.add(pod)
    return collector.result()
