"""State and physics of one simulated GPU: its MIG layout over time, memory, power, energy.

This module knows nothing of NVML's calling conventions (that is :mod:`migscope.sim._nvml`);
it answers "what is true of this GPU at simulated time ``t``". The layout is a list of
*segments*: the instances in force from ``begin`` until ``end``, when a re-partition (a
scheduled fault, or MIG Manager in the story being simulated) replaces them. Keeping past
segments lets counters stay exact across a re-partition: the energy counter at ``t`` sums
every instance's activity over the part of its life before ``t``.

Memory model (v2 semantics: ``used`` excludes ``reserved``):

- Whole GPU: ``reserved`` is the driver's share, measured on the H200 as 644,939,776 B of
  150,754,820,096 (``fixtures/h200/nvml_probe.json``); other models use the same ratio.
- MIG instance: 1 MiB reserved, as every empty 1g.5gb showed ``1MiB / 4864MiB`` on a real
  A100 (``reference/samples/nvidia-smi-a100-pcie-40gb-smi.txt``).
- Parent of a MIG GPU (NVML's privileged aggregate): the whole-GPU total and reserved, with
  ``used`` the sum over instances. NVML documents an aggregate but not its arithmetic; this
  is our model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from migscope.core import GiProfile, GpuModel
from migscope.sim._ids import derive_seed, gi_id_for, mig_uuid, stable_unit
from migscope.sim._power import PowerModel
from migscope.sim._workloads import COMPONENTS, Workload, WorkloadSample

MIB = 1 << 20
MIG_RESERVED_BYTES = MIB
_H200_TOTAL = 150_754_820_096
_H200_RESERVED = 644_939_776
_ZERO = (0.0,) * len(COMPONENTS)


def reserved_bytes(model: GpuModel) -> int:
    """Driver-reserved framebuffer of a whole ``model`` GPU (exact for the H200)."""
    if model.memory_total_bytes == _H200_TOTAL:
        return _H200_RESERVED
    return round(model.memory_total_bytes * _H200_RESERVED / _H200_TOTAL / MIB) * MIB


@dataclass(frozen=True)
class PodOwner:
    """The Kubernetes container that holds a GPU or MIG device (for the kubelet fake)."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class MemoryReading:
    """Framebuffer figures in bytes, v2 style: ``total = reserved + used + free``."""

    total: int
    reserved: int
    used: int

    @property
    def free(self) -> int:
        """What is neither reserved nor used."""
        return max(0, self.total - self.reserved - self.used)


