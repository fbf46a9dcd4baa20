"""Workloads: exact integrals, determinism under the seed, and trace replay against the CSV."""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import tarfile
from pathlib import Path

import pytest
from simhelpers import gpm_metrics, mig_devices, simulate, started

from migscope.sim import load_containers, load_series
from migscope.sim._traces import BUILTIN_DUTY, BUILTIN_MEMORY, TraceError, builtin_trace
from migscope.sim._workloads import Bursty, Constant, Idle, Periodic, Trace, Workload

GIB = 2**30


def _numeric_integral(w: Workload, t: float, dt: float) -> float:
    steps = round(t / dt)
    return sum(w.level((k + 0.5) * dt) for k in range(steps)) * dt


@pytest.mark.parametrize(
    "workload",
    [
        Constant(0.37),
        Periodic(period=10.0, duty=0.3, high=0.9, low=0.1, phase=2.5),
        Bursty(rate=30.0, burst=40.0, value=0.8, low=0.05, seed=11),
        Idle(),
    ],
    ids=["constant", "periodic", "bursty", "idle"],
)
def test_cumulative_is_the_integral_of_level(workload: Workload) -> None:
    """``cumulative(t)`` equals ``∫ level`` (GPM averages and energy are built on it)."""
    for t in (7.0, 95.5, 3600.0 + 17.0):
        assert workload.cumulative(t) == pytest.approx(
            _numeric_integral(workload, t, 0.25), abs=0.3
        )


def test_bursty_is_a_pure_function_of_time() -> None:
    """Same seed → same bursts whatever the order of questions; another seed → others.

    Each hour's arrivals come from an RNG seeded by (seed, hour), so asking about hour 50
    first changes nothing about hour 3.
    """
    times = [3 * 3600 + 12.5, 50 * 3600 + 1.0, 7.0, 20 * 3600 + 300.0]
    forward = Bursty(rate=4.0, burst=600.0, seed=5)
    backward = Bursty(rate=4.0, burst=600.0, seed=5)
    a = [(forward.level(t), forward.cumulative(t)) for t in times]
    b = [(backward.level(t), backward.cumulative(t)) for t in reversed(times)][::-1]
    assert a == b
    other = Bursty(rate=4.0, burst=600.0, seed=6)
    assert [other.cumulative(t) for t in times] != [c for _, c in a]


def test_bursty_rate() -> None:
    """Poisson arrivals at ``rate`` per hour: ~3 × 1000 bursts of 1 s cover ~3000 s."""
    w = Bursty(rate=3.0, burst=1.0, seed=1)
    covered = w.cumulative(1000 * 3600.0)
    assert 3000 - 5 * 55 < covered < 3000 + 5 * 55


def test_scenario_series_are_deterministic_under_the_seed() -> None:
    """Two simulations from the same scenario and seed give the same per-instance series,
    read in different orders; a different seed changes bursty workloads."""
    spec = {
        "model": "H200",
        "mig": True,
        "instances": [
            {"profile": "3g.71gb", "workload": {"pattern": "bursty", "rate": 6, "burst": "2m"}},
            {"profile": "3g.71gb", "workload": {"pattern": "bursty", "rate": 6, "burst": "2m"}},
        ],
    }
    grid = [k * 97.0 for k in range(200)]

    def series(seed: int, order: list[float]) -> dict[float, tuple[float, ...]]:
        node = simulate(spec, seed=seed).node("node-a")
        return {t: tuple(i.workload.level(t) for i in node.instances(0)) for t in order}

    one = series(3, grid)
    assert one == series(3, list(reversed(grid)))
    assert one != series(4, grid)
    # the two instances have their own RNG streams, not the same one twice
    assert any(a != b for a, b in one.values())


# -- traces -------------------------------------------------------------------------------


def _csv_rows(name: str) -> list[dict[str, str]]:
    with gzip.open(builtin_trace("duty" if name == BUILTIN_DUTY else "memory"), "rt") as f:
        return list(csv.DictReader(f))


def test_shipped_excerpt_keeps_upstream_columns() -> None:
    """The excerpt keeps each upstream header, column-order quirk included (samples.md §4)."""
    for kind, header in (
        ("duty", "value,timestamp_anon,container_ip"),
        ("memory", "timestamp_anon,value,container_ip"),
    ):
        with gzip.open(builtin_trace(kind), "rt") as f:  # type: ignore[arg-type]
            assert f.readline().strip() == header
    assert len(load_containers(None, "duty")) == 8


