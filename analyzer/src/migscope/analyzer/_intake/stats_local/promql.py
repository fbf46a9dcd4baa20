"""PromQL's ``quantile_over_time`` and ``increase()``, copied to the last bit.

These two are the definitions that must match the server's exactly
(``tests/analyzer/test_stats_agree.py`` holds them to a real Prometheus and
VictoriaMetrics): the textbook quantile and a plain last-minus-first would differ from what
:mod:`~migscope.analyzer._intake.stats_promql` reads back, and a report would change with
its source.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from migscope.analyzer._intake.stats_local.series import RangeSemantics, TimeSeries, to_ms


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
    start_ms, end_ms = to_ms(start), to_ms(end)
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
