"""The fast statistics equal the exact ones, field by field, on real engines and both dialects.

``remote_slice_stats(stats="fast")`` reads a few numbers per series and combines them per slice
in Python (:mod:`migscope.analyzer._intake.stats_promql.fast`); the slices it cannot settle
that way go to the exact queries, restricted to them. Two days of minute data hold one slice
per thing that can make the two paths differ: a pod change in the middle of the window, two
pods holding a slice at once, gaps of minutes and of hours, NaN, negative, above-1 and
infinite samples, memory above the slice's total, an exporter restarted under a new
``instance`` (two series of one slice), a GPU-instance id destroyed and re-created, a scrape
every 30 s, samples off the minute grid, a sample exactly at the window's start (closed ranges
on Prometheus 2), a slice born in the window's last hour, no activity series, an energy
counter with a bad sample, pod labels under ``exported_*``; and in dcgm-exporter's dialect
both name generations (4.8, 4.9 with its capacity field, and a 4.8 -> 4.9 rollout where
both hold a slice), a lower-cased relabel, and nodes named by ``Hostname`` and ``hostname``.
The history is backfilled into a real Prometheus 2.42 and imported into a real
VictoriaMetrics; on each, fast and exact must agree on every field, note and data-quality
count, and the routing must be the planned one (so that the test fails if the fast path is
never taken, or taken where it cannot be exact). The pure parts (interval unions, masks,
the ordered pool) are tested with tables first.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from support.engines import ENGINES_AND_DIALECTS
from support.prometheus import HistorySeries, ManagedServer, PrometheusServer, requires_prometheus
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.dialect import Dialect
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.prometheus_source import PrometheusSource, resolution_note
from migscope.analyzer._intake.stats_promql import RemoteSliceStats, evaluate, remote_slice_stats
from migscope.analyzer._intake.stats_promql.cells import (
    Grid,
    Presence,
    Unsettled,
    mask_bits,
    newest,
    union,
)
from migscope.analyzer._intake.stats_promql.evaluate import ordered_map
from migscope.analyzer._intake.stats_promql.quality import bad_values
from migscope.analyzer._intake.stats_promql.queries import MAX_QUERY_CHARS, Queries, _batches
from migscope.analyzer._intake.stats_promql.result import StatsMode
from migscope.analyzer._model import SliceKey, SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report
from migscope.cli.main import cli
from migscope.core._spec.v1 import report_json

# --------------------------------------------------------------------------------------------
# Pure parts


def _presence(counts: list[int], masks: dict[int, list[int]] | None = None) -> Presence:
    return Presence(
        np.array(counts, dtype=np.int64),
        {h: np.array(m, dtype=bool) for h, m in (masks or {}).items()},
    )


def test_grid_needs_whole_cells_on_the_period_grid() -> None:
    grid = Grid.of(3600.0 * 10, 3600.0 * 14, 60, 3600)
    assert grid is not None
    assert (grid.cells, grid.per, grid.block, grid.intervals) == (4, 60, 30, 240)
    assert grid.cell_end(0) == 3600.0 * 11
    assert grid.cell_of(3600.0 * 14) == 3
    assert grid.interval_end(0) == 3600.0 * 10 + 60
    assert grid.block_ends(3) == [3600.0 * 14 - 1800, 3600.0 * 14]
    assert Grid.of(0.0, 3600.0 * 2, 15, 3600).block == 48  # type: ignore[union-attr]
    assert Grid.of(0.0, 3600.0 * 2, 300, 3600).block == 12  # type: ignore[union-attr]
    assert Grid.of(1800.0, 7200.0, 60, 3600) is None  # not whole cells
    assert Grid.of(0.0, 5400.0, 60, 3600) is None  # not ending on the hour
    assert Grid.of(0.0, 7200.0, 0.5, 3600) is None  # not whole seconds
    assert Grid.of(0.0, 7200.0, 7, 3600) is None  # the period is not whole steps


def test_mask_bits_read_the_blocks_newest_interval_as_bit_zero() -> None:
    # Block of 4: bit 0 is the newest interval, bit r+1 the one r+1 steps into the block.
    assert mask_bits(1.0, 4).tolist() == [False, False, False, True]
    assert mask_bits(2.0, 4).tolist() == [True, False, False, False]
    assert mask_bits(15.0, 4).tolist() == [True, True, True, True]
    for bad in (16.0, -1.0, 2.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="not a mask"):
            mask_bits(bad, 4)


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ([], [0, 0, 0]),
        ([[0, 5, 60]], [0, 5, 60]),  # one member alone: its counts
        ([[60, 5, 0], [10, 0, 0]], [60, 5, 0]),  # a full member settles the cell
        ([[0, 0, 7], [3, 0, 0], [0, 2, 0]], [3, 2, 7]),  # one present per cell
    ],
)
def test_union_settled_by_counts(members: list[list[int]], expected: list[int]) -> None:
    assert union([_presence(m) for m in members], 60, 3).tolist() == expected


def test_union_needs_masks_where_two_partial_members_meet_and_uses_them() -> None:
    a, b = _presence([2, 1]), _presence([2, 60])
    with pytest.raises(Unsettled) as info:
        union([a, b], 60, 2)
    assert info.value.cells == {0}
    per = 60
    a.masks[0] = np.zeros(per, dtype=bool)
    b.masks[0] = np.zeros(per, dtype=bool)
    a.masks[0][[3, 4]] = True
    b.masks[0][[4, 59]] = True
    assert union([a, b], per, 2).tolist() == [3, 60]


def test_newest_interval() -> None:
    grid = Grid.of(0.0, 3 * 3600.0, 60, 3600)
    assert grid is not None
    assert newest([], grid) is None
    assert newest([_presence([0, 0, 0])], grid) is None
    assert newest([_presence([60, 60, 0])], grid) == 119  # a full cell ends with its last
    partial = _presence([60, 7, 0])
    with pytest.raises(Unsettled) as info:
        newest([partial], grid)
    assert info.value.cells == {1}
    partial.masks[1] = np.zeros(60, dtype=bool)
    partial.masks[1][[0, 9]] = True
    assert newest([partial], grid) == 60 + 9


def test_ordered_map_keeps_order_and_bounds_concurrency() -> None:
    active, peak = 0, 0
    lock = threading.Lock()

    def work(n: int) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.01 * (5 - n % 5))  # later items finish first
        with lock:
            active -= 1
        return n * n

    assert list(ordered_map(work, range(20), 3)) == [n * n for n in range(20)]
    assert 1 < peak <= 3
    assert list(ordered_map(work, range(4), 1)) == [0, 1, 4, 9]
    with pytest.raises(ValueError, match="workers"):
        list(ordered_map(work, range(2), 0))


def test_ordered_map_raises_the_first_failure_in_turn() -> None:
    def work(n: int) -> int:
        if n == 2:
            raise RuntimeError("chunk 2 failed")
        return n

    results = ordered_map(work, range(6), 3)
    assert [next(results), next(results)] == [0, 1]
    with pytest.raises(RuntimeError, match="chunk 2"):
        next(results)


@pytest.mark.parametrize(
    ("family", "low", "high", "bad"),
    [
        ("activity", 0.0, 1.0, False),
        ("activity", None, None, False),  # no sample
        ("activity", -0.1, 0.5, True),
        ("activity", 0.0, 1.0000001, True),
        ("activity", 0.0, math.inf, True),
        ("memory", 0.0, 1e12, False),  # memory has no ceiling (capped at the total later)
        ("memory", -1.0, 1e12, True),
        ("memory", 0.0, math.inf, True),
    ],
)
def test_bad_values_is_suspects_rule(
    family: str, low: float | None, high: float | None, bad: bool
) -> None:
    assert bad_values(family, low, high) is bad


def test_parts_are_packed_under_the_query_length_limit() -> None:
    parts = ["a" * 5000, "b" * 5000, "c" * 5000, "d" * 20_000, "e"]
    batches = _batches(parts)
    assert batches == [["a" * 5000, "b" * 5000], ["c" * 5000], ["d" * 20_000], ["e"]]
    assert all(len(" or ".join(b)) <= MAX_QUERY_CHARS for b in batches if len(b) > 1)


def test_a_restricted_query_names_each_node_its_gpus_and_instances() -> None:
    run = RemoteSliceStats(
        dialect=Dialect.DCGM,
        semantics="prometheus2",
        window_start=0.0,
        window_end=3600.0,
        node_label="Hostname",
        node_fallbacks=("hostname",),
        nodes=("a", "b"),
    )
    with PrometheusClient("http://127.0.0.1:1") as client:
        q = Queries(client, run, step=60, period=None)
        key = SliceKey("b", 3, "GPU-b3", 5)
        narrowed = q.restricted([(SliceKey("a", 0, "GPU-a0", 1), "1g.10gb"), (key, "2g.20gb")])
        text = narrowed.over("count_over_time", "DCGM_FI_DEV_FB_USED", ["ignored"], "1m")
    assert "ignored" not in text
    assert 'GPU_I_ID=~"(?:|1)",Hostname=~"(?:a)",gpu=~"(?:0)"' in text
    assert 'GPU_I_ID=~"(?:|5)",Hostname=~"(?:b)",gpu=~"(?:3)"' in text
    assert text.count("label_replace") == 2  # the hostname fallback, once per node
    assert q.only is None  # the original is untouched


# --------------------------------------------------------------------------------------------
# A planted history with every case


STEP = 60
END = float((int(time.time()) // 3600 - 3) * 3600)
START = END - 2 * 86_400
MID = START + 86_400
GRID = np.arange(START - 3600, END + 1, STEP, dtype=np.float64)  # an hour before the window too
MIB = 1 << 20
TOTAL_MIB = 18_000.0


@dataclass
class Planted:
    """One slice: its identity, values on GRID, and the spans of its series and pods.

    ``measure`` is the spans of its activity/memory series, each with extra labels (a new
    ``instance`` is a new series); ``pods`` the spans of the pods holding it.
    """

    name: str
    node: str
    gpu: int
    gi: int
    profile: str = "1g.18gb"
    activity: np.ndarray | None = None
    memory_mib: np.ndarray | None = None
    measure: list[tuple[np.ndarray, dict[str, str]]] = field(default_factory=list)
    pods: list[tuple[np.ndarray, dict[str, str]]] = field(default_factory=list)
    times: np.ndarray = field(default_factory=lambda: GRID.copy())
    extra_times: np.ndarray | None = None  # more samples (a faster scrape)
    energy_bad: bool = False
    mig_uuid: str = ""
    dcgm_names: str = "4.8"  # "4.8", "4.9", "both" (a rollout), "lower", "mixed-case"
    host_label: str = "Hostname"

    @property
    def uuid(self) -> str:
        return f"GPU-{self.node}-{self.gpu}"


def _all() -> np.ndarray:
    return np.ones(GRID.size, dtype=bool)


def _between(t0: float, t1: float) -> np.ndarray:
    return (t0 <= GRID) & (t1 > GRID)


def _pod(ns: str, pod: str, spelled: str = "") -> dict[str, str]:
    return {f"{spelled}namespace": ns, f"{spelled}pod": pod}


def _planted() -> list[Planted]:
    rng = np.random.default_rng(11)
    n = GRID.size

    def act(level: float) -> np.ndarray:
        return np.asarray(np.clip(level + rng.normal(0, 0.03, n), 0, 1).round(4))

    def mem(level: float) -> np.ndarray:
        return (level + rng.integers(0, 50, n)).astype(np.float64)

    out: list[Planted] = []

    def add(p: Planted) -> None:
        if p.activity is None and p.name != "no-activity":
            p.activity = act(0.3)
        if p.memory_mib is None:
            p.memory_mib = mem(4000)
        if not p.measure:
            p.measure = [(_all(), {})]
        out.append(p)

    add(Planted("steady", "n1", 0, 1, pods=[(_all(), _pod("ml", "a"))]))
    add(
        Planted(
            "pod-change",
            "n1",
            0,
            2,
            pods=[
                (_between(-math.inf, MID - 17 * 60), _pod("ml", "a")),
                (_between(MID + 5 * 60, math.inf), _pod("ml", "b")),
            ],
        )
    )
    add(
        Planted(
            "shared",
            "n1",
            0,
            3,
            pods=[
                (_between(-math.inf, MID + 3 * 3600 + 600), _pod("ml", "a")),
                (_between(MID, math.inf), _pod("ml", "c")),
            ],
        )
    )
    gaps = _all() & (rng.random(n) > 0.03)
    gaps &= ~_between(START + 5 * 3600 + 900, START + 10 * 3600 + 1200)
    add(Planted("gaps", "n1", 0, 4, measure=[(gaps, {})], pods=[(gaps, _pod("ml", "g"))]))
    nan = act(0.5)
    nan[rng.random(n) < 0.02] = math.nan
    add(Planted("nan", "n1", 1, 1, activity=nan, pods=[(_all(), _pod("ml", "n"))]))
    bad_act, bad_mem = act(0.6), mem(6000)
    bad_act[[100, 900, 1700]] = [-0.5, 1.7, math.inf]
    bad_mem[[200, 1300]] = [-3.0, math.inf]
    bad_mem[[2000, 2001]] = [30_000, 29_000]  # above the 18,000 MiB total
    add(
        Planted(
            "bad",
            "n1",
            1,
            2,
            activity=bad_act,
            memory_mib=bad_mem,
            pods=[(_all(), _pod("ml", "x"))],
        )
    )
    above = mem(17_000)
    above[[300, 301, 302]] = 19_000
    add(Planted("above", "n1", 1, 3, memory_mib=above, pods=[(_all(), _pod("ml", "y"))]))
    add(
        Planted(
            "restart",
            "n2",
            0,
            1,
            measure=[
                (_between(-math.inf, MID), {"instance": "10.0.0.1:9400"}),
                (_between(MID + 120, math.inf), {"instance": "10.0.0.2:9400"}),
            ],
            pods=[(_all(), _pod("ml", "r"))],
        )
    )
    # The same exporter back after two minutes under the same instance label (the Helm
    # chart sets instance to the node name): one series with a gap, settled by the reads.
    add(
        Planted(
            "restart-same-instance",
            "n2",
            1,
            4,
            measure=[(_between(-math.inf, MID), {}), (_between(MID + 120, math.inf), {})],
            pods=[(_all(), _pod("ml", "q"))],
        )
    )
    add(
        Planted(
            "old-gi",
            "n2",
            0,
            2,
            profile="2g.35gb",
            measure=[(_between(-math.inf, MID), {})],
            pods=[(_between(-math.inf, MID), _pod("ml", "o"))],
            mig_uuid="MIG-old",
        )
    )
    add(
        Planted(
            "new-gi",
            "n2",
            0,
            2,
            profile="1g.18gb",
            measure=[(_between(MID + 300, math.inf), {})],
            mig_uuid="MIG-new",
        )
    )
    fast_scrape = _between(START + 6 * 3600, START + 12 * 3600)
    add(
        Planted(
            "scrape-30s",
            "n2",
            1,
            1,
            extra_times=GRID[fast_scrape] + 30,
            pods=[(_all(), _pod("ml", "s"))],
        )
    )
    add(Planted("off-grid", "n2", 1, 2, times=GRID + 17, pods=[(_all(), _pod("ml", "f"))]))
    add(Planted("live", "n2", 1, 3, measure=[(_between(END - 40 * 60, math.inf), {})]))
    add(Planted("no-activity", "n3", 0, 1, pods=[(_all(), _pod("ml", "m"))]))
    add(Planted("bad-energy", "n3", 0, 2, energy_bad=True, pods=[(_all(), _pod("ml", "e"))]))
    add(
        Planted(
            "exported",
            "n3",
            0,
            3,
            pods=[
                (_between(-math.inf, MID), _pod("team", "p", "exported_")),
                (_between(MID - 3600, math.inf), _pod("team", "p")),
            ],
        )
    )
    # dcgm-exporter's own cases (in migscope's dialect they are plain slices).
    add(Planted("gen-4.9", "n4", 0, 1, dcgm_names="4.9", pods=[(_all(), _pod("ml", "v"))]))
    add(Planted("rollout", "n4", 0, 2, dcgm_names="both", pods=[(_all(), _pod("ml", "w"))]))
    add(Planted("lower", "n4", 1, 1, dcgm_names="lower", pods=[(_all(), _pod("ml", "l"))]))
    add(Planted("hostname", "n5", 0, 1, host_label="hostname", pods=[(_all(), _pod("ml", "h"))]))
    return out


PLANTED = _planted()


def _points(times: np.ndarray, values: np.ndarray) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in zip(times, values, strict=True)]


def _samples(p: Planted, mask: np.ndarray, values: np.ndarray) -> list[tuple[float, float]]:
    """The slice's samples where ``mask`` holds, with its extra (faster-scrape) samples."""
    pts = _points(p.times[mask], values[mask])
    if p.extra_times is not None:
        inside = np.isin(p.extra_times - 30, GRID[mask])
        pts += _points(p.extra_times[inside], np.full(int(inside.sum()), float(values[0])))
    return sorted(pts)


