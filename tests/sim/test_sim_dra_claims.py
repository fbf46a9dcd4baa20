"""GPU instances created and destroyed per claim mid-run, as NVIDIA's DRA driver does (DynamicMIG).

Through the simulated pynvml: the new GI shows in enumeration from the moment it is created,
the destroyed one's handles fail as a replaced MIG device's do, and the others keep their GI
ids, UUIDs and handles (a per-claim change is not a re-partition).
"""

from __future__ import annotations

import pynvml
import pytest
from simhelpers import started

GH200 = {"model": "GH200-96GB", "mig": True, "instances": [{"profile": "1g.12gb", "start": 0}]}


def _mig_uuids(nvml, gpu) -> list[str]:  # type: ignore[no-untyped-def]
    out = []
    for i in range(nvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            out.append(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i)))
        except pynvml.NVMLError_NotFound:
            continue
    return out


def test_a_gi_created_and_destroyed_mid_run() -> None:
    sim, nvml = started(GH200)
    node = sim.node("node-a")
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    [first] = _mig_uuids(nvml, gpu)
    kept = nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)

    sim.clock.advance(5)
    created = node.create_instance(0, "1g.12gb", start=4)
    assert created.dra_device_name == "gpu-0-mig-1g12gb-19-4"
    assert _mig_uuids(nvml, gpu) == [first, created.uuid]
    gi = nvml.nvmlDeviceGetGpuInstanceById(gpu, created.gi_id)
    info = nvml.nvmlGpuInstanceGetInfo(gi)
    assert (info.profileId, info.placement.start) == (19, 4)
    assert nvml.nvmlDeviceGetUUID(kept) == first  # the other GI's handle still works

    handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1)
    sim.clock.advance(5)
    node.destroy_instance(0, created.gi_id)
    assert _mig_uuids(nvml, gpu) == [first]
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetMemoryInfo(handle)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetGpuInstanceById(gpu, created.gi_id)
    assert nvml.nvmlDeviceGetUUID(kept) == first

    # re-created at the same placement: a new GI with a new UUID
    sim.clock.advance(5)
    again = node.create_instance(0, "1g.12gb", start=4)
    assert again.uuid != created.uuid
    assert _mig_uuids(nvml, gpu) == [first, again.uuid]


def test_energy_stays_continuous_across_per_claim_changes() -> None:
    busy = {"pattern": "constant", "level": 0.5}
    sim, _ = started({**GH200, "instances": [{"profile": "1g.12gb", "start": 0, "workload": busy}]})
    node = sim.node("node-a")
    gpu = node.gpus[0]
    sim.clock.advance(10)
    before = gpu.energy_mj(sim.clock.elapsed())
    node.create_instance(0, "1g.12gb", start=1, workload={"pattern": "constant", "level": 1.0})
    assert gpu.energy_mj(sim.clock.elapsed()) == before  # no jump at the change
    sim.clock.advance(10)
    node.destroy_instance(0, 8)
    after = gpu.energy_mj(sim.clock.elapsed())
    sim.clock.advance(10)
    # the survivor (1/7 of the GPU at 50 %) counted once, not once per layout it lived through
    watts = gpu.power.idle_watts + gpu.power.dynamic_watts * 0.5 / 7
    assert gpu.energy_mj(sim.clock.elapsed()) - after == pytest.approx(10 * watts * 1000, abs=2)


def test_refused_creations_and_the_minor_number() -> None:
    sim, nvml = started(GH200)
    node = sim.node("node-a")
    with pytest.raises(ValueError, match="no GPU 3"):
        node.create_instance(3, "1g.12gb")
    with pytest.raises(ValueError, match="overlap"):
        node.create_instance(0, "1g.12gb", start=0)  # taken
    with pytest.raises(ValueError, match="no GPU instance 99"):
        node.destroy_instance(0, 99)
    node.gpus[0].minor = 4
    assert nvml.nvmlDeviceGetMinorNumber(nvml.nvmlDeviceGetHandleByIndex(0)) == 4
    assert node.instances()[0].dra_device_name == "gpu-4-mig-1g12gb-19-0"
