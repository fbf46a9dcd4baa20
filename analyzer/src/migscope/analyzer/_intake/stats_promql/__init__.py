"""Slice statistics computed by the server in PromQL: the Prometheus path of ``stats_local``.

The analyzer must not pull a week of raw samples per slice to summarise it: at 10,000 slices
that is 100 million points. Instead every :class:`~migscope.analyzer._model.SliceStats` field
is one PromQL aggregation evaluated *at the window's end* over a ``[W]`` range or a
``[W:step]`` subquery, and the analyzer only reads one number per slice and field. Memory
is therefore proportional to the slices of one node chunk, whatever the window length.

The numbers must equal what :func:`migscope.analyzer._intake.stats_local.slice_stats` computes from
the
same raw samples (``tests/analyzer/test_stats_agree.py`` holds both to it on a real
Prometheus and a real VictoriaMetrics). So the queries copy ``stats_local``'s definitions:

* **NaN is dropped, not sorted first.** ``quantile_over_time`` over a raw range counts NaN
  as the lowest value, while ``stats_local`` ignores NaN. Each value is therefore taken per
  step interval first and filtered with ``>= 0`` (the filter drops NaN):
  ``quantile_over_time(0.95, (max by (slice) (last_over_time(x[step])) >= 0)[W:step])``.
  With data once per step (the analyzer's expected resolution) that is exactly the raw
  samples; with a faster scrape the quantiles see the last sample of each step interval
  (``max`` uses ``max_over_time`` per interval, so it stays exact at any scrape rate).
* **Coverage and allocation count step intervals**, as ``stats_local`` does: a subquery
  ``count_over_time((count by (slice) (...[step]))[W:step])`` counts the intervals
  ``(end-(k+1)·step, end-k·step]`` that hold a sample. Subquery points are aligned to
  multiples of ``step`` since the epoch, so the window must lie on that grid (end rounded
  down, length rounded up to whole steps: :func:`snap_window`, which the source's ``window()``
  applies once); :func:`remote_slice_stats` refuses a window off the grid.
* **Prometheus 2.x ranges are closed** (``[start, end]``). For counting, the per-interval
  range is ``step - 1ms`` and the subquery ``W - 1ms`` so intervals do not overlap; the
  sample exactly at ``start`` is then not counted (``stats_local`` folds it into the oldest
  interval, so the two differ only if that interval has no other sample).
* **Energy** is ``increase()`` on Prometheus and ``increase_prometheus()`` on
  VictoriaMetrics, whose plain ``increase()`` reaches back before the window.
* **Numbers out of range** follow :mod:`migscope.analyzer._intake.stats_local.quality`: per-interval
  values pass ``>= 0 < Inf`` (NaN, negative and infinite ones are missing), activity is
  ``clamp_max(..., 1)``, memory statistics are capped at the slice's total and a total that
  is no size is ignored, after the answers; an energy counter with a bad sample in the
  window has no energy. :mod:`.quality` finds the slices concerned with one cheap query
  per chunk over raw ranges and counts them only then, for one report note per kind.

* **Activity from the counter first.** Where the server holds
  ``migscope_mig_graphics_active_seconds_total`` (:func:`.discovery.migscope_names`), each
  activity statistic reads ``irate(counter[5m]) and count_over_time(counter[step])`` per
  interval before the ratio gauge, which aliases at long scrape intervals (``or``, per slice
  and interval: :meth:`.queries.Queries.per_interval`); the embedded path computes the same
  (:mod:`migscope.analyzer._intake.stats_local.counters`).
* **One slice per instance.** Series are grouped by node, GPU, GPU-instance id and, in
  migscope's dialect, ``mig_uuid`` (new for every instance MIG Manager creates), in
  dcgm-exporter's ``GPU_I_PROFILE`` (it has no MIG UUID): a GPU instance id destroyed and
  re-created during the window gives two slices, as the embedded source does, not one
  with the statistics of both. Slices of one key come oldest first.
* **dcgm-exporter's names in any letter case.** The names are read from the server and
  matched case-insensitively; each spelling is selected by its own exact name and the
  results joined with ``or``. Not with one ``{__name__=~"(?i)..."}`` matcher, which both
  engines accept: while two spellings overlap (a relabelling rolled out during the window),
  range functions drop the name and both engines fail with "vector cannot contain metrics
  with the same labelset" (``tests/analyzer/test_promql.py``).

Long windows: each statistic is one query over the whole window, because quantiles of
sub-windows cannot be combined exactly. Prometheus evaluates ``[7d:1m]`` subqueries without
a points limit (the 11,000-point limit is for range queries only) and VictoriaMetrics allows
100,000 points per subquery series by default, so a week at a one-minute step fits; what
bounds a query's cost is the number of series in it, which ``chunk_nodes`` limits (and with
it ``--query.max-samples`` pressure at a 15 s scrape).

The fast path (``stats="fast"``, :mod:`.fast`) computes the same numbers without the per-step
work across series that makes the queries above costly (each statistic, evaluated at every
step of a week for every series of a chunk, aggregates and filters them 10,080 times): it
reads each series alone in a few raw passes and combines them per slice in Python, and sends
the exact queries above, restricted to them, for the slices its reads cannot settle. Which
path runs is :func:`.evaluate.choose_mode`'s choice (``auto``: exact up to 64 slices).

The package, one job a module: :mod:`.discovery` (engine,
dialect, names and nodes, read at once), :mod:`.queries` (the PromQL building blocks),
:mod:`.inventory` (which slices a chunk holds), :mod:`.statistics` (their fields, the exact
path), :mod:`.quality` (the numbers out of range), :mod:`.per_series` (the fast path's reads),
:mod:`.cells` (its interval counts), :mod:`.fast` (its slices), :mod:`.result` (the
iterator, its cost and its notes) and :mod:`.evaluate` (the entry point: the snapped window,
the path taken, a few chunks at once).
"""

from __future__ import annotations

from migscope.analyzer._intake.stats_promql.evaluate import remote_slice_stats, snap_window
from migscope.analyzer._intake.stats_promql.result import RemoteSliceStats

__all__ = [
    "RemoteSliceStats",
    "remote_slice_stats",
    "snap_window",
]
