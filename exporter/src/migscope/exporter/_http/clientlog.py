"""One log line per client problem, and not a flood of them when a client attacks.

Every problem with a client (a malformed request, a timeout, a failed handshake, a shed
connection) is one line naming the client's address, never a traceback. An attacker can
cause thousands of such problems a second, though, and a node agent that writes thousands of
lines a second is its own outage (disk, log shipping, CPU). :class:`Throttle` keeps one kind
of problem to one warning per interval; the rest go to debug level and are counted in the
next warning.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from migscope.core import one_line

CLOSED_EARLY = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError)
"""What a client that connects and closes (a ``tcpSocket`` probe) raises; not a warning."""


def peer(conn: Any) -> str:
    """``addr:port`` of a cheroot connection, for log lines."""
    addr = getattr(conn, "remote_addr", None) or "?"
    port = getattr(conn, "remote_port", None)
    return f"[{addr}]:{port}" if ":" in str(addr) else f"{addr}:{port}"


def log_reason(exc: BaseException) -> str:
    """``exc`` for a connection's log line: OpenSSL's short reason, else class and message.

    Not bare :func:`~migscope.core._errors.one_line`: a reset, a timeout and an SSL EOF often
    carry the same text or none, so the class is what tells them apart.
    """
    reason = getattr(exc, "reason", None)
    if isinstance(exc, ssl.SSLError) and reason:
        return str(reason)
    if not str(exc).strip():
        return type(exc).__name__
    return f"{type(exc).__name__}: {one_line(exc)}"


class Throttle:
    """At most one warning per ``every`` seconds for one kind of client problem.

    The first problem of a quiet period is logged at once, with its details; the ones after
    it within ``every`` seconds go to debug level, and the next warning (or :meth:`flush`)
    says how many there were.
    """

    def __init__(
        self,
        logger: logging.Logger,
        kind: str,
        *,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Throttle warnings about ``kind`` (plural words, e.g. "requests timed out")."""
        self._logger = logger
        self._kind = kind
        self._every = every
        self._clock = clock
        self._last = -float("inf")
        self._held_back = 0
        self._lock = threading.Lock()

    def warn(self, msg: str, *args: object) -> None:
        """Log ``msg % args`` as a warning, or at debug level if one was logged recently."""
        now = self._clock()
        with self._lock:
            quiet = now - self._last >= self._every
            if quiet:
                held_back, self._held_back, self._last = self._held_back, 0, now
            else:
                self._held_back += 1
        if not quiet:
            self._logger.debug(msg, *args)
        elif held_back:
            self._logger.warning(
                msg + " (%d more %s in the %g s before, logged at debug level)",
                *args,
                held_back,
                self._kind,
                self._every,
            )
        else:
            self._logger.warning(msg, *args)

    def flush(self) -> None:
        """Report problems held back for longer than ``every`` seconds (call periodically)."""
        now = self._clock()
        with self._lock:
            if not self._held_back or now - self._last < self._every:
                return
            held_back, self._held_back, self._last = self._held_back, 0, now
        self._logger.warning(
            "%d more %s in the last %g s (logged at debug level)",
            held_back,
            self._kind,
            self._every,
        )
