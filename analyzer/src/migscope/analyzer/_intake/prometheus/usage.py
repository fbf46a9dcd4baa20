"""Running totals over one client's calls, and the server warnings it has seen, thread-safely.

Why a module of its own: the request loop counts requests, retries and bytes, the public
calls count results and wall time, and chunked queries add their merging time; all of them
update one :class:`ClientUsage` under one lock, which lives here.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(slots=True)
class ClientUsage:
    """Running totals over every call of one client, for benchmarks and progress reports.

    Attributes:
        calls: Results returned (each chunk of a chunked range query counts as one).
        requests: HTTP requests sent, retries included.
        retries: Requests that were repeats after a retryable failure.
        wall_seconds: Client-side wall time of all calls.
        server_eval_seconds: Sum of ``evalTotalTime`` over the requests that reported it.
        requests_with_stats: How many requests reported ``evalTotalTime``.
        bytes_received: Response body bytes.
    """

    calls: int = 0
    requests: int = 0
    retries: int = 0
    wall_seconds: float = 0.0
    server_eval_seconds: float = 0.0
    requests_with_stats: int = 0
    bytes_received: int = 0


class UsageTally:
    """One client's :class:`ClientUsage` and distinct warnings, behind one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage = ClientUsage()
        self._seen_warnings: dict[str, None] = {}

    def add(
        self,
        *,
        calls: int = 0,
        requests: int = 0,
        retries: int = 0,
        wall_seconds: float = 0.0,
        server_eval_seconds: float | None = None,
        bytes_received: int = 0,
    ) -> None:
        """Add to the totals.

        Args:
            calls: Results returned.
            requests: HTTP requests sent.
            retries: Requests that repeated a failed one.
            wall_seconds: Client-side wall time.
            server_eval_seconds: The server's ``evalTotalTime`` of one request; ``None``
                when it reported none (then :attr:`ClientUsage.requests_with_stats` stays).
            bytes_received: Response body bytes.
        """
        with self._lock:
            usage = self._usage
            usage.calls += calls
            usage.requests += requests
            usage.retries += retries
            usage.wall_seconds += wall_seconds
            usage.bytes_received += bytes_received
            if server_eval_seconds is not None:
                usage.server_eval_seconds += server_eval_seconds
                usage.requests_with_stats += 1

    def snapshot(self) -> ClientUsage:
        """A copy of the totals so far."""
        with self._lock:
            return dataclasses.replace(self._usage)

    def new_warnings(self, warnings: Iterable[str]) -> list[str]:
        """Record ``warnings`` and return those not seen before, in order (to log once)."""
        with self._lock:
            fresh = [w for w in dict.fromkeys(warnings) if w not in self._seen_warnings]
            self._seen_warnings.update(dict.fromkeys(fresh))
        return fresh

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every distinct warning recorded so far, in order."""
        with self._lock:
            return tuple(self._seen_warnings)
