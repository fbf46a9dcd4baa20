"""Window statistics of one slice, computed from its raw samples the way PromQL would.

The analyzer has two ways to get a slice's numbers: ask Prometheus (``quantile_over_time``
and friends, evaluated on the server) or compute them here from raw samples (the embedded
source: a file, or the simulator). Both must give the same answer on the same data, or a
report would change with the source. So this package copies PromQL's definitions rather than
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
- Timestamps are whole milliseconds, as Prometheus stores them, so that a sample exactly on
  a window edge falls on the same side in both places.

Checked against a real Prometheus 2.42 (quantiles and ``increase`` equal to the last bit)
and VictoriaMetrics 1.79 (quantiles equal to the 12 significant digits it stores).

PromQL equivalents, for a window ``W`` ending at ``end`` (one slice's series selected by
``gpu_uuid``/``gpu_instance_id``; the embedded source ignores NaN samples and holds the
others to their ranges (:mod:`.quality`), so the server queries drop and clamp the same way,
``clamp_max(x >= 0 < Inf, 1)`` for activity):

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

Where the exporter publishes ``migscope_mig_graphics_active_seconds_total`` the activity rows
read it instead of the ratio gauge, per slice and interval: ``irate(counter[5m])`` (only
where the interval holds a counter sample), exact at any scrape interval where the gauge
aliases (:mod:`.counters`).

Coverage and the allocated fraction count *step intervals* (the window cut into ``step``-long
pieces ending at ``end``) that hold at least one sample, rather than raw samples: with data
once per step that is the same number, and with a faster scrape (15 s samples, 60 s step) a
half-empty week still shows 50 % coverage instead of a capped 100 %.

Memory does not grow with the window beyond the slice at hand: every function here takes one
slice's arrays and returns a few numbers; :func:`iter_slice_stats` is a generator.

The modules, each one job:

- :mod:`.series`: the input, :class:`TimeSeries` and :class:`SliceSeries`, and the window
  edges of a range selector (:data:`RangeSemantics`).
- :mod:`.promql`: PromQL's ``quantile_over_time`` and ``increase()``, copied exactly.
- :mod:`.hourly`: the per-hour buckets of activity and allocation.
- :mod:`.window`: :func:`slice_stats`, one slice's summary of a window, built from the above.
- :mod:`.counters`: activity from the exporter's active-seconds counter (``irate``'s
  definition), preferred to the ratio gauge, which aliases at long scrape intervals.
- :mod:`.quality`: the range each number read must lie in, what becomes of one outside it
  (dropped or clamped), and the report's one note per kind, shared with both sources.
"""

from __future__ import annotations

from migscope.analyzer._intake.stats_local.counters import (
    COUNTER_LOOKBACK_SECONDS,
    counter_activity,
    prefer_counter,
)
from migscope.analyzer._intake.stats_local.hourly import HOURLY_PERIOD_SECONDS, hourly_buckets
from migscope.analyzer._intake.stats_local.promql import prometheus_increase, prometheus_quantile
from migscope.analyzer._intake.stats_local.series import RangeSemantics, SliceSeries, TimeSeries
from migscope.analyzer._intake.stats_local.window import iter_slice_stats, slice_stats

__all__ = [
    "COUNTER_LOOKBACK_SECONDS",
    "HOURLY_PERIOD_SECONDS",
    "RangeSemantics",
    "SliceSeries",
    "TimeSeries",
    "counter_activity",
    "hourly_buckets",
    "iter_slice_stats",
    "prefer_counter",
    "prometheus_increase",
    "prometheus_quantile",
    "slice_stats",
]
