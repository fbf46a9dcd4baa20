"""The analyzer reads activity from the active-seconds counter where a slice has one (issue 24).

The exporter publishes a slice's activity as a ratio gauge (the mean of its last GPM window
before a scrape: at a 30 s or 60 s scrape it sees a fraction of the time and aliases) and as
``migscope_mig_graphics_active_seconds_total`` (its integral: the increase between two scrapes
is the exact mean between them). Both statistics paths, the embedded one over raw samples
(:func:`migscope.analyzer._intake.stats_local.counter_activity`) and the server's PromQL
(:meth:`Queries.counter_ratio`), prefer the counter and fall back to the gauge per slice and
interval. Six hours of minute data on the step grid are planted in a real Prometheus 2.42 and a
real VictoriaMetrics, and:

* the same truth written as counter only, gauge only and both gives the same statistics,
  on either engine, through the exact and the fast path, and equal to the embedded path's
  (a counter reset, a short gap the increase spans and a long one it does not included);
* a counter and a gauge that disagree on purpose (bursts between the GPM windows: the gauge
  says idle) give the counter's numbers, and the analysis does not call the slice idle;
* in a half-upgraded fleet a slice with the counter and one with the gauge only are both read;
* the fast path reads a clean counter natively (per-series ``irate`` subqueries, no exact
  queries: :func:`...fast._clean`) and gives the exact path's numbers, and routes only the
  counters it cannot settle (a gap, a counter starting mid-window) to the exact queries, on a
  fleet that mixes them with a reset, ratios clamped at 1, a counter-only and a gauge-only slice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import pytest
from support.engines import ENGINES_AND_DIALECTS
from support.prometheus import HistorySeries, ManagedServer, PrometheusServer, to_openmetrics
from support.victoria import VictoriaServer

from migscope.analyzer._intake.dialect import (
    DIALECT_METRICS,
    MIG_ACTIVE_SECONDS,
    MIG_ACTIVITY,
    Dialect,
    iter_slice_series,
)
from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_local import (
    COUNTER_LOOKBACK_SECONDS,
    RangeSemantics,
    TimeSeries,
    counter_activity,
    prefer_counter,
    slice_stats,
)
from migscope.analyzer._intake.stats_promql import RemoteSliceStats, remote_slice_stats
from migscope.analyzer._intake.stats_promql.queries import Queries
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report

STEP = 60
END = float((int(time.time()) // 3600 - 3) * 3600)  # on the hour, clear of VM's latency offset
START = END - 6 * 3600
GRID = np.arange(START - 3600, END + 1, STEP, dtype=np.float64)
RESET_AT = START + 3 * 3600 + 17 * STEP  # the exporter restarts: its counter starts again
SHORT_GAP = (GRID > START + 3600) & (GRID <= START + 3600 + 2 * STEP)  # two scrapes lost
LONG_GAP = (GRID > START + 4 * 3600) & (GRID <= START + 4 * 3600 + 8 * STEP)  # > 5 minutes
FIELDS = (
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
    "last_seen",
)
ENGINES = [p for p in ENGINES_AND_DIALECTS if p.values[0][1] is Dialect.MIGSCOPE]
"""``(engine, dialect)`` params of migscope's dialect: dcgm-exporter has no counter."""


@dataclass(frozen=True)
class Planted:
    """One slice: its true activity per scrape (the mean since the previous one)."""

    gi: int
    truth: np.ndarray
    gauge: np.ndarray  # what the ratio gauge says at each scrape
    counter: bool = True  # the exporter writes the counter
    ratio: bool = True  # the exporter writes the gauge
    sampled: np.ndarray | None = None  # scrapes that happened (None: all)
    reset_at: float | None = None
    counter_from: float | None = None  # the counter's first scrape (an upgrade mid-window)


def _truths() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(24)
    n = GRID.size
    busy = rng.integers(0, 101, n) / 100.0
    steady = np.full(n, 0.4)
    steady[::7] = 0.9  # not constant, but constant across the gaps (checked below)
    return {"busy": busy, "idle": np.zeros(n), "steady": steady}


TRUTH = _truths()


def _counter(p: Planted) -> np.ndarray:
    """The active-seconds counter: the truth integrated over each scrape interval."""
    values = np.empty(GRID.size)
    total = 0.0
    for i, t in enumerate(GRID):
        if p.reset_at is not None and t == p.reset_at:
            total = 0.0  # restarted at the previous scrape: only this interval is counted
        total += p.truth[i] * STEP
        values[i] = round(total, 6)
    return values


