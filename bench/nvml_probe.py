"""Record, read-only, how a real GPU's NVML answers the calls migscope's exporter makes.

Run on a GPU machine: ``python3 bench/nvml_probe.py OUT.json``. It changes nothing on the GPU
(no MIG mode, clocks, power limits, persistence or reset): only ``nvmlDeviceGet*``,
``nvmlGpm*`` sampling and ``nvmlSystemGet*`` calls. The output pins the simulated NVML to real
behaviour: GI profile info and placements (through the ctypes call signature pynvml really
has), the error each MIG-only call raises while MIG is disabled, memory v1/v2, and the median
latency of every call (the NVML floor of one sampling cycle).
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import pynvml as N


def _err(exc: BaseException) -> dict[str, Any]:
    value = getattr(exc, "value", None)
    return {"error": type(exc).__name__, "code": value, "text": str(exc)}


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return {"ok": fn()}
    except N.NVMLError as exc:
        return _err(exc)
    except Exception as exc:  # record, never crash the probe
        return {"error": type(exc).__name__, "text": repr(exc)}


def _latency_us(fn: Callable[[], Any], n: int = 200) -> float | dict[str, Any]:
    try:
        fn()
    except Exception as exc:
        return _err(exc)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return round(statistics.median(samples), 3)


def _struct(obj: Any) -> dict[str, Any]:
    out = {}
    for name, _type in getattr(obj, "_fields_", []):
        value = getattr(obj, name)
        out[name] = value.decode() if isinstance(value, bytes) else value
    return out


def _placements(dev: Any, profile_id: int) -> Any:
    count = ctypes.c_uint(0)
    try:
        N.nvmlDeviceGetGpuInstancePossiblePlacements(dev, profile_id, None, ctypes.byref(count))
        size_query = {"count": count.value}
    except N.NVMLError as exc:
        size_query = _err(exc)
    arr = (N.c_nvmlGpuInstancePlacement_t * 16)()
    count = ctypes.c_uint(16)
    try:
        N.nvmlDeviceGetGpuInstancePossiblePlacements(dev, profile_id, arr, ctypes.byref(count))
        got = [[arr[i].start, arr[i].size] for i in range(count.value)]
        return {"size_query": size_query, "placements": got}
    except N.NVMLError as exc:
        return {"size_query": size_query, **_err(exc)}


def _gpu_instances(dev: Any, profile_id: int) -> Any:
    arr = (N.c_nvmlGpuInstance_t * 8)()
    count = ctypes.c_uint(8)
    try:
        N.nvmlDeviceGetGpuInstances(dev, profile_id, arr, ctypes.byref(count))
        return {"count": count.value}
    except N.NVMLError as exc:
        return _err(exc)


def _gpm_pair(dev: Any, mig_gi: int | None, seconds: float) -> dict[str, Any]:
    metrics = [
        N.NVML_GPM_METRIC_GRAPHICS_UTIL,
        N.NVML_GPM_METRIC_SM_UTIL,
        N.NVML_GPM_METRIC_SM_OCCUPANCY,
        N.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        N.NVML_GPM_METRIC_DRAM_BW_UTIL,
    ]
    s1, s2 = N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()
    try:
        get = (
            (lambda s: N.nvmlGpmSampleGet(dev, s))
            if mig_gi is None
            else (lambda s: N.nvmlGpmMigSampleGet(dev, mig_gi, s))
        )
        try:
            get(s1)
        except N.NVMLError as exc:
            return {"sample": _err(exc)}
        time.sleep(seconds)
        get(s2)
        mg = N.c_nvmlGpmMetricsGet_t()
        mg.version = N.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(metrics)
        mg.sample1, mg.sample2 = s1, s2
        for i, m in enumerate(metrics):
            mg.metrics[i].metricId = m
        try:
            N.nvmlGpmMetricsGet(mg)
        except N.NVMLError as exc:
            return {"metrics_get": _err(exc)}
        return {
            str(mg.metrics[i].metricId): {
                "value": mg.metrics[i].value,
                "ret": mg.metrics[i].nvmlReturn,
            }
            for i in range(len(metrics))
        }
    finally:
        N.nvmlGpmSampleFree(s1)
        N.nvmlGpmSampleFree(s2)


def probe_device(index: int) -> dict[str, Any]:
    """Everything migscope wants to know about GPU ``index``, errors included."""
    dev = N.nvmlDeviceGetHandleByIndex(index)
    out: dict[str, Any] = {"index": index}
    out["name"] = _try(lambda: N.nvmlDeviceGetName(dev))
    out["pci"] = _try(lambda: _struct(N.nvmlDeviceGetPciInfo(dev)))
    out["mig_mode"] = _try(lambda: N.nvmlDeviceGetMigMode(dev))
    out["max_mig_device_count"] = _try(lambda: N.nvmlDeviceGetMaxMigDeviceCount(dev))
    out["mig_handle_0"] = _try(lambda: str(N.nvmlDeviceGetMigDeviceHandleByIndex(dev, 0)))
    out["is_mig_handle"] = _try(lambda: N.nvmlDeviceIsMigDeviceHandle(dev).value)
    out["gpu_instance_id_on_parent"] = _try(lambda: N.nvmlDeviceGetGpuInstanceId(dev))
    out["memory_v1"] = _try(lambda: _struct(N.nvmlDeviceGetMemoryInfo(dev)))
    out["memory_v2"] = _try(
        lambda: _struct(N.nvmlDeviceGetMemoryInfo(dev, version=N.nvmlMemory_v2))
    )
    out["utilization"] = _try(lambda: _struct(N.nvmlDeviceGetUtilizationRates(dev)))
    out["power_mw"] = _try(lambda: N.nvmlDeviceGetPowerUsage(dev))
    out["energy_mj"] = _try(lambda: N.nvmlDeviceGetTotalEnergyConsumption(dev))
    out["temperature"] = _try(lambda: N.nvmlDeviceGetTemperature(dev, N.NVML_TEMPERATURE_GPU))
    out["processes"] = _try(lambda: [vars(p) for p in N.nvmlDeviceGetComputeRunningProcesses(dev)])
    out["gpm_support"] = _try(lambda: N.nvmlGpmQueryDeviceSupport(dev).isSupportedDevice)
    out["gpm_mig_sample_gi0"] = _gpm_pair(dev, 0, 0.2)
    out["gpm_device_200ms"] = _gpm_pair(dev, None, 0.2)
    out["gpm_device_20ms"] = _gpm_pair(dev, None, 0.02)
    profiles = []
    for idx in range(N.NVML_GPU_INSTANCE_PROFILE_COUNT + 2):
        entry: dict[str, Any] = {"index": idx}
        try:
            info = N.nvmlDeviceGetGpuInstanceProfileInfo(dev, idx)
        except N.NVMLError as exc:
            entry.update(_err(exc))
            profiles.append(entry)
            continue
        entry["info"] = _struct(info)
        pid = info.id
        entry["info_by_id"] = _try(
            lambda pid=pid: _struct(N.nvmlDeviceGetGpuInstanceProfileInfoById(dev, pid))
        )
        entry["remaining"] = _try(
            lambda pid=pid: N.nvmlDeviceGetGpuInstanceRemainingCapacity(dev, pid)
        )
        entry["placements"] = _placements(dev, pid)
        entry["gpu_instances"] = _gpu_instances(dev, pid)
        profiles.append(entry)
    out["gi_profiles"] = profiles
    out["gpu_instance_by_id_1"] = _try(lambda: str(N.nvmlDeviceGetGpuInstanceById(dev, 1)))
    out["latency_us"] = {
        "GetHandleByIndex": _latency_us(lambda: N.nvmlDeviceGetHandleByIndex(index)),
        "GetMemoryInfo": _latency_us(lambda: N.nvmlDeviceGetMemoryInfo(dev)),
        "GetMemoryInfo_v2": _latency_us(
            lambda: N.nvmlDeviceGetMemoryInfo(dev, version=N.nvmlMemory_v2)
        ),
        "GetPowerUsage": _latency_us(lambda: N.nvmlDeviceGetPowerUsage(dev)),
        "GetMigMode": _latency_us(lambda: N.nvmlDeviceGetMigMode(dev), n=50),
        "GetMaxMigDeviceCount": _latency_us(lambda: N.nvmlDeviceGetMaxMigDeviceCount(dev)),
        "GetUUID": _latency_us(lambda: N.nvmlDeviceGetUUID(dev)),
        "GetComputeRunningProcesses": _latency_us(
            lambda: N.nvmlDeviceGetComputeRunningProcesses(dev)
        ),
        "GetTotalEnergyConsumption": _latency_us(
            lambda: N.nvmlDeviceGetTotalEnergyConsumption(dev), n=20
        ),
        "GpmQueryDeviceSupport": _latency_us(lambda: N.nvmlGpmQueryDeviceSupport(dev)),
        "GetGpuInstanceProfileInfo": _latency_us(
            lambda: N.nvmlDeviceGetGpuInstanceProfileInfo(dev, 0)
        ),
    }
    return out


def main() -> None:
    """Probe every GPU and write JSON to the path given (or stdout)."""
    N.nvmlInit()
    try:
        result = {
            "driver": N.nvmlSystemGetDriverVersion(),
            "nvml_version": N.nvmlSystemGetNVMLVersion(),
            "nvidia_ml_py": getattr(N, "__version__", None),
            "count": N.nvmlDeviceGetCount(),
            "uninitialized_probe": None,
        }
        result["devices"] = [probe_device(i) for i in range(result["count"])]
    finally:
        N.nvmlShutdown()
    result["after_shutdown"] = _try(lambda: N.nvmlDeviceGetCount())
    text = json.dumps(result, indent=1, default=str)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text)
    print(text[:3000])


if __name__ == "__main__":
    main()
