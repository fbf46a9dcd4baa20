"""A request's clock, and the connection's read stream that replays what the intake read.

:mod:`.intake` reads each request off the worker threads and then hands the connection to
a worker, which parses the request with cheroot as usual. Two things make that seamless:

* :class:`RequestReader` is the connection's ``rfile``. Bytes the intake already read are
  put back in front of the socket (:meth:`RequestReader.replay`), so cheroot parses them as
  if it had read them itself; between requests :meth:`RequestReader.take_unread` gives the
  intake whatever a pipelining client sent beyond the last request.
* :class:`RequestClock` is the deadline of one request (:class:`.limits.ConnectionLimits`):
  the intake drops a request that misses it, and the worker's reads from the socket, if it
  has to read more than the intake gave it, are bounded by the same deadline.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from cheroot.makefile import StreamReader

from migscope.exporter._http.limits import ConnectionLimits


class RequestClock:
    """When one request started arriving and how fast it has come since.

    The deadline is the earliest of: ``request_timeout`` after the first byte; the point
    where the average rate falls below ``min_rate`` (each byte buys ``1 / min_rate`` s
    beyond ``rate_grace``); and ``silence`` seconds after the last byte.
    """

    __slots__ = ("last", "limits", "received", "silence", "started")

    def __init__(self, now: float, *, limits: ConnectionLimits, silence: float) -> None:
        """Start the clock at the request's first byte, ``now`` (monotonic seconds)."""
        self.started = self.last = now
        self.received = 0
        self.limits = limits
        self.silence = silence

    def add(self, count: int, now: float) -> None:
        """Record ``count`` more bytes received at ``now``."""
        self.received += count
        self.last = now

    def deadline(self) -> float:
        """The monotonic time at which this request is too late."""
        limits = self.limits
        deadline = min(self.started + limits.request_timeout, self.last + self.silence)
        if limits.min_rate > 0:
            earned = max(limits.rate_grace, self.received / limits.min_rate)
            deadline = min(deadline, self.started + earned)
        return deadline

    def why_late(self, now: float) -> str:
        """Which limit the request missed, for the log line of its 408."""
        limits = self.limits
        if now >= self.started + limits.request_timeout:
            return f"request not complete within {limits.request_timeout:g} s"
        if now >= self.last + self.silence:
            return f"client silent for {self.silence:g} s mid-request"
        rate = self.received / max(now - self.started, 1e-9)
        return (
            f"request arriving at {rate:.0f} bytes/s, below {limits.min_rate:g} bytes/s "
            f"({self.received} bytes in {now - self.started:.1f} s)"
        )


class _ReplayingSocketIO(socket.SocketIO):
    """The socket as a raw stream, with bytes to return before reading the socket."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, "rb")
        self.pending = bytearray()
        self.clock: RequestClock | None = None
        self._socket = sock

    def readinto(self, b: Any) -> int | None:
        if self.pending:
            count = min(len(b), len(self.pending))
            b[:count] = self.pending[:count]
            del self.pending[:count]
            return count
        clock = self.clock
        if clock is None:
            return super().readinto(b)
        # The worker needs more than the intake gave it (a chunked body the application
        # reads, or the end of a request that was answered early): same deadline.
        remaining = clock.deadline() - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")  # cheroot answers 408 to this text
        previous = self._socket.gettimeout()
        self._socket.settimeout(min(remaining, clock.silence))
        try:
            n: int | None = super().readinto(b)
        finally:
            self._socket.settimeout(previous)
        if n:
            clock.add(n, time.monotonic())
        return n


class RequestReader(StreamReader):
    """A connection's ``rfile``: cheroot's buffered reader over :class:`_ReplayingSocketIO`."""

    def __init__(self, sock: socket.socket, bufsize: int) -> None:
        """Read from ``sock`` through a buffer of ``bufsize`` bytes."""
        self._raw = _ReplayingSocketIO(sock)
        # Skip StreamReader.__init__, which would wrap the socket in a plain SocketIO.
        super(StreamReader, self).__init__(self._raw, bufsize)
        self.bytes_read = 0

    def take_unread(self) -> bytearray:
        """Every byte received and not yet consumed (pipelined requests), removed from here."""
        unread = bytearray()
        while self.has_data():  # type: ignore[no-untyped-call]
            unread += self.read1(1 << 16)  # only what is buffered: has_data() said so
        unread += self._raw.pending
        self._raw.pending.clear()
        return unread

    def replay(self, data: bytearray, clock: RequestClock | None) -> None:
        """Return ``data`` before any socket read; socket reads then obey ``clock``.

        Only call when nothing is buffered (after :meth:`take_unread`, or on a new
        connection).
        """
        self._raw.pending = data
        self._raw.clock = clock