def _history(slices: list[Planted]) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for p in slices:
        sampled = p.sampled if p.sampled is not None else np.ones(GRID.size, dtype=bool)
        base = {
            "node": "gpu-a",
            "gpu": "0",
            "gpu_uuid": "GPU-a0",
            "gpu_instance_id": str(p.gi),
            "mig_uuid": f"MIG-a0-{p.gi}",
        }

        def points(values: np.ndarray, mask: np.ndarray = sampled) -> list[tuple[float, float]]:
            return [(float(t), float(v)) for t, v in zip(GRID[mask], values[mask], strict=True)]

        ones = np.ones(GRID.size)
        alive = np.ones(GRID.size, dtype=bool)
        out.append(
            HistorySeries(
                "migscope_mig_info",
                {**base, "profile": "1g.18gb", "placement_start": "0"},
                points(ones, alive),
            )
        )
        if p.ratio:
            out.append(HistorySeries(MIG_ACTIVITY, base, points(p.gauge)))
        if p.counter:
            first = GRID[0] if p.counter_from is None else p.counter_from
            written = points(_counter(p), sampled & np.greater_equal(GRID, first))
            out.append(HistorySeries(MIG_ACTIVE_SECONDS, base, written))
        memory = np.full(GRID.size, float(1 << 30) * (1 + p.gi))
        out.append(HistorySeries("migscope_mig_memory_used_bytes", base, points(memory)))
        out.append(
            HistorySeries(
                "migscope_mig_memory_total_bytes", base, points(np.full(GRID.size, 18.0 * 2**30))
            )
        )
        pod = {**base, "namespace": "ml", "pod": f"job-{p.gi}", "container": "c"}
        out.append(HistorySeries("migscope_mig_pod_info", pod, points(ones)))
    out.append(
        HistorySeries(
            "migscope_gpu_info",
            {"node": "gpu-a", "gpu": "0", "gpu_uuid": "GPU-a0", "model": "H200-141GB"},
            [(float(t), 1.0) for t in GRID],
        )
    )
    return out


def _same_truth(counter: bool, ratio: bool) -> list[Planted]:
    """Three slices whose gauge and counter say the same thing; which of them is written.

    The increase after the short gap spans it (the truth is the same on both sides, so the
    gauge agrees); after the long one the counter's first sample has no value, which only
    an idle slice's mean does not notice.
    """
    return [
        Planted(1, TRUTH["busy"], TRUTH["busy"], counter, ratio, reset_at=RESET_AT),
        Planted(2, TRUTH["idle"], TRUTH["idle"], counter, ratio, sampled=~LONG_GAP),
        Planted(3, TRUTH["steady"], TRUTH["steady"], counter, ratio, sampled=~SHORT_GAP),
    ]


VARIANTS = {
    "counter": _same_truth(counter=True, ratio=False),
    "gauge": _same_truth(counter=False, ratio=True),
    "both": _same_truth(counter=True, ratio=True),
}

# Bursts between the GPM windows: the slice computes 45-55 % of every minute, never in the
# ten seconds before a scrape, so the gauge says 0 while the counter integrates the truth.
BURSTS = np.random.default_rng(5).integers(45, 56, GRID.size) / 100.0
# Five scrapes lost: the counter's pair then spans 6 minutes, beyond the lookback, so the
# first sample after the gap has no counter value and reads the gauge's (on VictoriaMetrics
# only if its irate is kept from reaching before its range).
MIXED_GAP = (GRID > START + 3 * 3600) & (GRID <= START + 3 * 3600 + 5 * STEP)
AFTER_GAP = int(np.flatnonzero(MIXED_GAP)[-1]) + 1
MIXED = [
    Planted(1, BURSTS, np.zeros(GRID.size), sampled=~MIXED_GAP),  # counter and aliased gauge
    Planted(2, np.full(GRID.size, 0.3), np.full(GRID.size, 0.3), counter=False),  # older one
]


# A fleet for the fast path's native reads (clean counters) and its exact route (the rest).
JITTER = np.where(np.arange(GRID.size) % 11 == 0, 1.03, TRUTH["busy"])  # ratios above 1
UPGRADED_AT = START + 2 * 3600 + 30 * STEP
FLEET = [
    Planted(1, TRUTH["busy"], TRUTH["busy"], reset_at=RESET_AT),  # clean, with a reset
    Planted(2, BURSTS, np.zeros(GRID.size)),  # clean, the gauge aliased: the counter's numbers
    Planted(3, TRUTH["steady"], TRUTH["steady"], sampled=~SHORT_GAP),  # a gap: exact
    Planted(4, TRUTH["busy"], TRUTH["busy"], counter_from=UPGRADED_AT),  # starts mid-window
    Planted(5, np.full(GRID.size, 0.3), np.full(GRID.size, 0.3), counter=False),  # gauge only
    Planted(6, TRUTH["steady"], TRUTH["steady"], ratio=False),  # counter only, clean
    Planted(7, JITTER, np.minimum(JITTER, 1.0)),  # clean, ratios clamped at 1
]
NATIVE = {1, 2, 6, 7}
"""The slices of :data:`FLEET` whose counter the fast path reads natively."""


