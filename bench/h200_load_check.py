"""Run the exporter's NVML path on a real GPU, idle and under a matmul load, read-only.

Usage on a GPU machine (no install needed; torch only for the load)::

    PYTHONPATH=src:exporter python3 bench/h200_load_check.py OUT_DIR

It changes no GPU setting (no MIG mode, clocks, power limits, persistence or reset). Phases:
idle (8 s), load (a bf16 8192x8192 matmul loop in a child process, 12 s), idle again (8 s).
The production ``NvmlBackend`` and ``Sampler`` sample once a second throughout; the script
records GPM activity, memory used and power per sample, the NVML calls and CPU time per
cycle, and one rendered exposition taken under load, and prints a summary. With MIG
disabled the activity is the whole GPU's (the same GPM code path as per slice, minus the GI id).
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pynvml
from prometheus_client import CollectorRegistry, generate_latest

from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._sampler import Sampler

LOAD = r"""
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
c = a @ b
torch.cuda.synchronize()
print("ready", flush=True)
end = time.time() + float(__import__("sys").argv[1])
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""


def sample_phase(
    sampler: Sampler, backend: NvmlBackend, seconds: float, phase: str
) -> list[dict[str, Any]]:
    rows = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        calls0 = backend.calls
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        snap = sampler.run_once()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        gpu = snap.gpus[0]
        act = gpu.activity
        rows.append(
            {
                "phase": phase,
                "t": round(time.time(), 3),
                "graphics": None if act is None else act.graphics,
                "sm_active": None if act is None else act.sm_active,
                "tensor": None if act is None else act.tensor,
                "dram": None if act is None else act.dram,
                "memory_used_bytes": gpu.memory_used_bytes,
                "power_watts": gpu.power_watts,
                "cycle_wall_ms": round(wall * 1000, 3),
                "cycle_cpu_ms": round(cpu * 1000, 3),
                "nvml_calls": backend.calls - calls0,
            }
        )
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
    return rows


def summary(rows: list[dict[str, Any]], phase: str) -> dict[str, Any]:
    chosen = [r for r in rows if r["phase"] == phase and r["graphics"] is not None]

    def med(key: str) -> float | None:
        values = [r[key] for r in chosen if r[key] is not None]
        return round(statistics.median(values), 4) if values else None

    return {
        "samples": len(chosen),
        "graphics_median": med("graphics"),
        "sm_active_median": med("sm_active"),
        "tensor_median": med("tensor"),
        "memory_used_bytes_median": med("memory_used_bytes"),
        "power_watts_median": med("power_watts"),
        "cycle_wall_ms_median": med("cycle_wall_ms"),
        "cycle_cpu_ms_median": med("cycle_cpu_ms"),
        "nvml_calls_per_cycle": med("nvml_calls"),
    }


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    backend = NvmlBackend(pynvml, gpm_interval=1.0)  # one activity value per 1-s sample
    sampler = Sampler(backend, interval=1.0, energy_interval=5.0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot=sampler.latest, backend="nvml", version="bench"))
    rows = sample_phase(sampler, backend, 8, "idle")
    load = subprocess.Popen([sys.executable, "-c", LOAD, "14"], stdout=subprocess.PIPE, text=True)
    assert load.stdout is not None
    load.stdout.readline()  # "ready": CUDA is up and the first matmul ran
    time.sleep(1.5)  # one full sampling interval inside the loop
    rows += sample_phase(sampler, backend, 10, "load")
    # The GPU's UUID is masked before anything is written, as in the team's fixtures.
    exposition = re.sub(
        r"GPU-[0-9a-f-]{36}",
        "GPU-00000000-0000-0000-0000-000000000000",
        generate_latest(registry).decode(),
    )
    load.wait()
    time.sleep(1.0)
    rows += sample_phase(sampler, backend, 8, "idle-after")
    sampler.stop()
    last = sampler.latest()
    report = {
        "driver": last.driver_version if last else None,
        "gpu": last.gpus[0].name if last and last.gpus else None,
        "phases": {p: summary(rows, p) for p in ("idle", "load", "idle-after")},
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "pid": os.getpid(),
        "samples": rows,
    }
    (out / "h200_load_check.json").write_text(json.dumps(report, indent=1))
    (out / "h200_exposition_under_load.txt").write_text(exposition)
    print(json.dumps(report["phases"], indent=1))
    print("max RSS MiB", report["max_rss_mib"])


if __name__ == "__main__":
    main()
