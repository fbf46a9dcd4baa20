"""The entry point of server-side statistics, and how a run is cut: window, path, chunks.

:func:`remote_slice_stats` ties the steps together in the order that makes a wrong server
fail early (:mod:`.discovery`) and keeps the statistics lazy (:mod:`.statistics`), so that
only a few chunks of nodes' results are held at a time. Before it queries anything it settles
three things, each once a run:

* the window the server can evaluate (:func:`snap_window`): end on the step grid, a whole
  number of steps. A source that evaluates PromQL snaps its window once, in ``window()``
  (:class:`~migscope.analyzer._intake.prometheus_source.PrometheusSource`,
  :class:`~migscope.analyzer._intake.embedded_prometheus.EmbeddedPrometheusSource`), and
  :func:`remote_slice_stats` refuses one off the grid. The statistics computed from raw
  series must be given the same snapped window when they are compared
  (``tests/analyzer/test_stats_agree.py``);
* which path computes the statistics (:func:`choose_mode`), from one cheap count, its rule
  documented in one place (``docs/analyzer-sources.md``):

  - ``exact``: :mod:`.statistics`, one PromQL aggregation per field over ``[W:step]``
    subqueries. The reference on a server, proven equal to the embedded statistics
    (``tests/analyzer/test_stats_agree.py``); its cost grows with slices times steps
    (about 0.25 s of Prometheus time per slice-week at one sample a minute on the
    development machine).
  - ``fast``: :mod:`.fast`, the same numbers from a few reads per series (about 5-10x a raw
    scan of the data), with the exact queries kept for the slices those reads cannot
    settle. It needs the window cut into whole cells (:meth:`.cells.Grid.of`: whole hours
    ending on the hour, a step of whole seconds); where it is not, the exact path is used
    and a note says so.
  - ``auto``: exact up to :data:`AUTO_EXACT_MAX_SLICES` slices (a small fleet's week costs
    seconds either way, and the reference path then answers), fast above;

* a few chunks of nodes in flight at once (:func:`ordered_map`): a chunk's queries wait on
  the server, not on this process, so a small pool of worker threads (one
  :class:`~migscope.analyzer._intake.prometheus.PrometheusClient`, which is thread-safe: one
  httpx connection pool, a deadline per calling thread) keeps a Prometheus, a Thanos querier
  or a vmselect busy on several chunks while the analyzer reads the answers of another. The
  pool is bounded (``workers``), so that a large fleet neither floods the server with
  queries nor holds more than ``workers + 1`` chunks' results, and results come out in chunk
  order, so a run's output does not depend on the concurrency.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from migscope.analyzer._intake.dialect import DEFAULT_NODE, MIG_INFO, Dialect
from migscope.analyzer._intake.dialect.grouping import NodeMoves
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_local import HOURLY_PERIOD_SECONDS, RangeSemantics
from migscope.analyzer._intake.stats_promql.cells import Grid
from migscope.analyzer._intake.stats_promql.discovery import (
    dcgm_names,
    detect_remote_dialect,
    detect_semantics,
    find_moves,
    find_nodes,
    migscope_names,
)
from migscope.analyzer._intake.stats_promql.fast import fast_chunk_stats
from migscope.analyzer._intake.stats_promql.queries import Queries
from migscope.analyzer._intake.stats_promql.result import Ledger, RemoteSliceStats, StatsMode
from migscope.analyzer._intake.stats_promql.statistics import chunk_stats
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import DEFAULT_STEP_SECONDS, STATS_MODES

DEFAULT_WORKERS = 4
"""Chunks evaluated at once: enough to overlap the server's work with the analyzer's, few
enough to stay a polite client (a Prometheus runs up to 20 queries at once by default,
``--query.max-concurrency``)."""

_T = TypeVar("_T")
_R = TypeVar("_R")


def ordered_map(work: Callable[[_T], _R], items: Iterable[_T], workers: int) -> Iterator[_R]:
    """``work(item)`` for each item, at most ``workers`` at once, yielded in ``items`` order.

    With ``workers`` 1 nothing runs on another thread. The first failure is raised when its
    turn comes; leaving the iteration early cancels the chunks not started.

    Raises:
        ValueError: ``workers`` is below 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1:
        yield from map(work, items)
        return
    pending: deque[Future[_R]] = deque()
    source = iter(items)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="migscope-chunk")
    try:
        for item in source:
            pending.append(pool.submit(work, item))
            if len(pending) >= workers:
                break
        while pending:
            done = pending.popleft().result()
            for item in source:
                pending.append(pool.submit(work, item))
                break
            yield done
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