def _embedded(history: list[HistorySeries], semantics: RangeSemantics) -> list[SliceStats]:
    text = to_openmetrics(history)
    series = parse_exposition(text, keep=DIALECT_METRICS, default_timestamp=END)
    return [
        slice_stats(s, start=START, end=END, step=STEP, semantics=semantics)
        for s in iter_slice_series(series)
    ]


@dataclass
class Run:
    semantics: RangeSemantics
    exact: dict[str, list[SliceStats]]
    fast: dict[str, list[SliceStats]]
    embedded: dict[str, list[SliceStats]]
    runs: dict[str, RemoteSliceStats]


def _serve(engine: str, history: list[HistorySeries]) -> ManagedServer:
    return PrometheusServer(history) if engine == "prometheus" else VictoriaServer(history)


@contextmanager
def _client(semantics: RangeSemantics, history: list[HistorySeries]) -> Iterator[PrometheusClient]:
    server = _serve("prometheus" if semantics == "prometheus2" else "victoria", history)
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        yield client


@pytest.fixture(scope="module", params=ENGINES)
def run(request: pytest.FixtureRequest) -> Run:
    engine, _ = request.param
    semantics: RangeSemantics = "prometheus2" if engine == "prometheus" else "victoriametrics"
    out = Run(semantics, {}, {}, {}, {})
    datasets = {**VARIANTS, "mixed": MIXED, "fleet": FLEET}
    for name, slices in datasets.items():
        history = _history(slices)
        out.embedded[name] = _embedded(history, semantics)
        server = _serve(engine, history)
        with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
            exact = remote_slice_stats(client, start=START, end=END, step=STEP, stats="exact")
            out.exact[name] = list(exact)
            out.runs[name] = exact
            fast = remote_slice_stats(client, start=START, end=END, step=STEP, stats="fast")
            out.fast[name] = list(fast)
            out.runs[f"{name}-fast"] = fast
    return out


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _assert_equal(got: list[SliceStats], want: list[SliceStats], what: str) -> None:
    assert [s.key for s in got] == [s.key for s in want], what
    for a, b in zip(got, want, strict=True):
        for name in FIELDS:
            assert _close(getattr(a, name), getattr(b, name)), (
                f"{what} {a.key.gpu_instance_id} {name}: {getattr(a, name)!r} != "
                f"{getattr(b, name)!r}"
            )
        assert a.hourly is not None
        assert b.hourly is not None
        assert len(a.hourly.activity) == 6
        for hour, (x, y) in enumerate(zip(a.hourly.activity, b.hourly.activity, strict=True)):
            assert _close(x, y), f"{what} {a.key.gpu_instance_id} hour {hour}: {x} != {y}"
        assert a.hourly.allocated == b.hourly.allocated


def _by_gi(stats: list[SliceStats]) -> Mapping[int, SliceStats]:
    return {s.key.gpu_instance_id: s for s in stats}


# -- the pure definition ---------------------------------------------------------------------


def _series(points: list[tuple[float, float]]) -> TimeSeries:
    return TimeSeries.of([t for t, _ in points], [v for _, v in points])


def _pairs(ts: TimeSeries) -> list[tuple[float, float]]:
    return [(int(t) / 1000, float(v)) for t, v in zip(ts.timestamps_ms, ts.values, strict=True)]


def test_counter_activity_is_the_increase_over_the_time_between_samples() -> None:
    counter = _series([(0, 100.0), (60, 130.0), (120, 130.0), (180, 190.0)])
    assert _pairs(counter_activity(counter)) == [(60, 0.5), (120, 0.0), (180, 1.0)]


def test_a_drop_is_a_reset_whose_increase_is_the_new_value() -> None:
    counter = _series([(0, 5000.0), (60, 5030.0), (120, 12.0), (180, 36.0)])
    assert _pairs(counter_activity(counter)) == [(60, 0.5), (120, 0.2), (180, 0.4)]