def test_trace_replay_matches_the_csv() -> None:
    """GPM activity and memory of a trace-driven slice equal the CSV's values.

    Container 3 of the excerpt, read here with the csv module. The duty % becomes the GPM
    graphics % over any interval inside one sample's hold time; the memory bytes in force
    are scaled from an 80 GiB reference GPU to the 1g.18gb instance.
    """
    container = load_containers(None, "duty")[3]
    duty = sorted(
        (float(r["timestamp_anon"]), float(r["value"]))
        for r in _csv_rows(BUILTIN_DUTY)
        if r["container_ip"] == container
    )
    memory = sorted(
        (float(r["timestamp_anon"]), float(r["value"]))
        for r in _csv_rows(BUILTIN_MEMORY)
        if r["container_ip"] == container
    )
    sim, nvml = started(
        {
            "model": "H200",
            "mig": True,
            "instances": [{"profile": "1g.18gb", "workload": {"pattern": "trace", "container": 3}}],
        }
    )
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    mig = mig_devices(nvml, gpu)[0]
    capacity = (16384 << 20) - (1 << 20)
    origin = duty[0][0]
    holds = [(t, v) for (t, v), (after, _) in itertools.pairwise(duty) if after - t == 57.0]
    busy = [h for h in holds if h[1] > 0]
    chosen = sorted(busy[:30] + [h for h in holds if h[1] == 0][:10])
    assert len(chosen) == 40
    for when, value in chosen:
        sim.clock.advance(when - origin + 10.0 - sim.clock.elapsed())
        s1 = nvml.nvmlGpmMigSampleGet(gpu, 7, nvml.nvmlGpmSampleAlloc())
        sim.clock.advance(30.0)
        s2 = nvml.nvmlGpmMigSampleGet(gpu, 7, nvml.nvmlGpmSampleAlloc())
        (graphics,) = gpm_metrics(nvml, s1, s2, [nvml.NVML_GPM_METRIC_GRAPHICS_UTIL])
        assert graphics[2] == pytest.approx(value), when
        in_force = [v for t, v in memory if t <= origin + sim.clock.elapsed()][-1]
        used = nvml.nvmlDeviceGetMemoryInfo(mig, version=nvml.nvmlMemory_v2).used
        assert used == int(in_force / (80 * GIB) * capacity), when


def test_trace_loops_when_it_ends() -> None:
    """Replay wraps around: ``period + t`` reads like ``t``, and the integral keeps growing."""
    series = load_series(None, "duty", 0)
    trace = Trace(series=series)
    for t in (30.0, 5000.0, 60000.0):
        assert trace.level(series.period + t) == trace.level(t)
    assert trace.cumulative(3 * series.period) == pytest.approx(3 * trace.cumulative(series.period))


def _write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_columns_are_found_by_name_in_any_format(tmp_path: Path) -> None:
    """Both upstream column orders, plain, gzip'd and the upstream .tar.gz, read the same."""
    rows = [("100.0", "5.0", "c1"), ("157.0", "50.0", "c1"), ("214.0", "0.0", "c1")]
    duty_first = _write(
        tmp_path / "duty.csv",
        "value,timestamp_anon,container_ip",
        [f"{v},{t},{c}" for t, v, c in rows],
    )
    time_first = tmp_path / "memory.csv.gz"
    with gzip.open(time_first, "wt") as f:
        f.write(
            "timestamp_anon,value,container_ip\n" + "".join(f"{t},{v},{c}\n" for t, v, c in rows)
        )
    archive = tmp_path / "upstream.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = duty_first.read_bytes()
        info = tarfile.TarInfo("pod_gpu_duty_cycle_anon.csv")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    series = [load_series(str(p), "duty", "c1") for p in (duty_first, time_first, archive)]
    assert series[0] == series[1] == series[2]
    assert series[0].times == (0.0, 57.0, 114.0)
    assert series[0].values == (5.0, 50.0, 0.0)
    assert series[0].period == 171.0


def test_trace_errors(tmp_path: Path) -> None:
    """Unknown containers, missing columns and missing files are one-line TraceErrors."""
    with pytest.raises(TraceError, match="unknown container 'nope'"):
        load_series(None, "duty", "nope")
    with pytest.raises(TraceError, match="index 99 out of range"):
        load_series(None, "duty", 99)
    bad = _write(tmp_path / "bad.csv", "value,when,who", ["1,2,3"])
    with pytest.raises(TraceError, match="no timestamp_anon"):
        load_series(str(bad), "duty", 0)
    with pytest.raises(TraceError, match="not found"):
        load_series(str(tmp_path / "missing.csv"), "duty", 0)
