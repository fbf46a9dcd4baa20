"""What one sampling cycle saw: immutable readings the collector renders at scrape time.

The sampler thread builds a new :class:`Snapshot` per cycle and swaps it in atomically; a
scrape only reads the latest one, so a scrape never touches NVML, the kubelet or the network,
and never sees half of a cycle. ``None`` means "not available" (an unsupported call, the first
GPM sample, Ampere without DCGM) and is rendered as an absent series, never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Activity:
    """Engine activity ratios (0..1) averaged over the GPM window that ended this cycle.

    ``graphics`` is GPM's GRAPHICS_UTIL (DCGM 1001, "GR engine active"): the share of time
    any kernel ran, the figure that tells idle from busy. The others say how well the busy
    time used the slice. ``window_seconds`` is the span the ratios average (the time between
    the two GPM samples they come from): a change of load shows in full only that long after
    it happened, which is the lag of these series (None where the backend does not know it).
    """

    graphics: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor: float | None = None
    dram: float | None = None
    window_seconds: float | None = None


@dataclass(frozen=True)
class ActiveSeconds:
    """Activity integrated over time (``*_active_seconds_total``), as node_exporter counts CPU.

    Seconds of full activity since the exporter first saw the GPU or slice: the integral of
    the matching :class:`Activity` ratio, accumulated by the sampler from the same GPM
    windows, so ``rate()`` over any range is the exact mean activity over that range,
    whatever the scrape interval. None until the ratio has had a value once.
    """

    graphics: float | None = None
    sm_active: float | None = None
    tensor: float | None = None
    dram: float | None = None


@dataclass(frozen=True)
class MigProfileInfo:
    """One GPU-instance profile as the GPU's own driver reports it (``nvidia-smi mig -lgip``).

    Read from NVML (``nvmlDeviceGetGpuInstanceProfileInfo`` and
    ``nvmlDeviceGetGpuInstancePossiblePlacements``), not from migscope's catalogue: names,
    memory sizes and placements differ by driver, and the analyzer prefers what the GPU says.

    Attributes:
        profile: Name without NVML's ``"MIG "`` prefix (``3g.71gb``).
        profile_id: NVML profile id (what ``-cgi`` takes).
        compute_slices: ``sliceCount``.
        memory_mib: ``memorySizeMB`` (NVML reports MiB).
        sm_count: ``multiprocessorCount``.
        max_instances: ``instanceCount``: most instances of the profile on one GPU.
        placements: Start positions in memory slices, ascending (``-lgipp``); empty when NVML
            did not say (no privilege, or an error).
        placement_size: Memory slices each placement takes; None when there is no placement.
        copy_engines, decoders, encoders, jpegs, ofas: Engine counts.
    """

    profile: str
    profile_id: int
    compute_slices: int
    memory_mib: int
    sm_count: int
    max_instances: int
    placements: tuple[int, ...]
    placement_size: int | None
    copy_engines: int
    decoders: int
    encoders: int
    jpegs: int
    ofas: int


@dataclass(frozen=True)
class MigReading:
    """One MIG slice (GPU instance) as sampled.

    Attributes:
        gpu_instance_id: NVML GI id (``nvmlDeviceGetGpuInstanceId``), the ``GPU_I_ID`` of
            dcgm-exporter.
        mig_uuid: ``MIG-<uuid>`` of the slice's (first) compute instance: what the device
            plugin hands to pods and the kubelet reports.
        profile: Profile name (``3g.71gb``).
        power_estimated_watts: The slice's estimated share of the GPU's measured power
            (``migscope.exporter._slice_power``); None when the GPU's power is unknown.
        energy_estimated_joules: That estimate integrated since the exporter first saw the slice.
        memory_reserved_bytes: Framebuffer the driver reserves on the slice
            (``nvmlMemory_v2_t.reserved``; ``total = used + free + reserved``); None where the
            backend does not read it. Only ``--dcgm-compat``'s ``FB_FREE``/``FB_RESERVED`` need it.
    """

    gpu_instance_id: int
    mig_uuid: str
    profile: str
    profile_id: int | None
    placement_start: int | None
    placement_size: int | None
    compute_slices: int
    memory_slices: int
    sm_count: int
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    processes: int | None = None
    activity: Activity | None = None
    power_estimated_watts: float | None = None
    energy_estimated_joules: float | None = None
    memory_reserved_bytes: int | None = None
    active_seconds: ActiveSeconds | None = None

    def with_estimates(self, watts: float, joules: float) -> MigReading:
        """A copy carrying the sampler's power and energy estimates.

        ``dataclasses.replace`` re-runs the frozen ``__init__`` (one ``object.__setattr__``
        per field); this copies the field dict instead, a fifth of the cost, which matters
        at 56 slices per sampling cycle (bench/exporter_bench.py).
        """
        copy = object.__new__(MigReading)
        copy.__dict__.update(
            self.__dict__, power_estimated_watts=watts, energy_estimated_joules=joules
        )
        return copy

    def with_active_seconds(self, active: ActiveSeconds | None) -> MigReading:
        """A copy carrying the sampler's activity integrals (copied as :meth:`with_estimates`)."""
        copy = object.__new__(MigReading)
        copy.__dict__.update(self.__dict__, active_seconds=active)
        return copy