def test_no_value_across_a_gap_of_the_lookback_or_more() -> None:
    lookback = COUNTER_LOOKBACK_SECONDS
    counter = _series([(0, 0.0), (lookback - 1, 29.95), (2 * lookback - 1, 59.95)])
    assert _pairs(counter_activity(counter)) == [(lookback - 1, 29.95 / (lookback - 1))]


def test_ratios_are_clamped_to_one_and_bad_ones_dropped() -> None:
    counter = _series([(0, 0.0), (60, 61.0), (120, math.nan), (180, 150.0), (240, math.inf)])
    assert _pairs(counter_activity(counter)) == [(60, 1.0)]  # NaN breaks two pairs, Inf one
    assert len(counter_activity(_series([(0, 1.0)]))) == 0  # the first sample gives none


def test_the_gauge_fills_in_where_the_counter_has_no_value() -> None:
    counter = counter_activity(_series([(60, 10.0), (120, 40.0), (180, 70.0)]))
    gauge = _series([(60, 0.9), (120, 0.1), (180, 0.1), (240, 0.7)])
    assert _pairs(prefer_counter(counter, gauge) or counter) == [
        (60, 0.9),  # the counter's first sample: no increase yet
        (120, 0.5),
        (180, 0.5),
        (240, 0.7),  # the counter stopped
    ]
    assert prefer_counter(None, gauge) is gauge
    assert prefer_counter(counter, None) is counter
    assert prefer_counter(None, None) is None


def test_without_a_counter_on_the_server_the_queries_read_the_gauge_alone() -> None:
    """Older fleets get the queries they had: no counter term, no cost per step for it."""
    for names, wanted in (({}, False), ({MIG_ACTIVE_SECONDS: (MIG_ACTIVE_SECONDS,)}, True)):
        run = RemoteSliceStats(
            dialect=Dialect.MIGSCOPE,
            semantics="prometheus2",
            window_start=START,
            window_end=END,
            node_label="node",
            nodes=("gpu-a",),
            names=names,
        )
        with PrometheusClient("http://127.0.0.1:9", trust_env=False) as client:
            q = Queries(client, run, step=STEP, period=None)
        expr = q.per_interval("last_over_time", q.activity, ["gpu-a"], ceiling=1.0, counters=[])
        assert MIG_ACTIVE_SECONDS not in expr
        counted = q.per_interval(
            "last_over_time", q.activity, ["gpu-a"], counters=q.counters_for(q.activity)
        )
        assert (MIG_ACTIVE_SECONDS in counted) is wanted
        memory = q.per_interval(
            "last_over_time", q.memory, ["gpu-a"], counters=q.counters_for(q.memory)
        )
        assert MIG_ACTIVE_SECONDS not in memory  # only activity has a counter


# -- on real engines -------------------------------------------------------------------------


def test_counter_gauge_and_both_give_the_same_statistics(run: Run) -> None:
    """(a) and (d): one truth, three ways of writing it, equal statistics on every path."""
    want = run.exact["gauge"]
    for name in VARIANTS:
        _assert_equal(run.exact[name], want, f"{run.semantics} exact {name} vs gauge")
        _assert_equal(run.fast[name], run.exact[name], f"{run.semantics} fast {name}")
        _assert_equal(run.embedded[name], run.exact[name], f"{run.semantics} embedded {name}")
    busy, idle, steady = (_by_gi(run.exact["counter"])[gi] for gi in (1, 2, 3))
    window = (GRID > START) & (GRID <= END)
    assert busy.activity_max == pytest.approx(TRUTH["busy"][window].max(), abs=1e-9)
    assert busy.activity_p50 == pytest.approx(np.quantile(TRUTH["busy"][window], 0.5), abs=1e-9)
    assert idle.activity_p95 == 0.0
    assert idle.coverage < 1.0  # eight scrapes lost
    assert steady.activity_p50 == pytest.approx(0.4)
    assert steady.coverage < 1.0  # two scrapes lost


