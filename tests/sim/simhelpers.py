"""Helpers for the simulated-NVML tests: build small simulations from inline scenarios.

A module of its own (not ``conftest``) so that test files can import it by a name no other
test directory uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from migscope.sim import SimClock, SimNvml, Simulation

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RECORDINGS = Path(__file__).resolve().parent / "recordings"


def simulate(
    *gpus: dict[str, Any],
    seed: int = 0,
    clock: SimClock | None = None,
    privileged: bool = True,
    faults: list[dict[str, Any]] | None = None,
) -> Simulation:
    """A one-node simulation ("node-a") with ``gpus`` (GPU specs as in a scenario file)."""
    scenario: dict[str, Any] = {
        "seed": seed,
        "nodes": [{"name": "node-a", "privileged": privileged, "gpus": list(gpus)}],
        "faults": faults or [],
    }
    return Simulation.from_scenario(scenario, clock=clock)


def started(*gpus: dict[str, Any], **kwargs: Any) -> tuple[Simulation, SimNvml]:
    """``simulate`` plus ``nvmlInit`` on node-a; returns the simulation and its NVML."""
    sim = simulate(*gpus, **kwargs)
    nvml = sim.node("node-a").nvml
    nvml.nvmlInit()
    return sim, nvml


def mig_devices(nvml: SimNvml, gpu: Any) -> list[Any]:
    """MIG device handles of ``gpu`` the way the exporter enumerates them."""
    out = []
    for i in range(nvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            out.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i))
        except nvml.NVMLError_NotFound:
            continue
    return out


def gpm_metrics(nvml: SimNvml, s1: Any, s2: Any, ids: list[int]) -> list[tuple[int, int, float]]:
    """``(metricId, nvmlReturn, value)`` for ``ids`` between two samples."""
    mg = nvml.c_nvmlGpmMetricsGet_t()
    mg.version = nvml.NVML_GPM_METRICS_GET_VERSION
    mg.numMetrics = len(ids)
    mg.sample1, mg.sample2 = s1, s2
    for i, metric in enumerate(ids):
        mg.metrics[i].metricId = metric
    nvml.nvmlGpmMetricsGet(mg)
    return [
        (mg.metrics[i].metricId, mg.metrics[i].nvmlReturn, mg.metrics[i].value)
        for i in range(len(ids))
    ]
