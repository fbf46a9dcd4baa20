"""The exporter's CPU and scrape latency on a real GPU, and what one sampling cycle calls.

Read-only (only ``nvmlDeviceGet*``/``nvmlGpm*`` sampling, as the exporter does). Three parts,
one run:

1. **Cost model, in process**: the production ``NvmlBackend`` + ``Sampler`` at the default
   settings over the real ``pynvml``, every NVML function wrapped to count its calls and time
   them; ``--cycles`` cycles one second apart. Per function: calls per cycle and the median
   µs per call; per cycle: CPU (``process_time``) against the time inside NVML.
2. **CPU of the served exporter**: ``migscope exporter`` (defaults; ``--no-pod-attribution``:
   there is no kubelet here) in a child process, idle GPU; after ``--warmup`` s, its user +
   system CPU over ``--seconds`` s from ``/proc/PID/stat``, as % of one core, and per thread.
3. **Scrape latency**: ``--scrapes`` GETs of ``/metrics`` over one keep-alive connection
   (after 100 warm-up scrapes), p50/p99/max in ms, identity and gzip.

Extra exporter environment (``MIGSCOPE_EXPORTER_*``) can be given as ``--env NAME=VALUE``.

Run: ``PYTHONPATH=core/src:exporter/src python3 bench/h200_exporter_cpu.py OUT.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class CountingNvml:
    """pynvml with every ``nvml*`` function counted and timed (wall µs; NVML calls block)."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self.samples: dict[str, list[float]] = defaultdict(list)

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._nvml, name)
        if not name.startswith("nvml") or not callable(target) or isinstance(target, type):
            return target
        samples = self.samples[name]

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return target(*args, **kwargs)
            finally:
                samples.append((time.perf_counter() - t0) * 1e6)

        return timed


def cost_model(cycles: int) -> dict[str, Any]:
    import pynvml

    from migscope.exporter._backends.nvml import NvmlBackend
    from migscope.exporter._sampler import Sampler
    from migscope.exporter._settings import load_settings

    s = load_settings(environ={})
    counting = CountingNvml(pynvml)
    backend = NvmlBackend(
        counting,
        enumerate_interval=s.enumerate_interval,
        gpm_interval=s.gpm_interval,
        gpm_refresh=s.gpm_refresh,
    )
    sampler = Sampler(backend, interval=s.interval, energy_interval=s.energy_interval)
    for _ in range(12):  # open, enumerate, profile table, GPM ring primed
        sampler.run_once()
        time.sleep(s.interval)
    counting.samples.clear()
    cpu, inside = [], []
    for _ in range(cycles):
        before = sum(sum(v) for v in counting.samples.values())
        t0 = time.process_time()
        sampler.run_once()
        cpu.append((time.process_time() - t0) * 1000)
        inside.append((sum(sum(v) for v in counting.samples.values()) - before) / 1000)
        time.sleep(s.interval)
    sampler.stop()
    per_call = {
        name: {
            "calls_per_cycle": round(len(v) / cycles, 3),
            "median_us": round(statistics.median(v), 1),
            "mean_us": round(statistics.fmean(v), 1),
            "us_per_cycle": round(sum(v) / cycles, 1),
        }
        for name, v in sorted(counting.samples.items(), key=lambda kv: -sum(kv[1]))
    }
    return {
        "settings": {
            "interval": s.interval,
            "gpm_interval": s.gpm_interval,
            "gpm_refresh": s.gpm_refresh,
            "energy_interval": s.energy_interval,
            "enumerate_interval": s.enumerate_interval,
        },
        "cycles": cycles,
        "cpu_ms_per_cycle_median": round(statistics.median(cpu), 3),
        "cpu_ms_per_cycle_mean": round(statistics.fmean(cpu), 3),
        "inside_nvml_ms_per_cycle_mean": round(statistics.fmean(inside), 3),
        "per_call": per_call,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ticks(pid: int) -> dict[str, int]:
    """user+system clock ticks of the process and of each of its threads."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        out[f"{task.name}:{name}"] = int(fields[11]) + int(fields[12])
    return out


def _scrapes(port: int, n: int, gzip: bool) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Accept": "text/plain;version=0.0.4"}
    if gzip:
        headers["Accept-Encoding"] = "gzip"
    times, size = [], 0
    for i in range(n + 100):
        t0 = time.perf_counter()
        conn.request("GET", "/metrics", headers=headers)
        size = len(conn.getresponse().read())
        if i >= 100:
            times.append((time.perf_counter() - t0) * 1000)
    conn.close()
    times.sort()
    return {
        "bytes": size,
        "p50_ms": round(times[len(times) // 2], 3),
        "p99_ms": round(times[int(len(times) * 0.99) - 1], 3),
        "max_ms": round(times[-1], 3),
    }


def served(seconds: float, warmup: float, scrapes: int, env: dict[str, str]) -> dict[str, Any]:
    port = _free_port()
    code = "import sys; from migscope.exporter._cli import main; main(sys.argv[1:])"
    child = subprocess.Popen(
        [sys.executable, "-c", code, "--listen", f"127.0.0.1:{port}", "--no-pod-attribution"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        time.sleep(warmup)
        hz = os.sysconf("SC_CLK_TCK")
        t0, before = time.monotonic(), _ticks(child.pid)
        time.sleep(seconds)
        t1, after = time.monotonic(), _ticks(child.pid)
        wall = t1 - t0
        threads = {
            k: round(100 * (after[k] - before.get(k, 0)) / hz / wall, 3)
            for k in after
            if after[k] - before.get(k, 0)
        }
        total = 100 * (sum(after.values()) - sum(before.values())) / hz / wall
        latency = {
            "identity": _scrapes(port, scrapes, False),
            "gzip": _scrapes(port, scrapes, True),
        }
        status = {
            line.split(":")[0]: line.split(":")[1].strip()
            for line in Path(f"/proc/{child.pid}/status").read_text().splitlines()
            if line.startswith(("VmRSS", "VmHWM"))
        }
    finally:
        child.terminate()
        _, err = child.communicate(timeout=30)
    return {
        "env": env,
        "seconds": round(wall, 1),
        "cpu_percent_of_a_core": round(total, 3),
        "cpu_percent_by_thread": threads,
        "scrapes": scrapes,
        "scrape": latency,
        "memory": status,
        "stderr_tail": err.decode(errors="replace")[-2000:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=15)
    parser.add_argument("--scrapes", type=int, default=1000)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE, repeatable")
    parser.add_argument("--skip-model", action="store_true")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    report: dict[str, Any] = {}
    if not args.skip_model:
        report["cost_model"] = cost_model(args.cycles)
        print(json.dumps(report["cost_model"], indent=1), flush=True)
    report["served"] = served(args.seconds, args.warmup, args.scrapes, env)
    print(json.dumps(report["served"], indent=1), flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
