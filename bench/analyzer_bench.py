"""The Prometheus analyzer's wall time and memory against the server's own PromQL time.

Run ``python bench/analyzer_bench.py [--slices 100 1000 3000] [--chunk-nodes 50]``.

For each size N the benchmark writes a synthetic week of history at a 60 s resolution for N
MIG slices (56 per node: 8 GPUs of 7 ``1g`` slices), in the migscope dialect: per slice
``migscope_mig_info``, ``migscope_mig_graphics_active_ratio``,
``migscope_mig_memory_used_bytes``, ``migscope_mig_energy_estimated_joules_total`` for the
whole week, and ``migscope_mig_pod_info`` for the spans a pod holds the slice (80 % of the
slices are held, by one or two pods). Labels are ``node``, ``gpu``, ``gpu_uuid``,
``gpu_instance_id``, ``mig_uuid`` (plus ``namespace``, ``pod`` on pod info), as after the
relabelling of ``docs/metrics.md``.

The OpenMetrics text is assembled with numpy as fixed-width byte rows (no per-sample Python),
backfilled with ``promtool tsdb create-blocks-from openmetrics --max-block-duration=168h``
into one week-aligned block, and served by a real Prometheus (``tests/support/prometheus.py``).
The analyzer then runs :func:`remote_slice_stats` over the week **in a child process**, so
its peak RSS (``ru_maxrss``) is its own and not the generator's. Reported per run:

* ``wall_s``: the analyzer's wall time (``RemoteSliceStats.wall_seconds``: queries plus
  result handling), and ``total_s`` the child's time including setup (dialect and node
  discovery);
* ``eval_s``: the sum of Prometheus' ``evalTotalTime`` over the queries (``stats=all``);
* ``overhead``: ``wall_s / eval_s - 1`` (the target is <= 25 %);
* ``queries``, ``samples`` (``totalQueryableSamples``), ``slices`` returned;
* ``rss_mib``: the analyzer child's peak RSS (``VmHWM``), and ``rss_base_mib`` its peak
  after imports, before the first query;
* ``prom_rss_mib``: Prometheus' peak RSS (``VmHWM``) at the end of the run, for context.

Times are printed, never asserted: the numbers are for the reader (docs/analyzer-benchmark.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
STEP = 60
WEEK = 7 * 86400
POINTS = WEEK // STEP
GPUS_PER_NODE = 8
SLICES_PER_GPU = 7
SLICES_PER_NODE = GPUS_PER_NODE * SLICES_PER_GPU
SLICE_BYTES = 18 * 1024**3  # an H200 1g.18gb slice
CHUNK = 128  # slices assembled at once (bounds the generator's memory)

U8 = npt.NDArray[np.uint8]


# --------------------------------------------------------------------------------------------
# History generation


def week_start(now: float) -> int:
    """The start of the last whole 168 h block before ``now`` (promtool aligns blocks so)."""
    return (int(now) // WEEK - 2) * WEEK


def digits(values: npt.NDArray[np.int64], width: int) -> U8:
    """Non-negative integers as zero-padded ASCII digits, shape ``values.shape + (width,)``."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((values[..., None] // powers) % 10 + 48).astype(np.uint8)


