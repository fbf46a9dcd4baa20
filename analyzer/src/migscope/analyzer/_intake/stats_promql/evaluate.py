"""The entry point of server-side statistics: discover at once, then query chunk by chunk.

Why a module of its own: it ties the steps together in the order that makes a wrong server
fail early (:mod:`.discovery`) and keeps the statistics lazy (:mod:`.statistics`), so that
only one chunk of nodes' results is held at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from migscope.analyzer._intake.dialect import DEFAULT_NODE, Dialect
from migscope.analyzer._intake.dialect.grouping import NodeMoves
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_local import HOURLY_PERIOD_SECONDS, RangeSemantics
from migscope.analyzer._intake.stats_promql.cells import Grid
from migscope.analyzer._intake.stats_promql.concurrency import DEFAULT_WORKERS, ordered_map
from migscope.analyzer._intake.stats_promql.discovery import (
    dcgm_names,
    detect_remote_dialect,
    detect_semantics,
    find_moves,
    find_nodes,
    migscope_names,
)
from migscope.analyzer._intake.stats_promql.fast import fast_chunk_stats
from migscope.analyzer._intake.stats_promql.modes import choose_mode
from migscope.analyzer._intake.stats_promql.queries import Queries
from migscope.analyzer._intake.stats_promql.result import Ledger, RemoteSliceStats, StatsMode
from migscope.analyzer._intake.stats_promql.statistics import chunk_stats
from migscope.analyzer._intake.stats_promql.window import snap_window
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import DEFAULT_STEP_SECONDS

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
    (:mod:`.concurrency`), and only those chunks' results are held. Listed nodes that no
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
        stats: ``exact``, ``fast`` or ``auto`` (:mod:`.modes`): the same numbers, at a
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
