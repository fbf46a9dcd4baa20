"""The fast simulated source gives the numbers the simulator's scalar API gives, sample by sample.

``simulate_slices`` evaluates the workloads' closed forms over whole arrays
(``sources/sim_truth.py``); ``support/sim_reference.py`` is the per-sample path it replaced.
Both run here on the built-in scenarios and on one that holds every workload pattern, every
memory model, two re-partitions of one GPU (one between two samples), a lost GPU and an NVML
error, and must agree: activity, memory, holders and timestamps exactly, energy bit for bit
except where a ``bursty`` integral sums the same bursts in another order (then to 1e-12
relative, 1 µJ absolute).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from support.sim_reference import reference_slices

from migscope.analyzer._intake.base import local_stats
from migscope.analyzer._intake.sim_truth import instance_truth
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices, simulation_window
from migscope.analyzer._intake.stats_local import SliceSeries
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report
from migscope.core._spec.v1 import report_json
from migscope.sim import Simulation
from migscope.sim._gpu import MIG_RESERVED_BYTES, SimInstance
from migscope.sim._workloads import Bursty, MemoryModel, Periodic, Trace, Workload

DAY = 86400.0
WEEK = 7 * DAY

EVERY_PATTERN: dict[str, Any] = {
    "version": 1,
    "seed": 3,
    "nodes": [
        {
            "name": "node-h200",
            "gpus": [
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "3g.71gb",
                            "workload": {"pattern": "trace", "container": 1, "offset": "7h"},
                            "pod": {"namespace": "a", "pod": "trace-0", "container": "c"},
                        },
                        {
                            "profile": "2g.35gb",
                            "workload": {"pattern": "trace", "container": 6, "memory": "3GiB"},
                            "pod": {"namespace": "a", "pod": "trace-1", "container": "c"},
                        },
                        {
                            "profile": "1g.18gb",
                            "workload": {
                                "pattern": "periodic",
                                "period": "6h",
                                "duty": 0.3,
                                "high": 0.9,
                                "low": 0.1,
                                "phase": "1h",
                                "memory": 0.2,
                                "memory_peak": 0.8,
                            },
                        },
                        {"profile": "1g.18gb"},
                    ],
                },
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "4g.71gb",
                            "workload": {
                                "pattern": "bursty",
                                "rate": 3,
                                "burst": "2h",
                                "level": 0.8,
                                "low": 0.05,
                                "memory": 0.1,
                                "memory_peak": 0.95,
                            },
                            "pod": {"namespace": "b", "pod": "bursty-0", "container": "c"},
                        },
                        {
                            "profile": "3g.71gb",
                            "workload": {"pattern": "bursty", "rate": 0.2, "burst": "90s"},
                        },
                    ],
                },
            ],
        },
        {
            "name": "node-a100",
            "gpus": [
                {
                    "model": "A100-40GB",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "3g.20gb",
                            "workload": {"pattern": "constant", "level": 0.42, "memory": "5GiB"},
                            "pod": {"namespace": "c", "pod": "const-0", "container": "c"},
                        },
                        {
                            "profile": "2g.10gb",
                            "workload": {"pattern": "idle", "memory": 0.5},
                            "pod": {"namespace": "c", "pod": "idle-0", "container": "c"},
                        },
                        {"profile": "1g.5gb", "workload": {"pattern": "idle"}},
                    ],
                },
                {
                    "model": "A100-40GB",
                    "mig": True,
                    "instances": [{"profile": "7g.40gb"}],
                },
                {"model": "A100-40GB", "workload": {"pattern": "constant", "level": 0.5}},
            ],
        },
    ],
    "faults": [
        {
            "kind": "layout_change",
            "node": "node-h200",
            "gpu": 1,
            "at": "2d",
            "instances": [
                {
                    "profile": "7g.141gb",
                    "workload": {"pattern": "periodic", "period": "1d", "duty": 0.5},
                    "pod": {"namespace": "b", "pod": "big-0", "container": "c"},
                }
            ],
        },
        {
            "kind": "layout_change",
            "node": "node-h200",
            "gpu": 1,
            "at": 4 * DAY + 30.5,
            "instances": [
                {
                    "profile": "1g.18gb",
                    "workload": {"pattern": "trace", "container": 3, "offset": "13m"},
                    "pod": {"namespace": "b", "pod": "small-0", "container": "c"},
                },
                {
                    "profile": "3g.71gb",
                    "workload": {"pattern": "bursty", "rate": 40, "burst": "3m", "level": 1},
                },
            ],
        },
        {"kind": "layout_change", "node": "node-a100", "gpu": 1, "at": "5d", "instances": []},
        {"kind": "gpu_lost", "node": "node-a100", "gpu": 0, "at": "3d"},
        {
            "kind": "nvml_error",
            "function": "nvmlDeviceGetMemoryInfo",
            "error": "GPU_IS_LOST",
            "probability": 0.5,
        },
    ],
}


def _instances(sim: Simulation) -> Iterator[SimInstance]:
    """Every MIG instance of every layout of ``sim``."""
    for node in sim:
        for gpu in node.gpus:
            for segment in gpu.segments:
                yield from segment.instances


def _has_bursts(series: SliceSeries, sim: Simulation) -> bool:
    (inst,) = (i for i in _instances(sim) if i.uuid == series.info.mig_uuid)
    return isinstance(inst.workload, Bursty)


def _assert_same(
    fast: Iterable[SliceSeries], reference: Iterable[SliceSeries], sim: Simulation
) -> int:
    """Every slice the same, in the same order; returns how many slices were compared."""
    pairs = list(zip(fast, reference, strict=True))
    assert pairs
    for new, old in pairs:
        assert new.info == old.info
        assert new.memory_total_bytes == old.memory_total_bytes
        for a, b in ((new.activity, old.activity), (new.memory_used, old.memory_used)):
            assert a is not None
            assert b is not None
            np.testing.assert_array_equal(a.timestamps_ms, b.timestamps_ms)
            np.testing.assert_array_equal(a.values, b.values)
        assert new.holders.keys() == old.holders.keys()
        for who, stamps in new.holders.items():
            np.testing.assert_array_equal(stamps, old.holders[who])
        ((energy,), (expected,)) = new.energy, old.energy
        np.testing.assert_array_equal(energy.timestamps_ms, expected.timestamps_ms)
        if _has_bursts(new, sim):
            np.testing.assert_allclose(energy.values, expected.values, rtol=1e-12, atol=1e-6)
        else:
            np.testing.assert_array_equal(energy.values, expected.values)
    return len(pairs)


@pytest.fixture(scope="module")
def every_pattern(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scn") / "every-pattern.yaml"
    path.write_text(yaml.safe_dump(EVERY_PATTERN))
    return path


@pytest.mark.parametrize("step", [60.0, 47.0])
def test_every_pattern_agrees_sample_by_sample(every_pattern: Path, step: float) -> None:
    """A week at 60 s (boundaries on samples) and at 47 s (boundaries between them)."""
    fast_sim, old_sim = load_fleet([every_pattern]), load_fleet([every_pattern])
    compared = _assert_same(
        simulate_slices(fast_sim, window_s=WEEK, step_s=step),
        reference_slices(old_sim, window_s=WEEK, step_s=step),
        fast_sim,
    )
    # 10 instances in the first layouts, then 1 and 2 on GPU 1 of node-h200 (node-a100 GPU 1
    # emptied: no new slice).
    assert compared == 13


@pytest.mark.parametrize("fleet", [["h200-node"], ["fleet-mixed"], ["fleet-mixed", "h200-node"]])
def test_builtin_scenarios_agree(fleet: list[str]) -> None:
    sim = load_fleet(fleet)
    _assert_same(
        simulate_slices(sim, window_s=WEEK),
        reference_slices(load_fleet(fleet), window_s=WEEK),
        sim,
    )


def _without_solver_times(report: dict[str, Any]) -> dict[str, Any]:
    """The report less the solver's wall and CPU seconds, which differ from run to run."""
    for pool in report["pools"]:
        assert pool["solve"].pop("wall_s") >= 0
        assert pool["solve"].pop("solver_s") >= 0
    return report


