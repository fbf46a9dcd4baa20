"""``analyze --prometheus`` against one raw scan of the same data: exact and fast statistics.

Run ``python bench/analyzer_bench.py [--slices 112 1000] [--runs fast:1 exact:1] [--counters
[no] [yes]]``.

For each size N the benchmark writes a synthetic week of history at a 60 s resolution for N
MIG slices (56 per node: 8 H200 GPUs of 7 ``1g.18gb`` slices), in the migscope dialect: per
slice ``migscope_mig_info`` (profile, placement), ``migscope_mig_graphics_active_ratio``,
``migscope_mig_memory_used_bytes`` (at most the total), ``migscope_mig_memory_total_bytes``
and ``migscope_mig_energy_estimated_joules_total`` for the whole week,
``migscope_mig_pod_info`` for the spans a pod holds the slice (80 % of the slices are held,
by one or two pods), and ``migscope_gpu_info`` per GPU. Labels are ``node``, ``gpu``,
``gpu_uuid``, ``gpu_instance_id``, ``mig_uuid`` and the scrape's ``instance``, as after the
relabelling of ``docs/metrics.md``. With ``--counters`` (``yes``, or ``no yes`` for both
fleets in one run) every slice also has
``migscope_mig_graphics_active_seconds_total``, the integral of the ratio gauge's activity (an
upgraded exporter: the analyzer reads its activity from the counter, issue 24). With
``--restarts F`` a share F of the nodes have their
exporter restarted in the middle of the week (a new ``instance``: two series per slice and
quantity, which the fast path merges with the exact quantile queries).

The OpenMetrics text is assembled with numpy as fixed-width byte rows (no per-sample Python),
backfilled with ``promtool tsdb create-blocks-from openmetrics --max-block-duration=168h``
into one week-aligned block, and served by a real Prometheus (``tests/support/prometheus.py``).
Then, in a **child process** (so that its peak RSS is its own, not the generator's):

* ``raw``: one raw scan of the same data, ``count_over_time(<metric>[7d])`` for each metric
  the analysis reads, one after the other (what the issue measured: 0.28 s at 112 slices);
  its wall time and the server's ``evalTotalTime``;
* per ``--modes``: the analysis, ``migscope.analyzer.run(PrometheusSource(client,
  stats=mode))`` over the week (statistics, classification, plans: ``analyze --prometheus``
  less the process start and the report files): its wall time, the statistics' share
  (``RemoteSliceStats.wall_seconds``), the server's ``evalTotalTime`` summed over the queries
  (``server_eval_seconds``), the queries, and how the slices were computed (per-series
  reads, merged, exact);
* ``cli_s``: the command itself, ``migscope analyze --prometheus URL --end ... --stats MODE
  -o json`` as a subprocess (imports and JSON output included), unless ``--no-cli``.

Ratios are to the raw scan's wall time. Times are printed, never asserted: the numbers are
for the reader (docs/analyzer-benchmark.md).
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
SLICE_BYTES = 16_384 * 1024**2  # an H200 1g.18gb slice: 16,384 MiB (the catalogue's, NVML's)
CHUNK = 128  # slices assembled at once (bounds the generator's memory)
COUNTER_LEAD = 5  # --counters: the counter's samples before the week (see write_history)

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


def ratio_chars(millis: npt.NDArray[np.int64], width: int = 1) -> U8:
    """Numbers given in thousandths as ``d.ddd`` (``width`` digits before the point)."""
    whole = digits(millis // 1000, width)
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

    def __init__(self, slices: int, seed: int = 7, counters: bool = False) -> None:
        self.slices = slices
        self.counters = counters
        self.rng = np.random.default_rng(seed)
        ids = np.arange(slices)
        self.node = ids // SLICES_PER_NODE
        self.gpu = (ids % SLICES_PER_NODE) // SLICES_PER_GPU
        self.gi = 7 + ids % SLICES_PER_GPU  # H200 1g GIs are 7..13
        self.level = self.rng.uniform(0.02, 0.9, slices)
        self.phase = self.rng.uniform(0, 2 * np.pi, slices)
        self.mem = self.rng.uniform(0.05, 0.95, slices)
        self.watts = self.rng.uniform(40.0, 100.0, slices)
        nodes = int(self.node.max()) + 1 if slices else 0
        self.restarted = np.zeros(max(nodes, 1), dtype=bool)
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

    def restart(self, share: float) -> None:
        """Restart the exporter of a share of the nodes mid-week (a new ``instance`` label)."""
        count = round(share * self.restarted.size)
        self.restarted[:] = False
        if count:
            self.restarted[self.rng.choice(self.restarted.size, count, replace=False)] = True

    def labels(self, i: int, instance: int = 0) -> bytes:
        node, gpu, gi = int(self.node[i]), int(self.gpu[i]), int(self.gi[i])
        return (
            f'node="node-{node:05d}",gpu="{gpu}",gpu_uuid="GPU-{node:05d}-{gpu}",'
            f'gpu_instance_id="{gi}",mig_uuid="MIG-{i:06d}",instance="10.0.{instance}.1:9400"'
        ).encode()

    def segments(self, i: int) -> list[tuple[int, int, int]]:
        """Point ranges ``(first, end, instance)`` of slice ``i``'s series: one, or two around
        a restart (two minutes without samples) in the middle of the week."""
        if not self.restarted[int(self.node[i])]:
            return [(0, POINTS, 0)]
        return [(0, POINTS // 2, 0), (POINTS // 2 + 2, POINTS, 1)]


def write_history(fleet: Fleet, t0: int, out: BinaryIO, part: range | None = None) -> int:
    """Write the week of the fleet's slices in ``part`` (all) as OpenMetrics; samples written."""
    part = range(fleet.slices) if part is None else part
    stamps = digits(t0 + STEP * np.arange(POINTS, dtype=np.int64), 10)
    minutes = np.arange(POINTS, dtype=np.float64)
    day = np.sin(2 * np.pi * minutes / 1440.0)
    total = 0
    chunks = [range(s, min(s + CHUNK, part.stop)) for s in range(part.start, part.stop, CHUNK)]

    def family(name: str, make: Any, extra: Any = None, lead: int = 0, tail: int = 0) -> None:
        """Write a family; ``lead`` points before the week and ``tail`` after its last too
        (``make`` returns them, in time order)."""
        nonlocal total
        times = digits(t0 + STEP * np.arange(-lead, POINTS + tail, dtype=np.int64), 10)
        for chunk in chunks:
            idx = np.array(chunk)
            values: U8 = make(idx)
            # rows() wants equal prefix lengths: GI 7..9 has one digit, 10..13 two; and one
            # point range per call: a restarted slice's two series are written apart.
            by_shape: dict[tuple[int, int, int, int], list[tuple[int, bytes]]] = {}
            for k, i in enumerate(chunk):
                for first, end, instance in fleet.segments(i):
                    more = extra(i) if extra is not None else b""
                    prefix = f"{name}{{".encode() + fleet.labels(i, instance) + more + b"} "
                    first = first if first == 0 else first + lead
                    end += lead + (tail if end == POINTS else 0)
                    by_shape.setdefault((len(prefix), first, end, 0), []).append((k, prefix))
            for (_, first, end, _), members in sorted(by_shape.items()):
                pick = [k for k, _ in members]
                out.write(rows([p for _, p in members], values[pick, first:end], times[first:end]))
                total += len(pick) * (end - first)

    def info(idx: npt.NDArray[np.int64]) -> U8:
        return np.full((len(idx), POINTS, 1), ord("1"), dtype=np.uint8)

    # The activity of each chunk, in thousandths: drawn once for the gauge, integrated by
    # the counter (same chunks, same order: the generator's draws do not move).
    drawn: dict[int, npt.NDArray[np.int64]] = {}

    def activity_millis(idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        first = int(idx[0])
        if first not in drawn:
            base = fleet.level[idx, None] * (1 + 0.5 * np.sin(2 * np.pi * minutes / 1440.0))
            noisy = base + fleet.rng.normal(0, 0.05, (len(idx), POINTS))
            drawn[first] = np.clip(np.rint(noisy * 1000), 0, 1000).astype(np.int64)
        return drawn[first]

    def activity(idx: npt.NDArray[np.int64]) -> U8:
        millis = activity_millis(idx)
        if not fleet.counters:
            del drawn[int(idx[0])]
        return ratio_chars(millis)

    def active_seconds(idx: npt.NDArray[np.int64]) -> U8:
        # Seconds active since the exporter started, in thousandths: each scrape adds the
        # interval's ratio times the step (the gauge at that scrape is that interval's mean).
        # The exporter ran before and after the week: COUNTER_LEAD idle scrapes before it, so
        # that its first step has the pair of samples a ratio needs, and one at its end, whose
        # last step interval the other series leave empty; as in a fleet measured over a past
        # week (otherwise the analyzer reads the gauge at the first step and nothing at the
        # last, and the fast path sends every slice to the exact queries, fast.py's _clean).
        drawn_millis = activity_millis(idx)
        millis = np.concatenate(
            [
                np.zeros((len(idx), COUNTER_LEAD), dtype=np.int64),
                drawn_millis,
                drawn_millis[:, -1:],
            ],
            axis=1,
        )
        del drawn[int(idx[0])]
        return ratio_chars(np.cumsum(millis * STEP, axis=1), 6)

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

    def placement(i: int) -> bytes:  # H200 1g GPU instances 7..13 sit on slices 0..6
        return f',profile="1g.18gb",placement_start="{int(fleet.gi[i]) - 7}"'.encode()

    family("migscope_mig_info", info, placement)
    family("migscope_mig_graphics_active_ratio", activity)
    if fleet.counters:
        family(
            "migscope_mig_graphics_active_seconds_total", active_seconds, lead=COUNTER_LEAD, tail=1
        )
    family("migscope_mig_memory_used_bytes", memory)

    def capacity(idx: npt.NDArray[np.int64]) -> U8:
        return np.broadcast_to(digits(np.array([SLICE_BYTES]), 11), (len(idx), POINTS, 11))

    family("migscope_mig_memory_total_bytes", capacity)
    family("migscope_mig_energy_estimated_joules_total", energy)
    # Pod info: variable spans, so one series at a time.
    for i in part:
        for k, (first, end) in enumerate(fleet.spans[i]):
            for seg_first, seg_end, instance in fleet.segments(i):
                lo, hi = max(first, seg_first), min(end, seg_end)
                if lo >= hi:
                    continue
                prefix = (
                    b"migscope_mig_pod_info{"
                    + fleet.labels(i, instance)
                    + f',namespace="team-{i % 17:02d}",pod="job-{i:06d}-{k}",'
                    f'container="main",resource="nvidia.com/mig-1g.18gb"}} '.encode()
                )
                ones = np.full((1, hi - lo, 1), ord("1"), dtype=np.uint8)
                out.write(rows([prefix], ones, stamps[lo:hi]))
                total += hi - lo
    # The GPUs' model, for the catalogue: one series per GPU.
    gpus = sorted({(int(fleet.node[i]), int(fleet.gpu[i])) for i in part})
    for node, gpu in gpus:
        prefix = (
            f'migscope_gpu_info{{node="node-{node:05d}",gpu="{gpu}",'
            f'gpu_uuid="GPU-{node:05d}-{gpu}",model="H200-141GB"}} '
        ).encode()
        out.write(rows([prefix], np.full((1, POINTS, 1), ord("1"), dtype=np.uint8), stamps))
        total += POINTS
    out.write(b"# EOF\n")
    return total


# --------------------------------------------------------------------------------------------
# Measurement (child process)


RAW_METRICS = (
    "migscope_mig_info",
    "migscope_mig_graphics_active_ratio",
    "migscope_mig_graphics_active_seconds_total",
    "migscope_mig_memory_used_bytes",
    "migscope_mig_memory_total_bytes",
    "migscope_mig_energy_estimated_joules_total",
    "migscope_mig_pod_info",
    "migscope_gpu_info",
)
"""Every metric the analysis reads (the raw scan reads each once; the counter only where
written: a scan of a metric with no series costs nothing)."""


def raw_scan(url: str, end: float) -> dict[str, float]:
    """One raw scan: ``count_over_time(m[7d])`` of each metric read, one after the other."""
    from migscope.analyzer._intake.prometheus import PrometheusClient

    with PrometheusClient(url, timeout=3600.0, trust_env=False) as client:
        started = time.perf_counter()
        evaluated = 0.0
        for metric in RAW_METRICS:
            result = client.query(f"count_over_time({metric}[7d])", at=end)
            evaluated += result.stats.eval_total_time if result.stats is not None else 0.0
        return {"raw_s": time.perf_counter() - started, "raw_eval_s": evaluated}


def measure(url: str, start: float, end: float, mode: str, workers: int) -> dict[str, Any]:
    """One analysis of the window through ``--stats mode``; its numbers and peak RSS."""
    from migscope.analyzer._analysis import run
    from migscope.analyzer._intake.prometheus import PrometheusClient
    from migscope.analyzer._intake.prometheus_source import PrometheusSource
    from migscope.analyzer._options import AnalyzeOptions

    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec, so it would report the
    # parent's (the generator's) peak; VmHWM belongs to this process's own address space.
    base_kib = proc_kib(os.getpid(), "VmHWM")
    client = PrometheusClient(url, timeout=3600.0, trust_env=False)
    source = PrometheusSource(client, stats=mode, workers=workers)  # type: ignore[arg-type]
    started = time.perf_counter()
    statuses: dict[str, int] = {}
    failed = None
    try:
        result = run(source, AnalyzeOptions(window_s=end - start, end=end))
    except AssertionError as exc:  # the planner's own checks: the statistics are still measured
        failed = f"{type(exc).__name__}: {exc}"
    else:
        for item in result.slices:
            statuses[item.status.value] = statuses.get(item.status.value, 0) + 1
    total = time.perf_counter() - started
    stats = source._run
    assert stats is not None
    return {
        **({"analysis_error": failed} if failed else {}),
        "mode": stats.stats,
        "slices": stats.fast_slices + stats.exact_slices,
        "nodes": len(stats.nodes),
        "workers": workers,
        "queries": stats.queries,
        "analysis_s": total,
        "stats_s": stats.wall_seconds,
        "eval_s": stats.server_eval_seconds,
        "samples": stats.queryable_samples,
        "fast_slices": stats.fast_slices,
        "merged_slices": stats.merged_slices,
        "counter_slices": stats.counter_slices,
        "exact_slices": stats.exact_slices,
        "statuses": statuses,
        "rss_mib": proc_kib(os.getpid(), "VmHWM") / 1024,
        "rss_base_mib": base_kib / 1024,
    }


def cli_seconds(url: str, end: float, mode: str) -> tuple[float, str | None]:
    """``migscope analyze --prometheus URL --stats MODE -o json``'s wall time, as a process,
    and its last error line if it failed."""
    command = [
        str(Path(sys.executable).with_name("migscope")),
        "analyze",
        "--prometheus",
        url,
        "--end",
        str(int(end)),
        "--stats",
        mode,
        "--pending-pods",
        "off",
        "--timeout",
        "1h",
        "-q",
        "-o",
        "json",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return seconds, lines[-1] if lines else f"exit {done.returncode}"
    return seconds, None


def proc_kib(pid: int, field: str) -> float:
    """A ``/proc/<pid>/status`` memory field (``VmHWM``, ``VmRSS``) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return float("nan")


# --------------------------------------------------------------------------------------------
# Driver


def import_into_victoria(url: str, path: Path) -> None:
    """Stream a history file into VictoriaMetrics' ``/api/v1/import/prometheus``.

    The file's lines end in Unix seconds; the import format wants milliseconds, so each line
    gets ``000`` before its newline (comment lines too, which the import skips anyway).
    """
    import httpx

    def body() -> Iterator[bytes]:
        with open(path, "rb") as fh:
            while lines := fh.readlines(16 << 20):
                yield b"".join(lines).replace(b"\n", b"000\n")

    with httpx.Client(base_url=url, timeout=None, trust_env=False) as http:
        response = http.post("/api/v1/import/prometheus", content=body())
        if response.status_code != 204:
            raise RuntimeError(f"import refused: HTTP {response.status_code} {response.text[:300]}")
        http.get("/internal/force_flush").raise_for_status()


def bench_size(
    slices: int,
    runs: Sequence[tuple[str, int]],
    work: Path,
    *,
    parts: int = 1,
    restarts: float = 0.0,
    cli: bool = True,
    keep: Path | None = None,
    engine: str = "prometheus",
    counters: bool = False,
) -> Iterator[dict[str, Any]]:
    """Generate, backfill, serve and measure one fleet size; one result per (mode, workers).

    With ``parts`` > 1 the history is written and backfilled a part of the slices at a time
    (whole nodes per part), each file deleted after its backfill: 10,000 slices are ~100 GB
    of text at once. Prometheus merges the overlapping blocks when it opens them. With
    ``keep``, the TSDB is kept in ``keep/<slices>-<restarts>`` and a later run with the same
    size reuses it (the week of a backfill stays the measured week), instead of spending
    ~20 minutes backfilling 10,000 slices again.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from support.prometheus import PrometheusServer
    from support.victoria import VictoriaServer

    kept = keep / f"{slices}-{restarts:g}{'-c' if counters else ''}" if keep is not None else None
    marker = kept / "bench.json" if kept is not None else None
    reused: dict[str, Any] = json.loads(marker.read_text()) if marker and marker.exists() else {}
    t0 = int(reused.get("t0", week_start(time.time())))
    fleet = Fleet(slices, counters=counters)
    fleet.restart(restarts)
    per_part = -(-slices // parts // SLICES_PER_NODE) * SLICES_PER_NODE
    ranges = [range(a, min(a + per_part, slices)) for a in range(0, slices, per_part)]
    totals = {"samples": 0, "gen_s": 0.0, "size_mib": 0.0}

    def generate(part: range) -> Path:
        path = work / f"history-{slices}-{int(counters)}-{part.start}.om"
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
            if kept is not None:  # the TSDB lives outside the server's temporary directory
                kept.mkdir(parents=True, exist_ok=True)
                self.data_dir.rmdir()
                self.data_dir.symlink_to(kept / "data", target_is_directory=True)
                (kept / "data").mkdir(exist_ok=True)
            if reused:
                self.openmetrics = None
                super().before_start()
                return
            begun, gen_before = time.perf_counter(), totals["gen_s"]
            super().before_start()
            for part in ranges[1:]:
                path = generate(part)
                self.backfill(path)
                path.unlink()
            self.backfill_s = time.perf_counter() - begun - (totals["gen_s"] - gen_before)
            if marker is not None:
                marker.write_text(json.dumps({"t0": t0, **totals, "backfill_s": self.backfill_s}))

    class ImportedServer(VictoriaServer):
        """VictoriaMetrics with every part imported once it is up (no TSDB to reuse)."""

        backfill_s = 0.0

        def after_start(self) -> None:
            begun, gen_before = time.perf_counter(), totals["gen_s"]
            for k, part in enumerate(ranges):
                part_path = path if k == 0 else generate(part)
                import_into_victoria(self.url, part_path)
                part_path.unlink()
            self.backfill_s = time.perf_counter() - begun - (totals["gen_s"] - gen_before)

    if engine == "victoria" and keep is not None:
        raise SystemExit("--keep is for Prometheus's TSDB only")
    if reused:
        totals.update({k: reused[k] for k in totals})
        print(f"# reusing the TSDB in {kept} (week starting {t0})", flush=True)
        path = work / "unused.om"
    else:
        path = generate(ranges[0])
    # A week of 1,400 slices per query outlasts Prometheus's default 2 min query timeout on
    # two busy cores; the benchmark measures evaluation cost, so it lifts the limit.
    server: PrometheusServer | VictoriaServer = (
        TimedServer(openmetrics=path, startup_timeout=600.0, extra_args=["--query.timeout=1h"])
        if engine == "prometheus"
        # The same lifted limit (VictoriaMetrics stops a query after 30 s by default), and no
        # rollup cache: runs repeat each other's queries, which a weekly job never does.
        else ImportedServer(
            startup_timeout=600.0,
            extra_args=["-search.maxQueryDuration=1h", "-search.disableCache"],
        )
    )
    started = time.perf_counter()
    with server:
        ready_s = time.perf_counter() - started
        backfill_s = reused.get("backfill_s", getattr(server, "backfill_s", 0.0))
        path.unlink(missing_ok=True)
        samples, gen_s, size_mib = totals["samples"], totals["gen_s"], totals["size_mib"]
        print(f"# {slices} slices: {samples:,} samples, {size_mib:,.0f} MiB in {gen_s:.1f} s")
        print(f"# backfill/import {backfill_s:.1f} s, {engine} ready after {ready_s:.1f} s")
        assert server._proc is not None
        pid = server._proc.pid

        def child(*args: str) -> dict[str, Any]:
            done = subprocess.run(
                [sys.executable, __file__, *args], capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return {"error": done.stderr.strip().splitlines()[-1]}
            answer: dict[str, Any] = json.loads(done.stdout)
            return answer

        window = [server.url, str(t0), str(t0 + WEEK)]
        raw = child("--raw", server.url, str(t0 + WEEK))
        timed: set[str] = set()
        for mode, workers in runs:
            result = child("--measure", *window, mode, str(workers))
            if cli and "error" not in result and mode not in timed:
                result["cli_s"], cli_error = cli_seconds(server.url, t0 + WEEK, mode)
                if cli_error is not None:
                    result["cli_error"] = cli_error
                timed.add(mode)
            raw_s = raw.get("raw_s")
            yield {
                "engine": engine,
                "counters": counters,
                "slices_generated": slices,
                "restarted_nodes": int(fleet.restarted.sum()),
                **raw,
                **result,
                "ratio": result["analysis_s"] / raw_s if raw_s and "error" not in result else None,
                "cli_ratio": result["cli_s"] / raw_s if raw_s and "cli_s" in result else None,
                "prom_rss_mib": proc_kib(pid, "VmHWM") / 1024,
                "history_samples": samples,
                "generate_s": gen_s,
                "backfill_s": backfill_s,
                "openmetrics_mib": size_mib,
            }


def table(results: Sequence[dict[str, Any]]) -> str:
    """The results as a fixed-width table."""
    head = (
        f"{'slices':>7} {'ctr':>3} {'mode':>5} {'wk':>2} {'raw s':>6} {'queries':>7} {'eval s':>8} "
        f"{'stats s':>8} "
        f"{'anal. s':>8} {'ratio':>6} {'cli s':>7} {'ratio':>6} {'fast':>5} {'merge':>5} "
        f"{'exact':>5} {'cntr':>5} {'RSS MiB':>8} {'prom MiB':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"{r['slices_generated']:>7} ERROR {r['error']}")
            continue
        eval_s = f"{r['eval_s']:8.2f}" if r["eval_s"] is not None else "     n/a"
        cli = f"{r['cli_s']:7.2f} {r['cli_ratio']:5.1f}x" if "cli_s" in r else "      -      -"
        lines.append(
            f"{r['slices']:>7} {'yes' if r.get('counters') else 'no':>3} {r['mode']:>5} "
            f"{r['workers']:>2} {r['raw_s']:>6.2f} "
            f"{r['queries']:>7} {eval_s} "
            f"{r['stats_s']:>8.2f} {r['analysis_s']:>8.2f} {r['ratio']:>5.1f}x {cli} "
            f"{r['fast_slices']:>5} {r['merged_slices']:>5} {r['exact_slices']:>5} "
            f"{r.get('counter_slices', 0):>5} "
            f"{r['rss_mib']:>8.1f} {r['prom_rss_mib']:>8.0f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments; either run the whole benchmark or one child measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, nargs="+", default=[112, 1000])
    parser.add_argument(
        "--runs",
        nargs="+",
        default=["fast:1", "fast:4", "exact:1"],
        help="MODE:WORKERS per analysis (fast|exact, chunks queried at once); the command "
        "line is timed once per mode, with its default workers",
    )
    parser.add_argument(
        "--restarts", type=float, default=0.0, help="share of nodes whose exporter restarts"
    )
    parser.add_argument(
        "--counters",
        nargs="*",
        choices=["no", "yes"],
        default=["no"],
        help="write the active-seconds counter too (yes; bare --counters is yes), or run "
        "both fleets one after the other (no yes)",
    )
    parser.add_argument("--no-cli", action="store_true", help="skip timing the command itself")
    parser.add_argument("--parts", type=int, default=1, help="write+backfill in this many parts")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", type=Path, help="keep (and reuse) each size's TSDB here")
    parser.add_argument(
        "--engine",
        choices=["prometheus", "victoria"],
        default="prometheus",
        help="the server the history is loaded into (victoria: single-node VictoriaMetrics)",
    )
    parser.add_argument("--measure", nargs=5, metavar=("URL", "START", "END", "MODE", "WORKERS"))
    parser.add_argument("--raw", nargs=2, metavar=("URL", "END"))
    args = parser.parse_args(argv)
    if args.measure:
        url, start, end, mode, workers = args.measure
        print(json.dumps(measure(url, float(start), float(end), mode, int(workers))))
        return 0
    if args.raw:
        print(json.dumps(raw_scan(args.raw[0], float(args.raw[1]))))
        return 0
    results: list[dict[str, Any]] = []
    runs = [(mode, int(workers)) for mode, _, workers in (r.partition(":") for r in args.runs)]
    with tempfile.TemporaryDirectory(prefix="migscope-bench-") as tmp:
        for slices, counters in [(n, c) for n in args.slices for c in args.counters or ["yes"]]:
            for result in bench_size(
                slices,
                runs,
                Path(tmp),
                parts=args.parts,
                restarts=args.restarts,
                cli=not args.no_cli,
                keep=args.keep,
                engine=args.engine,
                counters=counters == "yes",
            ):
                results.append(result)
                print(json.dumps(result), flush=True)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