def _migscope(slices: list[Planted]) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for p in slices:
        assert p.memory_mib is not None
        base = {
            "node": p.node,
            "gpu": str(p.gpu),
            "gpu_uuid": p.uuid,
            "gpu_instance_id": str(p.gi),
            "mig_uuid": p.mig_uuid or f"MIG-{p.name}",
        }
        alive = np.logical_or.reduce([m for m, _ in p.measure])
        out.append(
            HistorySeries(
                "migscope_mig_info",
                {**base, "profile": p.profile, "placement_start": str(p.gi - 1)},
                _points(p.times[alive], np.ones(int(alive.sum()))),
            )
        )
        out.append(
            HistorySeries(
                "migscope_mig_memory_total_bytes",
                base,
                _points(p.times[alive], np.full(int(alive.sum()), TOTAL_MIB * MIB)),
            )
        )
        for mask, extra in p.measure:
            labels = {**base, **extra}
            if p.activity is not None:
                out.append(
                    HistorySeries(
                        "migscope_mig_graphics_active_ratio", labels, _samples(p, mask, p.activity)
                    )
                )
            out.append(
                HistorySeries(
                    "migscope_mig_memory_used_bytes", labels, _samples(p, mask, p.memory_mib * MIB)
                )
            )
            energy = np.cumsum(np.full(GRID.size, 100.0 * STEP))
            if p.energy_bad:
                energy[GRID.size // 2] = -1.0
            out.append(
                HistorySeries(
                    "migscope_mig_energy_estimated_joules_total",
                    labels,
                    _points(p.times[mask], energy[mask]),
                )
            )
        for mask, pod in p.pods:
            out.append(
                HistorySeries(
                    "migscope_mig_pod_info",
                    {**base, **pod, "container": "c"},
                    _points(p.times[mask], np.ones(int(mask.sum()))),
                )
            )
    for node, gpu in sorted({(p.node, p.gpu) for p in slices}):
        out.append(
            HistorySeries(
                "migscope_gpu_info",
                {
                    "node": node,
                    "gpu": str(gpu),
                    "gpu_uuid": f"GPU-{node}-{gpu}",
                    "model": "H200-141GB",
                },
                _points(GRID, np.ones(GRID.size)),
            )
        )
    return out


_DCGM_NAMES = {
    "4.8": [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", 1.0)],
    "4.9": [
        (
            "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
            "DCGM_FI_DEV_FB_USED_BYTES",
            "DCGM_FI_DEV_FB_FREE_BYTES",
            float(MIB),
        )
    ],
    "lower": [("dcgm_fi_prof_gr_engine_active", "dcgm_fi_dev_fb_used", "dcgm_fi_dev_fb_free", 1.0)],
}
_DCGM_NAMES["both"] = _DCGM_NAMES["4.8"] + _DCGM_NAMES["4.9"]


def _dcgm(slices: list[Planted]) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for p in slices:
        assert p.memory_mib is not None
        base = {
            p.host_label: p.node,
            "gpu": str(p.gpu),
            "UUID": p.uuid,
            "GPU_I_ID": str(p.gi),
            "GPU_I_PROFILE": p.profile,
            "modelName": "NVIDIA H200",
        }
        held = [(mask, pod) for mask, pod in p.pods] or [(_all(), {})]
        for mask, extra in p.measure:
            # dcgm-exporter labels the pod on the measurement itself: one series per pod.
            covered = np.zeros(GRID.size, dtype=bool)
            spans = []
            for pod_mask, pod in held:
                part = mask & pod_mask & ~covered
                covered |= part
                spans.append((part, pod))
            spans.append((mask & ~covered, {}))
            for part, pod in spans:
                if not part.any():
                    continue
                labels = {**base, **extra, **pod}
                for act_name, used, free, scale in _DCGM_NAMES[p.dcgm_names]:
                    if p.activity is not None:
                        out.append(HistorySeries(act_name, labels, _samples(p, part, p.activity)))
                    out.append(HistorySeries(used, labels, _samples(p, part, p.memory_mib * scale)))
                    free_mib = np.maximum(TOTAL_MIB - p.memory_mib, 0)
                    out.append(HistorySeries(free, labels, _samples(p, part, free_mib * scale)))
                    if scale != 1.0:
                        out.append(
                            HistorySeries(
                                "DCGM_FI_DEV_FB_CAPACITY_BYTES",
                                labels,
                                _samples(p, part, np.full(GRID.size, TOTAL_MIB * MIB)),
                            )
                        )
    return out


HISTORIES = {Dialect.MIGSCOPE: _migscope(PLANTED), Dialect.DCGM: _dcgm(PLANTED)}

# Which slices go to the exact queries (NaN, out of range, a faster scrape; two generations
# holding one slice at once), and which have several series of one quantity merged by the
# server's quantile queries (a restarted exporter; under dcgm-exporter, pods label the
# measurements: a pod change is a new series). The rest are settled by the reads alone.
ALWAYS_EXACT = {"nan", "bad", "scrape-30s"}
EXACT_IN_DCGM = {"rollout"}
MERGED = {"restart"}
MERGED_IN_DCGM = {"pod-change", "shared", "exported"}
# VictoriaMetrics drops NaN samples: for it "nan" is a slice with gaps, settled by reads.
SETTLED_ON_VM = {"nan"}


@dataclass
class Case:
    engine: str
    dialect: Dialect
    fast: RemoteSliceStats
    exact: RemoteSliceStats
    fast_stats: list[SliceStats]
    exact_stats: list[SliceStats]


def _run(client: PrometheusClient, stats: StatsMode) -> tuple[RemoteSliceStats, list[SliceStats]]:
    run = remote_slice_stats(
        client, start=START, end=END, step=STEP, stats=stats, workers=2, chunk_nodes=2
    )
    return run, list(run)


@pytest.fixture(
    scope="module",
    params=ENGINES_AND_DIALECTS,
)
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    engine, dialect = request.param
    history = HISTORIES[dialect]
    server: ManagedServer = (
        PrometheusServer(history) if engine == "prometheus" else VictoriaServer(history)
    )
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        fast, fast_stats = _run(client, "fast")
        exact, exact_stats = _run(client, "exact")
        yield Case(engine, dialect, fast, exact, fast_stats, exact_stats)


def _close(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _name(stats: SliceStats) -> str:
    for p in PLANTED:
        mig_uuid = p.mig_uuid or f"MIG-{p.name}"
        where = (stats.key.node, stats.key.gpu, stats.key.gpu_instance_id)
        same = stats.info.mig_uuid in (None, mig_uuid) and stats.info.profile == p.profile
        if where == (p.node, p.gpu, p.gi) and same:
            return p.name
    raise AssertionError(f"no planted slice for {stats.key}")


def assert_same_stats(
    fast: list[SliceStats], exact: list[SliceStats], name: Callable[[SliceStats], str]
) -> None:
    """Every field equal (floats to 1e-9: the engines' own float sums), in the same order."""
    assert [s.info for s in fast] == [s.info for s in exact]
    for got, want in zip(fast, exact, strict=True):
        for f in fields(SliceStats):
            a, b = getattr(got, f.name), getattr(want, f.name)
            if f.name == "owners":
                assert [(o.namespace, o.pod) for o in a] == [(o.namespace, o.pod) for o in b]
                assert all(_close(x.fraction, y.fraction) for x, y in zip(a, b, strict=True))
            elif f.name == "hourly" and a is not None and b is not None:
                assert len(a.activity) == len(b.activity)
                for hour, (x, y) in enumerate(zip(a.activity, b.activity, strict=True)):
                    assert _close(x, y), f"{name(got)} activity hour {hour}: {x} != {y}"
                for hour, (x, y) in enumerate(zip(a.allocated, b.allocated, strict=True)):
                    assert _close(x, y), f"{name(got)} allocated hour {hour}: {x} != {y}"
            else:
                assert _close(a, b), f"{name(got)} {f.name}: fast {a!r} != exact {b!r}"


def assert_same_runs(fast: RemoteSliceStats, exact: RemoteSliceStats) -> None:
    """The same notes and the same data-quality counts."""
    assert fast.notes == exact.notes
    assert fast.quality.samples == exact.quality.samples
    assert fast.quality.slices == exact.quality.slices


def test_fast_equals_exact_field_by_field(case: Case) -> None:
    assert [_name(s) for s in case.fast_stats] == [_name(s) for s in case.exact_stats]
    assert len(case.fast_stats) == len(PLANTED)
    assert all(s.hourly is not None and len(s.hourly.activity) == 48 for s in case.fast_stats)
    assert_same_stats(case.fast_stats, case.exact_stats, _name)


def test_fast_says_the_same_notes_and_counts_the_same_bad_numbers(case: Case) -> None:
    assert_same_runs(case.fast, case.exact)
    if case.dialect is Dialect.MIGSCOPE:
        assert any("negative or infinite" in n for n in case.fast.notes)


def test_the_fast_path_settles_what_it_can_and_only_that(case: Case) -> None:
    exact, merged = set(ALWAYS_EXACT), set(MERGED)
    if case.dialect is Dialect.DCGM:
        exact |= EXACT_IN_DCGM
        merged |= MERGED_IN_DCGM
    if case.engine == "victoria":
        exact -= SETTLED_ON_VM
    assert case.fast.stats == "fast"
    assert case.exact.stats == "exact"
    assert case.fast.exact_slices == len(exact)
    assert case.fast.fast_slices == len(PLANTED) - len(exact)
    assert case.fast.merged_slices == len(merged)
    assert case.exact.exact_slices == len(PLANTED)


def without_timings(value: object) -> object:
    """A report without the solver's own timings (``solve.wall_s``, ``solve.solver_s``)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("wall_s", "solver_s")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_verdicts_and_plans_are_the_same(case: Case) -> None:
    options = AnalyzeOptions(step_s=STEP)
    fast = analyze(iter(case.fast_stats), window=(START, END), options=options)
    exact = analyze(iter(case.exact_stats), window=(START, END), options=options)
    assert without_timings(report_json(build_report(fast))) == without_timings(
        report_json(build_report(exact))
    )
    assert fast.mig_parted is not None or case.dialect is Dialect.DCGM


# --------------------------------------------------------------------------------------------
# Every other agreement suite's history, through both paths


@dataclass(frozen=True)
class Borrowed:
    """Another suite's history and window: what its own tests read through the exact path."""

    history: Callable[[Path], list[HistorySeries]]
    window: Callable[[Path], tuple[float, float]]
    step: float


def _planted_fleet(dialect: Dialect) -> Borrowed:
    """tests/analyzer/test_planted_fleet.py's week (36 slices, 300 s) in ``dialect``."""
    import test_planted_fleet as fleet

    def scenario(tmp: Path) -> Path:
        path = tmp / "planted-fleet.yaml"
        path.write_text(yaml.safe_dump(fleet.SCENARIO))
        return path

    return Borrowed(
        lambda tmp: fleet._history(scenario(tmp), dialect),
        lambda tmp: fleet._window(scenario(tmp)),
        fleet.STEP,
    )


def _borrowed(name: str) -> Borrowed:
    if name.startswith("planted-fleet"):
        return _planted_fleet(Dialect(name.rpartition("-")[2]))
    if name.startswith("stats-agree"):
        import test_stats_agree as agree

        history = agree.HISTORIES[Dialect(name.rpartition("-")[2])]
        return Borrowed(lambda _: history, lambda _: (agree.START, agree.END), agree.STEP)
    if name.startswith("uuid-grouping"):
        import test_uuid_grouping as uuids

        history = uuids.HISTORIES[Dialect(name.rpartition("-")[2])]
        return Borrowed(lambda _: history, lambda _: (uuids.START, uuids.END), uuids.STEP)
    if name.startswith("data-quality"):
        import test_data_quality as quality

        make = quality._migscope_history if name.endswith("migscope") else quality._dcgm_history
        return Borrowed(
            lambda _: make(quality._planted()), lambda _: (quality.START, quality.END), 60
        )
    if name == "dialect-errors-dcgm":
        import test_dialect_errors as errors

        return Borrowed(lambda _: errors.COMBINED, lambda _: (errors.T - 3600, errors.T), 60)
    assert name == "dcgm-generations-dcgm"
    import test_dcgm_generations as generations

    return Borrowed(
        lambda _: generations.SERVER_HISTORY,
        lambda _: (generations.START, generations.END),
        generations.STEP,
    )


BORROWED = [
    f"{suite}-{dialect.value}"
    for suite in ("planted-fleet", "stats-agree", "uuid-grouping", "data-quality")
    for dialect in Dialect
] + ["dialect-errors-dcgm", "dcgm-generations-dcgm"]


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param("prometheus", marks=requires_prometheus),
        pytest.param("victoria", marks=requires_victoria),
    ],
)
@pytest.mark.parametrize("name", BORROWED)
def test_every_agreement_suites_history_reads_the_same_fast(
    name: str, engine: str, tmp_path: Path
) -> None:
    borrowed = _borrowed(name)
    history = borrowed.history(tmp_path)
    start, end = borrowed.window(tmp_path)
    server: ManagedServer = (
        PrometheusServer(history) if engine == "prometheus" else VictoriaServer(history)
    )
    runs: dict[str, tuple[RemoteSliceStats, list[SliceStats]]] = {}
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        for mode in ("fast", "exact"):
            run = remote_slice_stats(
                client, start=start, end=end, step=borrowed.step, stats=mode, workers=2
            )
            runs[mode] = (run, list(run))
    (fast, fast_stats), (exact, exact_stats) = runs["fast"], runs["exact"]
    assert fast.stats == "fast"
    assert fast_stats
    assert_same_stats(fast_stats, exact_stats, lambda s: f"{name} {s.key}")
    assert_same_runs(fast, exact)
    options = AnalyzeOptions(step_s=borrowed.step)
    window = (fast.window_start, fast.window_end)
    from_fast = build_report(analyze(iter(fast_stats), window=window, options=options))
    from_exact = build_report(analyze(iter(exact_stats), window=window, options=options))
    assert without_timings(report_json(from_fast)) == without_timings(report_json(from_exact))
    assert fast.fast_slices > 0  # the fast path's own reads were used, not only the exact


# --------------------------------------------------------------------------------------------
# Choosing the path, and the command line


@requires_prometheus
def test_auto_takes_exact_for_a_small_fleet_and_fast_above_the_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history = HISTORIES[Dialect.MIGSCOPE]
    with (
        PrometheusServer(history) as server,
        PrometheusClient(server.url, retries=0, trust_env=False) as client,
    ):
        small = remote_slice_stats(client, start=START, end=END, step=STEP)
        assert small.stats == "exact"  # 20 slices: the reference path
        monkeypatch.setattr(evaluate, "AUTO_EXACT_MAX_SLICES", len(PLANTED) - 1)
        large = remote_slice_stats(client, start=START, end=END, step=STEP)
        assert large.stats == "fast"
        # Fast needs whole hours ending on the hour: half an hour off, exact with a note.
        odd = remote_slice_stats(client, start=START, end=END - 1800, step=STEP, stats="fast")
        assert odd.stats == "exact"
        assert any("fast statistics need a window of whole hours" in n for n in odd.notes)
        list(small), list(large), list(odd)


@requires_prometheus
def test_the_command_line_takes_stats_and_gives_the_same_report() -> None:
    reports = {}
    with PrometheusServer(HISTORIES[Dialect.MIGSCOPE]) as server:
        for mode in ("fast", "exact"):
            args = [
                "analyze",
                "--prometheus",
                server.url,
                "--end",
                str(int(END)),
                "--window",
                "2d",
                "--stats",
                mode,
                "--pending-pods",
                "off",
                "-q",
                "-o",
                "json",
            ]
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, result.output
            report = json.loads(result.output)
            report.pop("provenance")
            reports[mode] = without_timings(report)
    assert reports["fast"] == reports["exact"]
    refused = CliRunner().invoke(cli, ["analyze", "--simulate", "fleet-mixed", "--stats", "fast"])
    assert refused.exit_code == 1
    assert "--stats fast: only with --prometheus URL" in refused.output


def test_a_thanos_resolution_other_than_raw_is_said_in_the_report() -> None:
    assert resolution_note({}) is None
    assert resolution_note({"max_source_resolution": "0s"}) is None
    note = resolution_note({"max_source_resolution": "5m"})
    assert note is not None
    assert "downsampled to 5m" in note
    with PrometheusClient("http://127.0.0.1:1/?max_source_resolution=1h&dedup=true") as client:
        assert client.params == {"max_source_resolution": "1h", "dedup": "true"}
        source = PrometheusSource(client)
        assert any("downsampled to 1h" in n for n in source.notes())


@requires_victoria
def test_a_live_server_whose_newest_hour_fills_up_during_the_run_keeps_the_fast_reads() -> None:
    """Every request sees one more minute than the one before, as on a scraping server.

    The window ends at the next full hour (what ``migscope analyze`` asks a live server for),
    so its last hour is partly filled and grows while the fast path reads: a series' raw
    samples and its intervals must be compared within one request, or every live slice would
    look irregular and go to the exact queries.
    """
    now = float(int(time.time()) // STEP * STEP)
    end = (now // 3600 + 1) * 3600
    first = end - 3 * 3600
    minutes = [first + STEP * k for k in range(1, int((now - 1800 - first) // STEP))]

    def minute(t: float) -> list[HistorySeries]:
        out = []
        for gi in (1, 2, 3):
            base = {
                "node": "live",
                "gpu": "0",
                "gpu_uuid": "GPU-live",
                "gpu_instance_id": str(gi),
                "mig_uuid": f"MIG-live-{gi}",
            }
            out += [
                HistorySeries("migscope_mig_info", {**base, "profile": "1g.18gb"}, [(t, 1.0)]),
                HistorySeries("migscope_mig_graphics_active_ratio", base, [(t, 0.1 * gi)]),
                HistorySeries("migscope_mig_memory_used_bytes", base, [(t, 1e9)]),
                HistorySeries("migscope_mig_pod_info", {**base, "pod": f"p{gi}"}, [(t, 1.0)]),
            ]
        return out

    history = [s for t in minutes for s in minute(t)]
    with VictoriaServer(history) as vm:
        arriving = iter(np.arange(minutes[-1] + STEP, now - 120, STEP).tolist())
        arrived: list[float] = []

        class Live(PrometheusClient):
            """Imports the next minute before each query, as scrapes land between them."""

            def query(self, *args: Any, **kwargs: Any) -> Any:
                self._arrive()
                return super().query(*args, **kwargs)

            def query_range(self, *args: Any, **kwargs: Any) -> Any:
                self._arrive()
                return super().query_range(*args, **kwargs)

            def _arrive(self) -> None:
                t = next(arriving, None)
                if t is not None:
                    vm.load(minute(t))
                    arrived.append(t)

        with Live(vm.url, retries=0, trust_env=False) as client:
            run = remote_slice_stats(client, start=first, end=end, stats="fast", workers=1)
            stats = list(run)
    assert len(arrived) >= 5  # the data did change between the fast path's requests
    assert [s.key.gpu_instance_id for s in stats] == [1, 2, 3]
    assert (run.fast_slices, run.exact_slices) == (3, 0)
    assert all(s.activity_p50 is not None and s.coverage > 0 for s in stats)
