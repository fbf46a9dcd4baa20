"""Resolve the devices pods hold through DRA to the GPUs and GPU instances the sampler reads.

The kubelet names a DRA device by driver, pool and device name, never by UUID
(:mod:`migscope.exporter._dra`). For NVIDIA's driver the name says where the device
is, and the sampler's snapshot says what is there now:

* ``gpu-<minor>``: the GPU whose ``nvmlDeviceGetMinorNumber`` is ``<minor>`` (the minor, not
  the NVML index: the driver names GPUs by ``/dev/nvidia<minor>``);
* a MIG name (canonical or legacy): on that GPU, the GPU instance whose GI profile id and
  placement start (``nvmlGpuInstanceGetInfo``: ``profileId``, ``placement.start``) are the
  name's. One GPU cannot hold two GPU instances at one start slot, so at most one matches; a
  GI of the same profile at another start is another device. The profile part of a canonical
  name is not compared (the driver's own parser ignores it too).

Snapshots carry placements in memory slices (``migscope_mig_info``), NVML in the driver's
units (thirds of a memory slice on the RTX PRO 6000): the name's start is converted with the
GPU's catalogue model. A device that matches nothing (a name in no known form, a GPU minor or
GI not on the node, a GI whose placement NVML did not say) is left unattributed and logged
once, unless it resolves on the next snapshot: a GI the DRA driver just created is seen by the
sampler within one cycle, and may be listed by the kubelet first.

Everything is computed from two immutable inputs (a snapshot and the holders of one kubelet
answer) and cached until either changes, so a scrape pays for it once per change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from migscope.core import CatalogueError, DeviceName, find_model
from migscope.exporter._dra import DraHolder, DraHolders
from migscope.exporter._snapshot import GpuReading, MigReading, Snapshot

log = logging.getLogger(__name__)

Attribution = Literal["device-plugin", "dra-device-name", "dra-cdi"]


@dataclass(frozen=True, order=True, slots=True)
class DraOwner:
    """A container holding a device through a ResourceClaim, as the collector labels it.

    ``resource_name`` is the DRA driver's name (``gpu.nvidia.com``), ``attribution`` how the
    device was resolved: ``dra-device-name`` (from ``device_name``) or ``dra-cdi`` (from the
    device name inside a CDI id).
    """

    namespace: str
    pod: str
    container: str
    resource_name: str
    claim: str
    claim_namespace: str
    attribution: Attribution


@dataclass(frozen=True)
class Resolution:
    """What one snapshot and one set of holders resolve to.

    Attributes:
        owners: Device UUID (``GPU-…``, ``MIG-…``) → its DRA owners, sorted.
        unresolved: ``(holder, reason)`` for each holder that matched no device.
    """

    owners: Mapping[str, tuple[DraOwner, ...]]
    unresolved: tuple[tuple[DraHolder, str], ...]


def _start_in_slices(gpu: GpuReading, nvml_start: int) -> int | None:
    """The name's NVML placement start in memory slices, as the snapshot has it."""
    if gpu.model is None:
        return nvml_start  # the backend kept NVML's units too
    try:
        unit = find_model(gpu.model).placement_unit
    except CatalogueError:
        return nvml_start
    return nvml_start // unit if nvml_start % unit == 0 else None


def _find(snapshot: Snapshot, name: DeviceName) -> tuple[str | None, str]:
    """The UUID of the device ``name`` stands for, or None and why not."""
    gpu = next((g for g in snapshot.gpus if g.minor == name.minor), None)
    if gpu is None:
        minors = sorted(g.minor for g in snapshot.gpus if g.minor is not None)
        return None, f"no GPU with minor number {name.minor} on the node (minors: {minors})"
    if name.kind == "gpu":
        return gpu.uuid, ""
    assert name.profile_id is not None
    assert name.placement_start is not None
    start = _start_in_slices(gpu, name.placement_start)
    found: MigReading | None = None
    unknown = False
    for inst in gpu.instances:
        if inst.profile_id is None or inst.placement_start is None:
            unknown = True
        elif inst.profile_id == name.profile_id and inst.placement_start == start:
            found = inst
    if found is not None:
        return found.mig_uuid, ""
    why = (
        f"GPU {gpu.index} (minor {name.minor}) has no GPU instance of profile id "
        f"{name.profile_id} at placement start {name.placement_start}"
    )
    if unknown:
        why += " among those whose placement NVML reported (some it did not: privileges?)"
    return None, why