def test_the_counter_is_read_where_the_gauge_disagrees(run: Run) -> None:
    """(b) and (c): bursts the gauge misses are the counter's; a gauge-only slice is read."""
    for path in ("exact", "fast", "embedded"):
        stats = _by_gi(getattr(run, path)["mixed"])
        upgraded, older = stats[1], stats[2]
        read = BURSTS.copy()
        read[AFTER_GAP] = 0.0  # the gauge's, where the counter has no value
        truth = read[(GRID > START) & (GRID <= END) & ~MIXED_GAP]
        assert upgraded.activity_p50 == pytest.approx(np.quantile(truth, 0.5), abs=1e-9), path
        assert upgraded.hourly is not None
        assert upgraded.hourly.activity[3] == pytest.approx(truth[180:235].mean(), abs=1e-9)
        assert upgraded.activity_max == pytest.approx(truth.max(), abs=1e-9), path
        assert upgraded.hourly is not None
        assert upgraded.hourly.activity[0] == pytest.approx(truth[:60].mean(), abs=1e-9)
        assert older.activity_p95 == pytest.approx(0.3), path  # the gauge of an older exporter
        assert older.hourly is not None
        assert older.hourly.activity == pytest.approx((0.3,) * 6)
    _assert_equal(run.fast["mixed"], run.exact["mixed"], f"{run.semantics} fast mixed")
    _assert_equal(run.embedded["mixed"], run.exact["mixed"], f"{run.semantics} embedded mixed")
    assert run.runs["mixed-fast"].exact_slices == 1  # the counter's slice, exactly
    assert run.runs["mixed-fast"].fast_slices == 1


def test_the_analysis_does_not_call_a_bursty_slice_idle(run: Run) -> None:
    result = analyze(
        iter(run.exact["mixed"]), window=(START, END), options=AnalyzeOptions(step_s=STEP)
    )
    status = {s.gpu_instance_id: s.status for s in build_report(result).slices}
    assert status[1] != "idle"  # the gauge alone says 0 % all week
    gauge_only = [_zeroed(s) for s in run.exact["mixed"]]
    fooled = analyze(iter(gauge_only), window=(START, END), options=AnalyzeOptions(step_s=STEP))
    assert {s.gpu_instance_id: s.status for s in build_report(fooled).slices}[1] == "idle"


def _zeroed(stats: SliceStats) -> SliceStats:
    """The statistics the aliased gauge alone would give slice 1: zero activity."""
    if stats.key.gpu_instance_id != 1:
        return stats
    assert stats.hourly is not None
    hourly = replace(stats.hourly, activity=(0.0,) * len(stats.hourly.activity))
    return replace(stats, activity_p50=0.0, activity_p95=0.0, activity_max=0.0, hourly=hourly)


def test_the_fast_path_reads_clean_counters_natively(run: Run) -> None:
    """Clean counters take no exact query; the numbers are the exact path's and embedded's.

    Fails if counter slices are routed to the exact queries again (the ledger of the real
    run counts the slices each route computed), or if a native read differs anywhere.
    """
    _assert_equal(run.fast["fleet"], run.exact["fleet"], f"{run.semantics} fast fleet")
    _assert_equal(run.embedded["fleet"], run.exact["fleet"], f"{run.semantics} embedded fleet")
    fast = run.runs["fleet-fast"]
    assert fast.counter_slices == len(NATIVE)
    assert fast.exact_slices == len(FLEET) - len(NATIVE) - 1  # the gap, the late counter
    assert fast.fast_slices == len(FLEET) - fast.exact_slices
    stats = _by_gi(run.fast["fleet"])
    window = (GRID > START) & (GRID <= END)
    assert stats[2].activity_p50 == pytest.approx(np.quantile(BURSTS[window], 0.5), abs=1e-9)
    assert stats[7].activity_max == 1.0  # 1.03 clamped
    late = TRUTH["busy"][window]  # the gauge before the upgrade, the counter after: the truth
    assert stats[4].activity_p95 == pytest.approx(np.quantile(late, 0.95), abs=1e-9)
    # Every variant's clean counter (the busy slice with its reset) is read natively too.
    assert run.runs["counter-fast"].counter_slices == 1
    assert run.runs["both-fast"].counter_slices == 1
    assert run.runs["gauge-fast"].counter_slices == 0


def test_native_counter_reads_cost_no_exact_query(run: Run) -> None:
    """A fleet of clean counters asks as many queries as one without counters (no exact run)."""
    assert run.runs["fleet-fast"].exact_slices > 0  # the fleet's unclean slices
    clean = [p for p in FLEET if p.gi in NATIVE]
    counted: dict[str, int] = {}
    for name, slices in (("clean", clean), ("gauges", [replace(p, counter=False) for p in clean])):
        with _client(run.semantics, _history(slices)) as client:
            fast = remote_slice_stats(client, start=START, end=END, step=STEP, stats="fast")
            got = list(fast)
            assert fast.exact_slices == 0, name
            counted[name] = fast.queries
            if name == "clean":
                assert fast.counter_slices == len(clean)
                exact = list(
                    remote_slice_stats(client, start=START, end=END, step=STEP, stats="exact")
                )
                _assert_equal(got, exact, f"{run.semantics} clean counters")
    # The same requests: the counter's reads join the gauge's, in the same requests.
    assert counted["clean"] == counted["gauges"]
