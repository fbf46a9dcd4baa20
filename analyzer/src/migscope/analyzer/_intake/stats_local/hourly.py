"""Per-hour use of a slice: activity and allocation in ``period``-long buckets.

The buckets follow rules of their own, set by the server's range
queries rather than by the window statistics: a bucket is a whole number of step intervals,
each interval's activity is its last sample, and the window must sit on the period grid
(:func:`hourly_buckets`). :func:`~migscope.analyzer._intake.stats_local.slice_stats` fills
:attr:`SliceStats.hourly` from :func:`hourly_use`; the heatmap and the what-if replay read it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from migscope.analyzer._intake.stats_local.series import Int64Array, TimeSeries, to_ms
from migscope.analyzer._model import HourlyUse

HOURLY_PERIOD_SECONDS = 3600.0
"""Bucket length of the per-hour use (heatmap columns, what-if replay)."""


def hourly_buckets(start: float, end: float, step: float, period: float) -> int | None:
    """How many ``period`` buckets the window holds, or None when it cannot be bucketed.

    Buckets need the window to be a whole number of periods, each a whole number of steps,
    and ``end`` on the period grid (so that a server's range query at ``period`` resolution,
    which VictoriaMetrics and Thanos align to multiples of the step, lands on the same
    instants). :func:`~migscope.analyzer._intake.stats_promql.snap_window` with
    ``step=period`` gives such a window.
    """
    start_ms, end_ms, step_ms, period_ms = to_ms(start), to_ms(end), to_ms(step), to_ms(period)
    if step_ms <= 0 or period_ms <= 0 or period_ms % step_ms or end_ms % period_ms:
        return None
    if (end_ms - start_ms) <= 0 or (end_ms - start_ms) % period_ms:
        return None
    return (end_ms - start_ms) // period_ms


def hourly_use(
    activity: TimeSeries | None,
    holders: Iterable[Int64Array],
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

    Args:
        activity: The slice's activity samples, the whole series (the buckets pick theirs).
        holders: Per holder, the millisecond timestamps at which it held the slice.
        end_ms: Window end, Unix milliseconds, on the period grid.
        step_ms: Step interval, milliseconds.
        period_ms: Bucket length, milliseconds, a whole number of steps.
        buckets: How many buckets end at ``end_ms`` (:func:`hourly_buckets`).
    """
    per = period_ms // step_ms
    total = buckets * per

    def interval(stamps: Int64Array) -> Int64Array:
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
    held_k: Int64Array = np.empty(0, dtype=np.int64)
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
