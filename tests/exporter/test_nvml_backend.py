"""The NVML backend on the simulated NVML: readings, layout changes, lost GPUs, NVML errors.

The backend code under test is the production ``nvml`` path; only the NVML library beneath it
is the simulator (which copies real NVML's error semantics, see tests/sim/).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from migscope.exporter._backends import BackendError
from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._sampler import Sampler
from migscope.exporter._snapshot import GpuReading, Snapshot
from migscope.sim import Simulation

SCENARIO: dict[str, Any] = {
    "seed": 11,
    "nodes": [
        {
            "name": "node-a",
            "gpus": [
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "3g.71gb",
                            "workload": {"pattern": "constant", "level": 0.8},
                            "pod": {"namespace": "team-a", "pod": "trainer"},
                        },
                        {"profile": "2g.35gb", "workload": {"pattern": "idle"}},
                        {"profile": "1g.18gb", "workload": {"pattern": "constant", "level": 0.3}},
                    ],
                },
                {"model": "H200", "mig": False, "workload": {"pattern": "constant", "level": 0.5}},
                {"model": "A100-40GB", "mig": True, "instances": [{"profile": "3g.20gb"}]},
            ],
        }
    ],
}


def make(
    scenario: dict[str, Any] = SCENARIO,
    *,
    gpm_interval: float = 1.0,
    gpm_refresh: float = 0.0,
    **node_overrides: Any,
) -> tuple[Simulation, NvmlBackend, Sampler]:
    if node_overrides:
        scenario = {**scenario, "nodes": [{**scenario["nodes"][0], **node_overrides}]}
    sim = Simulation.from_scenario(scenario, seed=scenario["seed"])
    backend = NvmlBackend(
        sim.node("node-a").nvml,
        name="sim",
        clock=sim.clock.elapsed,
        gpm_interval=gpm_interval,
        gpm_refresh=gpm_refresh,
    )
    sampler = Sampler(backend, interval=1.0, clock=sim.clock.elapsed, wall=sim.clock.now)
    return sim, backend, sampler


def cycles(sim: Simulation, sampler: Sampler, n: int) -> Snapshot:
    snap = sampler.run_once()
    for _ in range(n - 1):
        sim.clock.advance(1.0)
        snap = sampler.run_once()
    return snap


def gpu(snap: Snapshot, index: int) -> GpuReading:
    return next(g for g in snap.gpus if g.index == index)


def status(snap: Snapshot, name: str) -> tuple[bool, str | None]:
    found = next(c for c in snap.collectors if c.name == name)
    return found.success, found.error


def test_readings_follow_the_scenario_workloads() -> None:
    sim, _backend, sampler = make()
    first = sampler.run_once()
    assert all(i.activity is None for i in gpu(first, 0).instances), "GPM needs two samples"
    snap = cycles(sim, sampler, 3)
    h200 = gpu(snap, 0)
    assert h200.model == "H200-141GB"
    assert h200.mig_enabled
    assert h200.layout_label == "3g.71gb,2g.35gb,1g.18gb"
    by_profile = {i.profile: i for i in h200.instances}
    busy = by_profile["3g.71gb"].activity
    assert busy is not None
    assert busy.graphics == pytest.approx(0.8, abs=1e-6)
    idle = by_profile["2g.35gb"].activity
    assert idle is not None
    assert idle.graphics == 0.0
    assert by_profile["2g.35gb"].memory_used_bytes == 0
    assert by_profile["3g.71gb"].processes == 1
    assert (by_profile["3g.71gb"].placement_start, by_profile["3g.71gb"].placement_size) == (0, 4)
    assert h200.compute_slices_free == 1
    assert h200.memory_slices_free == 1
    whole = gpu(snap, 1)
    assert not whole.mig_enabled
    assert whole.instances == ()
    assert whole.activity is not None
    assert whole.activity.graphics == pytest.approx(0.5, abs=1e-6)
    assert all(s for s, _ in (status(snap, "sim"), status(snap, "gpm")))
    main = next(c for c in snap.collectors if c.name == "sim")
    assert main.duration_seconds > 0, "the main collector's time is measured, not 0"


def test_refresh_equal_to_the_window_computes_once_per_window_and_republishes_between() -> None:
    """nvmlGpmMetricsGet costs ~1.2 ms per slice on a real H200: a node that cannot afford it
    every cycle sets gpm_refresh = gpm_interval and gets fixed windows, one computation each."""
    sim, backend, sampler = make(gpm_interval=10.0, gpm_refresh=10.0)
    nvml = sim.node("node-a").nvml
    snap = cycles(sim, sampler, 10)
    assert all(i.activity is None for i in gpu(snap, 0).instances), "first window still open"
    sim.clock.advance(1.0)
    snap = sampler.run_once()
    first = {i.gpu_instance_id: i.activity for i in gpu(snap, 0).instances}
    assert all(a is not None for a in first.values())
    for _ in range(5):
        sim.clock.advance(1.0)
        snap = sampler.run_once()
        assert {i.gpu_instance_id: i.activity for i in gpu(snap, 0).instances} == first
    # One computation per slice (3) and per whole GPU with GPM (1) in 16 one-second cycles.
    assert nvml.calls["nvmlGpmMetricsGet"] == 4
    assert backend.calls == sum(nvml.calls.values())


def test_estimated_power_adds_up_to_the_board_and_energy_accumulates() -> None:
    sim, _backend, sampler = make()
    snap = cycles(sim, sampler, 5)
    h200 = gpu(snap, 0)
    assert h200.power_watts is not None
    shares = [i.power_estimated_watts for i in h200.instances]
    assert all(s is not None for s in shares)
    assert sum(s for s in shares if s is not None) == pytest.approx(h200.power_watts)
    energies = [i.energy_estimated_joules or 0.0 for i in h200.instances]
    assert sum(energies) > 0
    assert h200.energy_joules is not None


def test_ampere_has_no_gpm_so_activity_is_absent_not_zero() -> None:
    sim, _backend, sampler = make()
    a100 = gpu(cycles(sim, sampler, 3), 2)
    assert a100.model == "A100-40GB"
    (only,) = a100.instances
    assert only.profile == "3g.20gb"
    assert only.activity is None
    assert only.memory_total_bytes is not None


def test_a_layout_change_between_two_samples_is_picked_up_without_restart() -> None:
    sim, backend, sampler = make()
    before = gpu(cycles(sim, sampler, 2), 0)
    old_uuids = {i.mig_uuid for i in before.instances}
    sim.node("node-a").nvml.faults.change_layout(
        0, [{"profile": "4g.71gb"}, {"profile": "2g.35gb"}, {"profile": "1g.18gb"}]
    )
    sim.clock.advance(1.0)
    after = gpu(sampler.run_once(), 0)
    assert after.layout_label == "4g.71gb,2g.35gb,1g.18gb"
    assert not old_uuids & {i.mig_uuid for i in after.instances}, "old slices vanish"
    # The old slices' rings are freed: one sample per new slice so far, and the whole GPU's
    # two (a window of one interval keeps the baseline and the newest sample).
    assert sim.node("node-a").nvml.gpm_samples_in_use == 3 * 1 + 2, "old slices' samples freed"
    assert status(sampler.latest() or Snapshot(0), "sim")[0]
    sim.clock.advance(1.0)
    settled = gpu(sampler.run_once(), 0)
    assert all(i.activity is not None for i in settled.instances)
    assert backend.calls > 0


def test_a_lost_gpu_is_dropped_and_reported_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    sim, _backend, sampler = make()
    cycles(sim, sampler, 2)
    sim.node("node-a").nvml.faults.lose_gpu(1)
    caplog.set_level(logging.WARNING)
    sim.clock.advance(1.0)
    snap = sampler.run_once()
    assert [g.index for g in snap.gpus] == [0, 2]
    ok, error = status(snap, "sim")
    assert not ok
    assert error is not None
    assert "GPU 1" in error
    assert "lost" in error
    assert "\n" not in error
    for _ in range(12):  # the fault lasts: the collector stays failed, logged once
        sim.clock.advance(1.0)
        snap = sampler.run_once()
        assert status(snap, "sim") == (False, error)
    failing = [r for r in caplog.records if "failing" in r.getMessage()]
    assert len(failing) == 1


@pytest.mark.parametrize(
    ("function", "error", "fails"),
    [
        ("nvmlDeviceGetPowerUsage", "UNKNOWN", True),
        ("nvmlDeviceGetPowerUsage", "NOT_SUPPORTED", False),
        ("nvmlDeviceGetMemoryInfo", "UNKNOWN", True),
        ("nvmlDeviceGetComputeRunningProcesses", "NO_PERMISSION", False),
    ],
)
def test_nvml_errors_on_a_value_blank_it_and_mark_the_collector(
    function: str, error: str, fails: bool
) -> None:
    sim, _backend, sampler = make()
    cycles(sim, sampler, 2)
    sim.node("node-a").nvml.faults.inject_error(function, error, gpu=0)
    sim.clock.advance(1.0)
    snap = sampler.run_once()
    assert [g.index for g in snap.gpus] == [0, 1, 2], "a failing value never drops a GPU"
    ok, message = status(snap, "sim")
    assert ok is not fails
    if fails:
        assert message is not None
        assert message.startswith("GPU 0: ")


def test_gpm_errors_mark_the_gpm_collector_only() -> None:
    sim, _backend, sampler = make()
    cycles(sim, sampler, 2)
    sim.node("node-a").nvml.faults.inject_error("nvmlGpmMigSampleGet", "UNKNOWN", gpu=0)
    sim.clock.advance(1.0)
    snap = sampler.run_once()
    assert status(snap, "sim")[0]
    assert not status(snap, "gpm")[0]
    assert all(i.activity is None for i in gpu(snap, 0).instances)
    assert all(i.memory_total_bytes for i in gpu(snap, 0).instances)


def test_nvml_init_failure_is_a_failed_snapshot_then_recovers() -> None:
    sim, _backend, sampler = make()
    nvml = sim.node("node-a").nvml
    rule = nvml.faults.inject_error("nvmlInit", "DRIVER_NOT_LOADED", count=1)
    snap = sampler.run_once()
    assert snap.gpus == ()
    ok, error = status(snap, "sim")
    assert not ok
    assert error is not None
    assert "NVML init failed" in error
    assert rule.hits == 1
    sim.clock.advance(1.0)
    assert len(sampler.run_once().gpus) == 3


def test_without_privileges_profiles_come_from_device_names() -> None:
    sim, _backend, sampler = make(privileged=False)
    h200 = gpu(cycles(sim, sampler, 2), 0)
    assert [i.profile for i in h200.instances] == ["3g.71gb", "2g.35gb", "1g.18gb"]
    assert all(i.placement_start is None for i in h200.instances)
    assert all(i.compute_slices for i in h200.instances)


def test_stop_frees_every_gpm_sample_shuts_down_and_a_failed_init_is_one_error() -> None:
    sim, _backend, sampler = make()
    nvml = sim.node("node-a").nvml
    cycles(sim, sampler, 3)
    assert nvml.gpm_samples_in_use == 2 * 4  # a pair per slice (3) and per whole GPU (1)
    sampler.stop()
    assert nvml.gpm_samples_in_use == 0
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    with pytest.raises(BackendError):
        NvmlBackend(_BrokenInit(nvml)).open()


class _BrokenInit:
    """An NVML whose init fails, as on a node without the driver."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self.NVMLError = nvml.NVMLError

    def nvmlInit(self) -> None:
        raise self._nvml.NVMLError(self._nvml.NVML_ERROR_DRIVER_NOT_LOADED)
