"""One slice's summary of a window: :func:`slice_stats` and its generator over a fleet.

This is where the pieces meet: the samples a range selector sees
(:mod:`.series`), PromQL's quantiles and ``increase()`` (:mod:`.promql`) and the per-hour
buckets (:mod:`.hourly`) become one :class:`~migscope.analyzer._model.SliceStats`, with
coverage, allocation and owners counted in step intervals (see the package docstring).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np

from migscope.analyzer._intake.stats_local.hourly import (
    HOURLY_PERIOD_SECONDS,
    hourly_buckets,
    hourly_use,
)
from migscope.analyzer._intake.stats_local.promql import prometheus_increase, prometheus_quantile
from migscope.analyzer._intake.stats_local.quality import (
    bad_counter,
    cap,
    clean_activity,
    clean_memory,
    finite,
    usable_total,
)
from migscope.analyzer._intake.stats_local.series import (
    Int64Array,
    RangeSemantics,
    SliceSeries,
    TimeSeries,
    to_ms,
)
from migscope.analyzer._model import Holder, Owner, SliceStats
from migscope.analyzer._options import DEFAULT_STEP_SECONDS


def _unique(*parts: Int64Array) -> Int64Array:
    """The distinct values of ``parts``, ascending: ``np.unique``/``np.union1d``'s answer.

    Why not those: numpy 2's ``np.unique`` hashes, which costs ~0.8 ms on a week of minute
    timestamps that are already (reverse) sorted, and it ran several times per slice, most of
    the statistics' time (bench/simulate_bench.py). A stable sort of integers is a radix
    sort, linear, and nearly free on sorted input.
    """
    merged = np.sort(np.concatenate(parts) if len(parts) != 1 else parts[0], kind="stable")
    if merged.size < 2:
        return merged
    keep = np.empty(merged.size, dtype=bool)
    keep[0] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    return merged[keep]


def _quantiles(series: TimeSeries) -> tuple[float | None, float | None, float | None]:
    """p50, p95 and max of a window's non-NaN values, or three Nones when there are none."""
    if not len(series):
        return None, None, None
    values = series.values
    return (
        prometheus_quantile(0.5, values),
        prometheus_quantile(0.95, values),
        float(values.max()),
    )


