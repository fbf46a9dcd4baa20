"""An exporter-like loop over the simulator reads back exactly what the scenario says.

The loop is the per-MIG sketch of ``reference/nvml-dcgm.md`` §2, written against a
module-like ``N`` (here the simulator, on a real node ``pynvml``): enumerate GPUs, their MIG
devices, memory, and GPM activity from two samples one (simulated) second apart. The
expected values are computed from the scenario text alone, not from simulator internals.
"""

from __future__ import annotations

from typing import Any

import pytest
from simhelpers import mig_devices, simulate

from migscope.sim import SimClock

GIB = 2**30
MIX = {"sm": 0.9, "occupancy": 0.3, "tensor": 0.6, "dram": 0.45}
SCENARIO_GPUS: list[dict[str, Any]] = [
    {
        "model": "H200",
        "mig": True,
        "instances": [
            {
                "profile": "3g.71gb",
                "start": 4,
                "workload": {"pattern": "constant", "level": 0.75, "memory": 0.5, "mix": MIX},
                "pod": {"namespace": "ml", "pod": "big", "container": "c"},
            },
            {
                "profile": "2g.35gb",
                "start": 0,
                "workload": {"pattern": "constant", "level": 0.2, "memory": "10GiB", "mix": MIX},
                "pod": {"namespace": "ml", "pod": "medium", "container": "c"},
            },
            {"profile": "1g.18gb", "start": 2},
        ],
    },
    {"model": "A100-40GB", "mig": True, "instances": [{"profile": "7g.40gb"}]},
    {"model": "H100-80GB", "workload": {"pattern": "constant", "level": 0.5, "memory": 0.1}},
]
# GI id -> (activity level, memory bytes) expected on GPU 0, from the scenario above.
EXPECTED = {
    2: (0.75, round(0.5 * ((71424 << 20) - (1 << 20)))),
    3: (0.2, 10 * GIB),
    9: (0.0, 0),
}


def exporter_cycle(N: Any, sleep: Any) -> dict[str, Any]:  # N as in the §2 sketch
    """One sampling cycle as in the §2 sketch; returns what an exporter would export."""
    metrics_ids = [
        N.NVML_GPM_METRIC_GRAPHICS_UTIL,
        N.NVML_GPM_METRIC_SM_UTIL,
        N.NVML_GPM_METRIC_SM_OCCUPANCY,
        N.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        N.NVML_GPM_METRIC_DRAM_BW_UTIL,
    ]

    def mig_devices(gpu: Any) -> Any:
        if N.nvmlDeviceGetMigMode(gpu)[0] != N.NVML_DEVICE_MIG_ENABLE:
            return
        for i in range(N.nvmlDeviceGetMaxMigDeviceCount(gpu)):
            try:
                h = N.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i)
            except N.NVMLError_NotFound:
                continue
            yield (
                N.nvmlDeviceGetGpuInstanceId(h),
                N.nvmlDeviceGetComputeInstanceId(h),
                (N.nvmlDeviceGetUUID(h)),
                h,
            )

    def metrics(s1: Any, s2: Any) -> dict[int, float | None]:
        mg = N.c_nvmlGpmMetricsGet_t()
        mg.version = N.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics, mg.sample1, mg.sample2 = len(metrics_ids), s1, s2
        for i, m in enumerate(metrics_ids):
            mg.metrics[i].metricId = m
        N.nvmlGpmMetricsGet(mg)
        return {
            mg.metrics[i].metricId: mg.metrics[i].value if mg.metrics[i].nvmlReturn == 0 else None
            for i in range(len(metrics_ids))
        }

    out: dict[str, Any] = {"slices": {}, "gpus": {}}
    for idx in range(N.nvmlDeviceGetCount()):
        gpu = N.nvmlDeviceGetHandleByIndex(idx)
        out["gpus"][idx] = {
            "power_mw": N.nvmlDeviceGetPowerUsage(gpu),
            "gpm": N.nvmlGpmQueryDeviceSupport(gpu).isSupportedDevice,
        }
        gis: dict[int, tuple[str, Any]] = {}
        for gi, _ci, uuid, h in mig_devices(gpu):
            gis.setdefault(gi, (uuid, h))
        for gi, (uuid, h) in gis.items():
            mem = N.nvmlDeviceGetMemoryInfo(h, version=N.nvmlMemory_v2)
            out["slices"][(idx, gi)] = {"uuid": uuid, "used": mem.used, "total": mem.total}
        if not out["gpus"][idx]["gpm"]:
            continue
        first = {gi: N.nvmlGpmMigSampleGet(gpu, gi, N.nvmlGpmSampleAlloc()) for gi in gis}
        sleep(1.0)  # > 0.1 s
        for gi, s1 in first.items():
            s2 = N.nvmlGpmMigSampleGet(gpu, gi, N.nvmlGpmSampleAlloc())
            out["slices"][(idx, gi)]["metrics"] = metrics(s1, s2)
            N.nvmlGpmSampleFree(s1)
            N.nvmlGpmSampleFree(s2)
    return out