class SimInstance:
    """One GPU instance with the single compute instance that spans it: one MIG device.

    Attributes:
        gpu: The parent GPU.
        profile: Its GI profile from the catalogue.
        start: Placement start, in memory slices.
        gi_id: NVML GPU-instance id (:func:`migscope.sim._ids.gi_id_for`).
        ci_id: Compute-instance id: always 0, the one CI created with ``-C``.
        uuid: ``MIG-<uuid>``, new for every layout generation.
        workload: What runs on it.
        owner: The pod holding it, or None.
        generation: Layout generation (0 = the scenario's initial layout).
        weight: Its share of the GPU's compute slices, for GPU-wide activity and power.
        pids: Process ids of its workload's processes.
    """

    def __init__(
        self,
        gpu: SimGpu,
        profile: GiProfile,
        start: int,
        workload: Workload,
        owner: PodOwner | None,
        generation: int,
    ) -> None:
        self.gpu = gpu
        self.profile = profile
        self.start = start
        self.gi_id = gi_id_for(gpu.model.memory_slices, start, profile.memory_slices)
        self.ci_id = 0
        self.uuid = mig_uuid(gpu.seed, gpu.uuid, self.gi_id, self.ci_id, generation)
        self.workload = workload
        self.owner = owner
        self.generation = generation
        self.weight = profile.compute_slices / gpu.model.compute_slices
        self.memory_total = profile.memory_mib * MIB
        base = 1000 + derive_seed(gpu.seed, gpu.node, gpu.index, self.gi_id, generation) % 3_000_000
        self.pids = tuple(base + k for k in range(workload.processes))
        self.segment: Segment | None = None
        self.begin_counters: tuple[float, ...] = _ZERO
        self.end = math.inf
        self.stale_error = 0

    def attach(self, segment: Segment) -> None:
        """Join ``segment``; the first one is its birth: remember the counters then.

        An instance that outlives a change of its GPU's layout (another GI created or
        destroyed beside it, as the DRA driver does per claim) joins the next segment too,
        keeping its identity; ``segment`` stays the one it was born in.
        """
        if self.segment is None:
            self.segment = segment
            self.begin_counters = self.counters(segment.begin)
            segment.bases[id(self)] = self.begin_counters
        else:
            segment.bases[id(self)] = self.counters(segment.begin)

    @property
    def dra_device_name(self) -> str:
        """The name NVIDIA's DRA driver (v25.12.0+) gives this GI: ``ToCanonicalName``.

        ``gpu-<minor>-mig-<profile, dots removed, RFC 1123>-<GI profile id>-<start>``, the
        start in NVML's units (docs/dra-sources.md §4).
        """
        pname = re.sub(r"[^a-z0-9-.]", "-", self.profile.name.replace(".", "").lower())
        pname = pname.strip("-").rstrip(".")
        pid = self.profile.nvml_id
        if pid is None:  # as migscope.sim._nvml_mig.profile_id answers
            pid = 100 + self.profile.nvml_index
        start, _ = self.gpu.model.nvml_span(self.start, self.profile.memory_slices)
        return f"gpu-{self.gpu.minor}-mig-{pname}-{pid}-{start}"

    def __repr__(self) -> str:
        return f"SimInstance({self.profile.name}@{self.start}, gi={self.gi_id}, {self.uuid})"

    def alive(self, t: float) -> bool:
        """Whether the instance exists at ``t`` (from its birth until destroyed or replaced)."""
        seg = self.segment
        return seg is not None and seg.begin <= t < self.end

    def memory(self, t: float) -> MemoryReading:
        """The instance's framebuffer at ``t``."""
        used = self.workload.memory_at(t, self.memory_total - MIG_RESERVED_BYTES)
        return MemoryReading(self.memory_total, MIG_RESERVED_BYTES, used)

    def counters(self, t: float) -> tuple[float, ...]:
        """Activity integrals relative to the instance (what its GPM samples hold)."""
        return self.workload.cumulative_vector(t)

    def sample(self, t: float) -> WorkloadSample:
        """Ground truth at ``t``: activity ratios, memory used, processes.

        For tests, and for feeding the analyzer without going through an exporter.
        """
        return self.workload.sample(t, self.memory_total - MIG_RESERVED_BYTES)


@dataclass(eq=False)
class Segment:
    """The instances of one layout, in force over ``[begin, end)``.

    ``stale_error`` is the NVML return code that calls on this segment's MIG handles get
    after ``end`` (set by the re-partition that ends it). ``bases`` holds each instance's
    activity counters at ``begin`` (by ``id``), so sums over segments telescope for an
    instance that lives through several.
    """

    begin: float
    instances: tuple[SimInstance, ...]
    generation: int
    end: float = math.inf
    stale_error: int = 0
    bases: dict[int, tuple[float, ...]] = field(default_factory=dict)


