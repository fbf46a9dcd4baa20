"""Where does a GPM cycle's time go on a real GPU? Read-only; prints median microseconds.

``PYTHONPATH=src:exporter python3 bench/gpm_cost_probe.py`` on a Hopper GPU. Measures
``nvmlGpmSampleGet``, building the ``c_nvmlGpmMetricsGet_t`` request in Python (it holds
NVML_GPM_METRIC_MAX entries), and ``nvmlGpmMetricsGet`` for 1 and 5 metrics, so the exporter's
per-slice GPM cost can be split into NVML's part and Python's part.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

import pynvml as N

METRICS = [
    N.NVML_GPM_METRIC_GRAPHICS_UTIL,
    N.NVML_GPM_METRIC_SM_UTIL,
    N.NVML_GPM_METRIC_SM_OCCUPANCY,
    N.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    N.NVML_GPM_METRIC_DRAM_BW_UTIL,
]


def median_us(fn: Callable[[], object], n: int = 200) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return round(statistics.median(samples), 2)


def main() -> None:
    N.nvmlInit()
    dev = N.nvmlDeviceGetHandleByIndex(0)
    s1, s2 = N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()
    N.nvmlGpmSampleGet(dev, s1)
    time.sleep(0.2)
    N.nvmlGpmSampleGet(dev, s2)
    request = N.c_nvmlGpmMetricsGet_t()

    def fill(k: int) -> None:
        request.version = N.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = k
        request.sample1, request.sample2 = s1, s2
        for i, m in enumerate(METRICS[:k]):
            request.metrics[i].metricId = m

    out = {
        "sample_get": median_us(lambda: N.nvmlGpmSampleGet(dev, s2)),
        "struct_new": median_us(N.c_nvmlGpmMetricsGet_t),
    }
    fill(1)
    out["metrics_get_1"] = median_us(lambda: N.nvmlGpmMetricsGet(request))
    fill(5)
    out["metrics_get_5"] = median_us(lambda: N.nvmlGpmMetricsGet(request))
    out["read_5_values"] = median_us(
        lambda: [(request.metrics[i].value, request.metrics[i].nvmlReturn) for i in range(5)]
    )
    out["memory_info_v2"] = median_us(
        lambda: N.nvmlDeviceGetMemoryInfo(dev, version=N.nvmlMemory_v2)
    )
    out["power"] = median_us(lambda: N.nvmlDeviceGetPowerUsage(dev))
    out["processes"] = median_us(lambda: N.nvmlDeviceGetComputeRunningProcesses(dev))
    N.nvmlGpmSampleFree(s1)
    N.nvmlGpmSampleFree(s2)
    N.nvmlShutdown()
    print(json.dumps(out, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