def test_the_demo_analysis_is_unchanged() -> None:
    """The demo fleet analysed from either path gives the same report."""
    fleet = ["fleet-mixed", "h200-node"]
    sim = load_fleet(fleet)
    window = simulation_window(sim, window_s=WEEK)
    fast_stats = local_stats(simulate_slices(sim, window_s=WEEK), window)
    old_stats = local_stats(reference_slices(load_fleet(fleet), window_s=WEEK), window)
    fast = report_json(build_report(analyze(fast_stats, window=window)))
    old = report_json(build_report(analyze(old_stats, window=window)))
    assert len(fast["slices"]) == 32  # 25 current, 7 ended by the re-partition
    assert _without_solver_times(fast) == _without_solver_times(old)


class _Sawtooth(Workload):
    """A workload type the fast path does not know: it must ask it sample by sample."""

    pattern = "sawtooth"

    def level(self, t: float) -> float:
        return (t % 600.0) / 600.0

    def cumulative(self, t: float) -> float:
        loops, r = divmod(max(t, 0.0), 600.0)
        return loops * 300.0 + r * r / 1200.0


class _Steps(MemoryModel):
    def at(self, t: float, level: float, capacity: int) -> int:
        return int(capacity * level) // 4096 * 4096


class _SlowPeriodic(Periodic):
    """A subclass may change the formulas: it is asked sample by sample too."""

    def level(self, t: float) -> float:
        return 0.5 * super().level(t)


