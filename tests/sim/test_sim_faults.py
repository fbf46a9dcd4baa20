"""Fault injection: lost GPUs, re-partitions underneath, slow calls, injected NVML errors."""

from __future__ import annotations

import pynvml
import pytest
from simhelpers import mig_devices, simulate, started

from migscope.sim import SimClock

MIXED = {
    "model": "H200",
    "mig": True,
    "instances": [
        {"profile": "3g.71gb", "start": 4, "pod": {"namespace": "ml", "pod": "old-3g"}},
        {"profile": "1g.18gb", "start": 0, "workload": {"pattern": "constant", "level": 1}},
    ],
}
NEW_LAYOUT = [
    {"profile": "4g.71gb", "workload": {"pattern": "constant", "level": 0.5}},
    {"profile": "3g.71gb", "start": 4, "pod": {"namespace": "ml", "pod": "new-3g"}},
]


def test_gpu_lost_from_a_given_time() -> None:
    """From ``at`` on, every call on the GPU, its MIG devices and GPU instances raises
    ``NVMLError_GpuIsLost`` (nvml.h: "GPU has fallen off the bus"); the count keeps it and
    other GPUs are unaffected."""
    sim, nvml = started(MIXED, {"model": "H200"})
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    mig = mig_devices(nvml, gpu)[0]
    gi = nvml.nvmlDeviceGetGpuInstanceById(gpu, 2)
    nvml.faults.lose_gpu(0, at=100.0)
    sim.clock.advance(99.0)
    assert nvml.nvmlDeviceGetPowerUsage(gpu) > 0
    sim.clock.advance(1.0)
    for call in (
        lambda: nvml.nvmlDeviceGetPowerUsage(gpu),
        lambda: nvml.nvmlDeviceGetMemoryInfo(mig),
        lambda: nvml.nvmlDeviceGetUUID(mig),
        lambda: nvml.nvmlGpuInstanceGetInfo(gi),
        lambda: nvml.nvmlGpmMigSampleGet(gpu, 2, nvml.nvmlGpmSampleAlloc()),
        lambda: nvml.nvmlDeviceGetHandleByIndex(0),
    ):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            call()
    assert nvml.nvmlDeviceGetCount() == 2
    assert nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(1)) == "NVIDIA H200"


@pytest.mark.parametrize(
    ("stale_error", "expected"),
    [
        ("INVALID_ARGUMENT", pynvml.NVMLError_InvalidArgument),
        ("NOT_FOUND", pynvml.NVMLError_NotFound),
    ],
)
def test_layout_changed_underneath(stale_error: str, expected: type[Exception]) -> None:
    """At T the instances are replaced: old MIG handles fail with the chosen error, old
    UUIDs are NOT_FOUND, enumeration shows the new instances with GI ids from their
    placements, fresh UUIDs and the new pods (§5: handles "must be requested again")."""
    sim, nvml = started(MIXED)
    node = sim.node("node-a")
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    old = mig_devices(nvml, gpu)
    old_uuids = [nvml.nvmlDeviceGetUUID(h) for h in old]
    new = nvml.faults.change_layout(0, NEW_LAYOUT, at=600.0, stale_error=stale_error)
    assert [i.gi_id for i in new] == [1, 2]
    sim.clock.advance(599.0)
    assert nvml.nvmlDeviceGetGpuInstanceId(old[0]) == 2
    assert [p.pod for p in node.pod_assignments()] == ["old-3g"]
    sim.clock.advance(1.0)
    for handle in old:
        with pytest.raises(expected):
            nvml.nvmlDeviceGetMemoryInfo(handle)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetHandleByUUID(old_uuids[0])
    current = mig_devices(nvml, gpu)
    assert [nvml.nvmlDeviceGetGpuInstanceId(h) for h in current] == [1, 2]
    assert {nvml.nvmlDeviceGetUUID(h) for h in current}.isdisjoint(old_uuids)
    assert [nvml.nvmlDeviceGetName(h) for h in current] == [
        "NVIDIA H200 MIG 4g.71gb",
        "NVIDIA H200 MIG 3g.71gb",
    ]
    assert [(p.pod, p.device_id) for p in node.pod_assignments()] == [
        ("new-3g", nvml.nvmlDeviceGetUUID(current[1]))
    ]


def test_pod_assignments_are_the_same_object_until_the_layout_changes() -> None:
    """The exporter's render cache knows owners unchanged by identity (issue 24): the node
    answers with the same tuple while nothing changed, and a new one after a re-partition."""
    sim, nvml = started(MIXED)
    node = sim.node("node-a")
    nvml.faults.change_layout(0, NEW_LAYOUT, at=600.0)
    first = node.pod_assignments()
    sim.clock.advance(599.0)
    assert node.pod_assignments() is first
    sim.clock.advance(1.0)
    after = node.pod_assignments()
    assert after is not first
    assert [p.pod for p in after] == ["new-3g"]
    assert node.pod_assignments() is after


