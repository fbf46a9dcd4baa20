"""Issue 23: the exporter names the privilege it lacks when NVML refuses its GPU-instance queries.

NVML lists GPU instances only for a privileged caller (nvml.h: ``nvmlDeviceGetGpuInstances``,
``...GetGpuInstanceById``, ``...GetGpuInstancePossiblePlacements`` "Requires privileged user",
NO_PERMISSION otherwise). The simulator copies that: a scenario node with ``privileged: false``
gets NO_PERMISSION from exactly those calls (docs/scenario.md). The backend under test is the
production ``nvml`` path. What must hold: one log line naming CAP_SYS_ADMIN and
NVIDIA_MIG_MONITOR_DEVICES=all when the state starts (not one per cycle), the collector failing
(``migscope_collector_success`` 0) for as long as it lasts, nothing said on a privileged node or
on a GPU with MIG disabled, and no extra NVML call on a privileged GPU that has slices.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._sampler import Sampler
from migscope.exporter._snapshot import Snapshot
from migscope.sim import Simulation

LOGGER = "migscope.exporter._backends.nvml"
ADVICE = "the container needs CAP_SYS_ADMIN and NVIDIA_MIG_MONITOR_DEVICES=all"
PROBE = "nvmlDeviceGetGpuInstances"


def scenario(*, privileged: bool, mig: bool = True, instances: bool = True) -> dict[str, Any]:
    gpu: dict[str, Any] = {"model": "H200", "mig": mig}
    if mig and instances:
        gpu["instances"] = [{"profile": "3g.71gb"}, {"profile": "1g.18gb"}]
    return {
        "seed": 3,
        "nodes": [
            {
                "name": "n",
                "privileged": privileged,
                "gpus": [gpu, {"model": "H200", "mig": False}],
            }
        ],
    }


def make(**kwargs: Any) -> tuple[Simulation, Any, Sampler]:
    sim = Simulation.from_scenario(scenario(**kwargs))
    nvml = sim.node("n").nvml
    backend = NvmlBackend(nvml, name="sim", clock=sim.clock.elapsed, enumerate_interval=10.0)
    sampler = Sampler(backend, interval=1.0, clock=sim.clock.elapsed, wall=sim.clock.now)
    return sim, nvml, sampler


def run(sim: Simulation, sampler: Sampler, n: int) -> list[Snapshot]:
    snaps = [sampler.run_once()]
    for _ in range(n - 1):
        sim.clock.advance(1.0)
        snaps.append(sampler.run_once())
    return snaps


def sim_status(snap: Snapshot) -> tuple[bool, str | None]:
    found = next(c for c in snap.collectors if c.name == "sim")
    return found.success, found.error


def privilege_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and ADVICE in r.getMessage()]


def test_refused_gpu_instance_queries_are_one_line_naming_the_privilege(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim, _nvml, sampler = make(privileged=False)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        snaps = run(sim, sampler, 25)  # two periodic re-enumerations (every 10 s)
    lines = privilege_lines(caplog)
    assert len(lines) == 1, lines
    assert lines[0].startswith("sim collector failing: GPU 0: cannot list GPU instances: ")
    assert "NVML says no permission (nvmlDeviceGetGpuInstanceById" in lines[0]
    assert lines[0].endswith(f"{ADVICE} (docs/install.md#privileges)")
    for snap in snaps:  # failing for as long as it lasts, not only in the first cycle
        ok, error = sim_status(snap)
        assert not ok
        assert error is not None
        assert ADVICE in error
    text = SnapshotCollector(snapshot=lambda: snaps[-1], backend="sim", version="t").render_text()
    assert b'migscope_collector_success{collector="sim"} 0.0' in text
    # the slices are still served, from the MIG device names (docs/exporter.md)
    assert [i.profile for i in snaps[-1].gpus[0].instances] == ["3g.71gb", "1g.18gb"]


def test_hidden_mig_devices_are_told_from_a_gpu_without_instances() -> None:
    """Without the monitor capability NVML may show no MIG device at all; the privileged
    ``nvmlDeviceGetGpuInstances`` (asked only when no slice was found) tells that apart from
    a GPU that really has no GPU instance."""
    sim, nvml, sampler = make(privileged=False)
    nvml.faults.inject_error("nvmlDeviceGetMigDeviceHandleByIndex", "NOT_FOUND", gpu=0)
    # placements answer NOT_SUPPORTED here, so that only the probe can tell
    nvml.faults.inject_error("nvmlDeviceGetGpuInstancePossiblePlacements", "NOT_SUPPORTED")
    snap = run(sim, sampler, 2)[-1]
    assert snap.gpus[0].instances == ()
    ok, error = sim_status(snap)
    assert not ok
    assert error is not None
    assert f"NVML says no permission ({PROBE}); {ADVICE}" in error

    sim, nvml, sampler = make(privileged=True, instances=False)
    snap = run(sim, sampler, 2)[-1]
    assert snap.gpus[0].mig_enabled
    assert snap.gpus[0].instances == ()
    assert sim_status(snap) == (True, None)
    assert nvml.calls[PROBE] == 1, "asked once per enumeration of a GPU without slices"


def test_a_privileged_node_says_nothing_and_pays_no_extra_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim, nvml, sampler = make(privileged=True)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        snap = run(sim, sampler, 12)[-1]
    assert sim_status(snap) == (True, None)
    assert not privilege_lines(caplog)
    assert nvml.calls[PROBE] == 0
    assert [i.placement_start for i in snap.gpus[0].instances] == [0, 4]


def test_mig_disabled_gpus_only_lose_their_placements(caplog: pytest.LogCaptureFixture) -> None:
    """With MIG off there are no GPU instances to miss: a refused placement query leaves the
    profile table's placements unknown and is no fault."""
    sim, _nvml, sampler = make(privileged=False, mig=False)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        snap = run(sim, sampler, 3)[-1]
    assert sim_status(snap) == (True, None)
    assert not privilege_lines(caplog)
    assert snap.gpus[0].mig_profiles
    assert all(p.placements == () for p in snap.gpus[0].mig_profiles)


def test_privileges_granted_later_recover_the_collector(caplog: pytest.LogCaptureFixture) -> None:
    """A fixed deployment (a new pod) is the usual way out; a simulator whose privilege flips
    checks that the state is re-derived at each enumeration, not latched."""
    sim, nvml, sampler = make(privileged=False)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert not sim_status(run(sim, sampler, 2)[-1])[0]
        nvml.privileged = True
        snaps = run(sim, sampler, 12)
    assert sim_status(snaps[-1]) == (True, None)
    assert any(r.getMessage() == "sim collector recovered" for r in caplog.records)
    assert len(privilege_lines(caplog)) == 1