def slice_stats(
    series: SliceSeries,
    *,
    start: float,
    end: float,
    step: float = DEFAULT_STEP_SECONDS,
    semantics: RangeSemantics = "prometheus3",
    period: float | None = HOURLY_PERIOD_SECONDS,
) -> SliceStats:
    """Summarise one slice's samples over the window ``(start, end]``.

    Args:
        series: The slice's raw series.
        start: Window start, Unix seconds (exclusive; inclusive with ``"prometheus2"``).
        end: Window end, Unix seconds (inclusive).
        step: The expected sample interval, seconds: the window holds ``ceil(W/step)`` step
            intervals, and coverage is the share of them that hold a sample.
        semantics: Which engine's window edges and ``increase()`` to copy.
        period: Bucket length of :attr:`SliceStats.hourly` (None: no buckets); buckets are
            only made when :func:`hourly_buckets` says the window allows them.

    The numbers read are held to their ranges first (:mod:`.quality`: infinite or negative
    activity and memory are missing, activity above 1 is 1, memory statistics are capped at
    a usable total, an energy counter with a bad sample in the window gives no energy), as
    the dialect readers and the server's queries do.

    Returns:
        The statistics; numbers the samples cannot give are None, never zero.

    Raises:
        ValueError: ``end`` is not after ``start``, or ``step`` is not positive.
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise ValueError(f"window end ({end}) must be after its start ({start})")
    if not math.isfinite(step) or step <= 0:
        raise ValueError(f"step must be a positive number of seconds, got {step}")
    start_ms, end_ms, step_ms = to_ms(start), to_ms(end), max(1, to_ms(step))
    expected = max(1, -(-(end_ms - start_ms) // step_ms))

    def in_window(ts: TimeSeries | None) -> TimeSeries:
        if ts is None:
            return TimeSeries.of_ms([], [])
        return ts.between(start_ms, end_ms, semantics=semantics).dropna()

    def buckets(stamps: Int64Array) -> Int64Array:
        # Step interval k is (end - (k+1)·step, end - k·step]; a sample exactly at a
        # prometheus2 window's start lands in the oldest one rather than one more.
        return _unique(np.minimum((end_ms - stamps) // step_ms, expected - 1))

    # The readers cleaned their series already; a source that built its own gets the same.
    activity_all = None if series.activity is None else clean_activity(series.activity).series
    used = None if series.memory_used is None else clean_memory(series.memory_used).series
    activity, memory = in_window(activity_all), in_window(used)
    total = series.memory_total_bytes if usable_total(series.memory_total_bytes) else None
    observed = _unique(activity.timestamps_ms, memory.timestamps_ms)
    observed_buckets = buckets(observed)

    held_by: dict[Holder, Int64Array] = {}
    for owner, stamps in series.holders.items():
        window = TimeSeries.of_ms(stamps, np.zeros(len(stamps))).between(
            start_ms, end_ms, semantics=semantics
        )
        if len(window):
            held_by[owner] = buckets(window.timestamps_ms)
    held: Int64Array = _unique(*held_by.values()) if held_by else np.empty(0, dtype=np.int64)
    seen = int(_unique(observed_buckets, held).size)
    owners = tuple(
        sorted(
            (Owner.of(holder, b.size / seen) for holder, b in held_by.items()),
            key=lambda o: (-o.fraction, o.namespace, o.pod),
        )
    )

    increases = [
        inc
        for counter in series.energy
        if (inc := prometheus_increase(counter, start=start, end=end, semantics=semantics))
        is not None
    ]
    if any(
        bad_counter(c.between(start_ms, end_ms, semantics=semantics).values) for c in series.energy
    ):
        increases = []  # a bad sample in the window: no increase can be trusted
    act_p50, act_p95, act_max = _quantiles(activity)
    _, mem_p95, mem_peak = _quantiles(memory)
    n_buckets = hourly_buckets(start, end, step, period) if period else None
    hourly = (
        hourly_use(
            activity_all,
            series.holders.values(),
            end_ms=end_ms,
            step_ms=step_ms,
            period_ms=to_ms(period),
            buckets=n_buckets,
        )
        if n_buckets and period
        else None
    )
    return SliceStats(
        info=series.info,
        window_start=start,
        window_end=end,
        samples=int(observed.size),
        expected_samples=int(expected),
        coverage=observed_buckets.size / expected,
        activity_p50=act_p50,
        activity_p95=act_p95,
        activity_max=act_max,
        memory_peak_bytes=cap(mem_peak, total),
        memory_p95_bytes=cap(mem_p95, total),
        memory_total_bytes=total,
        allocated_fraction=held.size / seen if seen else 0.0,
        owners=owners,
        energy_joules=finite(sum(increases)) if increases else None,
        hourly=hourly,
        # The end of the step interval holding the newest sample, as the server reports it.
        last_seen=(end_ms - int(observed_buckets.min()) * step_ms) / 1000.0
        if observed_buckets.size
        else None,
    )


def iter_slice_stats(
    slices: Iterable[SliceSeries],
    *,
    start: float,
    end: float,
    step: float = DEFAULT_STEP_SECONDS,
    semantics: RangeSemantics = "prometheus3",
) -> Iterator[SliceStats]:
    """:func:`slice_stats` for each slice in turn, holding one slice's samples at a time.

    Arguments are those of :func:`slice_stats`; ``slices`` may be a generator (the dialect
    readers' are), so a fleet is summarised without holding all of it.
    """
    for series in slices:
        yield slice_stats(series, start=start, end=end, step=step, semantics=semantics)
