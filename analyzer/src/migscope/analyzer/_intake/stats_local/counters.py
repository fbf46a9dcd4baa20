"""Activity from the exporter's active-seconds counter, preferred to the ratio gauge.

The exporter publishes a slice's activity twice, as the ratio gauge
``migscope_mig_graphics_active_ratio`` (the mean of its last GPM window before a scrape, 10 s
by default) and as the counter ``migscope_mig_graphics_active_seconds_total`` (the integral of
the same ratio). Scraped every 30 s or 60 s, the gauge sees a third or a sixth of the time
and aliases: a burst between two GPM windows never shows. The counter's increase between two
scrapes, over the seconds between them, is the exact mean of the whole interval, whatever
the scrape interval. So both statistics paths read the counter where a slice has one and the
gauge where it has not (an exporter from before the counters, a fleet half-upgraded, the
first sample of a counter): :func:`counter_activity` and :func:`prefer_counter` here, and
the server's queries (:meth:`~migscope.analyzer._intake.stats_promql.queries.Queries.per_interval`)
with the same definition:

``irate(counter[5m]) and count_over_time(counter[step])``, clamped to ``[0, 1]``: per step
interval, the increase from the sample before the interval's last sample to it, over the
seconds between them. ``irate`` is the one PromQL function that both engines compute alike
from two samples (Prometheus 2 and 3 and VictoriaMetrics; ``rate`` extrapolates on
Prometheus and reaches before its range on VictoriaMetrics): a drop is a counter reset whose
increase is the new value, the pair must lie within :data:`COUNTER_LOOKBACK_SECONDS`, and
the ``and`` keeps only intervals that hold a sample (``irate`` would repeat the last pair
across a gap). On VictoriaMetrics a further ``count_over_time(counter[5m]) > 1`` stops its
``irate`` from reaching before its range for the older sample.

Limits, both rare: VictoriaMetrics reads a drop to above 7/8 of the previous value as
jitter (no increase) where Prometheus and this module read a reset (a restarted exporter
starts from zero, so real resets are far below); and the server's pair must lie within 5
minutes of the interval's *end* where this module counts from the sample itself, so after
a gap just under 5 minutes a sample off the step grid may have a value here and none there.
"""

from __future__ import annotations

import numpy as np

from migscope.analyzer._intake.stats_local.series import TimeSeries

COUNTER_LOOKBACK_SECONDS = 300.0
"""The longest gap between two counter samples whose increase still counts: Prometheus's
default lookback delta, the age at which a sample is stale. Longer gaps (an exporter down,
a scrape failing) give no activity, as they give no gauge sample."""


def counter_activity(
    series: TimeSeries, *, lookback: float = COUNTER_LOOKBACK_SECONDS
) -> TimeSeries:
    """The activity ratio of each sample of an active-seconds counter, as ``irate`` reads it.

    At each sample but the first: the increase since the previous sample (the sample's own
    value after a drop, a counter reset: Prometheus's rule) divided by the seconds between
    them. No value where the previous sample is ``lookback`` seconds or more before, where
    either is NaN, or where the ratio is negative or infinite (the server's ``>= 0 < Inf``);
    values above 1 (scrape-time jitter) are 1. The arithmetic is ``irate``'s, so the values
    equal the server's to the last bit.

    Args:
        series: The counter's samples, seconds active.
        lookback: See :data:`COUNTER_LOOKBACK_SECONDS`.

    Returns:
        The ratio at each sample that has one.
    """
    stamps, values = series.timestamps_ms, series.values
    if stamps.size < 2:
        return TimeSeries.of_ms([], [])
    gap_ms = stamps[1:] - stamps[:-1]
    later, earlier = values[1:], values[:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        increase = np.where(later < earlier, later, later - earlier)
        ratio = increase / (gap_ms.astype(np.float64) / 1000.0)
        keep = (gap_ms < round(lookback * 1000.0)) & (ratio >= 0) & np.isfinite(ratio)
    return TimeSeries.of_ms(stamps[1:][keep], np.minimum(ratio[keep], 1.0))


def prefer_counter(counter: TimeSeries | None, gauge: TimeSeries | None) -> TimeSeries | None:
    """The counter's activity, and the gauge's samples at the times it has no value.

    Per sample, not per slice: a slice whose exporter was upgraded in the window reads the
    gauge before and the counter after, and the first sample of a counter (which has no
    increase) keeps the gauge's value. The exporter writes both at each scrape, so their
    timestamps are the same. None when neither has a series.

    Args:
        counter: :func:`counter_activity` of the slice's counter, or None.
        gauge: The slice's ratio gauge, or None.
    """
    if counter is None or not len(counter):
        return gauge if gauge is not None else counter
    if gauge is None or not len(gauge):
        return counter
    missing = ~np.isin(gauge.timestamps_ms, counter.timestamps_ms)
    return TimeSeries.of_ms(
        np.concatenate([counter.timestamps_ms, gauge.timestamps_ms[missing]]),
        np.concatenate([counter.values, gauge.values[missing]]),
    )
