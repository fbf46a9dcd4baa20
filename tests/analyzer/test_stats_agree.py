"""The server's PromQL statistics equal the embedded ones, on real engines and both dialects.

A report must not change with the source. Two days of minute data for five slices with
planted behaviour (idle, busy, unallocated, NaN gaps with an owner change, a slice destroyed
half way) are written once, backfilled into a real Prometheus 2.42 (promtool) and imported
into a real VictoriaMetrics, in migscope's and dcgm-exporter's dialects. Then
:func:`remote_slice_stats` (PromQL on the server) must equal :func:`stats.slice_stats` run on
the same text through the embedded reader, with the ``semantics`` of that engine, field by
field; and the planted truths must come out.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pytest
from support.engines import ENGINES_AND_DIALECTS
from support.prometheus import (
    HistorySeries,
    ManagedServer,
    PrometheusServer,
    to_openmetrics,
)
from support.victoria import VictoriaServer

from migscope.analyzer._intake.dialect import DIALECT_METRICS, Dialect, iter_slice_series
from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_local import RangeSemantics, slice_stats
from migscope.analyzer._intake.stats_promql import RemoteSliceStats, remote_slice_stats
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report
from migscope.core._migparted import check_config, emit_config, parse_config
from migscope.core._spec.v1 import report_json

STEP = 60
END = float((int(time.time()) // 3600 - 3) * 3600)  # on the grid, well clear of "now"
START = END - 2 * 86_400
GRID = np.arange(START - 1800, END + 1800 + 1, STEP, dtype=np.float64)
MID = START + 86_400
TRICKY_NODE = 'gpu"b.*|x'  # quotes and regex metacharacters, matched literally
MIB = 1 << 20


@dataclass(frozen=True)
class Planted:
    """One simulated slice and the truth planted in it."""

    node: str
    gpu: int
    uuid: str
    gi: int
    profile: str
    activity: np.ndarray  # NaN = NaN sample; -1 = no sample at all
    memory_mib: np.ndarray
    owners: tuple[tuple[str, str, float, float], ...]  # (namespace, pod, from, to)
    until: float = math.inf  # destroyed at


def _planted() -> list[Planted]:
    rng = np.random.default_rng(7)
    n = GRID.size
    idle = np.zeros(n)
    busy = np.clip(0.8 + rng.normal(0, 0.05, n), 0, 1).round(4)
    gappy = rng.uniform(0.02, 0.15, n).round(4)
    gappy[rng.random(n) < 0.1] = math.nan
    gap = (GRID > START + 30_000) & (GRID <= START + 30_000 + 6 * 3600)
    gappy[gap] = -1
    return [
        Planted(
            "gpu-a",
            0,
            "GPU-a0",
            1,
            "1g.18gb",
            idle,
            np.full(n, 512.0),
            (("ml", "notebook", -math.inf, math.inf),),
        ),
        Planted(
            "gpu-a",
            0,
            "GPU-a0",
            2,
            "3g.71gb",
            busy,
            rng.integers(30_000, 60_000, n) * 1.0,
            (("ml", "train", -math.inf, math.inf),),
        ),
        Planted("gpu-a", 0, "GPU-a0", 3, "2g.35gb", idle, np.zeros(n), ()),
        Planted(
            "gpu-a",
            1,
            "GPU-a1",
            1,
            "7g.141gb",
            gappy,
            rng.integers(1000, 9000, n) * 1.0,
            (
                ("team-x", "job-a", -math.inf, MID),
                ("team-y", "job-b", MID, math.inf),
            ),
        ),
        Planted(
            TRICKY_NODE,
            0,
            "GPU-b0",
            5,
            "1g.18gb",
            busy[::-1].copy(),
            np.full(n, 9000.0),
            (("ml", "serve", -math.inf, math.inf),),
            until=MID + 7 * 3600,
        ),
    ]


def _points(values: np.ndarray, mask: np.ndarray) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in zip(GRID[mask], values[mask], strict=True)]


def _migscope(slices: list[Planted]) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for s in slices:
        alive = s.until > GRID
        sampled = alive & ~(s.activity == -1)
        base = {
            "node": s.node,
            "gpu": str(s.gpu),
            "gpu_uuid": s.uuid,
            "gpu_instance_id": str(s.gi),
            "mig_uuid": f"MIG-{s.uuid}-{s.gi}",
        }
        ones = np.ones(GRID.size)
        out.append(
            HistorySeries(
                "migscope_mig_info",
                {**base, "profile": s.profile, "placement_start": "0"},
                _points(ones, alive),
            )
        )
        out.append(
            HistorySeries("migscope_mig_graphics_active_ratio", base, _points(s.activity, sampled))
        )
        out.append(
            HistorySeries(
                "migscope_mig_memory_used_bytes", base, _points(s.memory_mib * MIB, sampled)
            )
        )
        out.append(
            HistorySeries(
                "migscope_mig_memory_total_bytes",
                base,
                _points(np.full(GRID.size, 18.0 * 2**30), alive),
            )
        )
        power = 60.0 + 200.0 * np.nan_to_num(np.clip(s.activity, 0, 1))
        energy = np.cumsum(power * STEP)
        energy[GRID > MID] -= energy[GRID > MID][0] - 5.0  # an exporter restart: counter reset
        out.append(
            HistorySeries(
                "migscope_mig_energy_estimated_joules_total", base, _points(energy, alive)
            )
        )
        for ns, pod, t0, t1 in s.owners:
            held = alive & (t0 <= GRID) & (t1 > GRID)
            out.append(
                HistorySeries(
                    "migscope_mig_pod_info",
                    {**base, "namespace": ns, "pod": pod, "container": "c"},
                    _points(ones, held),
                )
            )
    models = {(s.node, s.gpu, s.uuid) for s in slices}
    for node, gpu, uuid in sorted(models):
        out.append(
            HistorySeries(
                "migscope_gpu_info",
                {"node": node, "gpu": str(gpu), "gpu_uuid": uuid, "model": "H200-141GB"},
                _points(np.ones(GRID.size), GRID == GRID),
            )
        )
    return out


def _dcgm(slices: list[Planted]) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for s in slices:
        alive = s.until > GRID
        sampled = alive & ~(s.activity == -1)
        base = {
            "Hostname": s.node,
            "gpu": str(s.gpu),
            "UUID": s.uuid,
            "GPU_I_ID": str(s.gi),
            "GPU_I_PROFILE": s.profile,
            "modelName": "NVIDIA H200",
            "device": "nvidia0",
        }
        spans = [(ns, pod, t0, t1) for ns, pod, t0, t1 in s.owners] or [
            ("", "", -math.inf, math.inf)
        ]
        for ns, pod, t0, t1 in spans:
            part = sampled & (t0 <= GRID) & (t1 > GRID)
            labels = {**base, "namespace": ns, "pod": pod}
            out.append(
                HistorySeries("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, _points(s.activity, part))
            )
            out.append(HistorySeries("DCGM_FI_DEV_FB_USED", labels, _points(s.memory_mib, part)))
            out.append(
                HistorySeries("DCGM_FI_DEV_FB_FREE", labels, _points(18_000 - s.memory_mib, part))
            )
    return out


PLANTED = _planted()
HISTORIES = {Dialect.MIGSCOPE: _migscope(PLANTED), Dialect.DCGM: _dcgm(PLANTED)}


@dataclass
class Case:
    dialect: Dialect
    semantics: RangeSemantics
    run: RemoteSliceStats
    remote: list[SliceStats]
    embedded: list[SliceStats]


@pytest.fixture(
    scope="module",
    params=ENGINES_AND_DIALECTS,
)
def case(request: pytest.FixtureRequest) -> Case:
    engine, dialect = request.param
    history = HISTORIES[dialect]
    server: ManagedServer = (
        PrometheusServer(history) if engine == "prometheus" else VictoriaServer(history)
    )
    semantics: RangeSemantics = "prometheus2" if engine == "prometheus" else "victoriametrics"
    text = to_openmetrics(history)
    series = parse_exposition(text, keep=DIALECT_METRICS, default_timestamp=END)
    embedded = [
        slice_stats(s, start=START, end=END, step=STEP, semantics=semantics)
        for s in iter_slice_series(series)
    ]
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        run = remote_slice_stats(client, start=START, end=END, step=STEP, chunk_nodes=1)
        remote = list(run)
    return Case(dialect, semantics, run, remote, embedded)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def test_engine_and_dialect_detected(case: Case) -> None:
    assert case.run.dialect is case.dialect
    assert case.run.semantics == case.semantics
    assert (case.run.window_start, case.run.window_end) == (START, END)
    assert case.run.queries > 0
    if case.semantics == "prometheus2":
        assert case.run.server_eval_seconds is not None
        assert case.run.server_eval_seconds > 0
    else:
        assert case.run.server_eval_seconds is None  # VictoriaMetrics reports no timings


def test_server_and_embedded_agree_field_by_field(case: Case) -> None:
    assert [s.key for s in case.remote] == [s.key for s in case.embedded]
    assert len(case.remote) == len(PLANTED)
    for got, want in zip(case.remote, case.embedded, strict=True):
        assert got.info == want.info
        for name in (
            "window_start",
            "window_end",
            "samples",
            "expected_samples",
            "coverage",
            "activity_p50",
            "activity_p95",
            "activity_max",
            "memory_peak_bytes",
            "memory_p95_bytes",
            "memory_total_bytes",
            "allocated_fraction",
            "energy_joules",
            "last_seen",  # picks a GPU's current instances after a re-partition
        ):
            assert _close(getattr(got, name), getattr(want, name)), (
                f"{got.key} {name}: server {getattr(got, name)!r} != embedded "
                f"{getattr(want, name)!r}"
            )
        assert [(o.namespace, o.pod) for o in got.owners] == [
            (o.namespace, o.pod) for o in want.owners
        ]
        assert got.hourly is not None
        assert want.hourly is not None
        assert len(got.hourly.activity) == len(want.hourly.activity) == 48
        for hour, (a, b) in enumerate(zip(got.hourly.activity, want.hourly.activity, strict=True)):
            assert _close(a, b), f"{got.key} activity hour {hour}: server {a} != embedded {b}"
        for hour, (a, b) in enumerate(
            zip(got.hourly.allocated, want.hourly.allocated, strict=True)
        ):
            assert _close(a, b), f"{got.key} allocated hour {hour}: server {a} != embedded {b}"
        for a, b in zip(got.owners, want.owners, strict=True):
            assert _close(a.fraction, b.fraction)


def test_planted_truths_come_out(case: Case) -> None:
    by_gi = {(s.key.node, s.key.gpu, s.key.gpu_instance_id): s for s in case.remote}
    idle = by_gi[("gpu-a", 0, 1)]
    busy = by_gi[("gpu-a", 0, 2)]
    unallocated = by_gi[("gpu-a", 0, 3)]
    gappy = by_gi[("gpu-a", 1, 1)]
    destroyed = by_gi[(TRICKY_NODE, 0, 5)]
    assert idle.activity_p95 == 0.0
    assert idle.allocated_fraction == 1.0
    assert idle.memory_peak_bytes == 512 * MIB
    assert idle.owners[0][:2] == ("ml", "notebook")
    assert busy.activity_p50 is not None
    assert abs(busy.activity_p50 - 0.8) < 0.01
    assert unallocated.allocated_fraction == 0.0
    assert unallocated.owners == ()
    assert unallocated.activity_max == 0.0  # seen at zero, not unknown
    assert gappy.coverage < 0.95  # six hours missing, NaN samples not counted
    assert gappy.activity_max is not None
    assert gappy.activity_max <= 0.15
    assert sorted(o.pod for o in gappy.owners) == ["job-a", "job-b"]  # owner changed
    assert 0.5 < destroyed.coverage < 0.7  # destroyed 31 h into a 48 h window
    assert destroyed.hourly is not None
    # Its last sample is a minute before hour 31 ends: hour 30 is held 59 of 60 minutes.
    assert destroyed.hourly.allocated[:30] == (1.0,) * 30
    assert destroyed.hourly.allocated[30] == 59 / 60
    assert destroyed.hourly.allocated[31:] == (0.0,) * 17
    assert destroyed.hourly.activity[31:] == (None,) * 17
    assert gappy.hourly is not None
    assert 5 <= gappy.hourly.activity.count(None) <= 7  # the six-hour gap
    assert idle.hourly is not None
    assert set(idle.hourly.activity) == {0.0}
    if case.dialect is Dialect.MIGSCOPE:
        assert busy.energy_joules is not None
        assert busy.energy_joules > 0
    else:
        assert busy.energy_joules is None  # dcgm-exporter has no per-slice energy


def test_the_analysis_finds_the_planted_slices_through_the_server(case: Case) -> None:
    """End to end from a real PromQL engine: statistics -> classification -> a valid plan."""
    result = analyze(iter(case.remote), window=(START, END), options=AnalyzeOptions(step_s=STEP))
    report = report_json(build_report(result))
    status = {(s["node"], s["gpu"], s["gpu_instance_id"]): s["status"] for s in report["slices"]}
    assert status[("gpu-a", 0, 1)] == "idle"
    assert status[("gpu-a", 0, 3)] == "unallocated"
    # The planted busy slice uses 30-60 GB against the 18 GiB total the data gives every
    # slice: a bottleneck by memory, whatever the dialect.
    assert status[("gpu-a", 0, 2)] == "saturated"
    if case.dialect is Dialect.MIGSCOPE:  # migscope_gpu_info names the model: a plan exists
        assert result.mig_parted is not None
    if result.mig_parted is not None:
        assert check_config(parse_config(emit_config(result.mig_parted))).ok
    for slice_ in report["slices"]:
        assert slice_["node"] in {"gpu-a", TRICKY_NODE}