@dataclass(frozen=True)
class GpuReading:
    """One physical GPU as sampled, with its MIG slices when MIG is enabled.

    ``mig_profiles`` is the GPU's own GPU-instance profile table (MIG-capable GPUs, whatever
    their MIG mode: NVML answers it with MIG disabled too); empty where it is unknown.
    ``memory_reserved_bytes`` is the driver's reserved framebuffer (``nvmlMemory_v2_t.reserved``),
    as on :class:`MigReading`. ``minor`` is the ``/dev/nvidia<minor>`` number
    (``nvmlDeviceGetMinorNumber``), by which NVIDIA's DRA driver names GPUs; None where the
    backend does not read it.
    """

    index: int
    uuid: str
    name: str
    model: str | None
    pci_bus_id: str
    pci_device_id: str
    mig_enabled: bool
    compute_slices: int | None = None
    memory_slices: int | None = None
    power_watts: float | None = None
    energy_joules: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    activity: Activity | None = None
    instances: tuple[MigReading, ...] = ()
    mig_profiles: tuple[MigProfileInfo, ...] = ()
    memory_reserved_bytes: int | None = None
    minor: int | None = None
    active_seconds: ActiveSeconds | None = None

    @property
    def compute_slices_free(self) -> int | None:
        """Compute slices no GPU instance holds (None when MIG is off or the model unknown)."""
        if not self.mig_enabled or self.compute_slices is None:
            return None
        return self.compute_slices - sum(i.compute_slices for i in self.instances)

    @property
    def memory_slices_free(self) -> int | None:
        """Memory slices no GPU instance holds."""
        if not self.mig_enabled or self.memory_slices is None:
            return None
        return self.memory_slices - sum(i.memory_slices for i in self.instances)

    @property
    def layout_label(self) -> str:
        """The layout as one label value: profiles, largest first, comma-separated."""
        ordered = sorted(
            self.instances, key=lambda i: (-i.memory_slices, -i.compute_slices, i.profile)
        )
        return ",".join(i.profile for i in ordered)


@dataclass(frozen=True)
class CollectorStatus:
    """How one collector's last run went, for ``migscope_collector_*``.

    ``error`` is one line meant for logs and /healthz; it is None on success.
    """

    name: str
    success: bool
    duration_seconds: float
    last_success: float | None
    error: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything one cycle read, plus the health of each collector."""

    taken_at: float
    driver_version: str = ""
    gpus: tuple[GpuReading, ...] = ()
    collectors: tuple[CollectorStatus, ...] = field(default=())
