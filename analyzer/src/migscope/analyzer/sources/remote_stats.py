"""Slice statistics computed by the server in PromQL: the Prometheus path of ``stats.py``.

The analyzer must not pull a week of raw samples per slice to summarise it: at 10,000 slices
that is 100 million points. Instead every :class:`~migscope.analyzer.model.SliceStats` field
is one PromQL aggregation evaluated *at the window's end* over a ``[W]`` range or a
``[W:step]`` subquery, and the analyzer only reads one number per slice and field. Memory
is therefore proportional to the slices of one node chunk, whatever the window length.

The numbers must equal what :func:`migscope.analyzer.stats.slice_stats` computes from the
same raw samples (``tests/analyzer/test_stats_agree.py`` holds both to it on a real
Prometheus and a real VictoriaMetrics). So the queries copy ``stats.py``'s definitions:

* **NaN is dropped, not sorted first.** ``quantile_over_time`` over a raw range counts NaN
  as the lowest value, while ``stats.py`` ignores NaN. Each value is therefore taken per
  step interval first and filtered with ``>= 0`` (the filter drops NaN):
  ``quantile_over_time(0.95, (max by (slice) (last_over_time(x[step])) >= 0)[W:step])``.
  With data once per step (the analyzer's expected resolution) that is exactly the raw
  samples; with a faster scrape the quantiles see the last sample of each step interval
  (``max`` uses ``max_over_time`` per interval, so it stays exact at any scrape rate).
* **Coverage and allocation count step intervals**, as ``stats.py`` does: a subquery
  ``count_over_time((count by (slice) (...[step]))[W:step])`` counts the intervals
  ``(end-(k+1)·step, end-k·step]`` that hold a sample. Subquery points are aligned to
  multiples of ``step`` since the epoch, so the window is snapped to that grid (end rounded
  down, length rounded up to whole steps; see :func:`snap_window`); the returned
  ``window_start``/``window_end`` are the snapped ones.
* **Prometheus 2.x ranges are closed** (``[start, end]``). For counting, the per-interval
  range is ``step - 1ms`` and the subquery ``W - 1ms`` so intervals do not overlap; the
  sample exactly at ``start`` is then not counted (``stats.py`` folds it into the oldest
  interval, so the two differ only if that interval has no other sample).
* **Energy** is ``increase()`` on Prometheus and ``increase_prometheus()`` on
  VictoriaMetrics, whose plain ``increase()`` reaches back before the window.

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
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from migscope.analyzer.dialect import (
    DCGM_ACTIVITY,
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DEFAULT_NODE,
    GPU_INFO,
    MIB,
    MIG_ACTIVITY,
    MIG_ENERGY,
    MIG_INFO,
    MIG_MEMORY_TOTAL,
    MIG_MEMORY_USED,
    MIG_POD_INFO,
    Dialect,
    NoMigSeriesError,
    SliceId,
    catalogue_model,
    dcgm_family,
    explain_no_mig,
    migscope_slice_info,
    pod_of,
    presence_family,
    profile_bytes,
)
from migscope.analyzer.model import HourlyUse, Owner, SliceInfo, SliceKey, SliceStats
from migscope.analyzer.sources.prometheus import (
    PrometheusClient,
    QueryResult,
    Sample,
    Series,
)
from migscope.analyzer.sources.promql import Matcher, duration, selector
from migscope.analyzer.stats import (
    DEFAULT_STEP_SECONDS,
    HOURLY_PERIOD_SECONDS,
    RangeSemantics,
    hourly_buckets,
)
from migscope.core.catalogue import (
    GpuModel,
    model_for_name,
)

__all__ = [
    "RemoteSliceStats",
    "detect_remote_dialect",
    "detect_semantics",
    "remote_slice_stats",
    "snap_window",
]

_NODE_LABELS = ("node", "Hostname", "hostname", "instance")
_POD_LABELS = (
    "exported_namespace",
    "namespace",
    "pod_namespace",
    "exported_pod",
    "pod",
    "pod_name",
)
_HOLDER_LABELS = ("exported_pod", "pod", "pod_name")
_NON_EMPTY = Matcher("=~", ".+")  # a constant, trusted regex: "the label is set"

_Values: TypeAlias = dict[SliceId, float]


def snap_window(start: float, end: float, step: float) -> tuple[float, float]:
    """The window the server can evaluate: ``end`` on the step grid, a whole number of steps.

    Why: subquery evaluation points are multiples of ``step`` since the epoch, and
    ``stats.py`` counts step intervals ending at ``end``; the two agree only when ``end`` is
    itself a multiple of ``step`` and the window a whole number of steps. Pass the snapped
    window to the embedded source too when comparing the two.

    Raises:
        ValueError: ``end`` is not after ``start`` or ``step`` is not a positive whole
            number of milliseconds.
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise ValueError(f"window end ({end}) must be after its start ({start})")
    step_ms = round(step * 1000)
    if not math.isfinite(step) or step_ms <= 0 or abs(step_ms - step * 1000) > 1e-6:
        raise ValueError(f"step must be a positive whole number of ms, got {step!r} s")
    end_ms = (round(end * 1000) // step_ms) * step_ms
    steps = max(1, -(-(end_ms - round(start * 1000)) // step_ms))
    return (end_ms - steps * step_ms) / 1000.0, end_ms / 1000.0


def detect_semantics(client: PrometheusClient) -> RangeSemantics:
    """Which engine answers: Prometheus 2.x, 3.x, or VictoriaMetrics (no version reported).

    Why: window edges and ``increase()`` differ between them (see ``stats.py``), and the
    energy query must call ``increase_prometheus()`` on VictoriaMetrics. Front ends that
    report their own version (Thanos, Mimir) are taken as Prometheus 3 unless it starts
    with ``2.``; pass ``semantics=`` to override.
    """
    version = client.build_info().get("version", "")
    if not version:
        return "victoriametrics"
    return "prometheus2" if version.startswith("2.") else "prometheus3"


@dataclass
class RemoteSliceStats(Iterator[SliceStats]):
    """The slices' statistics, produced chunk by chunk, with the server's own cost.

    Iterate it for :class:`SliceStats` (sorted by node, then GPU and GI, like the embedded
    source). The counters grow as chunks are evaluated; read them after the iteration.

    Attributes:
        dialect: The detected (or given) dialect.
        semantics: The engine whose window semantics the queries assume.
        window_start: Snapped window start (see :func:`snap_window`).
        window_end: Snapped window end.
        node_label: The label the nodes were read from (None when the series have none).
        nodes: The nodes, in processing order.
        queries: Instant queries sent so far.
        server_eval_seconds: Sum of the server's ``evalTotalTime`` over those queries, or
            None when the server reports no timings (VictoriaMetrics): the PromQL time the
            benchmark compares the analyzer's wall time with.
        queryable_samples: Sum of the server's ``totalQueryableSamples``, or None.
        wall_seconds: The analyzer's own wall time inside queries and result handling.
        names: The metric names read for each family the dialect uses, as the server spells
            them (dcgm-exporter's families in any letter case; ``presence`` is the family
            that lists GPU instances without activity or framebuffer series, if any).
        notes: One sentence per thing worth a report note (slices seen only through the
            presence family), filled in as chunks are evaluated.
    """

    dialect: Dialect
    semantics: RangeSemantics
    window_start: float
    window_end: float
    node_label: str | None
    nodes: tuple[str, ...]
    names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    queries: int = 0
    server_eval_seconds: float | None = 0.0
    queryable_samples: int | None = 0
    wall_seconds: float = 0.0
    _items: Iterator[SliceStats] = field(default_factory=lambda: iter(()), repr=False)

    def __next__(self) -> SliceStats:
        started = time.perf_counter()
        try:
            return next(self._items)
        finally:
            self.wall_seconds += time.perf_counter() - started

    def __iter__(self) -> RemoteSliceStats:
        return self

    def _account(self, result: QueryResult[Sample] | QueryResult[Series]) -> None:
        self.queries += 1
        stats = result.stats
        evaluated = stats.eval_total_time if stats is not None else None
        samples = stats.total_queryable_samples if stats is not None else None
        self.server_eval_seconds = (
            None
            if evaluated is None or self.server_eval_seconds is None
            else self.server_eval_seconds + evaluated
        )
        self.queryable_samples = (
            None
            if samples is None or self.queryable_samples is None
            else self.queryable_samples + samples
        )


def detect_remote_dialect(client: PrometheusClient, *, start: float, end: float) -> Dialect:
    """Which exporter's series the server holds in ``(start, end]``.

    Mirrors :func:`migscope.analyzer.dialect.detect_dialect`: ``migscope_mig_info`` wins;
    else any dcgm-exporter family (any letter case) with a ``GPU_I_ID``.

    Raises:
        NoMigSeriesError: neither is present; the message says what the server holds (the
            dcgm-exporter families found, or the names closest to the expected ones).
    """
    names = set(client.label_values("__name__", start=start, end=end))
    if MIG_INFO in names:
        return Dialect.MIGSCOPE
    if _gi_families(client, names, start=start, end=end):
        return Dialect.DCGM
    raise NoMigSeriesError(explain_no_mig(client.base_url, names, empty="no series in the window"))


def _gi_families(
    client: PrometheusClient, names: Iterable[str], *, start: float, end: float
) -> dict[str, tuple[str, ...]]:
    """dcgm-exporter families (upper case) with a ``GPU_I_ID``: the spellings of each.

    One label-values call over the index: the names of the series that carry the label.
    """
    dcgm = sorted(n for n in names if dcgm_family(n) is not None)
    if not dcgm:
        return {}
    with_gi = client.label_values(
        "__name__",
        match=[selector(None, GPU_I_ID=_NON_EMPTY, **{"__name__": dcgm})],
        start=start,
        end=end,
    )
    out: dict[str, list[str]] = {}
    for name in sorted(with_gi):
        family = dcgm_family(name)
        if family is not None:
            out.setdefault(family, []).append(name)
    return {family: tuple(spellings) for family, spellings in out.items()}


def _spellings(names: Iterable[str], family: str) -> tuple[str, ...]:
    """Every name on the server that is ``family`` in some letter case (itself if none)."""
    found = tuple(sorted(n for n in names if dcgm_family(n) == family))
    return found or (family,)


def remote_slice_stats(
    client: PrometheusClient,
    *,
    start: float,
    end: float,
    step: float = DEFAULT_STEP_SECONDS,
    dialect: Dialect | None = None,
    nodes: Iterable[str] | None = None,
    chunk_nodes: int = 50,
    semantics: RangeSemantics | None = None,
    period: float | None = HOURLY_PERIOD_SECONDS,
) -> RemoteSliceStats:
    """Every slice's window statistics, evaluated by the server, a chunk of nodes at a time.

    The dialect, the node label and the node list are read at once (so a wrong server fails
    here, not at the first ``next()``); the statistics are queried lazily, one chunk of
    ``chunk_nodes`` nodes per round of queries, and only that chunk's results are held.

    Args:
        client: The server.
        start: Window start, Unix seconds (snapped, see :func:`snap_window`).
        end: Window end, Unix seconds.
        step: Step interval for coverage, allocation and per-interval values, seconds.
        dialect: Force a dialect instead of detecting it.
        nodes: Only these nodes (matched literally); all nodes when None.
        chunk_nodes: Nodes per round of queries: bounds each query's series count.
        semantics: The engine's window semantics; detected from its build info when None.
        period: Bucket length of :attr:`SliceStats.hourly`, computed with two range queries
            per chunk when the snapped window allows it (see
            :func:`~migscope.analyzer.stats.hourly_buckets`: snap the window to ``period``
            first); None: no buckets.

    Returns:
        An iterator of :class:`SliceStats` that also carries the server's evaluation time.

    Raises:
        NoMigSeriesError: the server holds no MIG series of either dialect in the window.
        PrometheusError: the server is unreachable or rejects a query.
        ValueError: a bad window, step or chunk size.
    """
    if chunk_nodes < 1:
        raise ValueError(f"chunk_nodes must be at least 1, got {chunk_nodes}")
    start, end = snap_window(start, end, step)
    chosen = detect_remote_dialect(client, start=start, end=end) if dialect is None else dialect
    engine = detect_semantics(client) if semantics is None else semantics
    names: dict[str, tuple[str, ...]] = {}
    if chosen is Dialect.DCGM:
        present = client.label_values("__name__", start=start, end=end)
        for family in (DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE):
            names[family] = _spellings(present, family)
        presence = presence_family(_gi_families(client, present, start=start, end=end))
        if presence is not None:
            names["presence"] = _spellings(present, presence)
        # Nodes with GPU instances only: whole-GPU series (no GPU_I_ID) make no slice.
        matches = [
            selector(n, GPU_I_ID=_NON_EMPTY) for spellings in names.values() for n in spellings
        ]
    else:
        matches = [selector(MIG_INFO)]
    node_label: str | None = None
    found: list[str] = []
    for label in _NODE_LABELS:
        found = [v for v in client.label_values(label, match=matches, start=start, end=end) if v]
        if found:
            node_label = label
            break
    if nodes is not None:
        wanted = set(nodes)
        found = [n for n in found if n in wanted]
    run = RemoteSliceStats(
        dialect=chosen,
        semantics=engine,
        window_start=start,
        window_end=end,
        node_label=node_label,
        nodes=tuple(sorted(found)) if node_label is not None else (DEFAULT_NODE,),
        names=names,
    )
    query = _Queries(client, run, step=step, period=period)
    chunks = [run.nodes[i : i + chunk_nodes] for i in range(0, len(run.nodes), chunk_nodes)]
    run._items = (stats for chunk in chunks for stats in query.chunk(chunk))
    return run


class _Queries:
    """The PromQL of one run, and the conversion of its answers into SliceStats."""

    def __init__(
        self, client: PrometheusClient, run: RemoteSliceStats, *, step: float, period: float | None
    ) -> None:
        self.client = client
        self.run = run
        self.step_ms = round(step * 1000)
        self.window_ms = round((run.window_end - run.window_start) * 1000)
        closed = run.semantics == "prometheus2"
        self.buckets = (
            hourly_buckets(run.window_start, run.window_end, step, period) if period else None
        )
        self.period_ms = round(period * 1000) if period else 0
        self.bucket_range = duration((self.period_ms - (1 if closed else 0)) / 1000)
        # Closed ranges (Prometheus 2) would count a sample on the grid in two intervals.
        self.interval = duration((self.step_ms - (1 if closed else 0)) / 1000)
        self.count_range = duration((self.window_ms - (1 if closed else 0)) / 1000)
        self.value_range = duration(self.window_ms / 1000)
        self.step = duration(self.step_ms / 1000)
        self.window = self.value_range
        self.migscope = run.dialect is Dialect.MIGSCOPE
        node = [run.node_label] if run.node_label is not None else []
        # The last label tells re-created instances of one GI id apart (see SliceId).
        if self.migscope:
            self.key_labels: tuple[str, ...] = (
                "gpu",
                "gpu_uuid",
                "gpu_instance_id",
                *node,
                "mig_uuid",
            )
        else:
            self.key_labels = ("gpu", "UUID", "uuid", "GPU_I_ID", *node, "GPU_I_PROFILE")
        self.by = "by (" + ", ".join(self.key_labels) + ")"
        names = run.names

        def spelled(family: str) -> list[str]:
            return list(names.get(family, (family,)))

        self.activity = [MIG_ACTIVITY] if self.migscope else spelled(DCGM_ACTIVITY)
        self.memory = [MIG_MEMORY_USED] if self.migscope else spelled(DCGM_FB_USED)
        self.free = [] if self.migscope else spelled(DCGM_FB_FREE)
        self.presence = [] if self.migscope else list(names.get("presence", ()))

    # -- helpers ---------------------------------------------------------------------------------

    def sel(self, metric: str, nodes: Sequence[str], **extra: Matcher) -> str:
        if self.run.node_label is None:
            return selector(metric, **extra)
        return selector(metric, **{self.run.node_label: list(nodes)}, **extra)

    def ask(self, expr: str) -> QueryResult[Sample]:
        result = self.client.query(expr, at=self.run.window_end)
        self.run._account(result)
        return result

    def key(self, labels: Mapping[str, str]) -> SliceId | None:
        """The slice a result's labels name, as :mod:`~migscope.analyzer.dialect` groups it."""
        if self.migscope:
            gpu_text, gi_text = labels.get("gpu", ""), labels.get("gpu_instance_id", "")
            uuid, ident = labels.get("gpu_uuid", ""), labels.get("mig_uuid", "")
            if not uuid:
                return None
        else:
            gpu_text, gi_text = labels.get("gpu", ""), labels.get("GPU_I_ID", "")
            uuid = labels.get("UUID") or labels.get("uuid") or ""
            ident = labels.get("GPU_I_PROFILE", "")
        try:
            gpu, gi = int(gpu_text), int(gi_text)
        except ValueError:
            return None
        node = labels.get(self.run.node_label, "") if self.run.node_label else ""
        return SliceKey(node or DEFAULT_NODE, gpu, uuid, gi), ident

    def last(self, metrics: Sequence[str], nodes: Sequence[str], **extra: Matcher) -> str:
        """Each series' last value in the window, over every spelling of a family."""
        return " or ".join(
            f"last_over_time({self.sel(m, nodes, **extra)}[{self.window}])" for m in metrics
        )

    def values(self, expr: str, *, scale: float = 1.0) -> _Values:
        out: _Values = {}
        for sample in self.ask(expr):
            key = self.key(sample.labels)
            if key is not None and not math.isnan(sample.value):
                out[key] = sample.value * scale
        return out

    def per_interval(self, fn: str, metrics: Sequence[str], nodes: Sequence[str]) -> str:
        """One non-NaN value per slice and step interval: the input of value statistics."""
        # The filter goes inside each branch: ``or`` keeps the left side's NaN over the right
        # side's number when both have the same labels (activity and memory do).
        parts = " or ".join(f"({fn}({self.sel(m, nodes)}[{self.interval}]) >= 0)" for m in metrics)
        return f"(max {self.by} ({parts}))"

    def observed(self, metrics: Sequence[str], nodes: Sequence[str]) -> str:
        """Per slice and step interval: present when any metric has a non-NaN sample."""
        return " or ".join(
            f"(max_over_time({self.sel(m, nodes)}[{self.interval}]) >= 0)" for m in metrics
        )

    def holding(self, metrics: Sequence[str], nodes: Sequence[str]) -> str:
        """Per slice, pod and step interval: present when a series naming a pod has a sample."""
        return " or ".join(
            f"count_over_time({self.sel(m, nodes, **{label: _NON_EMPTY})}[{self.interval}])"
            for m in metrics
            for label in _HOLDER_LABELS
        )

    def intervals(self, inner: str, by: str) -> str:
        """How many step intervals of the window hold ``inner``."""
        return f"count_over_time((count {by} ({inner}))[{self.count_range}:{self.step}])"

    # -- one chunk -------------------------------------------------------------------------------

    def chunk(self, nodes: Sequence[str]) -> Iterator[SliceStats]:
        migscope = self.migscope
        activity, memory = self.activity, self.memory
        scale = 1.0 if migscope else float(MIB)
        holders = [MIG_POD_INFO] if migscope else activity + memory
        infos = self.infos(nodes) if migscope else self.dcgm_infos(nodes)
        if not infos:
            return
        order = self.order(infos, nodes)

        def quantile(q: float, metrics: Sequence[str], s: float = 1.0) -> _Values:
            inner = self.per_interval("last_over_time", metrics, nodes)
            return self.values(
                f"quantile_over_time({q}, {inner}[{self.value_range}:{self.step}])", scale=s
            )

        def maximum(metrics: Sequence[str], s: float = 1.0) -> _Values:
            inner = self.per_interval("max_over_time", metrics, nodes)
            return self.values(f"max_over_time({inner}[{self.value_range}:{self.step}])", scale=s)

        act_p50, act_p95, act_max = (
            quantile(0.5, activity),
            quantile(0.95, activity),
            maximum(activity),
        )
        mem_p95, mem_peak = quantile(0.95, memory, scale), maximum(memory, scale)
        samples = self.values(
            f"count_over_time({self.per_interval('last_over_time', activity + memory, nodes)}"
            f"[{self.value_range}:{self.step}])"
        )
        observed = self.observed(activity + memory, nodes)
        held = self.holding(holders, nodes)
        covered = self.values(self.intervals(observed, self.by))
        seen = self.values(self.intervals(f"{observed} or {held}", self.by))
        held_any = self.values(self.intervals(held, self.by))
        owners = self.owners(held)
        energy = (
            self.values(
                f"sum {self.by} ({self._increase()}({self.sel(MIG_ENERGY, nodes)}[{self.window}]))"
            )
            if migscope
            else {}
        )
        expected = max(1, self.window_ms // self.step_ms)
        hourly = self.hourly(activity, held, nodes)
        last_seen = self.last_seen(activity + memory, nodes)
        for key in order:
            info, total = infos[key]
            seen_k = seen.get(key, 0.0)
            yield SliceStats(
                info=info,
                window_start=self.run.window_start,
                window_end=self.run.window_end,
                samples=int(samples.get(key, 0)),
                expected_samples=expected,
                coverage=covered.get(key, 0.0) / expected,
                activity_p50=act_p50.get(key),
                activity_p95=act_p95.get(key),
                activity_max=act_max.get(key),
                memory_peak_bytes=mem_peak.get(key),
                memory_p95_bytes=mem_p95.get(key),
                memory_total_bytes=total,
                allocated_fraction=held_any.get(key, 0.0) / seen_k if seen_k else 0.0,
                owners=tuple(
                    sorted(
                        (Owner(ns, pod, n / seen_k) for (ns, pod), n in owners.get(key, {}).items())
                        if seen_k
                        else (),
                        key=lambda o: (-o.fraction, o.namespace, o.pod),
                    )
                ),
                energy_joules=energy.get(key),
                hourly=hourly.get(key, self.unused()) if self.buckets else None,
                last_seen=last_seen.get(key),
            )

    def last_seen(self, metrics: Sequence[str], nodes: Sequence[str]) -> _Values:
        """Per slice, the end of the step interval holding its newest sample in the window.

        Why: after a re-partition in the window the instances seen last are the current ones,
        and coverage cannot tell (an old instance seen for four days outweighs its successor
        seen for three). One subquery, as cheap as a statistic (see :meth:`seen_at`).
        """
        return self.values(self.seen_at("max", metrics, nodes))

    def seen_at(self, fn: str, metrics: Sequence[str], nodes: Sequence[str]) -> str:
        """The latest (``max``) or earliest (``min``) step at which a slice has a sample.

        ``timestamp()`` of an aggregated expression is its evaluation time: the end of the
        step interval holding the sample, which is what :func:`stats.slice_stats` reports
        too. Aggregating *before* ``timestamp()`` keeps the subquery as cheap as the
        statistics' (``timestamp()`` of the raw series, one per pod label set, took 30 s on
        the demo week where each statistic takes under one).
        """
        inner = f"timestamp(max {self.by} ({self.observed(metrics, nodes)}))"
        return f"{fn}_over_time({inner}[{self.count_range}:{self.step}])"

    def unused(self) -> HourlyUse:
        """The buckets of a slice nothing was seen on: activity unknown, never held."""
        n = self.buckets or 0
        return HourlyUse(self.period_ms / 1000.0, (None,) * n, (0.0,) * n)

    def order(self, infos: Mapping[SliceId, object], nodes: Sequence[str]) -> list[SliceId]:
        """The slices sorted by key, re-created instances of one key oldest first.

        Why: the embedded sources yield them so (by first sample). Only when a key has
        several instances in the chunk does it cost a query: the first step each was seen at
        (:meth:`seen_at`).
        """
        keys = [ident[0] for ident in infos]
        if len(set(keys)) == len(keys):
            return sorted(infos)
        metrics = [MIG_INFO] if self.migscope else self.activity + self.memory + self.free
        first = self.values(self.seen_at("min", metrics, nodes))
        return sorted(infos, key=lambda k: (k[0], first.get(k, math.inf), k[1]))

    def hourly(
        self, activity: Sequence[str], held: str, nodes: Sequence[str]
    ) -> dict[SliceId, HourlyUse]:
        """Per-bucket activity and allocation: two range queries at ``period`` resolution.

        Evaluated at the end of each bucket: ``avg_over_time`` of the per-interval activity
        and ``count_over_time`` of the held intervals over a ``[period:step]`` subquery
        (``period - 1ms`` on Prometheus 2, whose ranges are closed). Empty without buckets.
        """
        if not self.buckets:
            return {}
        n, period_ms, step = self.buckets, self.period_ms, self.step
        per = period_ms // self.step_ms
        end = self.run.window_end
        first = end - (n - 1) * period_ms / 1000.0

        def ask(expr: str) -> dict[SliceId, dict[int, float]]:
            result = self.client.query_range(expr, start=first, end=end, step=period_ms / 1000.0)
            self.run._account(result)
            out: dict[SliceId, dict[int, float]] = {}
            for series in result:
                key = self.key(series.labels)
                if key is None:
                    continue
                points = out.setdefault(key, {})
                for t, v in series.points():
                    bucket = n - 1 - round((end - t) * 1000) // period_ms
                    if 0 <= bucket < n and not math.isnan(v):
                        points[bucket] = v
            return out

        inner = self.per_interval("last_over_time", activity, nodes)
        act = ask(f"avg_over_time({inner}[{self.bucket_range}:{step}])")
        alloc = ask(f"count_over_time((count {self.by} ({held}))[{self.bucket_range}:{step}])")
        return {
            key: HourlyUse(
                period_seconds=period_ms / 1000.0,
                activity=tuple(act.get(key, {}).get(b) for b in range(n)),
                allocated=tuple(alloc.get(key, {}).get(b, 0.0) / per for b in range(n)),
            )
            for key in act.keys() | alloc.keys()
        }

    def _increase(self) -> str:
        return "increase_prometheus" if self.run.semantics == "victoriametrics" else "increase"

    def owners(self, held: str) -> dict[SliceId, dict[tuple[str, str], float]]:
        """Step intervals held per slice and pod (labels as :func:`dialect.pod_of` reads them)."""
        by = "by (" + ", ".join((*self.key_labels, *_POD_LABELS)) + ")"
        out: dict[SliceId, dict[tuple[str, str], float]] = {}
        for sample in self.ask(self.intervals(held, by)):
            key = self.key(sample.labels)
            owner = pod_of(sample.labels)
            if key is None or owner is None:
                continue
            # One pod seen under two label spellings: the larger count, not a double count.
            per_key = out.setdefault(key, {})
            per_key[owner] = max(per_key.get(owner, 0.0), sample.value)
        return out

    def infos(self, nodes: Sequence[str]) -> dict[SliceId, tuple[SliceInfo, float | None]]:
        """migscope: the slices that have ``migscope_mig_info`` in the window, with sizes."""
        models: dict[tuple[str, str], GpuModel | None] = {}
        for sample in self.ask(f"last_over_time({self.sel(GPU_INFO, nodes)}[{self.window}])"):
            labels = sample.labels
            node = labels.get(self.run.node_label, "") if self.run.node_label else ""
            models[(node or DEFAULT_NODE, labels.get("uuid", ""))] = catalogue_model(
                labels.get("model"), labels.get("name")
            )
        totals = self.values(
            f"max {self.by} (last_over_time({self.sel(MIG_MEMORY_TOTAL, nodes)}[{self.window}]))"
        )
        out: dict[SliceId, tuple[SliceInfo, float | None]] = {}
        infos = self.ask(f"last_over_time({self.sel(MIG_INFO, nodes)}[{self.window}])")
        for sample in sorted(infos, key=lambda s: sorted(s.labels.items())):
            ident = self.key(sample.labels)
            if ident is None:
                continue
            key = ident[0]
            model = models.get((key.node, key.gpu_uuid))
            total = totals.get(ident)
            info = migscope_slice_info(ident, sample.labels, model)
            out[ident] = (info, total if total is not None else profile_bytes(model, info.profile))
        return out

    def dcgm_infos(self, nodes: Sequence[str]) -> dict[SliceId, tuple[SliceInfo, float | None]]:
        """dcgm-exporter: the slices with activity, framebuffer or presence series in the window.

        Memory total is ``FB_USED + FB_FREE`` in the last step interval that has both (each
        family's spellings merged first, ``max without ()``, so that two spellings of one
        family do not make the addition many-to-many), else the catalogue's profile size.
        Slices seen only in the presence family have no samples: they come out ``unknown``.
        """

        def per_interval(metrics: Sequence[str]) -> str:
            parts = " or ".join(
                f"last_over_time({self.sel(m, nodes)}[{self.interval}])" for m in metrics
            )
            return f"max without () ({parts})"

        # The last step interval in which both were seen, as the embedded source takes the
        # last time both were sampled: a slice whose pod (and so series) changed keeps the
        # newest total, not the largest of its series'.
        both = f"(max {self.by} ({per_interval(self.memory)} + {per_interval(self.free)}) >= 0)"
        totals = self.values(
            f"last_over_time({both}[{self.value_range}:{self.step}])", scale=float(MIB)
        )
        labels_by = dict.fromkeys((*self.key_labels, "modelName"))
        by = "by (" + ", ".join(labels_by) + ")"
        measured = self.last([*self.activity, *self.memory, *self.free], nodes)
        found = sorted(self.ask(f"count {by} ({measured})"), key=lambda s: sorted(s.labels.items()))
        listed: list[Sample] = []
        if self.presence:
            present = self.last(self.presence, nodes, GPU_I_ID=_NON_EMPTY)
            listed = sorted(
                self.ask(f"count {by} ({present})"), key=lambda s: sorted(s.labels.items())
            )
        out: dict[SliceId, tuple[SliceInfo, float | None]] = {}
        only_listed = 0
        for presence_only, sample in [*((False, s) for s in found), *((True, s) for s in listed)]:
            ident = self.key(sample.labels)
            if ident is None or ident in out:
                continue
            only_listed += presence_only
            model = model_for_name(sample.labels.get("modelName", ""))
            profile = ident[1]
            total = totals.get(ident)
            out[ident] = (
                SliceInfo(
                    key=ident[0],
                    model=model.key if model is not None else None,
                    profile=profile,
                ),
                total if total is not None else profile_bytes(model, profile),
            )
        if only_listed:
            self.run.notes.append(
                f"{self.client.base_url}: {only_listed} GPU instance(s) appear only in "
                f"{', '.join(self.presence)}, with no {DCGM_ACTIVITY} or framebuffer series: "
                "reported unknown, their GPUs kept as they are"
            )
        return out