def test_energy_stays_monotonic_across_a_layout_change() -> None:
    """The energy counter integrates every instance over its life, so a re-partition
    neither rewinds nor jumps it; power follows the new layout."""
    sim, nvml = started(MIXED)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.faults.change_layout(0, NEW_LAYOUT, at=300.0)
    readings = []  # mJ; ΔE/Δt in W below
    for _ in range(12):
        readings.append(nvml.nvmlDeviceGetTotalEnergyConsumption(gpu))
        sim.clock.advance(50.0)
    assert readings == sorted(readings)
    idle_w, max_w = 78.0, 700.0
    before = idle_w + (max_w - idle_w) * (1 / 7)  # the busy 1g
    after = idle_w + (max_w - idle_w) * (4 / 7 * 0.5)  # the half-busy 4g
    assert (readings[5] - readings[4]) / 50.0 / 1000 == pytest.approx(before, rel=1e-4)
    assert (readings[11] - readings[10]) / 50.0 / 1000 == pytest.approx(after, rel=1e-4)
    assert nvml.nvmlDeviceGetPowerUsage(gpu) == round(after * 1000)


def test_slow_calls_sleep_real_time_through_the_clock() -> None:
    """Named functions cost ``delay_ms`` of real time (the clock's real sleep); simulated
    time does not move, other functions and other GPUs are not slowed."""
    slept: list[float] = []
    clock = SimClock(sleeper=slept.append)
    sim, nvml = started({"model": "H200"}, {"model": "H200"}, clock=clock)
    nvml.faults.slow("nvmlDeviceGetTotalEnergyConsumption", 3.0, gpu=1)
    nvml.faults.slow(["nvmlDeviceGetMigMode"], 0.15)
    g0, g1 = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    nvml.nvmlDeviceGetTotalEnergyConsumption(g0)
    nvml.nvmlDeviceGetTotalEnergyConsumption(g1)
    nvml.nvmlDeviceGetMigMode(g0)
    nvml.nvmlDeviceGetName(g1)
    assert slept == [pytest.approx(0.003), pytest.approx(0.00015)]
    assert sim.clock.elapsed() == 0.0


def test_injected_error_count_gpu_and_window() -> None:
    """An error on a named function, for one GPU, a number of times, within a window."""
    sim, nvml = started({"model": "H200"}, {"model": "H200"})
    g0, g1 = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    rule = nvml.faults.inject_error(
        "nvmlDeviceGetMemoryInfo", "GPU_IS_LOST", gpu=1, count=2, start=10.0, until=20.0
    )
    nvml.nvmlDeviceGetMemoryInfo(g1)  # before the window
    sim.clock.advance(10.0)
    nvml.nvmlDeviceGetMemoryInfo(g0)  # other GPU
    for _ in range(2):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            nvml.nvmlDeviceGetMemoryInfo(g1)
    nvml.nvmlDeviceGetMemoryInfo(g1)  # count used up
    assert rule.hits == 2


def test_injected_error_probability_is_seeded() -> None:
    """With a probability, failures are drawn from a seeded RNG: the same scenario fails
    on the same calls every run, at about the asked rate."""

    def pattern() -> list[bool]:
        sim = simulate(
            {"model": "H200"},
            faults=[
                {
                    "kind": "nvml_error",
                    "function": "nvmlDeviceGetPowerUsage",
                    "error": "UNKNOWN",
                    "probability": 0.25,
                }
            ],
        )
        nvml = sim.node("node-a").nvml
        nvml.nvmlInit()
        gpu = nvml.nvmlDeviceGetHandleByIndex(0)
        out = []
        for _ in range(400):
            try:
                nvml.nvmlDeviceGetPowerUsage(gpu)
                out.append(False)
            except pynvml.NVMLError_Unknown:
                out.append(True)
        return out

    first = pattern()
    assert first == pattern()
    assert 60 < sum(first) < 140


def test_init_itself_can_fail() -> None:
    """Injected errors apply to ``nvmlInit`` too (a node whose driver is not loaded)."""
    nvml = simulate({"model": "H200"}).node("node-a").nvml
    nvml.faults.inject_error("nvmlInit", "DRIVER_NOT_LOADED", count=1)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nvml.nvmlInit()
    nvml.nvmlInit()
    assert nvml.nvmlDeviceGetCount() == 1


def test_faults_from_the_scenario_file() -> None:
    """The same faults can be declared in a scenario (``faults:``)."""
    sim = simulate(
        MIXED,
        {"model": "H200"},
        faults=[
            {"kind": "gpu_lost", "node": "node-a", "gpu": 1, "at": "1h"},
            {
                "kind": "layout_change",
                "node": "node-a",
                "gpu": 0,
                "at": "30m",
                "instances": NEW_LAYOUT,
                "stale_error": "NOT_FOUND",
            },
            {"kind": "slow_call", "functions": ["nvmlDeviceGetName"], "delay_ms": 0},
        ],
    )
    nvml = sim.node("node-a").nvml
    nvml.nvmlInit()
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    sim.clock.advance(1800.0)
    assert [nvml.nvmlDeviceGetGpuInstanceId(h) for h in mig_devices(nvml, gpu)] == [1, 2]
    sim.clock.advance(1800.0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(1)
    assert len(nvml.faults.slow_calls) == 1
