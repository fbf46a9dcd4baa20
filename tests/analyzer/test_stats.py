"""Window statistics from raw samples: PromQL's definitions, checked against hand computations.

The embedded source and the Prometheus source must agree, so the quantile is Prometheus's
``quantile_over_time`` (rank φ·(n−1), linear interpolation), the window is a range selector's
``(start, end]`` and energy is ``increase()`` with its extrapolation. Every expected number
below is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migscope.analyzer._intake.stats_local import (
    RangeSemantics,
    SliceSeries,
    TimeSeries,
    iter_slice_stats,
    prometheus_increase,
    prometheus_quantile,
    slice_stats,
)
from migscope.analyzer._model import Owner, SliceInfo, SliceKey

GIB = float(1 << 30)
T0 = 1_760_000_000.0  # a whole minute
INFO = SliceInfo(
    key=SliceKey(node="node-a", gpu=0, gpu_uuid="GPU-0", gpu_instance_id=3),
    model="H200-141GB",
    profile="2g.35gb",
    mig_uuid="MIG-3",
    placement_start=0,
)


def minutes(*values: float, first: int = 1) -> TimeSeries:
    """Samples at T0 + 60·(first), T0 + 60·(first+1), ..."""
    return TimeSeries.of(T0 + 60.0 * np.arange(first, first + len(values)), values)


# ---------------------------------------------------------------------------------------------
# The quantile definition


@pytest.mark.parametrize(
    ("q", "values", "expected"),
    [
        # n=4, rank 0.5·3 = 1.5: halfway between 2 and 3.
        (0.5, [4, 1, 3, 2], 2.5),
        # rank 0.95·3 = 2.85: 3·0.15 + 4·0.85 = 3.85.
        (0.95, [1, 2, 3, 4], 3.85),
        # n=5, rank 0.95·4 = 3.8: 40·0.2 + 50·0.8 = 48.
        (0.95, [50, 10, 40, 20, 30], 48.0),
        # rank 0.25·4 = 1: exactly the second smallest.
        (0.25, [50, 10, 40, 20, 30], 20.0),
        (0.0, [3, 1, 2], 1.0),
        (1.0, [3, 1, 2], 3.0),
        # One sample is every quantile.
        (0.95, [0.7], 0.7),
        # n=10 of 0..0.9, rank 0.95·9 = 8.55: 0.8·0.45 + 0.9·0.55 = 0.855.
        (0.95, [i / 10 for i in range(10)], 0.855),
    ],
)
def test_quantile_matches_hand_computation(q: float, values: list[float], expected: float) -> None:
    assert prometheus_quantile(q, values) == pytest.approx(expected, abs=1e-12)


def test_quantile_edge_cases_are_prometheus_ones() -> None:
    assert math.isnan(prometheus_quantile(0.5, []))
    assert math.isnan(prometheus_quantile(math.nan, [1.0, 2.0]))
    assert prometheus_quantile(-0.1, [1.0, 2.0]) == -math.inf
    assert prometheus_quantile(1.1, [1.0, 2.0]) == math.inf
    # Prometheus sorts NaN first: the 0-quantile of [NaN, 1, 2] is NaN, the 1-quantile 2.
    assert math.isnan(prometheus_quantile(0.0, [2.0, math.nan, 1.0]))
    assert prometheus_quantile(1.0, [2.0, math.nan, 1.0]) == 2.0


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), min_size=1, max_size=60
    ),
    q=st.floats(min_value=0.0, max_value=1.0),
)
def test_quantile_equals_numpy_linear(values: list[float], q: float) -> None:
    expected = float(np.quantile(np.array(values), q, method="linear"))
    assert prometheus_quantile(q, values) == pytest.approx(expected, rel=1e-12, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# TimeSeries


def test_time_series_sorts_dedups_and_is_read_only() -> None:
    series = TimeSeries.of([3.0, 1.0, 2.0, 2.0], [30.0, 10.0, 20.0, 21.0])
    assert series.timestamps_ms.tolist() == [1000, 2000, 3000]
    # A repeated timestamp keeps the value written last, as a re-sent scrape would.
    assert series.values.tolist() == [10.0, 21.0, 30.0]
    with pytest.raises(ValueError, match="read-only"):
        series.values[0] = 5.0


def test_time_series_rejects_mismatched_arrays() -> None:
    with pytest.raises(ValueError, match="equal length"):
        TimeSeries.of([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        TimeSeries.of([math.nan], [1.0])


def test_time_series_concat_and_last_value() -> None:
    joined = TimeSeries.concat([minutes(1.0, 2.0), minutes(3.0, math.nan, first=3)])
    assert joined is not None
    assert joined.values.tolist()[:3] == [1.0, 2.0, 3.0]
    assert joined.last_value() == 3.0  # the NaN at the end is skipped
    assert TimeSeries.concat([]) is None


# ---------------------------------------------------------------------------------------------
# slice_stats against hand computations


def test_stats_of_a_ten_minute_window() -> None:
    # Window (T0, T0+600]: ten one-minute steps; samples at minutes 1..10.
    activity = minutes(0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, math.nan)
    memory = minutes(*(g * GIB for g in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)))
    stamps = memory.timestamps_ms
    series = SliceSeries(
        info=INFO,
        activity=activity,
        memory_used=memory,
        memory_total_bytes=32.5 * GIB,
        holders={("ml", "a"): stamps[:4], ("ml", "b"): stamps[6:]},
    )
    stats = slice_stats(series, start=T0, end=T0 + 600)
    assert stats.window_start == T0
    assert stats.window_end == T0 + 600
    # Memory was sampled every minute; the NaN activity sample counts as missing but the
    # memory sample of that minute still shows the slice was observed.
    assert (stats.samples, stats.expected_samples, stats.coverage) == (10, 10, 1.0)
    # Activity 0..0.8 (nine values): p50 rank 4 -> 0.4; p95 rank 7.6 -> 0.7·0.4 + 0.8·0.6.
    assert stats.activity_p50 == pytest.approx(0.4)
    assert stats.activity_p95 == pytest.approx(0.76)
    assert stats.activity_max == pytest.approx(0.8)
    # Memory 1..10 GiB: p95 rank 8.55 -> 9·0.45 + 10·0.55 = 9.55 GiB; peak 10 GiB.
    assert stats.memory_p95_bytes == pytest.approx(9.55 * GIB)
    assert stats.memory_peak_bytes == 10 * GIB
    assert stats.memory_total_bytes == 32.5 * GIB
    # Pods held it in minutes 1-4 and 7-10: 8 of 10 observed steps.
    assert stats.allocated_fraction == pytest.approx(0.8)
    assert stats.owners == (Owner("ml", "a", 0.4), Owner("ml", "b", 0.4))
    assert stats.energy_joules is None


def test_window_edges_follow_range_selectors() -> None:
    # Samples at minutes 0..10 of values 0..10; window (T0, T0+600].
    series = SliceSeries(
        info=INFO, activity=TimeSeries.of(T0 + 60.0 * np.arange(11), np.arange(11) / 10)
    )
    left_open = slice_stats(series, start=T0, end=T0 + 600)
    # Prometheus 3 / VictoriaMetrics: the sample at T0 is out, the one at T0+600 is in.
    assert left_open.samples == 10
    assert left_open.activity_max == pytest.approx(1.0)
    assert left_open.activity_p50 == pytest.approx(0.55)  # 0.1..1.0, rank 4.5
    closed = slice_stats(series, start=T0, end=T0 + 600, semantics="prometheus2")
    # Prometheus 2.x includes it: 11 samples, p50 of 0..1.0 is 0.5, and coverage stays 1.
    assert closed.samples == 11
    assert closed.activity_p50 == pytest.approx(0.5)
    assert closed.coverage == 1.0


def test_coverage_counts_steps_not_scrapes() -> None:
    # A 15 s scrape for the first 30 minutes of a 60-minute window: 120 samples, but only
    # half of the window's 60 one-minute steps hold one.
    stamps = T0 + 15.0 * np.arange(1, 121)
    series = SliceSeries(info=INFO, memory_used=TimeSeries.of(stamps, np.full(120, GIB)))
    stats = slice_stats(series, start=T0, end=T0 + 3600)
    assert stats.samples == 120
    assert stats.expected_samples == 60
    assert stats.coverage == pytest.approx(0.5)


def test_partial_last_step_and_gaps() -> None:
    # A 150 s window at 60 s steps has ceil(2.5) = 3 steps: (end-60, end], (end-120, end-60]
    # and the partial (start, end-120]. One sample in the newest step only.
    series = SliceSeries(info=INFO, activity=TimeSeries.of([T0 + 150.0], [0.5]))
    stats = slice_stats(series, start=T0, end=T0 + 150)
    assert stats.expected_samples == 3
    assert stats.coverage == pytest.approx(1 / 3)


def test_unknown_numbers_stay_none() -> None:
    # Ampere without DCGM: memory only. Activity must be unknown, never 0.
    series = SliceSeries(info=INFO, memory_used=minutes(GIB, 2 * GIB))
    stats = slice_stats(series, start=T0, end=T0 + 120)
    assert stats.activity_p50 is None
    assert stats.activity_p95 is None
    assert stats.activity_max is None
    assert not stats.activity_known
    assert stats.memory_known
    assert stats.memory_total_bytes is None
    assert stats.allocated_fraction == 0.0
    assert stats.owners == ()
    empty = slice_stats(SliceSeries(info=INFO), start=T0, end=T0 + 120)
    assert (empty.samples, empty.coverage, empty.memory_peak_bytes) == (0, 0.0, None)


def test_all_nan_series_counts_as_missing() -> None:
    series = SliceSeries(info=INFO, activity=minutes(math.nan, math.nan))
    stats = slice_stats(series, start=T0, end=T0 + 120)
    assert stats.samples == 0
    assert stats.activity_p95 is None


def test_pod_seen_without_usage_data_still_counts_as_held() -> None:
    # Pod info in steps 1-2, memory in steps 1 and 3: seen in 3 steps, held in 2 of them.
    series = SliceSeries(
        info=INFO,
        memory_used=TimeSeries.of([T0 + 60, T0 + 180], [GIB, GIB]),
        holders={("ns", "p"): TimeSeries.of([T0 + 60, T0 + 120], [1, 1]).timestamps_ms},
    )
    stats = slice_stats(series, start=T0, end=T0 + 180)
    assert stats.allocated_fraction == pytest.approx(2 / 3)
    assert stats.coverage == pytest.approx(2 / 3)


def test_energy_is_the_increase_over_the_window() -> None:
    # 10 samples at minutes 1..10 going 100, 110, ..., 190; window (T0, T0+600].
    # increase = 90 over 540 s sampled; the first sample is 60 s from the start (< 1.1 · 60),
    # so extrapolate all the way: 90 · 600/540 = 100.
    counter = minutes(*(100.0 + 10 * i for i in range(10)))
    series = SliceSeries(info=INFO, memory_used=counter, energy=(counter,))
    assert slice_stats(series, start=T0, end=T0 + 600).energy_joules == pytest.approx(100.0)
    # Two counters (labels changed mid-window) add up.
    twice = SliceSeries(info=INFO, memory_used=counter, energy=(counter, counter))
    assert slice_stats(twice, start=T0, end=T0 + 600).energy_joules == pytest.approx(200.0)


@pytest.mark.parametrize(
    ("stamps", "values", "semantics", "expected"),
    [
        # Close to zero: from 5 J the counter would reach 0 after 540·5/90 = 30 s < 60 s,
        # so extrapolate back 30 s only: 90 · 570/540 = 95.
        ([60 * i for i in range(1, 11)], [5.0 + 10 * i for i in range(10)], "prometheus3", 95.0),
        # A reset after 20: 15 - 10 + 20 = 25 over 450 s sampled, 150 s to the start (< 165):
        # 25 · 600/450.
        ([150, 300, 450, 600], [10.0, 20.0, 5.0, 15.0], "prometheus3", 25 * 600 / 450),
        # The series starts mid-window (300 s from the start > 1.1·60): Prometheus 3 extends
        # by half an interval (30 s; zero is 300·8/50 = 48 s away): 50 · 330/300 = 55.
        ([300 + 60 * i for i in range(6)], [8.0 + 10 * i for i in range(6)], "prometheus3", 55.0),
        # Prometheus 2 clamps to the zero point first (48 s < 66 s): 50 · 348/300 = 58.
        ([300 + 60 * i for i in range(6)], [8.0 + 10 * i for i in range(6)], "prometheus2", 58.0),
        # VictoriaMetrics' increase_prometheus(): no extrapolation.
        ([300 + 60 * i for i in range(6)], [8.0 + 10 * i for i in range(6)], "victoriametrics", 50),
        # Two samples 40 s apart, 200 s from the start and 360 s from the end (both > 44 s):
        # each edge gets half an interval: 10 · (40 + 20 + 20)/40 = 20.
        ([200, 240], [100.0, 110.0], "prometheus3", 20.0),
    ],
)
def test_increase_matches_hand_computation(
    stamps: list[float], values: list[float], semantics: RangeSemantics, expected: float
) -> None:
    series = TimeSeries.of(T0 + np.array(stamps, dtype=float), values)
    got = prometheus_increase(series, start=T0, end=T0 + 600, semantics=semantics)
    assert got == pytest.approx(expected)


def test_increase_needs_two_samples() -> None:
    one = TimeSeries.of([T0 + 60], [5.0])
    assert prometheus_increase(one, start=T0, end=T0 + 600) is None
    with_nan = TimeSeries.of([T0 + 60, T0 + 120], [5.0, math.nan])
    assert prometheus_increase(with_nan, start=T0, end=T0 + 600) is None


def test_invalid_windows_are_refused() -> None:
    series = SliceSeries(info=INFO)
    with pytest.raises(ValueError, match="after its start"):
        slice_stats(series, start=T0, end=T0)
    with pytest.raises(ValueError, match="step"):
        slice_stats(series, start=T0, end=T0 + 60, step=0)


def test_iter_slice_stats_is_lazy() -> None:
    produced: list[int] = []

    def slices() -> Iterator[SliceSeries]:
        for gi in range(1_000_000):
            produced.append(gi)
            key = SliceKey("n", 0, "GPU-0", gi)
            yield SliceSeries(info=SliceInfo(key, "H200-141GB", "1g.18gb"), memory_used=minutes(1))

    stream = iter_slice_stats(slices(), start=T0, end=T0 + 60)
    first = next(stream)
    assert first.key.gpu_instance_id == 0
    assert produced == [0]  # one slice at a time, never the whole fleet


def test_stats_to_dict_is_json_without_nan() -> None:
    series = SliceSeries(
        info=INFO,
        activity=minutes(0.5),
        memory_used=minutes(GIB),
        holders={("ml", "a"): minutes(1).timestamps_ms},
    )
    stats = slice_stats(series, start=T0, end=T0 + 60)
    odd = dataclasses.replace(stats, activity_max=math.nan)
    data = json.loads(json.dumps(odd.to_dict(), allow_nan=False))
    assert data["activity_max"] is None
    assert data["node"] == "node-a"
    assert data["gpu_instance_id"] == 3
    assert data["owners"] == [{"namespace": "ml", "pod": "a", "fraction": 1.0}]
    assert data["profile"] == "2g.35gb"


@given(
    st.lists(st.lists(st.integers(-(2**40), 2**40), max_size=40), min_size=1, max_size=4),
)
def test_the_sort_based_unique_is_numpys_unique(parts: list[list[int]]) -> None:
    """``window._unique`` replaces ``np.unique``/``np.union1d`` for speed, not for a new answer."""
    from migscope.analyzer._intake.stats_local.window import _unique

    arrays = [np.asarray(p, dtype=np.int64) for p in parts]
    expected = np.unique(np.concatenate(arrays))
    got = _unique(*arrays)
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected)
