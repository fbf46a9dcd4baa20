"""The fast path's reads: a few numbers per *series*, never aggregated across series per step.

What makes the exact path slow is not the subqueries but the work
per step they ask for across series (``max by (slice)``, ``>= 0``, ``or``): measured on a week
of 112 slices at one sample a minute (Prometheus 2.42), a range function over each raw series
reads it in ~0.5 ms, the same inside a ``[7d:1m]`` subquery ~1.5 ms, and each aggregation or
binary operator per step adds 4-8 ms a series. So each read here is one range function per
series, over raw ranges or a subquery of another range function, and the per-slice
combination is done in Python (:mod:`.fast`, :mod:`.cells`).

Reads, per chunk of nodes (each one request; parts told apart by a ``migscope_part`` label,
since range functions drop the metric name and two metrics share label sets):

* :func:`weekly`: per activity/memory series over the statistics' range,
  ``quantile_over_time`` 0.5/0.95, ``max_over_time``, ``min_over_time``, ``sum_over_time``
  (NaN when a sample is NaN) and ``last_over_time``;
* :func:`cells`: per series of every family, the step intervals holding a sample in each
  cell (``sum_over_time(present_over_time(x[step])[period:step])``, a range query at
  ``period``), per activity and memory series the raw samples of each cell, and per
  activity series the raw mean of each cell;
* :func:`masks`: for the cells whose intervals must be told apart, bit masks of them
  (``sum_over_time((present_over_time(x[step]) * 2 ^ ((time() % span) / step))[span:step] @ t)``),
  only for the slices and cells concerned, with the ``@`` modifier.

The active-seconds counter (issue 24) is read natively, per series and without operators:
its ratio per interval is ``clamp_max(irate(c[5m]), 1)`` (:func:`counter_ratio`), and the
statistics are the exact path's own subqueries over it (``quantile_over_time(0.95, ...
[W:step])``, ``max_over_time``, each cell's ``avg_over_time``), evaluated at the same times.
They equal the exact path's ``irate(c[5m]) and count_over_time(c[step])`` (filtered, clamped,
the gauge where it has no value) where the counter has a sample in every interval and a pair
within the lookback at the first one (:func:`.fast._clean`); measured on a week of 112 slices
(Prometheus 2.42), ``and`` multiplies the cost of the subquery by three to four and ``>= 0 <
Inf`` adds as much again, so the cheap form is read for every counter series and the exact
queries take the others.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from migscope.analyzer._intake.dialect import SliceId, unit_scale
from migscope.analyzer._intake.promql import duration
from migscope.analyzer._intake.stats_local import COUNTER_LOOKBACK_SECONDS
from migscope.analyzer._intake.stats_local.quality import ACTIVITY_CEILING
from migscope.analyzer._intake.stats_promql.cells import Grid, Presence, mask_bits
from migscope.analyzer._intake.stats_promql.queries import Queries

PART_LABEL = "migscope_part"
"""The label that tells the parts of one request apart (``label_replace``)."""

ACTIVITY, MEMORY, PODS, FREE, CAPACITY = "activity", "memory", "pods", "free", "capacity"
COUNTER = "counter"
"""The active-seconds counter: its ratio's statistics (:func:`counter_ratio`: ``p50``, ``p95``,
``max``, each cell's mean) and what says they are the exact path's (its raw ``min`` and
``sum``, its intervals per cell, ``extra``, ``pair``: :func:`.fast._clean`); no masks."""

SeriesId = tuple[str, frozenset[tuple[str, str]]]
"""A series: its metric name and its labels (without ``__name__`` and the part label)."""


@dataclass(frozen=True)
class Spans:
    """The ranges the reads use, in the engine's window semantics.

    On Prometheus 2 ranges are closed: the exact path's ``[W:step]`` subqueries then evaluate
    at ``start`` too, reading the interval ``(start - step, start]``, and its counts use
    ``W - 1ms``. The raw ranges here copy that: values over ``W + step - 1ms``, each cell's
    counts over ``period - 1ms``, so that a series with at most one sample per interval gives
    the same numbers.

    Attributes:
        values: The range of the value statistics (quantiles, maximum, minimum, sum).
        cells: The range of one cell's counts and mean (``period``, less 1 ms when closed).
        interval: One step interval (``step``, less 1 ms when closed).
        step: The step.
        block: One mask block (``block * step``, less 1 ms when closed).
    """

    values: str
    cells: str
    interval: str
    step: str
    block: str

    @classmethod
    def of(cls, grid: Grid, window_ms: int, closed: bool) -> Spans:
        """The spans of ``grid`` over a window of ``window_ms``."""
        less = 1 if closed else 0
        step = grid.step_ms
        return cls(
            values=duration((window_ms + (step - 1 if closed else 0)) / 1000),
            cells=duration((grid.period_ms - less) / 1000),
            interval=duration((step - less) / 1000),
            step=duration(step / 1000),
            block=duration((grid.block * step - less) / 1000),
        )


@dataclass
class Read:
    """What the reads say of one series.

    Attributes:
        family: :data:`ACTIVITY`, :data:`MEMORY`, :data:`PODS`, :data:`FREE`,
            :data:`CAPACITY` or :data:`COUNTER`.
        metric: The metric name.
        labels: Its labels (as the queries return them: a node read from a fallback label
            is also under the first one, see :meth:`Queries.over`).
        key: The slice it belongs to.
        presence: Intervals holding a sample, per cell (and masks where asked).
        numbers: The weekly numbers (``extra``, ``p50``, ``p95``, ``max``,
            ``min``, ``sum``, ``last``), in the series' own unit; absent when not read or
            when the series has no sample there.
        hourly: Raw mean of each cell (activity; a counter's: of its ratio per step,
            :func:`cells`), NaN where the cell has no sample.
        raw: Raw samples per cell (activity and memory), read in the same request as
            ``presence``: compared with it, they say whether a series has more than one
            sample in a step interval (see :attr:`regular`).
    """

    family: str
    metric: str
    labels: Mapping[str, str]
    key: SliceId
    presence: Presence
    numbers: dict[str, float] = field(default_factory=dict)
    hourly: NDArray[np.float64] | None = None
    raw: NDArray[np.int64] | None = None

    @property
    def scale(self) -> float:
        """What turns the series' values into bytes or ratio (dcgm-exporter 4.8's MiB)."""
        return unit_scale(self.metric)

    @property
    def extra(self) -> int:
        """Samples in ``(start - step, start]``, read by the statistics on Prometheus 2 only."""
        return int(self.numbers.get("extra", 0.0))

    @property
    def regular(self) -> bool:
        """At most one sample per step interval over the statistics' range.

        Then the raw samples are the exact path's per-interval values, and raw statistics
        equal its statistics. Raw samples and intervals with a sample are compared cell by
        cell from one request (a live server's newest hour fills up between two requests);
        a series that became irregular since the weekly read is still caught, since samples
        are only added.
        """
        if self.raw is None:
            return not self.presence.total and self.extra <= 1
        return bool(np.array_equal(self.raw, self.presence.counts)) and self.extra <= 1


def _tagged(expr: str, tag: str) -> str:
    return f'label_replace({expr}, "{PART_LABEL}", "{tag}", "", "")'


def _identity(metric: str, labels: Mapping[str, str]) -> SeriesId:
    return metric, frozenset((k, v) for k, v in labels.items() if k not in ("__name__", PART_LABEL))


class Reads:
    """Every series of a chunk the fast path reads, by family and slice.

    Args:
        q: The chunk's queries.
        grid: The window's cells.
        families: Metric names per family, in the queries' order (newer generation first).
    """

    def __init__(self, q: Queries, grid: Grid, families: Mapping[str, Sequence[str]]) -> None:
        self.q = q
        self.grid = grid
        self.families = {f: list(names) for f, names in families.items() if names}
        self.spans = Spans.of(grid, q.window_ms, q.closed)
        self.series: dict[SeriesId, Read] = {}

    def family_of(self, metric: str) -> str:
        """The family a metric name was read for (the first, when several)."""
        return next(f for f, names in self.families.items() if metric in names)

    def _metrics(self, families: Iterable[str]) -> list[str]:
        seen: dict[str, None] = {}
        for family in families:
            for name in self.families.get(family, ()):
                seen.setdefault(name)
        return list(seen)

    def _read(self, metric: str, labels: Mapping[str, str]) -> Read | None:
        ident = _identity(metric, labels)
        found = self.series.get(ident)
        if found is not None:
            return found
        key = self.q.key(labels)
        if key is None:
            return None
        clean = dict(ident[1])
        read = Read(self.family_of(metric), metric, clean, key, Presence.empty(self.grid.cells))
        self.series[ident] = read
        return read

    def by_slice(self) -> dict[SliceId, list[Read]]:
        """The reads grouped by slice."""
        out: dict[SliceId, list[Read]] = defaultdict(list)
        for read in self.series.values():
            out[read.key].append(read)
        return out


def counter_ratio(q: Queries, counter: str, nodes: Sequence[str]) -> str:
    """An active-seconds counter's ratio per step interval, per series: ``clamp_max(irate)``.

    The exact path's :meth:`Queries.counter_ratio` without its ``and``, filter and
    aggregation, which cost several times the ``irate`` itself: the same number wherever
    :func:`.fast._clean` holds (a sample in every interval, so the ``and`` keeps every step;
    no negative or NaN sample, so the filter keeps every value; one series per slice).
    """
    return f"clamp_max({q.over('irate', counter, nodes, q.lookback)}, {ACTIVITY_CEILING:g})"


def cells(reads: Reads, nodes: Sequence[str]) -> None:
    """Per series of every family, intervals with a sample per cell; per activity series, means.

    One range query at ``period`` from the first cell's end to the window's end, which also
    counts the raw samples of each activity and memory series per cell (:attr:`Read.regular`),
    and per active-seconds counter the mean of its ratio in each cell (:func:`counter_ratio`,
    over the exact path's ``[period:step]`` subquery, :func:`.statistics.activity_mean`).
    """
    q, spans, grid = reads.q, reads.spans, reads.grid
    parts: list[str] = []
    metrics = reads._metrics(reads.families)
    for i, metric in enumerate(metrics):
        present = q.over("present_over_time", metric, nodes, spans.interval)
        expr = f"sum_over_time({present}[{spans.cells}:{spans.step}])"
        parts.append(_tagged(expr, f"p|{i}"))
    activity = set(reads.families.get(ACTIVITY, ()))
    measured = activity | set(reads.families.get(MEMORY, ()))
    counters = set(reads.families.get(COUNTER, ()))
    for i, metric in enumerate(metrics):
        if metric in activity:
            parts.append(_tagged(q.over("avg_over_time", metric, nodes, spans.cells), f"a|{i}"))
        if metric in measured:
            parts.append(_tagged(q.over("count_over_time", metric, nodes, spans.cells), f"c|{i}"))
        if metric in counters:
            ratio = counter_ratio(q, metric, nodes)
            parts.append(_tagged(f"avg_over_time({ratio}[{q.bucket_range}:{q.step}])", f"a|{i}"))
    if not parts:
        return
    first, last = grid.cell_end(0), grid.cell_end(grid.cells - 1)
    for series in q.range_parts(parts, start=first, end=last, step=grid.period_ms / 1000):
        kind, _, index = series.labels.get(PART_LABEL, "").partition("|")
        if kind not in ("p", "a", "c") or not index.isdigit():
            continue
        read = reads._read(metrics[int(index)], series.labels)
        if read is None:
            continue
        if kind == "a" and read.hourly is None:
            read.hourly = np.full(grid.cells, math.nan)
        if kind == "c" and read.raw is None:
            read.raw = np.zeros(grid.cells, dtype=np.int64)
        for t, value in series.points():
            h = grid.cell_of(t)
            if not 0 <= h < grid.cells:
                continue
            if kind == "p":
                read.presence.counts[h] = round(value) if math.isfinite(value) else 0
            elif kind == "c" and read.raw is not None:
                read.raw[h] = round(value) if math.isfinite(value) else 0
            elif read.hourly is not None:
                read.hourly[h] = value


def weekly(reads: Reads, nodes: Sequence[str]) -> None:
    """Per activity and memory series, the statistics' raw numbers; per free/capacity, the last.

    One instant query at the window's end: over the values' range the quantiles, maximum,
    minimum (for :func:`.quality.suspects`'s rule, negative values) and sum (NaN when a sample
    is NaN); on Prometheus 2 the samples of the extra interval its closed ranges read
    (``@ start``, see :class:`Spans`). The last value of the memory, free and capacity series
    (dcgm-exporter's memory total) only where the dialect has those. (The raw sample counts
    are read per cell by :func:`cells`, in the same request as the intervals.)

    Per active-seconds counter, the exact path's ``quantile_over_time`` 0.5/0.95 and
    ``max_over_time`` over ``[W:step]`` of its ratio (:func:`counter_ratio`), evaluated at the
    same steps; its raw minimum and sum over every sample an ``irate`` of those steps reads;
    ``extra`` on Prometheus 2; and ``pair``, its samples in the ``irate`` range of the first
    step (two or more: that step has a ratio). :func:`.fast._clean` decides from these.
    """
    q, spans = reads.q, reads.spans
    dcgm = not q.migscope
    wanted = {
        ACTIVITY: ("p50", "p95", "max", "min", "sum"),
        MEMORY: ("p95", "max", "min", "sum", *(("last",) if dcgm else ())),
        FREE: ("last",),
        CAPACITY: ("last",),
        COUNTER: ("cp50", "cp95", "cmax", "cmin", "csum", "pair", *(("extra",) * q.closed)),
    }
    start = q.run.window_start
    # The first step the exact path's [W:step] subqueries evaluate: the window's start on
    # Prometheus 2 (closed ranges), one step later elsewhere.
    first = start if q.closed else start + q.step_ms / 1000
    # Every sample an irate of those steps reads: the window, a step and the lookback before.
    reach = duration((q.window_ms + q.step_ms + round(COUNTER_LOOKBACK_SECONDS * 1000)) / 1000)
    functions: dict[str, tuple[str, str | None, str, float | None]] = {
        "p50": ("quantile_over_time", "0.5", spans.values, None),
        "p95": ("quantile_over_time", "0.95", spans.values, None),
        "max": ("max_over_time", None, spans.values, None),
        "min": ("min_over_time", None, spans.values, None),
        "sum": ("sum_over_time", None, spans.values, None),
        "last": ("last_over_time", None, spans.values, None),
        "extra": ("count_over_time", None, spans.interval, start),
        "cmin": ("min_over_time", None, reach, None),
        "csum": ("sum_over_time", None, reach, None),
        "pair": ("count_over_time", None, q.lookback, first),
    }
    ratios = {"cp50": "quantile_over_time(0.5, ", "cp95": "quantile_over_time(0.95, "}
    ratios["cmax"] = "max_over_time("
    metrics = reads._metrics(wanted)
    parts: list[str] = []
    for i, metric in enumerate(metrics):
        names: dict[str, None] = {}
        for family, fields in wanted.items():
            if metric in reads.families.get(family, ()):
                names.update(dict.fromkeys(fields))
        if q.closed and "sum" in names:  # activity and memory
            names["extra"] = None
        for name in names:
            if name in ratios:
                ratio = counter_ratio(q, metric, nodes)
                expr = f"{ratios[name]}{ratio}[{q.value_range}:{q.step}])"
            else:
                fn, arg, span, at = functions[name]
                expr = q.over(fn, metric, nodes, span, arg, at)
            parts.append(_tagged(expr, f"{name}|{i}"))
    if not parts:
        return
    for sample in q.ask_parts(parts):
        name, _, index = sample.labels.get(PART_LABEL, "").partition("|")
        if not index.isdigit() or name not in functions.keys() | ratios.keys():
            continue
        read = reads._read(metrics[int(index)], sample.labels)
        if read is not None:
            read.numbers[name] = sample.value


def masks(reads: Reads, needed: Mapping[int, Iterable[SliceId]], nodes: Sequence[str]) -> None:
    """Which intervals hold a sample, for the given cells of the given slices' series.

    One term per cell, mask block and metric, evaluated at the block's end with ``@``, over
    the series of the slices that need it (:meth:`Queries.restricted`); as few requests as
    the query length allows (:meth:`Queries.ask_parts`).
    """
    q, spans, grid = reads.q, reads.spans, reads.grid
    metrics = reads._metrics(f for f in reads.families if f != COUNTER)
    span_s, step_s = grid.block * grid.step_ms // 1000, grid.step_ms // 1000
    terms: list[tuple[str, tuple[int, int, int]]] = []
    for h, slices in sorted(needed.items()):
        narrowed = q.restricted(slices)
        for b, at in enumerate(grid.block_ends(h)):
            for i, metric in enumerate(metrics):
                present = narrowed.over("present_over_time", metric, nodes, spans.interval)
                weighted = f"({present} * 2 ^ ((time() % {span_s}) / {step_s}))"
                expr = f"sum_over_time({weighted}[{spans.block}:{spans.step}] @ {at:.3f})"
                terms.append((expr, (h, b, i)))
    tagged = [_tagged(e, "|".join(map(str, tag))) for e, tag in terms]
    for sample in q.ask_parts(tagged):
        tag = sample.labels.get(PART_LABEL, "").split("|")
        if len(tag) != 3 or not all(t.isdigit() for t in tag):
            continue
        h, b, i = (int(t) for t in tag)
        read = reads._read(metrics[i], sample.labels)
        if read is None:
            continue
        cell = read.presence.masks.setdefault(h, np.zeros(grid.per, dtype=bool))
        cell[b * grid.block : (b + 1) * grid.block] = mask_bits(sample.value, grid.block)
    # A series with no sample in a requested cell returns nothing there: an empty mask.
    for h, slices in needed.items():
        wanted = set(slices)
        for read in reads.series.values():
            if read.key in wanted and h not in read.presence.masks:
                read.presence.masks[h] = np.zeros(grid.per, dtype=bool)
