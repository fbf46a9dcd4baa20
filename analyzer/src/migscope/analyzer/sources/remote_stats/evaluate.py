"""The entry point of server-side statistics: discover at once, then query chunk by chunk.

Why a module of its own: it ties the steps together in the order that makes a wrong server
fail early (:mod:`.discovery`) and keeps the statistics lazy (:mod:`.statistics`), so that
only one chunk of nodes' results is held at a time.
"""

from __future__ import annotations

from collections.abc import Iterable

from migscope.analyzer.dialect import DEFAULT_NODE, Dialect
from migscope.analyzer.sources.prometheus import PrometheusClient
from migscope.analyzer.sources.remote_stats.discovery import (
    dcgm_names,
    detect_remote_dialect,
    detect_semantics,
    find_nodes,
)
from migscope.analyzer.sources.remote_stats.queries import Queries
from migscope.analyzer.sources.remote_stats.result import RemoteSliceStats
from migscope.analyzer.sources.remote_stats.statistics import chunk_stats
from migscope.analyzer.sources.remote_stats.window import snap_window
from migscope.analyzer.stats import DEFAULT_STEP_SECONDS, HOURLY_PERIOD_SECONDS, RangeSemantics

__all__ = ["remote_slice_stats"]


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
    names = dcgm_names(client, start=start, end=end) if chosen is Dialect.DCGM else {}
    node_labels, found = find_nodes(client, chosen, names, start=start, end=end)
    node_label = node_labels[0] if node_labels else None
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
    )
    query = Queries(client, run, step=step, period=period)
    chunks = [run.nodes[i : i + chunk_nodes] for i in range(0, len(run.nodes), chunk_nodes)]
    run._items = (stats for chunk in chunks for stats in chunk_stats(query, chunk))
    return run
