"""The PromQL of one run: ranges, selectors, the per-interval building blocks, and asking.

Every statistic is assembled from the same few pieces (a selector
limited to the chunk's nodes, one value per slice and step interval, the count of intervals
that hold something), and every answer is read back into slices the same way; the
inventory (:mod:`.inventory`) and the statistics (:mod:`.statistics`) both build on it.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

from migscope.analyzer._intake.dialect import (
    CLAIM_LABELS,
    DCGM_ACTIVITY,
    DCGM_FB_CAPACITY,
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DEFAULT_NODE,
    MIG_ACTIVE_SECONDS,
    MIG_ACTIVITY,
    MIG_MEMORY_USED,
    POD_LABELS,
    Dialect,
    SliceId,
    dcgm_field,
    unit_scale,
)
from migscope.analyzer._intake.prometheus import PrometheusClient, QueryResult, Sample, Series
from migscope.analyzer._intake.promql import Matcher, duration, selector
from migscope.analyzer._intake.stats_local import COUNTER_LOOKBACK_SECONDS, hourly_buckets
from migscope.analyzer._intake.stats_promql.result import Ledger, RemoteSliceStats
from migscope.analyzer._model import HourlyUse, SliceKey

NON_EMPTY = Matcher("=~", ".+")  # a constant, trusted regex: "the label is set"
"""The matcher "the label is set"."""

VALID = ">= 0 < Inf"
"""The filter that keeps a value the statistics may use: not NaN, not negative, finite."""

MAX_QUERY_CHARS = 12_000
"""The longest query the fast path sends when it joins parts with ``or``: VictoriaMetrics
refuses queries longer than 16 KiB by default (``-search.maxQueryLen=16384``)."""

Values: TypeAlias = dict[SliceId, float]
"""One number per slice: what an aggregation by the slice's key labels returns."""

Restriction: TypeAlias = tuple[str | None, dict[str, list[str]]]
"""One node (None without a node label) and the label values its selectors must have: the
GPU indices and GPU-instance ids of the slices a restricted :class:`Queries` reads."""


