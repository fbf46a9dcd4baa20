"""One deadline for a whole request: connecting, sending, the headers, the body and the retries.

httpx's timeouts bound each socket operation, not the request. A server (or a proxy in front
of it) that sends one byte a second never trips a 60 s read timeout and holds ``migscope
analyze`` forever; a retry loop that restarts every clock multiplies the wait by the number of
attempts. A :class:`Deadline` is set when a request
starts and applies to everything the calling thread does for it.

How it is enforced: every connection the client opens goes through :class:`DeadlineBackend`,
an httpcore network backend that wraps the real one. Each connect, TLS handshake, read and
write of the thread's current request waits at most until the deadline (the smaller of its own
timeout and the time left), and fails at once when none is left. A trickled header or body
therefore ends at the deadline, and the socket is still owned by the thread that waits on
it: no watchdog thread, no socket closed under another thread's feet. httpx has no public
way to give its transport a network backend, so :func:`install` sets the one of each
connection pool the client built (its own transport and any proxy from the environment);
should httpx change its internals, :func:`install` says so and the body's deadline is still
checked between chunks by the reader.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import typing
from collections.abc import Callable, Iterable, Iterator

import httpcore
import httpx

# The package's logger, whichever module of it logs: one name to configure and filter on.
_log = logging.getLogger(__name__.rpartition(".")[0])


class Deadline:
    """The moment a request must be over by, and whether a wait was cut short by it.

    Args:
        seconds: The budget from now; ``None`` for no deadline.
        clock: Monotonic seconds (tests may pass their own).

    Attributes:
        seconds: The budget as given (for messages).
        hit: True once a wait was shortened to the deadline and then ran out.
    """

    def __init__(
        self, seconds: float | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self.hit = False
        self._clock = clock
        self._end = None if seconds is None else clock() + seconds

    def remaining(self) -> float | None:
        """Seconds left (0 or less once passed); ``None`` without a deadline."""
        return None if self._end is None else self._end - self._clock()

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        left = self.remaining()
        return left is not None and left <= 0

    def allows(self, seconds: float) -> bool:
        """Whether a wait of ``seconds`` ends before the deadline (a retry after it would not)."""
        left = self.remaining()
        return left is None or seconds < left

    def cap(self, timeout: float | None) -> float | None:
        """``timeout`` shortened to the time left (``None``: no limit of its own)."""
        left = self.remaining()
        if left is None:
            return timeout
        return max(0.0, left) if timeout is None else min(timeout, max(0.0, left))

    @contextlib.contextmanager
    def applied(self) -> Iterator[Deadline]:
        """Make this the deadline of the calling thread's socket operations, for the block."""
        previous = _current.deadline
        _current.deadline = self
        try:
            yield self
        finally:
            _current.deadline = previous


class _Current(threading.local):
    deadline: Deadline | None = None


_current = _Current()


_Result = typing.TypeVar("_Result")


def _bounded(
    timeout: float | None,
    error: type[httpcore.TimeoutException],
    operation: Callable[[float | None], _Result],
) -> _Result:
    """Run ``operation`` with ``timeout`` capped to the thread's deadline, if it has one."""
    deadline = _current.deadline
    left = None if deadline is None else deadline.remaining()
    if deadline is None or left is None:
        return operation(timeout)
    if left <= 0:
        deadline.hit = True
        raise error(f"the request's deadline of {deadline.seconds:g} s has passed")
    capped = timeout is None or left < timeout
    try:
        return operation(left if capped else timeout)
    except httpcore.TimeoutException:
        if capped:
            deadline.hit = True
        raise


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every wait ends by the current thread's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _bounded(timeout, httpcore.ReadTimeout, lambda t: self._inner.read(max_bytes, t))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _bounded(timeout, httpcore.WriteTimeout, lambda t: self._inner.write(buffer, t))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: typing.Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            _bounded(
                timeout,
                httpcore.ConnectTimeout,
                lambda t: self._inner.start_tls(ssl_context, server_hostname, t),
            )
        )

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """An httpcore network backend whose connections keep the thread's deadline.

    Args:
        inner: The backend that really connects (httpcore's own).
    """

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self.inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        """Connect within the deadline; see :meth:`httpcore.NetworkBackend.connect_tcp`."""
        stream = _bounded(
            timeout,
            httpcore.ConnectTimeout,
            lambda t: self.inner.connect_tcp(host, port, t, local_address, socket_options),
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        """Connect within the deadline; see :meth:`httpcore.NetworkBackend.connect_unix_socket`."""
        stream = _bounded(
            timeout,
            httpcore.ConnectTimeout,
            lambda t: self.inner.connect_unix_socket(path, t, socket_options),
        )
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        """Sleep, as the inner backend does."""
        self.inner.sleep(seconds)


def deadline_seconds(timeout: httpx.Timeout) -> float | None:
    """The budget of one whole request under ``timeout``: the longest of its limits.

    A float timeout ``T`` (connect ``min(T, 5)``, the rest ``T``) gives ``T``. No deadline when
    reads are unbounded (``read=None``): the caller chose to wait as long as it takes.
    """
    if timeout.read is None:
        return None
    limits = (timeout.connect, timeout.read, timeout.write, timeout.pool)
    return max(limit for limit in limits if limit is not None)


def install(client: httpx.Client) -> bool:
    """Give every connection pool of ``client`` a :class:`DeadlineBackend`.

    Transports that are not httpx's own (``httpx.MockTransport`` in tests) are left alone:
    they open no sockets.

    Returns:
        False when an httpx transport did not have the expected pool (httpx changed); a
        warning is logged, and the deadline then holds between body chunks only.
    """
    transports: list[httpx.BaseTransport | None] = [
        getattr(client, "_transport", None),
        *getattr(client, "_mounts", {}).values(),
    ]
    complete = True
    for transport in transports:
        if not isinstance(transport, httpx.HTTPTransport):
            continue
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if not isinstance(backend, httpcore.NetworkBackend):
            complete = False
            continue
        if not isinstance(backend, DeadlineBackend):
            pool._network_backend = DeadlineBackend(backend)  # type: ignore[union-attr]
    if not complete:
        _log.warning(
            "httpx %s has no connection pool where migscope expects it: a request's deadline "
            "is checked between body chunks only, and a server that trickles its headers can "
            "hold a request until the read timeout of each byte",
            httpx.__version__,
        )
    return complete
