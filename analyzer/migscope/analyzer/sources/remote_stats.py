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
    catalogue_model,
    pod_of,
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

_Values: TypeAlias = dict[SliceKey, float]


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
    """

    dialect: Dialect
    semantics: RangeSemantics
    window_start: float
    window_end: float
    node_label: str | None
    nodes: tuple[str, ...]
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
    else dcgm-exporter's activity or framebuffer series with a ``GPU_I_ID``.

    Raises:
        NoMigSeriesError: neither is present; the message says what the server holds.
    """
    where = client.base_url
    names = set(client.label_values("__name__", start=start, end=end))
    if MIG_INFO in names:
        return Dialect.MIGSCOPE
    dcgm = [n for n in (DCGM_ACTIVITY, DCGM_FB_USED) if n in names]
    if dcgm:
        with_gi = client.label_values(
            "GPU_I_ID", match=[selector(n) for n in dcgm], start=start, end=end
        )
        if any(with_gi):
            return Dialect.DCGM
    if any(n.startswith("DCGM_FI_") for n in names):
        raise NoMigSeriesError(
            f"{where}: dcgm-exporter series found, but none has a GPU_I_ID label: "
            "MIG is disabled or the GPUs have no GPU instances"
        )
    if any(n.startswith("migscope_") for n in names):
        raise NoMigSeriesError(
            f"{where}: migscope series found, but no {MIG_INFO}: "
            "MIG is disabled or the GPUs have no GPU instances"
        )
    found = f"{len(names)} other metric names" if names else "no series in the window"
    raise NoMigSeriesError(
        f"{where}: no MIG series found ({found}; expected {MIG_INFO} from migscope "
        f"or {DCGM_ACTIVITY}/{DCGM_FB_USED} with GPU_I_ID from dcgm-exporter)"
    )


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
    base = [MIG_INFO] if chosen is Dialect.MIGSCOPE else [DCGM_ACTIVITY, DCGM_FB_USED]
    matches = [selector(name) for name in base]
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
        migscope = run.dialect is Dialect.MIGSCOPE
        node = [run.node_label] if run.node_label is not None else []
        if migscope:
            self.key_labels = ("gpu", "gpu_uuid", "gpu_instance_id", *node)
        else:
            self.key_labels = ("gpu", "UUID", "GPU_I_ID", *node)
        self.by = "by (" + ", ".join(self.key_labels) + ")"

    # -- helpers ---------------------------------------------------------------------------------

    def sel(self, metric: str, nodes: Sequence[str], **extra: Matcher) -> str:
        if self.run.node_label is None:
            return selector(metric, **extra)
        return selector(metric, **{self.run.node_label: list(nodes)}, **extra)

    def ask(self, expr: str) -> QueryResult[Sample]:
        result = self.client.query(expr, at=self.run.window_end)
        self.run._account(result)
        return result

    def key(self, labels: Mapping[str, str]) -> SliceKey | None:
        gpu_label, uuid_label, gi_label = self.key_labels[:3]
        try:
            gpu = int(labels.get(gpu_label, ""))
            gi = int(labels.get(gi_label, ""))
        except ValueError:
            return None
        uuid = labels.get(uuid_label, "")
        if not uuid:
            return None
        node = labels.get(self.run.node_label, "") if self.run.node_label else ""
        return SliceKey(node or DEFAULT_NODE, gpu, uuid, gi)

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
        migscope = self.run.dialect is Dialect.MIGSCOPE
        activity = [MIG_ACTIVITY] if migscope else [DCGM_ACTIVITY]
        memory = [MIG_MEMORY_USED] if migscope else [DCGM_FB_USED]
        scale = 1.0 if migscope else float(MIB)
        holders = [MIG_POD_INFO] if migscope else [DCGM_ACTIVITY, DCGM_FB_USED]
        infos = self.infos(nodes) if migscope else self.dcgm_infos(nodes)
        if not infos:
            return

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
        for key in sorted(infos):
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
            )

    def unused(self) -> HourlyUse:
        """The buckets of a slice nothing was seen on: activity unknown, never held."""
        n = self.buckets or 0
        return HourlyUse(self.period_ms / 1000.0, (None,) * n, (0.0,) * n)

    def hourly(
        self, activity: Sequence[str], held: str, nodes: Sequence[str]
    ) -> dict[SliceKey, HourlyUse]:
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

        def ask(expr: str) -> dict[SliceKey, dict[int, float]]:
            result = self.client.query_range(expr, start=first, end=end, step=period_ms / 1000.0)
            self.run._account(result)
            out: dict[SliceKey, dict[int, float]] = {}
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

    def owners(self, held: str) -> dict[SliceKey, dict[tuple[str, str], float]]:
        """Step intervals held per slice and pod (labels as :func:`dialect.pod_of` reads them)."""
        by = "by (" + ", ".join((*self.key_labels, *_POD_LABELS)) + ")"
        out: dict[SliceKey, dict[tuple[str, str], float]] = {}
        for sample in self.ask(self.intervals(held, by)):
            key = self.key(sample.labels)
            owner = pod_of(sample.labels)
            if key is None or owner is None:
                continue
            # One pod seen under two label spellings: the larger count, not a double count.
            per_key = out.setdefault(key, {})
            per_key[owner] = max(per_key.get(owner, 0.0), sample.value)
        return out

    def infos(self, nodes: Sequence[str]) -> dict[SliceKey, tuple[SliceInfo, float | None]]:
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
        out: dict[SliceKey, tuple[SliceInfo, float | None]] = {}
        infos = self.ask(f"last_over_time({self.sel(MIG_INFO, nodes)}[{self.window}])")
        for sample in sorted(infos, key=lambda s: sorted(s.labels.items())):
            key = self.key(sample.labels)
            if key is None:
                continue
            labels = sample.labels
            model = models.get((key.node, key.gpu_uuid))
            profile = labels.get("profile", "")
            total = totals.get(key)
            out[key] = (
                SliceInfo(
                    key=key,
                    model=model.key if model is not None else None,
                    profile=profile,
                    mig_uuid=labels.get("mig_uuid") or None,
                    placement_start=_int(labels.get("placement_start")),
                ),
                total if total is not None else profile_bytes(model, profile),
            )
        return out

    def dcgm_infos(self, nodes: Sequence[str]) -> dict[SliceKey, tuple[SliceInfo, float | None]]:
        """dcgm-exporter: the slices with activity or framebuffer series in the window."""
        totals = self.values(
            f"max {self.by} (last_over_time({self.sel(DCGM_FB_USED, nodes)}[{self.window}])"
            f" + last_over_time({self.sel(DCGM_FB_FREE, nodes)}[{self.window}]))",
            scale=float(MIB),
        )
        by = "by (" + ", ".join((*self.key_labels, "GPU_I_PROFILE", "modelName")) + ")"
        expr = " or ".join(
            f"last_over_time({self.sel(m, nodes)}[{self.window}])"
            for m in (DCGM_ACTIVITY, DCGM_FB_USED)
        )
        out: dict[SliceKey, tuple[SliceInfo, float | None]] = {}
        for sample in sorted(
            self.ask(f"count {by} ({expr})"), key=lambda s: sorted(s.labels.items())
        ):
            key = self.key(sample.labels)
            if key is None:
                continue
            model = model_for_name(sample.labels.get("modelName", ""))
            profile = sample.labels.get("GPU_I_PROFILE", "")
            total = totals.get(key)
            out[key] = (
                SliceInfo(
                    key=key,
                    model=model.key if model is not None else None,
                    profile=profile,
                ),
                total if total is not None else profile_bytes(model, profile),
            )
        return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None
