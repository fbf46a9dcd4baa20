"""GPM freshness and the GPU's own MIG profile table, on a real GPU, read-only.

Usage on a GPU machine (no install: torch only for the load)::

    PYTHONPATH=core/src:exporter/src python3 bench/h200_freshness.py OUT_DIR [--counters]

and, without a GPU, ``--dry-run`` runs the same code over the simulator (no load, no lags
worth reading) to check the script itself. It changes no GPU setting (no MIG mode, clocks,
power limits, persistence or reset). It records, into ``OUT_DIR/h200-freshness.json``:

1. ``profile_table``: the production reader (:mod:`migscope.exporter._backends.nvml.profiles`)
   on GPU 0, every NVML call it made with its answer or error code and its latency, and the
   ``migscope_gpu_mig_profile_info`` lines the collector renders from a full backend read.
2. ``gpm_sample_memory``: resident memory per filled GPM sample buffer (the ring's cost).
3. ``metrics_get_us``: ``nvmlGpmMetricsGet`` latency over a 1 s and a 10 s span.
4. ``freshness``: four production ``NvmlBackend`` + ``Sampler`` pairs sampled once a second,
   side by side on one load: the old fixed 10 s window (``gpm_refresh=10``) and sliding
   windows of 10, 5 and 2 s refreshed every cycle, while a child process runs a bf16 8192²
   matmul loop in two pulses at known times; per cycle the whole-GPU activity each one
   publishes, its window, its NVML calls and CPU time, NVML's own utilisation rate and
   ``nvidia-smi``'s, and the SM clock. With MIG disabled this is the whole-GPU GPM path
   (``nvmlGpmSampleGet``), the same code as per slice minus the GPU-instance id.
5. ``--counters``: instead of 4., the 10 s window refreshed every cycle and every 2 s, each
   also as the slope of its activity integral (the ``*_active_seconds_total`` counter) between
   its last two changes: what ``irate()`` of a fine scrape would show.
6. ``lags``: per series and pulse, seconds from the load's start until the value first
   exceeds 0.5 and from its stop until it first falls below 0.1, at the time the value was
   published (a scrape adds up to its own interval).
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._backends.nvml.codes import code_of
from migscope.exporter._backends.nvml.profiles import read_profile_table
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._sampler import Sampler

Config = tuple[str, float, float]
CONFIGS: tuple[Config, ...] = (
    ("fixed-10s", 10.0, 10.0),
    ("sliding-10s", 10.0, 0.0),
    ("sliding-5s", 5.0, 0.0),
    ("sliding-2s", 2.0, 0.0),
)
"""(name, gpm_interval = window, gpm_refresh)."""
COUNTER_CONFIGS: tuple[Config, ...] = (
    ("refresh-1s", 10.0, 0.0),
    ("refresh-2s", 10.0, 2.0),
)
"""``--counters``: the default 10 s window refreshed every cycle against every 2 s; each also
read through its ``graphics_active_seconds_total`` integral (``<name>/counter``)."""
PULSES = ((15.5, 25.0), (62.3, 25.0))
"""(start, duration) of each load pulse, seconds after the sampling grid starts. The two
starts fall at different phases of the fixed 10 s windows (5.5 and 2.3 s into one)."""
TOTAL = 110.0
INTERVAL = 1.0
MASK = "GPU-00000000-0000-0000-0000-000000000000"

LOAD = r"""
import json, sys, time, torch
pulses = json.loads(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
c = a @ b
torch.cuda.synchronize()
print("ready", flush=True)
t0 = float(sys.stdin.readline())
done = []
for start, seconds in pulses:
    time.sleep(max(0.0, t0 + start - time.time()))
    began = time.time()
    while time.time() < t0 + start + seconds:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
    done.append({"start": began - t0, "stop": time.time() - t0})
print(json.dumps(done), flush=True)
"""


def mask(text: str) -> str:
    return re.sub(r"GPU-[0-9a-f-]{36}", MASK, text)


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def median_us(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return round(statistics.median(times), 2)


def profile_table(nvml: Any) -> dict[str, Any]:
    """The production reader on GPU 0, with every call it made."""
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    calls: list[dict[str, Any]] = []

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        entry: dict[str, Any] = {"fn": fn.__name__, "arg": args[1] if len(args) > 1 else None}
        try:
            result = fn(*args)
            entry["ok"] = True
            return result
        except nvml.NVMLError as exc:
            entry["error"] = type(exc).__name__
            entry["code"] = code_of(exc)
            raise
        finally:
            entry["us"] = round((time.perf_counter() - t0) * 1e6, 1)
            calls.append(entry)

    t0 = time.perf_counter()
    table = read_profile_table(nvml, call, handle)
    seconds = time.perf_counter() - t0
    return {
        "mig_mode": list(nvml.nvmlDeviceGetMigMode(handle)),
        "nvidia_ml_py_profile_count": int(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT),
        "read_seconds": round(seconds, 4),
        "profiles": [{**p.__dict__, "placements": list(p.placements)} for p in table],
        "calls": calls,
    }


def gpm_sample_memory(nvml: Any, n: int = 256) -> dict[str, Any]:
    """Resident memory per allocated and filled GPM sample buffer."""
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    before = rss_kib()
    samples = [nvml.nvmlGpmSampleAlloc() for _ in range(n)]
    allocated = rss_kib()
    for s in samples:
        nvml.nvmlGpmSampleGet(handle, s)
    filled = rss_kib()
    for s in samples:
        nvml.nvmlGpmSampleFree(s)
    return {
        "samples": n,
        "rss_kib_before": before,
        "rss_kib_allocated": allocated,
        "rss_kib_filled": filled,
        "kib_per_sample": round((filled - before) / n, 2),
    }


def metrics_get_us(nvml: Any, sleep: Callable[[float], None]) -> dict[str, Any]:
    """``nvmlGpmMetricsGet`` latency over spans of 1 s and 10 s (does the span matter?)."""
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    old, mid, new = (nvml.nvmlGpmSampleAlloc() for _ in range(3))
    nvml.nvmlGpmSampleGet(handle, old)
    sleep(9.0)
    nvml.nvmlGpmSampleGet(handle, mid)
    sleep(1.0)
    nvml.nvmlGpmSampleGet(handle, new)
    out = {}
    for name, first in (("span_1s", mid), ("span_10s", old)):
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 5
        request.sample1, request.sample2 = first, new
        for i, m in enumerate(
            (
                nvml.NVML_GPM_METRIC_GRAPHICS_UTIL,
                nvml.NVML_GPM_METRIC_SM_UTIL,
                nvml.NVML_GPM_METRIC_SM_OCCUPANCY,
                nvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                nvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
            )
        ):
            request.metrics[i].metricId = m
        out[name] = median_us(lambda r=request: nvml.nvmlGpmMetricsGet(r), 50)
    out["sample_get"] = median_us(lambda: nvml.nvmlGpmSampleGet(handle, new), 200)
    for s in (old, mid, new):
        nvml.nvmlGpmSampleFree(s)
    return out


def collect_profiles_exposition(nvml: Any) -> str:
    """The profile-table lines of one rendered exposition from a full backend read."""
    backend = NvmlBackend(nvml, gpm_interval=1.0)
    sampler = Sampler(backend, interval=1.0)
    snap = sampler.run_once()
    text = SnapshotCollector(snapshot=lambda: snap, backend="nvml", version="bench").render_text()
    backend.close()
    keep = [
        line
        for line in text.decode().splitlines()
        if "migscope_gpu_mig_profile_info" in line or "migscope_gpu_info" in line
    ]
    return mask("\n".join(keep) + "\n")


class SmiLog:
    """``nvidia-smi`` printing its utilisation every 250 ms, for comparison."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(
                [
                    "nvidia-smi",
                    "--query-gpu=timestamp,utilization.gpu",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "250",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )

    def stop(self, t0: float) -> list[tuple[float, float]]:
        if self.proc is None:
            return []
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        rows = []
        for line in out.splitlines():
            try:
                stamp, util = (x.strip() for x in line.split(","))
                t = datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
                rows.append((round(t - t0, 3), float(util) / 100.0))
            except ValueError:
                continue
        return rows


def clock_mhz(nvml: Any, handle: Any) -> int | None:
    """The SM clock now: GPM's ratios count cycles, so clocks weigh a window's parts."""
    try:
        return int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    except nvml.NVMLError:
        return None


def freshness(
    nvml: Any, load: subprocess.Popen[str] | None, total: float, configs: tuple[Config, ...]
) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    runs = []
    for name, window, refresh in configs:
        backend = NvmlBackend(nvml, gpm_interval=window, gpm_refresh=refresh)
        runs.append((name, backend, Sampler(backend, interval=INTERVAL, energy_interval=1e6)))
    for _name, _backend, sampler in runs:
        sampler.run_once()  # open NVML, enumerate, first GPM sample: not part of the grid
    smi = SmiLog()
    t0 = time.time() + 1.0
    if load is not None:
        assert load.stdin is not None
        load.stdin.write(f"{t0}\n")
        load.stdin.flush()
    rows: list[dict[str, Any]] = []
    k = 0
    while True:
        due = t0 + k * INTERVAL
        if due - t0 > total:
            break
        time.sleep(max(0.0, due - time.time()))
        row: dict[str, Any] = {"tick": k}
        for name, backend, sampler in runs:
            calls = backend.calls
            cpu, wall = time.thread_time(), time.perf_counter()
            snap = sampler.run_once()
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            gpu = snap.gpus[0] if snap.gpus else None
            act = gpu.activity if gpu else None
            integral = gpu.active_seconds if gpu else None
            gpm = next((c.duration_seconds for c in snap.collectors if c.name == "gpm"), None)
            row[name] = {
                "t": round(time.time() - t0, 3),
                "graphics": None if act is None else act.graphics,
                "window": None if act is None else act.window_seconds,
                "integral": None if integral is None else integral.graphics,
                "calls": backend.calls - calls,
                "wall_ms": round(wall * 1e3, 3),
                "cpu_ms": round(cpu * 1e3, 3),
                "gpm_ms": None if gpm is None else round(gpm * 1e3, 3),
            }
        util = nvml.nvmlDeviceGetUtilizationRates(handle)
        row["nvml_util"] = {"t": round(time.time() - t0, 3), "graphics": util.gpu / 100.0}
        row["sm_clock_mhz"] = clock_mhz(nvml, handle)
        rows.append(row)
        k += 1
    smi_rows = smi.stop(t0)
    for _name, _backend, sampler in runs:
        sampler.stop()
    pulses: list[dict[str, float]] = [{"start": s, "stop": s + d} for s, d in PULSES]
    if load is not None:
        assert load.stdout is not None
        pulses = json.loads(load.stdout.readline())
        load.wait(timeout=30)
    return {"pulses": pulses, "cycles": rows, "nvidia_smi": smi_rows}


def counter_slope(
    cycles: list[dict[str, Any]], name: str, refresh: float
) -> list[tuple[float, float | None]]:
    """The integral's slope over the last refresh span (one cycle when every cycle refreshes),
    as published at each cycle: ``rate()`` over that span of a scrape taken every cycle."""
    back = max(1, round(refresh / INTERVAL))
    out: list[tuple[float, float | None]] = []
    for k, row in enumerate(cycles):
        value = None
        if k >= back:
            then, now = cycles[k - back][name], row[name]
            if then["integral"] is not None and now["integral"] is not None:
                value = (now["integral"] - then["integral"]) / (now["t"] - then["t"])
        out.append((row[name]["t"], value))
    return out


def series(result: dict[str, Any], name: str) -> list[tuple[float, float | None]]:
    if name == "nvidia-smi":
        return [(t, v) for t, v in result["nvidia_smi"]]
    if name.endswith("/counter"):
        base = name.removesuffix("/counter")
        refresh = next(c["refresh_s"] for c in result["configs"] if c["name"] == base)
        return counter_slope(result["cycles"], base, refresh)
    return [(r[name]["t"], r[name]["graphics"]) for r in result["cycles"]]


def lags(
    result: dict[str, Any], configs: tuple[Config, ...]
) -> dict[str, list[dict[str, float | None]]]:
    """Seconds from each pulse's start to > 0.5 and from its stop to < 0.1, per series."""
    names = [c[0] for c in configs]
    if configs is COUNTER_CONFIGS:
        names += [f"{c[0]}/counter" for c in configs]
    names += ["nvml_util", "nvidia-smi"]
    out: dict[str, list[dict[str, float | None]]] = {}
    for name in names:
        points = series(result, name)
        found = []
        for pulse in result["pulses"]:
            up = next(
                (t for t, v in points if t >= pulse["start"] and v is not None and v > 0.5), None
            )
            down = next(
                (t for t, v in points if t >= pulse["stop"] and v is not None and v < 0.1), None
            )
            found.append(
                {
                    "rise_s": None if up is None else round(up - pulse["start"], 2),
                    "fall_s": None if down is None else round(down - pulse["stop"], 2),
                }
            )
        out[name] = found
    return out


def costs(result: dict[str, Any], configs: tuple[Config, ...]) -> dict[str, dict[str, float]]:
    out = {}
    for name, _w, _r in configs:
        cycles = [r[name] for r in result["cycles"]]
        out[name] = {
            key: round(statistics.mean(c[key] for c in cycles if c[key] is not None), 4)
            for key in ("calls", "wall_ms", "cpu_ms", "gpm_ms")
        }
    return out


def main(argv: list[str]) -> None:
    dry = "--dry-run" in argv
    configs = COUNTER_CONFIGS if "--counters" in argv else CONFIGS
    args = [a for a in argv if a not in ("--dry-run", "--counters")]
    out = Path(args[0] if args else ".")
    out.mkdir(parents=True, exist_ok=True)
    load = None
    if dry:
        from migscope.sim import SimClock, Simulation

        scenario = {
            "seed": 1,
            "nodes": [{"name": "n", "gpus": [{"model": "H200", "mig": False}]}],
        }
        nvml: Any = Simulation.from_scenario(scenario, clock=SimClock(realtime=True)).node("n").nvml
        sleep: Callable[[float], None] = lambda s: None  # noqa: E731
    else:
        import pynvml

        nvml, sleep = pynvml, time.sleep
        load = subprocess.Popen(
            [sys.executable, "-c", LOAD, json.dumps(PULSES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert load.stdout is not None
        print(load.stdout.readline().strip(), flush=True)  # "ready": CUDA is up
    nvml.nvmlInit()
    report: dict[str, Any] = {
        "driver": str(nvml.nvmlSystemGetDriverVersion()),
        "gpu": str(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0))),
        "command": "PYTHONPATH=core/src:exporter/src python3 bench/h200_freshness.py OUT_DIR"
        + (" --counters" if configs is COUNTER_CONFIGS else ""),
        "configs": [{"name": n, "window_s": w, "refresh_s": r} for n, w, r in configs],
        "interval_s": INTERVAL,
    }
    report["profile_table"] = profile_table(nvml)
    print("profile table:", len(report["profile_table"]["profiles"]), "profiles", flush=True)
    (out / "h200-profile-info.prom").write_text(collect_profiles_exposition(nvml))
    report["gpm_sample_memory"] = gpm_sample_memory(nvml)
    report["metrics_get_us"] = metrics_get_us(nvml, sleep)
    print("gpm:", report["gpm_sample_memory"], report["metrics_get_us"], flush=True)
    result = freshness(nvml, load, 12.0 if dry else TOTAL, configs)
    result["configs"] = report["configs"]
    report["lags"] = lags(result, configs)
    report["cost_per_cycle"] = costs(result, configs)
    report["freshness"] = result
    nvml.nvmlShutdown()
    name = "h200-freshness-counters.json" if configs is COUNTER_CONFIGS else "h200-freshness.json"
    (out / name).write_text(mask(json.dumps(report, indent=1)))
    print(json.dumps({"lags": report["lags"], "cost": report["cost_per_cycle"]}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
