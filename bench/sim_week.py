"""How fast the simulated NVML replays a week: simulated seconds per wall second.

Run ``python bench/sim_week.py [scenario.yaml]``. An exporter-like loop polls every GPU and
MIG device of every node once per simulated minute for seven simulated days: memory (v2),
power, energy, and, on GPUs with GPM, one sample per GPU instance (the previous one is the
baseline, as DCGM does) turned into five metrics. MIG devices are re-enumerated when a call
on them fails (a re-partition in the scenario). Prints the ratio of simulated to wall time
and the cost of one NVML call. Never gates CI; the numbers are for the reader.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from migscope.sim import Simulation

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "sim" / "src" / "migscope" / "sim" / "_scenarios" / "h200-node.yaml"
STEP = 60.0
WEEK = 7 * 86400.0


class Poller:
    """The per-GPU state an exporter keeps: MIG devices and the last GPM sample of each."""

    def __init__(self, nvml: Any, index: int) -> None:
        self.n = nvml
        self.gpu = nvml.nvmlDeviceGetHandleByIndex(index)
        self.gpm = bool(nvml.nvmlGpmQueryDeviceSupport(self.gpu).isSupportedDevice)
        self.metrics = [
            nvml.NVML_GPM_METRIC_GRAPHICS_UTIL,
            nvml.NVML_GPM_METRIC_SM_UTIL,
            nvml.NVML_GPM_METRIC_SM_OCCUPANCY,
            nvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            nvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
        ]
        self.calls = 2
        self.slices: dict[int, list[Any]] = {}
        self.enumerate()

    def enumerate(self) -> None:
        n = self.n
        for _, previous in self.slices.values():
            if previous is not None:
                n.nvmlGpmSampleFree(previous)
        self.slices = {}
        for k in range(n.nvmlDeviceGetMaxMigDeviceCount(self.gpu)):
            try:
                mig = n.nvmlDeviceGetMigDeviceHandleByIndex(self.gpu, k)
            except n.NVMLError_NotFound:
                continue
            gi = n.nvmlDeviceGetGpuInstanceId(mig)
            sample = (
                n.nvmlGpmMigSampleGet(self.gpu, gi, n.nvmlGpmSampleAlloc()) if self.gpm else None
            )
            self.slices[gi] = [mig, sample]
            self.calls += 3

    def poll(self) -> None:
        n = self.n
        n.nvmlDeviceGetPowerUsage(self.gpu)
        n.nvmlDeviceGetTotalEnergyConsumption(self.gpu)
        n.nvmlDeviceGetMemoryInfo(self.gpu, version=n.nvmlMemory_v2)
        self.calls += 3
        try:
            for gi, slot in self.slices.items():
                self.poll_slice(gi, slot)
        except n.NVMLError:
            self.enumerate()

    def poll_slice(self, gi: int, slot: list[Any]) -> None:
        n = self.n
        mig, previous = slot
        n.nvmlDeviceGetMemoryInfo(mig, version=n.nvmlMemory_v2)
        self.calls += 1
        if previous is None:
            return
        current = n.nvmlGpmMigSampleGet(self.gpu, gi, n.nvmlGpmSampleAlloc())
        mg = n.c_nvmlGpmMetricsGet_t()
        mg.version = n.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(self.metrics)
        mg.sample1, mg.sample2 = previous, current
        for j, metric in enumerate(self.metrics):
            mg.metrics[j].metricId = metric
        n.nvmlGpmMetricsGet(mg)
        n.nvmlGpmSampleFree(previous)
        slot[1] = current
        self.calls += 4


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    sim = Simulation.from_scenario(source)
    pollers = []
    for node in sim:
        node.nvml.nvmlInit()
        pollers += [Poller(node.nvml, i) for i in range(node.nvml.nvmlDeviceGetCount())]
    started = time.perf_counter()
    for _ in range(int(WEEK / STEP)):
        sim.clock.advance(STEP)
        for poller in pollers:
            poller.poll()
    wall = time.perf_counter() - started
    calls = sum(p.calls for p in pollers)
    devices = sum(len(p.slices) for p in pollers)
    shape = f"{len(sim.nodes)} node(s), {len(pollers)} GPUs, {devices} MIG devices"
    print(f"scenario: {source.name}, {shape}")
    print(f"simulated {WEEK / 86400:.0f} days in {wall:.2f} s wall: {WEEK / wall:,.0f}x real time")
    print(f"{calls:,} NVML calls, {wall / calls * 1e6:.1f} µs per call")


if __name__ == "__main__":
    main()