def ratio_chars(millis: npt.NDArray[np.int64]) -> U8:
    """Ratios given in thousandths (0..1000) as ``d.ddd``."""
    whole = digits(millis // 1000, 1)
    frac = digits(millis % 1000, 3)
    dot = np.full((*millis.shape, 1), ord("."), dtype=np.uint8)
    return np.concatenate([whole, dot, frac], axis=-1)


def rows(prefixes: Sequence[bytes], values: U8, stamps: U8) -> bytes:
    """OpenMetrics lines ``<prefix><value> <ts>\\n`` for S series of T points each.

    ``prefixes`` must all have the same length (series name, labels and a space); ``values``
    is ``(S, T, W)`` ASCII and ``stamps`` ``(T, 10)`` ASCII seconds.
    """
    count, points, _ = values.shape
    pre = np.frombuffer(b"".join(prefixes), dtype=np.uint8).reshape(count, 1, -1)
    parts = [
        np.broadcast_to(pre, (count, points, pre.shape[-1])),
        values,
        np.full((count, points, 1), ord(" "), dtype=np.uint8),
        np.broadcast_to(stamps, (count, points, stamps.shape[-1])),
        np.full((count, points, 1), ord("\n"), dtype=np.uint8),
    ]
    return np.concatenate(parts, axis=-1).tobytes()


class Fleet:
    """N synthetic slices: their labels and deterministic random behaviour."""

    def __init__(self, slices: int, seed: int = 7) -> None:
        self.slices = slices
        self.rng = np.random.default_rng(seed)
        ids = np.arange(slices)
        self.node = ids // SLICES_PER_NODE
        self.gpu = (ids % SLICES_PER_NODE) // SLICES_PER_GPU
        self.gi = 7 + ids % SLICES_PER_GPU  # H200 1g GIs are 7..13
        self.level = self.rng.uniform(0.02, 0.9, slices)
        self.phase = self.rng.uniform(0, 2 * np.pi, slices)
        self.mem = self.rng.uniform(0.05, 0.95, slices)
        self.watts = self.rng.uniform(40.0, 100.0, slices)
        held = self.rng.random(slices) < 0.8
        split = self.rng.integers(POINTS // 4, POINTS, slices)
        two = self.rng.random(slices) < 0.5
        # Pod spans, as (first, end) point indices: one pod from the start, maybe a second.
        self.spans: list[list[tuple[int, int]]] = []
        for i in range(slices):
            if not held[i]:
                self.spans.append([])
            elif two[i]:
                self.spans.append([(0, int(split[i]) - 30), (int(split[i]), POINTS)])
            else:
                self.spans.append([(0, int(split[i]))])

    def labels(self, i: int) -> bytes:
        node, gpu, gi = int(self.node[i]), int(self.gpu[i]), int(self.gi[i])
        return (
            f'node="node-{node:05d}",gpu="{gpu}",gpu_uuid="GPU-{node:05d}-{gpu}",'
            f'gpu_instance_id="{gi}",mig_uuid="MIG-{i:06d}"'
        ).encode()


def write_history(fleet: Fleet, t0: int, out: BinaryIO, part: range | None = None) -> int:
    """Write the week of the fleet's slices in ``part`` (all) as OpenMetrics; samples written."""
    part = range(fleet.slices) if part is None else part
    stamps = digits(t0 + STEP * np.arange(POINTS, dtype=np.int64), 10)
    minutes = np.arange(POINTS, dtype=np.float64)
    day = np.sin(2 * np.pi * minutes / 1440.0)
    total = 0
    chunks = [range(s, min(s + CHUNK, part.stop)) for s in range(part.start, part.stop, CHUNK)]

    def family(name: str, make: Any) -> None:
        nonlocal total
        for chunk in chunks:
            idx = np.array(chunk)
            values: U8 = make(idx)
            prefixes = [f"{name}{{".encode() + fleet.labels(i) + b"} " for i in chunk]
            # rows() wants equal prefix lengths: GI 7..9 has one digit, 10..13 two.
            for length in sorted({len(p) for p in prefixes}):
                pick = [k for k, p in enumerate(prefixes) if len(p) == length]
                out.write(rows([prefixes[k] for k in pick], values[pick], stamps))
            total += values.shape[0] * values.shape[1]

    def info(idx: npt.NDArray[np.int64]) -> U8:
        return np.full((len(idx), POINTS, 1), ord("1"), dtype=np.uint8)

    def activity(idx: npt.NDArray[np.int64]) -> U8:
        rng = fleet.rng
        base = fleet.level[idx, None] * (1 + 0.5 * np.sin(2 * np.pi * minutes / 1440.0))
        noisy = base + rng.normal(0, 0.05, (len(idx), POINTS))
        return ratio_chars(np.clip(np.rint(noisy * 1000), 0, 1000).astype(np.int64))

    def memory(idx: npt.NDArray[np.int64]) -> U8:
        frac = fleet.mem[idx, None] * (1 + 0.1 * day) + fleet.rng.normal(
            0, 0.01, (len(idx), POINTS)
        )
        used = np.clip(frac, 0, 1) * SLICE_BYTES
        return digits(used.astype(np.int64), 11)

    def energy(idx: npt.NDArray[np.int64]) -> U8:
        power = fleet.watts[idx, None] * (0.6 + 0.4 * np.clip(fleet.level[idx, None], 0, 1))
        joules = np.cumsum(np.broadcast_to(power * STEP, (len(idx), POINTS)), axis=1)
        return digits(joules.astype(np.int64), 10)

    family("migscope_mig_info", info)
    family("migscope_mig_graphics_active_ratio", activity)
    family("migscope_mig_memory_used_bytes", memory)
    family("migscope_mig_energy_estimated_joules_total", energy)
    # Pod info: variable spans, so one series at a time.
    for i in part:
        for k, (first, end) in enumerate(fleet.spans[i]):
            prefix = (
                b"migscope_mig_pod_info{"
                + fleet.labels(i)
                + f',namespace="team-{i % 17:02d}",pod="job-{i:06d}-{k}",'
                f'container="main",resource="nvidia.com/mig-1g.18gb"}} '.encode()
            )
            count = end - first
            ones = np.full((1, count, 1), ord("1"), dtype=np.uint8)
            out.write(rows([prefix], ones, stamps[first:end]))
            total += count
    out.write(b"# EOF\n")
    return total


# --------------------------------------------------------------------------------------------
# Measurement (child process)


def measure(url: str, start: float, end: float, chunk_nodes: int) -> dict[str, Any]:
    """Run the analyzer once over the window; its numbers and this process's peak RSS."""
    from migscope.analyzer.sources.prometheus import PrometheusClient
    from migscope.analyzer.sources.remote_stats import remote_slice_stats

    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec, so it would report the
    # parent's (the generator's) peak; VmHWM belongs to this process's own address space.
    base_kib = proc_kib(os.getpid(), "VmHWM")
    started = time.perf_counter()
    with PrometheusClient(url, timeout=600.0, trust_env=False) as client:
        run = remote_slice_stats(client, start=start, end=end, chunk_nodes=chunk_nodes)
        slices = sum(1 for _ in run)
    total = time.perf_counter() - started
    return {
        "slices": slices,
        "nodes": len(run.nodes),
        "queries": run.queries,
        "wall_s": run.wall_seconds,
        "total_s": total,
        "eval_s": run.server_eval_seconds,
        "samples": run.queryable_samples,
        "rss_mib": proc_kib(os.getpid(), "VmHWM") / 1024,
        "rss_base_mib": base_kib / 1024,
    }


def proc_kib(pid: int, field: str) -> float:
    """A ``/proc/<pid>/status`` memory field (``VmHWM``, ``VmRSS``) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return float("nan")


# --------------------------------------------------------------------------------------------
# Driver


def bench_size(
    slices: int, chunk_nodes: Sequence[int], work: Path, parts: int = 1
) -> Iterator[dict[str, Any]]:
    """Generate, backfill, serve and measure one fleet size; one result per ``chunk_nodes``.

    With ``parts`` > 1 the history is written and backfilled a part of the slices at a time
    (whole nodes per part), each file deleted after its backfill: 10,000 slices are ~69 GB
    of text at once. Prometheus merges the overlapping blocks when it opens them.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from support.prometheus import PrometheusServer

    t0 = week_start(time.time())
    fleet = Fleet(slices)
    per_part = -(-slices // parts // SLICES_PER_NODE) * SLICES_PER_NODE
    ranges = [range(a, min(a + per_part, slices)) for a in range(0, slices, per_part)]
    totals = {"samples": 0, "gen_s": 0.0, "size_mib": 0.0}

    def generate(part: range) -> Path:
        path = work / f"history-{slices}-{part.start}.om"
        started = time.perf_counter()
        with open(path, "wb") as fh:
            samples = write_history(fleet, t0, fh, part)
        totals["samples"] += samples
        totals["gen_s"] += time.perf_counter() - started
        totals["size_mib"] += path.stat().st_size / 2**20
        print(f"# slices {part.start}-{part.stop}: {samples:,} samples", flush=True)
        return path

    class TimedServer(PrometheusServer):
        backfill_s = 0.0

        def before_start(self) -> None:
            begun, gen_before = time.perf_counter(), totals["gen_s"]
            super().before_start()
            for part in ranges[1:]:
                path = generate(part)
                self.backfill(path)
                path.unlink()
            self.backfill_s = time.perf_counter() - begun - (totals["gen_s"] - gen_before)

    path = generate(ranges[0])
    # A week of 1,400 slices per query outlasts Prometheus's default 2 min query timeout on
    # two busy cores; the benchmark measures evaluation cost, so it lifts the limit.
    server = TimedServer(openmetrics=path, startup_timeout=600.0, extra_args=["--query.timeout=1h"])
    started = time.perf_counter()
    with server:
        ready_s = time.perf_counter() - started
        backfill_s = server.backfill_s
        path.unlink(missing_ok=True)
        samples, gen_s, size_mib = totals["samples"], totals["gen_s"], totals["size_mib"]
        print(f"# {slices} slices: {samples:,} samples, {size_mib:,.0f} MiB in {gen_s:.1f} s")
        print(f"# backfill {backfill_s:.1f} s, Prometheus ready after {ready_s:.1f} s")
        assert server._proc is not None
        pid = server._proc.pid
        for chunk in chunk_nodes:
            child = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--measure",
                    server.url,
                    str(t0),
                    str(t0 + WEEK),
                    str(chunk),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if child.returncode != 0:
                print(child.stderr[-3000:], file=sys.stderr)
                result: dict[str, Any] = {"error": child.stderr.strip().splitlines()[-1]}
            else:
                result = json.loads(child.stdout)
            eval_s = result.get("eval_s")
            yield {
                "slices_generated": slices,
                "chunk_nodes": chunk,
                **result,
                "overhead": result["wall_s"] / eval_s - 1 if eval_s else None,
                "prom_rss_mib": proc_kib(pid, "VmHWM") / 1024,
                "history_samples": samples,
                "generate_s": gen_s,
                "backfill_s": backfill_s,
                "openmetrics_mib": size_mib,
            }


def table(results: Sequence[dict[str, Any]]) -> str:
    """The results as a fixed-width table."""
    head = (
        f"{'slices':>7} {'chunk':>5} {'queries':>7} {'eval s':>8} {'wall s':>8} "
        f"{'overhd':>7} {'total s':>8} {'RSS MiB':>8} {'base':>6} {'prom MiB':>8} "
        f"{'gen s':>6} {'fill s':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"{r['slices_generated']:>7} {r['chunk_nodes']:>5} ERROR {r['error']}")
            continue
        overhead = f"{100 * r['overhead']:6.1f}%" if r["overhead"] is not None else "    n/a"
        lines.append(
            f"{r['slices']:>7} {r['chunk_nodes']:>5} {r['queries']:>7} {r['eval_s']:>8.2f} "
            f"{r['wall_s']:>8.2f} {overhead:>7} {r['total_s']:>8.2f} {r['rss_mib']:>8.1f} "
            f"{r['rss_base_mib']:>6.1f} {r['prom_rss_mib']:>8.0f} {r['generate_s']:>6.1f} "
            f"{r['backfill_s']:>7.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments; either run the whole benchmark or one child measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--chunk-nodes", type=int, nargs="+", default=[50])
    parser.add_argument("--parts", type=int, default=1, help="write+backfill in this many parts")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--measure", nargs=4, metavar=("URL", "START", "END", "CHUNK"))
    args = parser.parse_args(argv)
    if args.measure:
        url, start, end, chunk = args.measure
        print(json.dumps(measure(url, float(start), float(end), int(chunk))))
        return 0
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="migscope-bench-") as tmp:
        for slices in args.slices:
            for result in bench_size(slices, args.chunk_nodes, Path(tmp), args.parts):
                results.append(result)
                print(json.dumps(result), flush=True)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