def _scalar_agrees(workload: Workload, t: np.ndarray[Any, np.dtype[np.float64]]) -> None:
    """``instance_truth`` of an instance running ``workload`` equals the scalar API at ``t``."""
    sim = load_fleet(["h200-node"])
    inst = next(_instances(sim))
    inst.workload = workload
    assert inst.segment is not None
    assert inst.segment.begin == 0.0
    inst.attach(inst.segment)
    truth = instance_truth(inst, t)
    capacity = inst.memory_total - MIG_RESERVED_BYTES
    power, weight = inst.gpu.power, inst.weight
    energy = [
        weight * power.idle_watts * x
        + weight * power.dynamic_watts * (workload.cumulative(x) - inst.begin_counters[0])
        for x in t.tolist()
    ]
    np.testing.assert_array_equal(truth.activity, [workload.level(x) for x in t.tolist()])
    np.testing.assert_array_equal(
        truth.memory_used, [workload.memory_at(x, capacity) for x in t.tolist()]
    )
    np.testing.assert_allclose(truth.energy, energy, rtol=1e-12, atol=1e-6)


def _around(edges: Iterable[float]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Each edge and the floats either side of it (where a ``<`` against ``<=`` shows)."""
    points = np.asarray([e for e in edges if e > 0], dtype=np.float64)
    both = [np.nextafter(points, -np.inf), points, np.nextafter(points, np.inf)]
    return np.unique(np.concatenate(both))


def test_bursts_agree_on_their_edges() -> None:
    workload = Bursty(rate=6.0, burst=900.0, value=0.7, low=0.1, seed=9)
    spans = workload.bursts(2 * DAY)
    assert len(spans) > 20
    _scalar_agrees(workload, _around(x for span in spans for x in span))


def test_periodic_agrees_on_its_edges() -> None:
    workload = Periodic(period=3600.0, duty=0.35, high=0.8, low=0.15, phase=600.0)
    edges = [k * 3600.0 - 600.0 + d for k in range(1, 50) for d in (0.0, 0.35 * 3600.0)]
    _scalar_agrees(workload, _around(edges))


def test_trace_agrees_on_its_samples() -> None:
    sim = load_fleet(["h200-node"])
    (trace,) = (
        i.workload for i in _instances(sim) if i.owner is not None and i.owner.pod == "sd-serve-2"
    )
    assert isinstance(trace, Trace)
    series = trace.series
    loops = [k * series.period + x - trace.offset for k in range(3) for x in series.times]
    _scalar_agrees(trace, _around(loops))


@pytest.mark.parametrize(
    "workload",
    [
        _Sawtooth(memory=_Steps()),
        _SlowPeriodic(period=900.0, duty=0.25, high=0.7, low=0.2, phase=60.0),
    ],
    ids=["new-type", "subclass"],
)
def test_unknown_workloads_are_asked_sample_by_sample(workload: Workload) -> None:
    _scalar_agrees(workload, 60.0 * np.arange(1, 2001, dtype=np.float64))
