"""What a run of server-side statistics returns: the slices, and what producing them cost.

:class:`RemoteSliceStats` is both the iterator callers consume and
the account the queries add to as they run; the query modules import it, and the entry
point (:mod:`.evaluate`) creates it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from migscope.analyzer._intake.dialect import (
    DCGM_ACTIVITY,
    DCGM_FB_CAPACITY,
    DCGM_FB_FREE,
    DCGM_FB_USED,
    MIG_ACTIVITY,
    MIG_ENERGY,
    MIG_MEMORY_TOTAL,
    MIG_MEMORY_USED,
    Dialect,
    quantity_names,
)
from migscope.analyzer._intake.dialect.grouping import NodeMoves
from migscope.analyzer._intake.prometheus import QueryResult, Sample, Series
from migscope.analyzer._intake.stats_local import RangeSemantics
from migscope.analyzer._intake.stats_local.quality import Kind, QualityCounts
from migscope.analyzer._model import SliceStats

MAX_NAMED_NODES = 20
"""Nodes a note names before it says "and N more": a whole zone gone quiet stays one line."""

StatsMode: TypeAlias = Literal["exact", "fast", "auto"]
"""How the statistics are computed (:func:`.evaluate.choose_mode`): ``exact`` evaluates every
field as one PromQL aggregation per slice over ``[W:step]`` subqueries; ``fast`` reads each
series in few raw passes and combines them per slice in Python, the exact queries kept for
the slices that need them; ``auto`` picks by the fleet's size."""


def silent_nodes_note(server: str, nodes: tuple[str, ...]) -> str:
    """The report note for nodes the server listed but returned no statistics for."""
    named = ", ".join(nodes[:MAX_NAMED_NODES])
    more = f" and {len(nodes) - MAX_NAMED_NODES} more" if len(nodes) > MAX_NAMED_NODES else ""
    return (
        f"{server}: {len(nodes)} node(s) listed for the window returned no statistics, so "
        f"they are not in this report: {named}{more} (a store or shard that answered "
        "nothing, or series that ended before the window)"
    )