class Queries:
    """The PromQL of one run, and the reading of its answers back into slices.

    Args:
        client: The server.
        run: The run (window, dialect, node label, names).
        step: Step interval, seconds.
        period: Bucket length of the hourly use, seconds, or None for none.
        ledger: Where the queries' cost and findings go (a new one when None): one per chunk,
            merged into ``run`` when the chunk is consumed (:meth:`RemoteSliceStats.merge`).
    """

    def __init__(
        self,
        client: PrometheusClient,
        run: RemoteSliceStats,
        *,
        step: float,
        period: float | None,
        ledger: Ledger | None = None,
    ) -> None:
        self.client = client
        self.run = run
        self.ledger = ledger if ledger is not None else Ledger()
        self.only: tuple[Restriction, ...] | None = None
        self.closed = run.semantics == "prometheus2"
        self.step_ms = round(step * 1000)
        self.window_ms = round((run.window_end - run.window_start) * 1000)
        closed = run.semantics == "prometheus2"
        self.buckets = (
            hourly_buckets(run.window_start, run.window_end, step, period) if period else None
        )
        self.period_ms = round(period * 1000) if period else 0
        # No buckets (period None, as remote_slice_stats allows): no bucket range either.
        self.bucket_range = (
            duration((self.period_ms - (1 if closed else 0)) / 1000) if self.period_ms else ""
        )
        # Closed ranges (Prometheus 2) would count a sample on the grid in two intervals.
        self.interval = duration((self.step_ms - (1 if closed else 0)) / 1000)
        self.count_range = duration((self.window_ms - (1 if closed else 0)) / 1000)
        self.value_range = duration(self.window_ms / 1000)
        self.step = duration(self.step_ms / 1000)
        lookback_ms = round(COUNTER_LOOKBACK_SECONDS * 1000)
        self.lookback = duration((lookback_ms - (1 if closed else 0)) / 1000)
        self.window = self.value_range
        self.migscope = run.dialect is Dialect.MIGSCOPE
        # With moved GPUs (a relabelling changed their node name in the window) the node is
        # no part of a slice's identity: the GPU UUID is, and :meth:`key` names its node.
        node = [run.node_label] if run.node_label is not None and run.moves is None else []
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
        self.gi_label = "gpu_instance_id" if self.migscope else "GPU_I_ID"
        names = run.names

        def spelled(family: str) -> list[str]:
            return list(names.get(family, (family,)))

        self.activity = [MIG_ACTIVITY] if self.migscope else spelled(DCGM_ACTIVITY)
        # The active-seconds counter, read before the gauge where the server has it
        # (:meth:`per_interval`); dcgm-exporter has none.
        self.activity_counters = list(names.get(MIG_ACTIVE_SECONDS, ())) if self.migscope else []
        self.memory = [MIG_MEMORY_USED] if self.migscope else spelled(DCGM_FB_USED)
        self.free = [] if self.migscope else spelled(DCGM_FB_FREE)
        # No capacity clause at all when the server has no such series (4.8 and older).
        self.capacity = [] if self.migscope else list(names.get(DCGM_FB_CAPACITY, ()))
        self.presence = [] if self.migscope else list(names.get("presence", ()))

    # -- helpers ---------------------------------------------------------------------------------

    def for_chunk(self, ledger: Ledger | None = None) -> Queries:
        """The same queries with a ledger of their own (one per chunk, see :class:`Ledger`)."""
        other = copy.copy(self)
        other.ledger = ledger if ledger is not None else Ledger()
        return other

    def restricted(self, slices: Iterable[SliceId]) -> Queries:
        """The same queries, reading only the series of ``slices`` (and their GPU's namesakes).

        Each selector is narrowed to one node, its GPU indices and its GPU-instance ids, and
        the nodes' parts are joined with ``or``: a few selectors, not one per slice. Within a
        node the indices and ids combine freely, so a slice of another GPU whose id is listed
        may be read too; callers keep only the slices they asked for. The ledger is shared.
        """
        wanted: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for key, _ in slices:
            picked = wanted[key.node]
            picked["gpu"].add(str(key.gpu))
            # "" too: the GPU's own series (migscope_gpu_info) have no GPU-instance id.
            picked[self.gi_label].update(("", str(key.gpu_instance_id)))
        other = copy.copy(self)
        labelled = self.run.node_label is not None
        other.only = tuple(
            (node if labelled else None, {k: sorted(v) for k, v in picked.items()})
            for node, picked in sorted(wanted.items())
        )
        return other

    def over(
        self,
        fn: str,
        metric: str,
        nodes: Sequence[str],
        span: str,
        arg: str | None = None,
        at: float | None = None,
        /,
        **extra: Matcher,
    ) -> str:
        """``fn([arg, ]metric[span])`` over the series of ``nodes``, whichever label names them.

        Every series when there is no node label. With one, one selector. Where later labels
        of :data:`~migscope.analyzer._intake.dialect.NODE_LABELS` name the node of series that lack
        the earlier ones (:attr:`RemoteSliceStats.node_fallbacks`: dcgm-exporter wrote
        ``Hostname`` up to 4.8.2 and ``hostname`` from 4.8.3, so a fleet in the middle of an
        upgrade, or a window that spans one, has both), one selector per label, each for
        the series without the labels before it, its result given the first label with
        ``label_replace``: every series then names its node by the first label, as the
        file reader's :func:`~migscope.analyzer._intake.dialect.node_of` reads it.

        A restricted instance (:meth:`restricted`) reads its own nodes and slices instead of
        ``nodes``, one part per node. ``at`` evaluates the range at that time (``@``).
        """
        groups: Sequence[tuple[Sequence[str] | None, Mapping[str, Matcher | list[str]]]] = (
            [(None if node is None else [node], picked) for node, picked in self.only]
            if self.only is not None
            else [(nodes, {})]
        )
        parts: list[str] = []
        for group_nodes, picked in groups:
            ranged = f"[{span}]" if at is None else f"[{span}] @ {at:.3f}"
            parts += self._over_nodes(fn, metric, group_nodes, ranged, arg, {**extra, **picked})
        return parts[0] if len(parts) == 1 else f"({' or '.join(parts)})"

    def _over_nodes(
        self,
        fn: str,
        metric: str,
        nodes: Sequence[str] | None,
        ranged: str,
        arg: str | None,
        extra: Mapping[str, Matcher | list[str]],
    ) -> list[str]:
        head = f"{fn}({arg}, " if arg is not None else f"{fn}("
        if self.run.node_label is None or nodes is None:
            return [f"{head}{selector(metric, **extra)}{ranged})"]
        first, wanted = self.run.node_label, list(nodes)
        if self.run.moves is not None:  # every name the chunk's GPUs were seen under
            wanted = self.run.moves.expand(wanted)
        parts = [f"{head}{selector(metric, **{**extra, first: wanted})}{ranged})"]
        absent: dict[str, Matcher | str | list[str]] = {first: ""}
        for label in self.run.node_fallbacks:
            chosen = selector(metric, **{**extra, **absent, label: wanted})
            parts.append(
                f'label_replace({head}{chosen}{ranged}), "{first}", "$1", "{label}", "(.*)")'
            )
            absent[label] = ""
        return parts

    @staticmethod
    def in_base_units(expr: str, metric: str) -> str:
        """``expr``, a function of ``metric``'s samples, in bytes or ratio (see :func:`unit_scale`).

        dcgm-exporter's 4.8 framebuffer fields are MiB: their values are multiplied by 2^20 on
        the server, so that every spelling and generation of a quantity can be joined with
        ``or`` and aggregated together. A power of two scales exactly, so a quantile of the
        scaled values is the scaled quantile, bit for bit (the embedded source scales first
        too).
        """
        scale = unit_scale(metric)
        return expr if scale == 1.0 else f"{expr} * {scale!r}"

    def ask(self, expr: str) -> QueryResult[Sample]:
        """Evaluate ``expr`` at the window's end, and account for it."""
        result = self.client.query(expr, at=self.run.window_end)
        self.ledger.account(result)
        return result

    def ask_parts(self, parts: Sequence[str]) -> list[Sample]:
        """Evaluate ``parts`` (told apart by their labels) joined with ``or``.

        In as few requests as :data:`MAX_QUERY_CHARS` allows.
        """
        out: list[Sample] = []
        for batch in _batches(parts):
            out += self.ask(" or ".join(batch))
        return out

    def range_parts(
        self, parts: Sequence[str], *, start: float, end: float, step: float
    ) -> list[Series]:
        """:meth:`ask_parts` as range queries from ``start`` to ``end``."""
        out: list[Series] = []
        for batch in _batches(parts):
            result = self.client.query_range(" or ".join(batch), start=start, end=end, step=step)
            self.ledger.account(result)
            out += result
        return out

    def key(self, labels: Mapping[str, str]) -> SliceId | None:
        """The slice a result's labels name, as :mod:`~..dialect` groups it."""
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
        if self.run.moves is not None:
            node = self.run.moves.canonical.get(uuid, node)
        return SliceKey(node or DEFAULT_NODE, gpu, uuid, gi), ident

    def last(self, metrics: Sequence[str], nodes: Sequence[str], **extra: Matcher) -> str:
        """Each series' last value in the window, over every spelling of a family."""
        return " or ".join(
            self.over("last_over_time", m, nodes, self.window, **extra) for m in metrics
        )

    def values(self, expr: str, *, scale: float = 1.0) -> Values:
        """Evaluate ``expr`` and read one number per slice (NaN dropped), times ``scale``."""
        out: Values = {}
        for sample in self.ask(expr):
            key = self.key(sample.labels)
            if key is not None and not math.isnan(sample.value):
                out[key] = sample.value * scale
        return out

    def per_interval(
        self,
        fn: str,
        metrics: Sequence[str],
        nodes: Sequence[str],
        *,
        ceiling: float | None = None,
        counters: Sequence[str] = (),
    ) -> str:
        """One valid value per slice and step interval: the input of value statistics.

        Valid as :mod:`migscope.analyzer._intake.stats_local.quality` has it: ``>= 0 < Inf`` drops
        NaN,
        negative and infinite values; ``ceiling`` (activity's 1) clamps what is above it.
        Values are in bytes or ratio whatever the series' unit (:meth:`in_base_units`).
        Where two generations of names hold a slice in one interval, the first in ``metrics``
        is read (:meth:`generations`): each is aggregated to the slice first, because their
        series differ in more than the name (4.9 writes ``DCGM_FI_SYSTEM_DRIVER_VERSION``
        where 4.8 wrote ``DCGM_FI_DRIVER_VERSION``), and ``or`` prefers only what has the
        same labels.

        ``counters`` (activity's active-seconds counter, :meth:`counters_for`) come first:
        where a slice's counter has a value in an interval (:meth:`counter_ratio`) it is read,
        and ``metrics`` (the ratio gauge) only where it has none, per slice and interval.
        Why: the gauge is the mean of the exporter's last GPM window before each scrape and
        aliases at a 30 s or 60 s scrape, the counter's increase is exact at any; an exporter
        from before the counters, or a counter's first sample, still has the gauge.
        """

        # The filter goes inside each branch: ``or`` keeps the left side's NaN over the right
        # side's number when both have the same labels (activity and memory do).
        def valid(value: str) -> str:
            value = f"{value} {VALID}"
            return f"clamp_max({value}, {ceiling:g})" if ceiling is not None else f"({value})"

        def one(m: str) -> str:
            return valid(self.in_base_units(self.over(fn, m, nodes, self.interval), m))

        parts = [f"(max {self.by} ({valid(self.counter_ratio(c, nodes))}))" for c in counters]
        parts += [
            f"(max {self.by} ({' or '.join(one(m) for m in names)}))"
            for names in self.generations(metrics)
        ]
        return parts[0] if len(parts) == 1 else f"({' or '.join(parts)})"

    def counters_for(self, metrics: Sequence[str]) -> list[str]:
        """The counters read before ``metrics`` by :meth:`per_interval`: activity's, if any."""
        return self.activity_counters if list(metrics) == self.activity else []

    def counter_ratio(self, counter: str, nodes: Sequence[str]) -> str:
        """Per series and step interval, the ratio an active-seconds counter gives.

        ``irate(c[5m]) and count_over_time(c[step])``: the increase from the sample before
        the interval's last sample to it, over the seconds between them (a drop is a reset,
        the increase its new value), where the interval holds a sample and the pair lies
        within :data:`~migscope.analyzer._intake.stats_local.COUNTER_LOOKBACK_SECONDS` (less 1 ms on
        Prometheus 2, whose ranges are closed). VictoriaMetrics' ``irate`` with one sample
        in its range reaches before it; ``count_over_time(c[5m]) > 1`` stops that. The
        definition is :func:`~migscope.analyzer._intake.stats_local.counter_activity`'s.
        """
        pair = self.over("irate", counter, nodes, self.lookback)
        held = self.over("count_over_time", counter, nodes, self.interval)
        expr = f"{pair} and {held}"
        if self.run.semantics == "victoriametrics":
            expr += f" and ({self.over('count_over_time', counter, nodes, self.lookback)} > 1)"
        return f"({expr})"

    @staticmethod
    def generations(metrics: Sequence[str]) -> list[list[str]]:
        """``metrics`` grouped by the field they spell, in their order (newer first).

        Letter cases of one name are one group (a lower-casing relabel: the same series);
        dcgm-exporter 4.8's and 4.9's names of one quantity are two. migscope's names are
        one group each.
        """
        groups: dict[str, list[str]] = {}
        for m in metrics:
            field = dcgm_field(m)
            groups.setdefault(field.name if field is not None else m, []).append(m)
        return list(groups.values())

    def observed(self, metrics: Sequence[str], nodes: Sequence[str]) -> str:
        """Per slice and step interval: present when any metric has a valid sample."""
        return " or ".join(
            f"({self.over('max_over_time', m, nodes, self.interval)} {VALID})" for m in metrics
        )

    def holding(self, metrics: Sequence[str], nodes: Sequence[str]) -> str:
        """Per slice, holder and step interval: present when a holder's series has a sample.

        A holder is a pod or a DRA claim (:func:`dialect.holder_of`): a series is kept unless
        every pod and claim label is empty or absent (``label=""`` matches both). Two
        selectors per metric, whatever the number of labels that may name a holder, so that
        the query stays under VictoriaMetrics' length limit (:data:`MAX_QUERY_CHARS`) with
        the claim labels added; one selector per label joined with ``or`` did not.
        """
        nobody = {label: Matcher("=", "") for label in (*POD_LABELS, *CLAIM_LABELS)}
        return " or ".join(
            f"({self.over('count_over_time', m, nodes, self.interval)} unless "
            f"{self.over('count_over_time', m, nodes, self.interval, **nobody)})"
            for m in metrics
        )

    def intervals(self, inner: str, by: str) -> str:
        """How many step intervals of the window hold ``inner``."""
        return f"count_over_time((count {by} ({inner}))[{self.count_range}:{self.step}])"

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

    def increase(self) -> str:
        """The function that takes a counter's increase over the window on this engine.

        VictoriaMetrics's own ``increase()`` reaches back before the window;
        ``increase_prometheus()`` is its Prometheus-compatible one.
        """
        return "increase_prometheus" if self.run.semantics == "victoriametrics" else "increase"


def _batches(parts: Sequence[str]) -> list[list[str]]:
    """``parts`` in order, packed into lists whose ``or`` stays under :data:`MAX_QUERY_CHARS`.

    A part longer than that alone is sent alone (the server says whether it takes it).
    """
    out: list[list[str]] = []
    size = 0
    for part in parts:
        if out and size + 4 + len(part) <= MAX_QUERY_CHARS:
            out[-1].append(part)
            size += 4 + len(part)
        else:
            out.append([part])
            size = len(part)
    return out