AUTO_EXACT_MAX_SLICES = 64
"""Up to this many slices ``auto`` takes the exact path: about 15 s of Prometheus time for a
week at one sample a minute on the development machine (``docs/analyzer-benchmark.md``)."""


def count_slices(q: Queries, nodes: tuple[str, ...]) -> int:
    """How many slices the window holds on ``nodes``: one instant query over raw ranges.

    migscope: the ``migscope_mig_info`` series; dcgm-exporter: the slice keys of its activity
    and framebuffer series.
    """
    if q.migscope:
        expr = f"count({q.over('last_over_time', MIG_INFO, nodes, q.window)})"
    else:
        expr = f"count(count {q.by} ({q.last([*q.activity, *q.memory], nodes)}))"
    result = q.ask(expr)
    return int(next((s.value for s in result), 0.0))


def choose_mode(
    requested: StatsMode, q: Queries, nodes: tuple[str, ...], grid: Grid | None
) -> tuple[StatsMode, str | None]:
    """The path to take, and a note when ``fast`` was asked for but cannot be taken.

    Raises:
        ValueError: ``requested`` is not one of :data:`STATS_MODES`.
    """
    if requested not in STATS_MODES:
        raise ValueError(f"stats must be one of {', '.join(STATS_MODES)}, got {requested!r}")
    if requested == "exact":
        return "exact", None
    if grid is None:
        note = (
            "fast statistics need a window of whole hours ending on the hour and a step of "
            "whole seconds: the exact queries were used"
        )
        return "exact", note if requested == "fast" else None
    if requested == "fast":
        return "fast", None
    return ("exact" if count_slices(q, nodes) <= AUTO_EXACT_MAX_SLICES else "fast"), None


