"""Window statistics of one slice, computed from its raw samples the way PromQL would.

The analyzer has two ways to get a slice's numbers: ask Prometheus (``quantile_over_time``
and friends, evaluated on the server) or compute them here from raw samples (the embedded
source: a file, or the simulator). Both must give the same answer on the same data, or a
report would change with the source. So this module copies PromQL's definitions rather than
the textbook ones:

- Quantiles are ``quantile_over_time``'s: sort, rank ``φ·(n−1)``, interpolate linearly between
  the two closest ranks (:func:`prometheus_quantile`; equal to numpy's ``"linear"`` method).
- A window is a range selector's: samples with ``start < t <= end`` (Prometheus 3 and
  VictoriaMetrics); ``semantics="prometheus2"`` includes ``t == start`` as Prometheus 2.x
  does, for comparisons with the Prometheus 2.42 that Debian 12 ships.
- Energy is Prometheus's ``increase()``, extrapolation to the window's edges included
  (:func:`prometheus_increase`); ``semantics="victoriametrics"`` gives what VictoriaMetrics'
  ``increase_prometheus()`` returns instead (no extrapolation; its plain ``increase()`` also
  reaches back to the sample before the window, which no other engine does).

Checked against a real Prometheus 2.42 (quantiles and ``increase`` equal to the last bit)
and VictoriaMetrics 1.79 (quantiles equal to the 12 significant digits it stores).
- Timestamps are whole milliseconds, as Prometheus stores them, so that a sample exactly on
  a window edge falls on the same side in both places.

PromQL equivalents, for a window ``W`` ending at ``end`` (one slice's series selected by
``gpu_uuid``/``gpu_instance_id``; the embedded source ignores NaN samples, so the server
queries should drop them too, e.g. with ``(x >= 0)``):

==================== =====================================================================
field                PromQL at ``end``
==================== =====================================================================
activity_p95         ``quantile_over_time(0.95, migscope_mig_graphics_active_ratio[W])``
activity_max         ``max_over_time(migscope_mig_graphics_active_ratio[W])``
memory_peak_bytes    ``max_over_time(migscope_mig_memory_used_bytes[W])``
samples              ``count_over_time(migscope_mig_memory_used_bytes[W])`` (activity and
                     memory are scraped together, so either series counts the scrapes)
coverage             ``samples / expected_samples`` when the data come once per step
energy_joules        ``increase(migscope_mig_energy_estimated_joules_total[W])``
==================== =====================================================================

Coverage and the allocated fraction count *step intervals* (the window cut into ``step``-long
pieces ending at ``end``) that hold at least one sample, rather than raw samples: with data
once per step that is the same number, and with a faster scrape (15 s samples, 60 s step) a
half-empty week still shows 50 % coverage instead of a capped 100 %.

Memory does not grow with the window beyond the slice at hand: every function here takes one
slice's arrays and returns a few numbers; :func:`iter_slice_stats` is a generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from migscope.analyzer.model import HourlyUse, Owner, SliceInfo, SliceStats

__all__ = [
    "DEFAULT_STEP_SECONDS",
    "HOURLY_PERIOD_SECONDS",
    "RangeSemantics",
    "SliceSeries",
    "TimeSeries",
    "hourly_buckets",
    "iter_slice_stats",
    "prometheus_increase",
    "prometheus_quantile",
    "slice_stats",
]

DEFAULT_STEP_SECONDS = 60.0
"""Resolution the analyzer expects its data at: one sample per slice per minute."""

HOURLY_PERIOD_SECONDS = 3600.0
"""Bucket length of the per-hour use (heatmap columns, what-if replay)."""

RangeSemantics: TypeAlias = Literal["prometheus3", "prometheus2", "victoriametrics"]
"""Which engine to copy: window edges ``(start, end]`` (Prometheus 3, VictoriaMetrics) or
``[start, end]`` (Prometheus 2), and how ``increase()`` extrapolates (see
:func:`prometheus_increase`)."""

_Int64Array: TypeAlias = NDArray[np.int64]
_FloatArray: TypeAlias = NDArray[np.float64]


def _to_ms(seconds: float) -> int:
    """Unix seconds to whole milliseconds, the resolution Prometheus stores."""
    return round(seconds * 1000.0)


@dataclass(frozen=True, eq=False)
class TimeSeries:
    """One series' samples: millisecond timestamps, ascending and unique, and values.

    Build it with :meth:`of`, which sorts, drops duplicate timestamps (keeping the last value
    written, as a re-sent scrape would) and makes the arrays read-only. NaN values are kept
    here and ignored by the statistics, which count them as missing.

    Attributes:
        timestamps_ms: Unix time of each sample in whole milliseconds (int64).
        values: The sample values (float64).
    """

    timestamps_ms: _Int64Array
    values: _FloatArray

    @classmethod
    def of(cls, timestamps: ArrayLike, values: ArrayLike) -> TimeSeries:
        """Build a series from timestamps in Unix *seconds* and values.

        Raises:
            ValueError: the arrays are not one-dimensional, differ in length, or a timestamp
                is not finite.
        """
        seconds = np.asarray(timestamps, dtype=np.float64)
        if seconds.ndim != 1 or not np.all(np.isfinite(seconds)):
            raise ValueError("timestamps must be a one-dimensional array of finite seconds")
        return cls.of_ms(np.round(seconds * 1000.0).astype(np.int64), values)

    @classmethod
    def of_ms(cls, timestamps_ms: ArrayLike, values: ArrayLike) -> TimeSeries:
        """Build a series from timestamps in Unix *milliseconds* and values.

        Raises:
            ValueError: the arrays are not one-dimensional or differ in length.
        """
        stamps = np.asarray(timestamps_ms, dtype=np.int64)
        vals = np.asarray(values, dtype=np.float64)
        if stamps.ndim != 1 or vals.ndim != 1 or stamps.shape != vals.shape:
            raise ValueError(
                f"timestamps and values must be one-dimensional and of equal length, "
                f"got shapes {stamps.shape} and {vals.shape}"
            )
        order = np.argsort(stamps, kind="stable")
        stamps, vals = stamps[order], vals[order]
        if stamps.size > 1:
            keep = np.empty(stamps.size, dtype=bool)
            keep[:-1] = stamps[1:] != stamps[:-1]
            keep[-1] = True
            stamps, vals = stamps[keep], vals[keep]
        stamps.setflags(write=False)
        vals.setflags(write=False)
        return cls(stamps, vals)

    @classmethod
    def concat(cls, parts: Iterable[TimeSeries]) -> TimeSeries | None:
        """Join series of the same quantity (one slice seen under several label sets).

        dcgm-exporter starts a new series whenever the pod holding a slice changes, because
        the pod is a label; the slice's activity is the union of them. Returns None when
        ``parts`` is empty.
        """
        pieces = list(parts)
        if not pieces:
            return None
        if len(pieces) == 1:
            return pieces[0]
        return cls.of_ms(
            np.concatenate([p.timestamps_ms for p in pieces]),
            np.concatenate([p.values for p in pieces]),
        )

    def __len__(self) -> int:
        return int(self.timestamps_ms.size)

    def between(
        self, start_ms: int, end_ms: int, *, semantics: RangeSemantics = "prometheus3"
    ) -> TimeSeries:
        """The samples a range selector ending at ``end_ms`` would see (NaN included)."""
        side: Literal["left", "right"] = "left" if semantics == "prometheus2" else "right"
        lo = int(np.searchsorted(self.timestamps_ms, start_ms, side=side))
        hi = int(np.searchsorted(self.timestamps_ms, end_ms, side="right"))
        return TimeSeries(self.timestamps_ms[lo:hi], self.values[lo:hi])

    def dropna(self) -> TimeSeries:
        """The same series without its NaN samples."""
        keep = ~np.isnan(self.values)
        if bool(keep.all()):
            return self
        return TimeSeries(self.timestamps_ms[keep], self.values[keep])

    def last_value(self) -> float | None:
        """The most recent non-NaN value, or None."""
        clean = self.dropna()
        return float(clean.values[-1]) if len(clean) else None


@dataclass(frozen=True, eq=False)
class SliceSeries:
    """Everything recorded about one slice, in the units of the migscope metrics.

    This is the input of :func:`slice_stats`, produced by ``migscope.analyzer.dialect`` from
    either dialect (dcgm-exporter's MiB already turned into bytes) or built directly by a
    source that has the data in hand (the simulator).

    Attributes:
        info: Which slice, and its profile.
        activity: Graphics-engine activity ratio 0..1, or None when the source has none
            (Ampere without DCGM). Never invent zeros for it.
        memory_used: Framebuffer in use, bytes, or None.
        memory_total_bytes: The slice's framebuffer size, bytes, or None if unknown.
        holders: For each ``(namespace, pod)`` that held the slice, the millisecond
            timestamps at which it was seen holding it.
        energy: Per-slice energy counters in joules (several when the counter's labels
            changed within the window); empty when the source has no per-slice estimate.
    """

    info: SliceInfo
    activity: TimeSeries | None = None
    memory_used: TimeSeries | None = None
    memory_total_bytes: float | None = None
    holders: Mapping[tuple[str, str], _Int64Array] = field(default_factory=dict)
    energy: tuple[TimeSeries, ...] = ()


def prometheus_quantile(q: float, values: ArrayLike) -> float:
    """The φ-quantile exactly as PromQL's ``quantile_over_time`` computes it.

    Prometheus sorts the samples (NaN first), takes the rank ``r = φ·(n−1)`` and interpolates
    linearly between the samples at ``floor(r)`` and ``floor(r)+1``. For data without NaN
    that is numpy's ``method="linear"`` (the default) — the tests hold both to hand-computed
    values. Copying the edge cases too (NaN for no data, ±Inf for φ outside 0..1) keeps the
    embedded and the server answers equal even where they are odd.

    Args:
        q: The quantile φ, normally in 0..1.
        values: The samples, in any order.

    Returns:
        The interpolated quantile; NaN when ``values`` is empty or ``q`` is NaN.
    """
    data = np.asarray(values, dtype=np.float64).ravel()
    if data.size == 0 or math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    nan = np.isnan(data)
    ordered = np.concatenate([data[nan], np.sort(data[~nan])])
    n = ordered.size
    rank = q * (n - 1)
    lower = max(0, math.floor(rank))
    upper = min(n - 1, lower + 1)
    weight = rank - math.floor(rank)
    # Python floats, as Go's float64 arithmetic: 0·Inf is NaN there too, without numpy's warning.
    return float(ordered[lower]) * (1 - weight) + float(ordered[upper]) * weight


def prometheus_increase(
    series: TimeSeries,
    *,
    start: float,
    end: float,
    semantics: RangeSemantics = "prometheus3",
) -> float | None:
    """A counter's increase over ``(start, end]`` as PromQL's ``increase()`` computes it.

    That is: last minus first sample with counter resets added back, then extrapolated
    towards the window's edges — all the way when a sample is within 1.1 average intervals
    of the edge, else by half an interval — and never back past the counter's zero. The
    zero-point rule changed between Prometheus 2.x (applied before the edge threshold) and
    3.x (after it); ``semantics`` picks which one, so that a comparison with either engine is
    exact. ``"victoriametrics"`` returns the increase without extrapolation, as
    VictoriaMetrics' ``increase_prometheus()`` does. NaN samples are dropped first.

    Args:
        series: The counter's samples.
        start: Window start, Unix seconds.
        end: Window end, Unix seconds.
        semantics: Which Prometheus to copy.

    Returns:
        The increase, or None when the window holds fewer than two samples (PromQL returns
        no value then).
    """
    start_ms, end_ms = _to_ms(start), _to_ms(end)
    window = series.between(start_ms, end_ms, semantics=semantics).dropna()
    if len(window) < 2:
        return None
    values = window.values
    result = float(values[-1] - values[0])
    drops = values[1:] < values[:-1]
    result += float(values[:-1][drops].sum())
    if semantics == "victoriametrics":
        return result
    first_t, last_t = int(window.timestamps_ms[0]), int(window.timestamps_ms[-1])
    to_start = (first_t - start_ms) / 1000.0
    to_end = (end_ms - last_t) / 1000.0
    sampled = (last_t - first_t) / 1000.0
    average = sampled / (len(window) - 1)
    threshold = average * 1.1
    first_value = float(values[0])

    def zero_clamped(duration: float) -> float:
        if result > 0 and first_value >= 0:
            return min(duration, sampled * (first_value / result))
        return duration

    if semantics == "prometheus2":
        to_start = zero_clamped(to_start)
        to_start = to_start if to_start < threshold else average / 2
    else:
        to_start = to_start if to_start < threshold else average / 2
        to_start = zero_clamped(to_start)
    to_end = to_end if to_end < threshold else average / 2
    return result * ((sampled + to_start + to_end) / sampled)


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


def hourly_buckets(start: float, end: float, step: float, period: float) -> int | None:
    """How many ``period`` buckets the window holds, or None when it cannot be bucketed.

    Buckets need the window to be a whole number of periods, each a whole number of steps,
    and ``end`` on the period grid (so that a server's range query at ``period`` resolution,
    which VictoriaMetrics and Thanos align to multiples of the step, lands on the same
    instants). :func:`~migscope.analyzer.sources.remote_stats.snap_window` with
    ``step=period`` gives such a window.
    """
    start_ms, end_ms, step_ms, period_ms = _to_ms(start), _to_ms(end), _to_ms(step), _to_ms(period)
    if step_ms <= 0 or period_ms <= 0 or period_ms % step_ms or end_ms % period_ms:
        return None
    if (end_ms - start_ms) <= 0 or (end_ms - start_ms) % period_ms:
        return None
    return (end_ms - start_ms) // period_ms


def _hourly(
    activity: TimeSeries | None,
    holders: Iterable[_Int64Array],
    *,
    end_ms: int,
    step_ms: int,
    period_ms: int,
    buckets: int,
) -> HourlyUse:
    """Per-bucket activity and allocation, exactly as the server's range queries compute them.

    Step interval ``k`` is ``(end - (k+1)·step, end - k·step]``; a bucket holds ``L =
    period/step`` of them. Activity per interval is its last sample, dropped when NaN
    (PromQL's ``last_over_time(x[step]) >= 0``); allocation counts intervals with a holder.
    """
    per = period_ms // step_ms
    total = buckets * per

    def interval(stamps: _Int64Array) -> _Int64Array:
        return (end_ms - stamps) // step_ms

    act_sum = np.zeros(buckets)
    act_n = np.zeros(buckets, dtype=np.int64)
    if activity is not None and len(activity):
        k = interval(activity.timestamps_ms)
        inside = (k >= 0) & (k < total)
        k, values = k[inside], activity.values[inside]
        # Samples ascend in time, so k descends: the first occurrence of each k is its last.
        ks, first = np.unique(k, return_index=True)
        last = values[first]
        keep = ~np.isnan(last)
        b = buckets - 1 - ks[keep] // per
        np.add.at(act_sum, b, last[keep])
        np.add.at(act_n, b, 1)
    held_k: _Int64Array = np.empty(0, dtype=np.int64)
    parts = [interval(stamps) for stamps in holders]
    if parts:
        k = np.unique(np.concatenate(parts))
        held_k = k[(k >= 0) & (k < total)]
    held_n = np.bincount(buckets - 1 - held_k // per, minlength=buckets)
    return HourlyUse(
        period_seconds=period_ms / 1000.0,
        activity=tuple(
            float(s / n) if n else None
            for s, n in zip(act_sum.tolist(), act_n.tolist(), strict=True)
        ),
        allocated=tuple(float(n) / per for n in held_n.tolist()),
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

    Returns:
        The statistics; numbers the samples cannot give are None, never zero.

    Raises:
        ValueError: ``end`` is not after ``start``, or ``step`` is not positive.
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise ValueError(f"window end ({end}) must be after its start ({start})")
    if not math.isfinite(step) or step <= 0:
        raise ValueError(f"step must be a positive number of seconds, got {step}")
    start_ms, end_ms, step_ms = _to_ms(start), _to_ms(end), max(1, _to_ms(step))
    expected = max(1, -(-(end_ms - start_ms) // step_ms))

    def in_window(ts: TimeSeries | None) -> TimeSeries:
        if ts is None:
            return TimeSeries.of_ms([], [])
        return ts.between(start_ms, end_ms, semantics=semantics).dropna()

    def buckets(stamps: _Int64Array) -> _Int64Array:
        # Step interval k is (end - (k+1)·step, end - k·step]; a sample exactly at a
        # prometheus2 window's start lands in the oldest one rather than one more.
        return np.unique(np.minimum((end_ms - stamps) // step_ms, expected - 1))

    activity = in_window(series.activity)
    memory = in_window(series.memory_used)
    observed = np.union1d(activity.timestamps_ms, memory.timestamps_ms)
    observed_buckets = buckets(observed)

    held_by: dict[tuple[str, str], _Int64Array] = {}
    for owner, stamps in series.holders.items():
        window = TimeSeries.of_ms(stamps, np.zeros(len(stamps))).between(
            start_ms, end_ms, semantics=semantics
        )
        if len(window):
            held_by[owner] = buckets(window.timestamps_ms)
    held: _Int64Array = (
        np.unique(np.concatenate(list(held_by.values())))
        if held_by
        else np.empty(0, dtype=np.int64)
    )
    seen = int(np.union1d(observed_buckets, held).size)
    owners = tuple(
        sorted(
            (Owner(ns, pod, b.size / seen) for (ns, pod), b in held_by.items()),
            key=lambda o: (-o.fraction, o.namespace, o.pod),
        )
    )

    increases = [
        inc
        for counter in series.energy
        if (inc := prometheus_increase(counter, start=start, end=end, semantics=semantics))
        is not None
    ]
    act_p50, act_p95, act_max = _quantiles(activity)
    _, mem_p95, mem_peak = _quantiles(memory)
    n_buckets = hourly_buckets(start, end, step, period) if period else None
    hourly = (
        _hourly(
            series.activity,
            series.holders.values(),
            end_ms=end_ms,
            step_ms=step_ms,
            period_ms=_to_ms(period),
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
        memory_peak_bytes=mem_peak,
        memory_p95_bytes=mem_p95,
        memory_total_bytes=series.memory_total_bytes,
        allocated_fraction=held.size / seen if seen else 0.0,
        owners=owners,
        energy_joules=sum(increases) if increases else None,
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