@dataclass
class Ledger:
    """What one chunk's queries cost and found, kept apart until the chunk is consumed.

    Why: chunks are evaluated on worker threads (:func:`.evaluate.ordered_map`); each writes to
    its own ledger, and :meth:`RemoteSliceStats.merge` adds it to the run in chunk order, so
    that the totals need no lock and the notes come out in the same order whatever the
    concurrency.

    Attributes:
        queries: Requests sent (instant and range queries).
        server_eval_seconds: Sum of the server's ``evalTotalTime``, None once one reports none.
        queryable_samples: Sum of ``totalQueryableSamples``, None once one reports none.
        quality: The numbers out of range found (:mod:`.quality`).
        found: Sentences worth a report note.
        presence_only: GPU instances seen only in dcgm-exporter's presence family (one
            note for the run, :attr:`RemoteSliceStats.notes`).
        fast_slices: Slices whose statistics came from the per-series reads.
        merged_slices: Of those, the slices with several series of one quantity, whose
            quantiles came from the exact queries restricted to them.
        counter_slices: Of those, the slices whose activity came from their active-seconds
            counter's per-series reads (issue 24).
        exact_slices: Slices computed with the exact queries (restricted to them, on the
            fast path; all of them on the exact path).
    """

    queries: int = 0
    server_eval_seconds: float | None = 0.0
    queryable_samples: int | None = 0
    quality: QualityCounts = field(default_factory=QualityCounts)
    found: list[str] = field(default_factory=list)
    presence_only: int = 0
    fast_slices: int = 0
    merged_slices: int = 0
    counter_slices: int = 0
    exact_slices: int = 0

    def account(self, result: QueryResult[Sample] | QueryResult[Series]) -> None:
        """Count one query and add the server's reported cost (None once one reports none)."""
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
        node_fallbacks: Later labels of :data:`~migscope.analyzer._intake.dialect.NODE_LABELS` that
            name the node of series without ``node_label`` (``hostname`` after ``Hostname``
            while a fleet upgrades dcgm-exporter past 4.8.2); the queries read their series
            as if ``node_label`` were set (:meth:`Queries.over`).
        nodes: The nodes, in processing order.
        stats: How the statistics are computed: ``"exact"`` or ``"fast"`` (``"auto"``
            resolved, see :func:`.evaluate.choose_mode`).
        workers: Chunks evaluated at once (1: one after the other).
        queries: Queries sent so far (instant and range).
        fast_slices: Slices whose statistics came from per-series reads (fast path).
        merged_slices: Of those, the slices with several series of one quantity (a pod
            change under dcgm-exporter, a restarted exporter): their quantiles came from the
            exact queries, restricted to them.
        counter_slices: Of those, the slices whose activity came from their active-seconds
            counter's per-series reads (issue 24).
        exact_slices: Slices computed with the exact queries: every slice on the exact path,
            on the fast path the ones its reads could not settle (several series of one
            quantity, NaN or out-of-range samples, more than one sample per step).
        server_eval_seconds: Sum of the server's ``evalTotalTime`` over those queries, or
            None when the server reports no timings (VictoriaMetrics): the PromQL time the
            benchmark compares the analyzer's wall time with.
        queryable_samples: Sum of the server's ``totalQueryableSamples``, or None.
        wall_seconds: The analyzer's own wall time inside queries and result handling.
        names: The metric names read for each family the dialect uses, as the server spells
            them (dcgm-exporter's families in any letter case; ``presence`` is the family
            that lists GPU instances without activity or framebuffer series, if any).
        server: The server's URL, as the notes name it.
        found: One sentence per thing worth a report note, filled in as chunks are
            evaluated.
        presence_only: GPU instances seen only through dcgm-exporter's presence family,
            counted over the chunks (one note says how many).
        quality: The numbers out of range, per kind, summed over the chunks evaluated
            (:mod:`.quality`); :attr:`notes` says them once per kind.
        silent_nodes: Nodes of :attr:`nodes` that no chunk's queries returned a slice of,
            set once every chunk is consumed; :attr:`notes` names them. Why: the nodes come
            from the label index and the slices from queries, and the two disagree when a
            store or shard answers nothing for a node without a warning (a Thanos querier
            with ``partial_response``), or when a node's series ended before the window but
            in a block that overlaps it (the index answers per block, not per sample); the
            fleet would otherwise just be smaller, with no word of it (issue 20).
        moves: GPUs whose series carry several node names in the window (a node
            relabelling added or changed), or None: the queries then group slices without
            the node label, chunks hold every name of a moved GPU, and each GPU is reported
            under its newest name (:func:`.discovery.find_moves`).
    """

    dialect: Dialect
    semantics: RangeSemantics
    window_start: float
    window_end: float
    node_label: str | None
    nodes: tuple[str, ...]
    node_fallbacks: tuple[str, ...] = ()
    names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    server: str = ""
    found: list[str] = field(default_factory=list)
    quality: QualityCounts = field(default_factory=QualityCounts)
    presence_only: int = 0
    stats: StatsMode = "exact"
    workers: int = 1
    queries: int = 0
    fast_slices: int = 0
    merged_slices: int = 0
    counter_slices: int = 0
    exact_slices: int = 0
    server_eval_seconds: float | None = 0.0
    queryable_samples: int | None = 0
    wall_seconds: float = 0.0
    silent_nodes: tuple[str, ...] = ()
    moves: NodeMoves | None = None
    _items: Iterator[SliceStats] = field(default_factory=lambda: iter(()), repr=False)

    @property
    def notes(self) -> list[str]:
        """What is worth a report note: :attr:`found`, then one sentence per kind of bad number.

        Read it after the iteration: the chunks add to it as they are evaluated.
        """
        listed = []
        if self.presence_only:
            presence = ", ".join(self.names.get("presence", ()))
            activity = quantity_names(DCGM_ACTIVITY, self.names.get(DCGM_ACTIVITY, ()))
            listed.append(
                f"{self.server}: {self.presence_only} GPU instance(s) appear only in "
                f"{presence}, with no {activity} or framebuffer series: "
                "reported unknown, their GPUs kept as they are"
            )
        if self.silent_nodes:
            listed.append(silent_nodes_note(self.server, self.silent_nodes))
        return [*listed, *self.found, *self.quality.notes(self.server, self._metric_names())]

    def _metric_names(self) -> dict[Kind, str]:
        """The metric each kind of note is about, as the file readers name them."""
        if self.dialect is Dialect.MIGSCOPE:
            activity, used, total = MIG_ACTIVITY, MIG_MEMORY_USED, MIG_MEMORY_TOTAL
        else:
            present = [n for spellings in self.names.values() for n in spellings]
            activity = quantity_names(DCGM_ACTIVITY, present)
            used = quantity_names(DCGM_FB_USED, present)
            total = f"{used} + {quantity_names(DCGM_FB_FREE, present)}"
            if self.names.get(DCGM_FB_CAPACITY):
                total += f" (else {DCGM_FB_CAPACITY})"
        return {
            Kind.ACTIVITY_DROPPED: activity,
            Kind.ACTIVITY_CLAMPED: activity,
            Kind.MEMORY_DROPPED: used,
            Kind.MEMORY_ABOVE_TOTAL: used,
            Kind.TOTAL_IGNORED: total,
            Kind.ENERGY_UNKNOWN: MIG_ENERGY,
        }

    def __next__(self) -> SliceStats:
        started = time.perf_counter()
        try:
            return next(self._items)
        finally:
            self.wall_seconds += time.perf_counter() - started

    def __iter__(self) -> RemoteSliceStats:
        return self

    def merge(self, ledger: Ledger) -> None:
        """Add one chunk's (or the discovery's) ledger to the run's totals and notes."""
        self.queries += ledger.queries
        for name in ("server_eval_seconds", "queryable_samples"):
            mine, theirs = getattr(self, name), getattr(ledger, name)
            setattr(self, name, None if mine is None or theirs is None else mine + theirs)
        for kind, count in ledger.quality.samples.items():
            self.quality.samples[kind] = self.quality.samples.get(kind, 0) + count
        for kind, slices in ledger.quality.slices.items():
            self.quality.slices.setdefault(kind, set()).update(slices)
        self.found.extend(ledger.found)
        self.presence_only += ledger.presence_only
        self.fast_slices += ledger.fast_slices
        self.merged_slices += ledger.merged_slices
        self.counter_slices += ledger.counter_slices
        self.exact_slices += ledger.exact_slices
