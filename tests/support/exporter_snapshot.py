"""One small H200 snapshot (two slices, one owned) shared by the exporter's collector tests.

Kept in support/ so that test modules never import each other (pytest's import mode does not
make `tests` a package)."""

from __future__ import annotations

from dataclasses import dataclass

from migscope.exporter._snapshot import Activity, CollectorStatus, GpuReading, MigReading, Snapshot

GIB = 1024**3


@dataclass(frozen=True)
class PodOwner:
    namespace: str
    pod: str
    container: str
    resource_name: str


SLICE_A = MigReading(
    gpu_instance_id=1,
    mig_uuid="MIG-aaaaaaaa-0000-0000-0000-000000000001",
    profile="4g.71gb",
    profile_id=5,
    placement_start=0,
    placement_size=4,
    compute_slices=4,
    memory_slices=4,
    sm_count=64,
    memory_used_bytes=12 * GIB,
    memory_total_bytes=70 * GIB,
    processes=2,
    activity=Activity(graphics=0.9, sm_active=0.8, sm_occupancy=0.3, tensor=0.7, dram=0.2),
    power_estimated_watts=400.0,
    energy_estimated_joules=1200.0,
)
SLICE_B = MigReading(
    gpu_instance_id=2,
    mig_uuid="MIG-bbbbbbbb-0000-0000-0000-000000000002",
    profile="3g.71gb",
    profile_id=9,
    placement_start=4,
    placement_size=4,
    compute_slices=3,
    memory_slices=4,
    sm_count=60,
    memory_used_bytes=0,
    memory_total_bytes=70 * GIB,
    processes=0,
    activity=None,  # first cycle: GPM needs two samples
    power_estimated_watts=100.0,
    energy_estimated_joules=None,
)
GPU = GpuReading(
    index=0,
    uuid="GPU-00000000-0000-0000-0000-000000000000",
    name="NVIDIA H200",
    model="H200-141GB",
    pci_bus_id="00000000:00:06.0",
    pci_device_id="0x233510DE",
    mig_enabled=True,
    compute_slices=7,
    memory_slices=8,
    power_watts=500.0,
    energy_joules=2_845_127.0,
    memory_used_bytes=12 * GIB,
    memory_total_bytes=140 * GIB,
    instances=(SLICE_A, SLICE_B),
)
SNAP = Snapshot(
    taken_at=1000.0,
    driver_version="580.159.04",
    gpus=(GPU,),
    collectors=(CollectorStatus("nvml", True, 0.003, 999.0),),
)
OWNERS = {SLICE_A.mig_uuid: (PodOwner("team-a", "trainer-0", "main", "nvidia.com/mig-4g.71gb"),)}