def snap_window(start: float, end: float, step: float) -> tuple[float, float]:
    """The window the server can evaluate: ``end`` on the step grid, a whole number of steps.

    Why: subquery evaluation points are multiples of ``step`` since the epoch, and the local
    statistics (:mod:`~migscope.analyzer._intake.stats_local`) count step intervals ending at
    ``end``; the two agree only when ``end`` is itself a multiple of ``step`` and the window a
    whole number of steps. Pass the snapped window to the embedded source too when comparing
    the two.

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


MAX_CHUNK_NODES: dict[StatsMode, int] = {"exact": 50, "fast": 10, "auto": 10}
"""The most nodes a chunk holds when ``chunk_nodes`` is not given. The exact path's answers
are one number per slice and field, so 50 nodes (2,800 slices of HGX H200 nodes) make small
answers; the fast path's per-cell reads return ``cells`` points per series, so its chunks
are smaller (10 HGX nodes and a week of hours: about 560 slices, 10 MB of JSON a read)."""


def remote_slice_stats(
    client: PrometheusClient,
    *,
    start: float,
    end: float,
    step: float = DEFAULT_STEP_SECONDS,
    dialect: Dialect | None = None,
    nodes: Iterable[str] | None = None,
    chunk_nodes: int | None = None,
    semantics: RangeSemantics | None = None,
    period: float | None = HOURLY_PERIOD_SECONDS,
    stats: StatsMode = "auto",
    workers: int = DEFAULT_WORKERS,
) -> RemoteSliceStats:
    """Every slice's window statistics, evaluated by the server, a chunk of nodes at a time.

    The dialect, the node label and the node list are read at once (so a wrong server fails
    here, not at the first ``next()``); the statistics are queried lazily, one chunk of
    ``chunk_nodes`` nodes per round of queries, ``workers`` chunks at once
    (:func:`ordered_map`), and only those chunks' results are held. Listed nodes that no
    chunk returned a slice of end up in :attr:`RemoteSliceStats.silent_nodes` (and a note).

    Args:
        client: The server.
        start: Window start, Unix seconds, on the step grid (what :func:`snap_window`
            returns; the source snaps its window once, in ``window()``).
        end: Window end, Unix seconds, on the step grid.
        step: Step interval for coverage, allocation and per-interval values, seconds.
        dialect: Force a dialect instead of detecting it.
        nodes: Only these nodes (matched literally); all nodes when None.
        chunk_nodes: Nodes per round of queries: bounds each query's series count. None:
            enough chunks to keep ``workers`` busy, at most :data:`MAX_CHUNK_NODES` nodes each
            for the path taken.
        semantics: The engine's window semantics; detected from its build info when None.
        period: Bucket length of :attr:`SliceStats.hourly`, computed with two range queries
            per chunk when the snapped window allows it (see
            :func:`~migscope.analyzer._intake.stats_local.hourly_buckets`: snap the window to
            ``period``
            first); None: no buckets.
        stats: ``exact``, ``fast`` or ``auto`` (:func:`choose_mode`): the same numbers, at a
            different cost; :attr:`RemoteSliceStats.stats` says which was taken.
        workers: Chunks evaluated at once (1: one after the other).

    Returns:
        An iterator of :class:`SliceStats` that also carries the server's evaluation time.

    Raises:
        NoMigSeriesError: the server holds no MIG series of either dialect in the window.
        PrometheusError: the server is unreachable or rejects a query.
        ValueError: a bad window or one off the step grid, a bad step, chunk size, mode or
            worker count.
    """
    if chunk_nodes is not None and chunk_nodes < 1:
        raise ValueError(f"chunk_nodes must be at least 1, got {chunk_nodes}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if snap_window(start, end, step) != (start, end):
        raise ValueError(
            f"the window {start:g} .. {end:g} is not on the {step:g} s step grid: pass the "
            "window snap_window returns"
        )
    chosen = detect_remote_dialect(client, start=start, end=end) if dialect is None else dialect
    engine = detect_semantics(client) if semantics is None else semantics
    names = (
        dcgm_names(client, start=start, end=end)
        if chosen is Dialect.DCGM
        else migscope_names(client, start=start, end=end)
    )
    node_labels, found = find_nodes(client, chosen, names, start=start, end=end)
    node_label = node_labels[0] if node_labels else None
    moves, renamed = find_moves(client, chosen, names, node_labels, start=start, end=end, step=step)
    found = [n for n in found if n not in set(renamed)]
    if nodes is not None:
        wanted = set(nodes)
        found = [n for n in found if n in wanted]
    run = RemoteSliceStats(
        dialect=chosen,
        semantics=engine,
        window_start=start,
        window_end=end,
        node_label=node_label,
        node_fallbacks=node_labels[1:],
        nodes=tuple(sorted(found)) if node_label is not None else (DEFAULT_NODE,),
        names=names,
        server=client.base_url,
        moves=moves,
    )
    if moves is not None:
        run.found.append(moves.note(client.base_url))
    query = Queries(client, run, step=step, period=period)
    grid = (
        Grid.of(start, end, step, period)
        if period is not None and query.buckets
        else Grid.of(start, end, step, HOURLY_PERIOD_SECONDS)
    )
    counting = query.for_chunk()
    mode, note = choose_mode(stats, counting, run.nodes, grid)
    run.merge(counting.ledger)
    if note is not None:
        run.found.append(f"{client.base_url}: {note}")
    run.stats, run.workers = mode, workers
    size = chunk_nodes or max(1, min(MAX_CHUNK_NODES[mode], -(-len(run.nodes) // workers)))
    chunks = _chunks(run.nodes, size, moves)

    def evaluate(chunk: Sequence[str]) -> tuple[list[SliceStats], Ledger]:
        q = query.for_chunk()
        if mode == "fast" and grid is not None:
            return fast_chunk_stats(q, chunk, grid), q.ledger
        return list(chunk_stats(q, chunk)), q.ledger

    def items() -> Iterator[SliceStats]:
        answered: set[str] = set()
        for found, ledger in ordered_map(evaluate, chunks, workers):
            run.merge(ledger)
            answered.update(s.key.node for s in found)
            yield from found
        if node_label is not None:  # listed by the index, absent from every answer
            run.silent_nodes = tuple(n for n in run.nodes if n not in answered)

    run._items = items()
    return run


def _chunks(nodes: tuple[str, ...], size: int, moves: NodeMoves | None) -> list[tuple[str, ...]]:
    """``nodes`` in chunks of ``size``; the names a moved GPU was seen under stay together.

    Why: a slice's statistics are exact only when every series of it is in one query, and
    with moves a GPU's series carry several node names (:class:`NodeMoves`). A group of
    linked names is one unit, however large.
    """
    if moves is None:
        return [nodes[i : i + size] for i in range(0, len(nodes), size)]
    units: dict[tuple[str, ...], list[str]] = {}
    for node in nodes:
        units.setdefault(moves.groups.get(node, (node,)), []).append(node)
    chunks: list[tuple[str, ...]] = []
    current: list[str] = []
    for unit in units.values():
        if current and len(current) + len(unit) > size:
            chunks.append(tuple(current))
            current = []
        current += unit
    if current:
        chunks.append(tuple(current))
    return chunks