def test_exporter_loop_reads_the_scenario() -> None:
    """Memory, GPM ratios and power of every slice match the scenario's workloads."""
    sim = simulate(*SCENARIO_GPUS)
    node = sim.node("node-a")
    N = node.nvml
    N.nvmlInit()
    sim.clock.advance(600)
    seen = exporter_cycle(N, sim.clock.sleep)

    assert set(seen["slices"]) == {(0, 2), (0, 3), (0, 9), (1, 0)}
    for gi, (level, used) in EXPECTED.items():
        got = seen["slices"][(0, gi)]
        assert got["used"] == used
        assert got["metrics"] == {
            N.NVML_GPM_METRIC_GRAPHICS_UTIL: pytest.approx(100 * level),
            N.NVML_GPM_METRIC_SM_UTIL: pytest.approx(100 * level * MIX["sm"]),
            N.NVML_GPM_METRIC_SM_OCCUPANCY: pytest.approx(100 * level * MIX["occupancy"]),
            N.NVML_GPM_METRIC_ANY_TENSOR_UTIL: pytest.approx(100 * level * MIX["tensor"]),
            N.NVML_GPM_METRIC_DRAM_BW_UTIL: pytest.approx(100 * level * MIX["dram"]),
        }
    assert "metrics" not in seen["slices"][(1, 0)]  # A100: no GPM, memory only
    assert seen["gpus"][1]["gpm"] == 0
    assert seen["slices"][(1, 0)]["total"] == 39.5 * GIB

    # H200 power: 78 W idle + 622 W × (3/7 × 0.75 + 2/7 × 0.2); H100 whole GPU at 0.5.
    assert seen["gpus"][0]["power_mw"] == round(1000 * (78 + 622 * (3 / 7 * 0.75 + 2 / 7 * 0.2)))
    assert seen["gpus"][2]["power_mw"] == round(1000 * (70 + 630 * 0.5))

    pods = {
        p.device_id: (p.namespace, p.pod, p.container, p.resource_name)
        for p in node.pod_assignments()
    }
    assert pods == {
        seen["slices"][(0, 2)]["uuid"]: ("ml", "big", "c", "nvidia.com/mig-3g.71gb"),
        seen["slices"][(0, 3)]["uuid"]: ("ml", "medium", "c", "nvidia.com/mig-2g.35gb"),
    }


def test_exporter_loop_on_a_realtime_clock() -> None:
    """With a real-time clock (60× speed) the same loop works with real sleeps."""
    clock = SimClock(realtime=True, speed=60.0)
    sim = simulate(SCENARIO_GPUS[0], clock=clock)
    N = sim.node("node-a").nvml
    N.nvmlInit()
    seen = exporter_cycle(N, clock.sleep)  # sleeps 1/60 s of wall time
    graphics = seen["slices"][(0, 2)]["metrics"][N.NVML_GPM_METRIC_GRAPHICS_UTIL]
    assert graphics == pytest.approx(75.0)


def test_ground_truth_matches_what_nvml_reports() -> None:
    """``SimInstance.sample(t)`` (for the analyzer's embedded source) agrees with NVML."""
    sim = simulate(*SCENARIO_GPUS)
    node = sim.node("node-a")
    N = node.nvml
    N.nvmlInit()
    sim.clock.advance(42)
    by_uuid = {i.uuid: i for i in node.instances()}
    gpu = N.nvmlDeviceGetHandleByIndex(0)
    for h in mig_devices(N, gpu):
        truth = by_uuid[N.nvmlDeviceGetUUID(h)].sample(sim.clock.elapsed())
        assert truth.memory_bytes == N.nvmlDeviceGetMemoryInfo(h, version=N.nvmlMemory_v2).used
        assert truth.processes == len(N.nvmlDeviceGetComputeRunningProcesses(h))
    whole = node.gpus[2].sample(sim.clock.elapsed())
    assert whole is not None
    assert whole.activity["graphics"] == 0.5
    assert node.gpus[0].sample(0.0) is None
