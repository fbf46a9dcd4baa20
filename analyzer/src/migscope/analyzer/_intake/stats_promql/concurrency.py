"""A few chunks of nodes in flight at once, their results handed out in order.

Why a module of its own: a chunk's queries wait on the server, not on this process, so a
small pool of worker threads (one :class:`~migscope.analyzer._intake.prometheus.
PrometheusClient`, which is thread-safe: one httpx connection pool, a deadline per calling
thread) keeps a Prometheus, a Thanos querier or a vmselect busy on several chunks while the
analyzer reads the answers of another. The pool is bounded (``workers``) so that a large fleet
neither floods the server with queries nor holds more than ``workers + 1`` chunks' results.
Results come out in chunk order, so a run's output does not depend on the concurrency.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

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