class SimGpu:
    """One physical GPU of a simulated node.

    Args:
        node: Node name (part of every seed).
        index: NVML index on the node.
        model: Catalogue model.
        uuid: ``GPU-<uuid>``.
        pci_bus_id: ``00000000:18:00.0``.
        mig_enabled: Current MIG mode.
        mig_pending: Pending MIG mode (differs until the next GPU reset).
        power: Idle/max watts.
        seed: Scenario seed.
        workload: What runs on the whole GPU when MIG is disabled.
        owner: The pod holding the whole GPU when MIG is disabled.
        name: NVML device name; the catalogue's first (current drivers') name by default.
        pci_device_id: Packed PCI id (``0x233510DE``); the model's first by default.
        minor: ``/dev/nvidia<minor>`` number (``nvmlDeviceGetMinorNumber``); the index by
            default. Tests set another to tell minor from index apart.
    """

    def __init__(
        self,
        *,
        node: str,
        index: int,
        model: GpuModel,
        uuid: str,
        pci_bus_id: str,
        mig_enabled: bool,
        mig_pending: bool,
        power: PowerModel,
        seed: int,
        workload: Workload | None = None,
        owner: PodOwner | None = None,
        name: str | None = None,
        pci_device_id: int | None = None,
        minor: int | None = None,
    ) -> None:
        self.node = node
        self.index = index
        self.minor = index if minor is None else minor
        self.model = model
        self.uuid = uuid
        self.pci_bus_id = pci_bus_id
        self.mig_enabled = mig_enabled
        self.mig_pending = mig_pending
        self.power = power
        self.seed = seed
        self.workload = workload
        self.owner = owner
        self.name = name or model.names[0]
        self.pci_device_id = pci_device_id or model.pci_device_ids[0]
        self.reserved = reserved_bytes(model)
        self.lost_at: float | None = None
        self.segments: list[Segment] = [Segment(0.0, (), 0)]
        self.energy_offset_mj = int(1e6 + 9e8 * stable_unit(seed, node, index, "energy"))
        self.temperature_offset = 4.0 * stable_unit(seed, node, index, "temperature")

    def __repr__(self) -> str:
        mig = "MIG" if self.mig_enabled else "no MIG"
        return f"SimGpu({self.node}#{self.index} {self.model.key}, {mig})"

    # -- layout ---------------------------------------------------------------------------

    def next_generation(self) -> int:
        """Generation number the next layout will get."""
        return len(self.segments)

    def set_layout(self, instances: Sequence[SimInstance]) -> None:
        """Install the initial layout (before any time has passed)."""
        first = Segment(0.0, tuple(sorted(instances, key=lambda i: i.gi_id)), 0)
        for inst in first.instances:
            inst.attach(first)
        self.segments = [first]

    def schedule_layout(
        self, at: float, instances: Sequence[SimInstance], stale_error: int
    ) -> None:
        """Replace the layout at simulated time ``at`` (seconds since the start).

        Raises:
            ValueError: MIG is disabled, or ``at`` is not after the last layout's start
                (layouts are scheduled in time order).
        """
        if not self.mig_enabled:
            raise ValueError(f"GPU {self.index} has MIG disabled: it has no layout to change")
        last = self.segments[-1]
        if at <= last.begin:
            raise ValueError(
                f"layout change at {at:g}s must come after the previous one ({last.begin:g}s)"
            )
        last.end, last.stale_error = at, stale_error
        for gone in set(last.instances) - set(instances):
            gone.end, gone.stale_error = at, stale_error
        nxt = Segment(at, tuple(sorted(instances, key=lambda i: i.gi_id)), len(self.segments))
        for inst in nxt.instances:
            inst.attach(nxt)
        self.segments.append(nxt)

    def add_instance(self, at: float, instance: SimInstance) -> None:
        """Create one GPU instance at ``at``, beside the others (DynamicMIG's prepare).

        The other instances keep their GI ids, UUIDs and handles, as they do on a real GPU
        when ``nvmlDeviceCreateGpuInstanceWithPlacement`` adds one.

        Raises:
            ValueError: as :meth:`schedule_layout`, or a GI already at that placement.
        """
        current = self.segments[-1].instances
        if any(i.gi_id == instance.gi_id for i in current):
            raise ValueError(f"GPU {self.index} already has GPU instance {instance.gi_id}")
        self.schedule_layout(at, (*current, instance), 0)

    def remove_instance(self, at: float, gi_id: int, stale_error: int) -> SimInstance:
        """Destroy GPU instance ``gi_id`` at ``at`` (DynamicMIG's unprepare); others stay.

        Calls on its handles get ``stale_error`` from then on.

        Raises:
            ValueError: no such GPU instance, or as :meth:`schedule_layout`.
        """
        current = self.segments[-1].instances
        gone = next((i for i in current if i.gi_id == gi_id), None)
        if gone is None:
            raise ValueError(f"GPU {self.index} has no GPU instance {gi_id}")
        self.schedule_layout(at, tuple(i for i in current if i is not gone), stale_error)
        return gone

    def segment_at(self, t: float) -> Segment:
        """The layout in force at ``t``."""
        for seg in reversed(self.segments):
            if seg.begin <= t:
                return seg
        return self.segments[0]

    def instances_at(self, t: float) -> tuple[SimInstance, ...]:
        """MIG devices at ``t`` in NVML's MIG-device index order (ascending GI id).

        Real ``nvidia-smi -L`` lists MIG devices in GI-id order: GI 2 (3g) then 7, 8, 9 on
        the H100 PCIe sample, GI 2, 3, 9 on the A100 one.
        """
        return self.segment_at(t).instances if self.mig_enabled else ()

    def lose(self, at: float) -> None:
        """Make the GPU fall off the bus at ``at`` (an earlier loss wins)."""
        self.lost_at = at if self.lost_at is None else min(self.lost_at, at)

    def is_lost(self, t: float) -> bool:
        """Whether every call on the GPU fails with GPU_IS_LOST at ``t``."""
        return self.lost_at is not None and t >= self.lost_at

    # -- activity, power, energy ----------------------------------------------------------

    def counters(self, t: float) -> tuple[float, ...]:
        """GPU-wide activity integrals at ``t`` (a GPU-level GPM sample's content).

        MIG: each instance's integral over its lifetime up to ``t``, weighted by its share
        of the compute slices.
        """
        if not self.mig_enabled:
            return self.workload.cumulative_vector(t) if self.workload else _ZERO
        total = [0.0] * len(COMPONENTS)
        for seg in self.segments:
            if seg.begin >= t:
                break
            upto = min(t, seg.end)
            for inst in seg.instances:
                now, w = inst.counters(upto), inst.weight
                then = seg.bases.get(id(inst), inst.begin_counters)
                for k in range(len(total)):
                    total[k] += w * (now[k] - then[k])
        return tuple(total)

    def _activity(self, t: float) -> float:
        """GPU-wide integral of graphics activity: ``counters(t)[0]``, computed alone."""
        if t <= 0:
            return 0.0
        if not self.mig_enabled:
            return self.workload.cumulative(t) if self.workload else 0.0
        total = 0.0
        for seg in self.segments:
            if seg.begin >= t:
                break
            upto = min(t, seg.end)
            for inst in seg.instances:
                base = seg.bases.get(id(inst), inst.begin_counters)[0]
                total += inst.weight * (inst.workload.cumulative(upto) - base)
        return total

    def mean_activity(self, t: float, window: float) -> float:
        """Average GPU-wide graphics activity over the ``window`` seconds before ``t``."""
        start = max(0.0, t - window)
        if t <= start:
            return self._level(t)
        return (self._activity(t) - self._activity(start)) / (t - start)

    def _level(self, t: float) -> float:
        if not self.mig_enabled:
            return self.workload.level(t) if self.workload else 0.0
        return sum(i.weight * i.workload.level(t) for i in self.instances_at(t))

    def power_mw(self, t: float) -> int:
        """Board power in mW, averaged over the last second.

        That is what Ampere-and-newer NVML reports (``nvmlDeviceGetPowerUsage``: "1 sec
        average", except on GA100).
        """
        activity = self.mean_activity(t, 1.0)
        watts = self.power.idle_watts + self.power.dynamic_watts * activity
        return round(watts * 1000)

    def energy_mj(self, t: float) -> int:
        """Energy since "driver load" in mJ: an offset plus the exact integral of power."""
        joules = self.power.idle_watts * t + self.power.dynamic_watts * self._activity(t)
        return self.energy_offset_mj + int(joules * 1000)

    def temperature_c(self, t: float) -> int:
        """Die temperature: 30 °C plus up to 45 °C following the last minute's activity."""
        return round(30.0 + self.temperature_offset + 45.0 * self.mean_activity(t, 60.0))

    def utilization(self, t: float) -> tuple[int, int]:
        """``(gpu %, memory %)`` over the last second, for a GPU without MIG."""
        if self.workload is None or t <= 0:
            return 0, 0
        start = max(0.0, t - 1.0)
        now, then = self.workload.cumulative_vector(t), self.workload.cumulative_vector(start)
        span = t - start
        gpu = (now[0] - then[0]) / span
        dram = (now[4] - then[4]) / span
        return round(100 * gpu), round(100 * dram)

    # -- memory ---------------------------------------------------------------------------

    def memory(self, t: float) -> MemoryReading:
        """The whole GPU's framebuffer (the aggregate over instances when MIG is on)."""
        total = self.model.memory_total_bytes
        if self.mig_enabled:
            used = sum(i.memory(t).used for i in self.instances_at(t))
        elif self.workload is not None:
            used = self.workload.memory_at(t, total - self.reserved)
        else:
            used = 0
        return MemoryReading(total, self.reserved, used)

    def sample(self, t: float) -> WorkloadSample | None:
        """Ground truth of the whole-GPU workload at ``t``.

        None on a MIG GPU: ask its instances.
        """
        if self.mig_enabled or self.workload is None:
            return None
        return self.workload.sample(t, self.model.memory_total_bytes - self.reserved)

    def whole_pids(self) -> tuple[int, ...]:
        """Process ids of the whole-GPU workload (MIG disabled)."""
        if self.workload is None:
            return ()
        base = 1000 + derive_seed(self.seed, self.node, self.index, "whole") % 3_000_000
        return tuple(base + k for k in range(self.workload.processes))