def resolve(snapshot: Snapshot | None, holders: Sequence[DraHolder]) -> Resolution:
    """Match every holder's device to a GPU or GPU instance of ``snapshot``."""
    owners: dict[str, set[DraOwner]] = {}
    unresolved: list[tuple[DraHolder, str]] = []
    for holder in holders:
        name, how = holder.parsed()
        if name is None:
            unresolved.append(
                (holder, "the device name is in no form NVIDIA's driver emits, nor is any CDI id")
            )
            continue
        if snapshot is None:
            unresolved.append((holder, "no sample of the GPUs yet"))
            continue
        uuid, why = _find(snapshot, name)
        if uuid is None:
            unresolved.append((holder, why))
            continue
        owner = DraOwner(
            holder.namespace,
            holder.pod,
            holder.container,
            holder.driver,
            holder.claim,
            holder.claim_namespace,
            how,
        )
        owners.setdefault(uuid, set()).add(owner)
    return Resolution(
        {uuid: tuple(sorted(found)) for uuid, found in sorted(owners.items())}, tuple(unresolved)
    )


class DraResolver:
    """:func:`resolve`, cached per (snapshot, holders), logging each unresolved device once.

    A device is logged when it is still unresolved on a second snapshot (a GI created after
    the kubelet listed its claim shows from the sampler's next cycle), and again only after it
    resolved in between.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[Snapshot | None, DraHolders, object] | None = None
        self._merged: Mapping[str, Sequence[object]] = {}
        self._pending: dict[tuple[str, str, str], float | None] = {}
        self._logged: set[tuple[str, str, str]] = set()

    def merged(
        self,
        snapshot: Snapshot | None,
        holders: DraHolders,
        base: Mapping[str, Sequence[object]],
    ) -> Mapping[str, Sequence[object]]:
        """``base`` (device-plugin owners) with the DRA owners of ``holders`` added."""
        if not holders.holders:
            return base
        with self._lock:
            key = (snapshot, holders, base)
            if self._key is not None and all(a is b for a, b in zip(self._key, key, strict=True)):
                return self._merged
            resolution = resolve(snapshot, holders.holders)
            self._note(snapshot, resolution)
            merged: dict[str, Sequence[object]] = dict(base)
            for uuid, owners in resolution.owners.items():
                merged[uuid] = (*base.get(uuid, ()), *owners)
            self._key, self._merged = key, merged
            return merged

    def _note(self, snapshot: Snapshot | None, resolution: Resolution) -> None:
        taken = None if snapshot is None else snapshot.taken_at
        now_unresolved: set[tuple[str, str, str]] = set()
        for holder, why in resolution.unresolved:
            device = (holder.driver, holder.pool, holder.device)
            now_unresolved.add(device)
            first = self._pending.setdefault(device, taken)
            if device in self._logged or taken is None or first == taken:
                continue
            self._logged.add(device)
            log.warning(
                "pod attribution: DRA device %s/%s/%s (claim %s/%s, pod %s/%s) not attributed: "
                "%s; its series carry no pod",
                holder.driver,
                holder.pool,
                holder.device,
                holder.claim_namespace,
                holder.claim,
                holder.namespace,
                holder.pod,
                why,
            )
        for device in list(self._pending):
            if device not in now_unresolved:
                del self._pending[device]
                self._logged.discard(device)
