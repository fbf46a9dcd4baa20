"""Connections wait here, off the worker threads, until their whole request has arrived.

cheroot hands a connection to a worker as soon as it is readable, and the worker then
blocks reading the request under a per-read timeout: a client that sends one byte every few
seconds (or finishes a TLS handshake and says nothing, or drips a body) holds that worker
for as long as it likes, and eight such clients stop every scrape and probe. cheroot 11 has
no request deadline, no minimum rate and no way to read a request before committing a
worker (its only limits are the per-read ``timeout``, header and body sizes, and a
keep-alive count that refuses rather than sheds), so :class:`Intake` adds them:

* **One thread, one selector, non-blocking sockets.** New connections, idle keep-alive
  connections, TLS handshakes and requests still arriving all wait here (one
  :class:`.pending.Pending` each). A connection goes to a worker only when
  :class:`.framing.RequestFrame` says the worker can parse and answer it without waiting on
  the client; the bytes read so far are replayed to cheroot. A complete request waits up
  to 1 s for room in the workers' bounded queue, then is dropped.
* **Deadlines** (:class:`.limits.ConnectionLimits`): a TLS handshake must finish within
  ``handshake_timeout`` of the connection; a request must arrive within
  ``request_timeout`` of its first byte, at ``min_rate`` bytes/s after ``rate_grace``,
  with no silence longer than the socket timeout (past any: ``408`` and close); an idle
  connection is closed after the socket timeout, as cheroot does.
* **A connection limit that sheds.** Past ``max_connections``, a new connection closes the
  one idle the longest (else the oldest still sending), so a flood of idle sockets costs the
  attacker its oldest sockets instead of refusing new scrapes.
* **Made answers sent from here.** A complete plain ``GET /metrics`` whose answer is already
  made (:mod:`.fastpath`: the rendered body of the current snapshot, no auth) is answered by
  this thread with non-blocking sends, without a worker; a client that stops reading is
  dropped after the socket timeout without progress, and holds one of the
  ``max_connections`` meanwhile. The connection then waits here for its next request (or is
  closed, as cheroot would).

Everything here runs in the intake thread except :meth:`Intake.add`, which any thread may
call; the thread never blocks on a client, so one slow client cannot delay another.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from migscope.exporter._http.clientlog import Throttle, log_reason, peer
from migscope.exporter._http.framing import RequestFrame
from migscope.exporter._http.limits import ConnectionLimits
from migscope.exporter._http.pending import Answer, Pending, Phase, RequestRules, Step

_log = logging.getLogger(__name__)

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_SWEEP_EVERY = 0.1  # seconds between deadline checks
_QUEUE_WAIT = 1.0  # seconds a complete request may wait for room in the workers' queue
_QUEUE_POLL = 0.005  # seconds between tries while it waits
_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n"
    b"Content-Type: text/plain\r\nConnection: close\r\n\r\n"
)
_PROBLEMS = {  # what each log throttle counts
    "timeout": "requests timed out",
    "handshake": "TLS handshakes timed out",
    "failed": "failed TLS handshakes",
    "plain": "plain HTTP requests to the HTTPS port",
    "shed": "connections closed at the connection limit",
    "busy": "connections dropped with every worker busy",
    "stalled": "responses dropped with the client not reading",
    "error": "intake errors",
}


class Intake:
    """Holds connections until a whole request has arrived, then hands them to ``dispatch``.

    Args:
        dispatch: Queues a connection with a complete request for a worker, or returns
            False at once when the queue is full (the intake tries again for
            ``_QUEUE_WAIT`` seconds, then drops it); called in the intake thread.
        limits: Deadlines and the connection limit.
        idle_timeout: Seconds an idle connection is kept, and the longest silence within a
            request (the server's socket timeout).
        max_head: The server's request line plus headers limit, in bytes.
        max_body: The server's request body limit, in bytes.
        throttles: The server's other log throttles, flushed with the intake's own.
        answer: Returns the response to a complete request whose answer is already made
            (``CachedMetrics.answer``: the request's bytes and frame), or None to hand it
            to a worker; called in the intake thread, so it must never block. None: every
            request goes to a worker.
    """

    def __init__(
        self,
        dispatch: Callable[[Any], bool],
        *,
        limits: ConnectionLimits,
        idle_timeout: float,
        max_head: int,
        max_body: int,
        throttles: Iterable[Throttle] = (),
        answer: Callable[[bytearray, RequestFrame], Answer | None] | None = None,
    ) -> None:
        self._dispatch = dispatch
        self._answer = answer
        self._limits = limits
        self._idle_timeout = idle_timeout
        self._rules = RequestRules(limits, idle_timeout, max_head, max_body)
        self._held: collections.OrderedDict[int, Pending] = collections.OrderedDict()
        self._inbox: collections.deque[tuple[Any, bool]] = collections.deque()
        self._queued: collections.deque[Pending] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = False
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, _READ, None)
        self._thread = threading.Thread(target=self._run, name="migscope-http-intake")
        self._warn = {kind: Throttle(_log, text) for kind, text in _PROBLEMS.items()}
        self._throttles = (*self._warn.values(), *throttles)

    def start(self) -> None:
        """Start the intake thread."""
        self._thread.start()

    def add(self, conn: Any, *, keepalive: bool) -> None:
        """Take ``conn``: just accepted, or back from a worker after a keep-alive response.

        Safe from any thread; after :meth:`stop` the connection is closed at once.
        """
        with self._lock:
            if not self._stopping:
                self._inbox.append((conn, keepalive))
                conn = None
        if conn is not None:
            _close(conn)
            return
        self._wake()

    def stop(self, timeout: float = 5.0) -> None:
        """Close every connection held here and join the thread (idempotent)."""
        with self._lock:
            self._stopping = True
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout)
        elif self._thread.ident is None:  # never started: release what __init__ opened
            self._close_all()

    def _wake(self) -> None:
        # BlockingIOError: a wake-up is already pending; OSError: the intake is closed.
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    # -- the thread --------------------------------------------------------------------

    def _run(self) -> None:
        next_sweep = time.monotonic() + _SWEEP_EVERY
        try:
            while not self._stopping:
                try:
                    next_sweep = self._turn(next_sweep)
                except Exception as exc:  # keep serving: the intake is the only way in
                    self._warn["error"].warn("HTTP intake error: %s", log_reason(exc))
                    time.sleep(0.01)
        finally:
            self._close_all()

    def _turn(self, next_sweep: float) -> float:
        """One select, then queued requests, new connections and deadlines."""
        timeout = max(0.0, next_sweep - time.monotonic()) if self._held else None
        if self._queued:
            timeout = min(timeout or _QUEUE_POLL, _QUEUE_POLL)
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                self._drain_wake()
            else:
                self._guarded(self._on_ready, key.data)
        self._release_queued()
        self._admit()
        now = time.monotonic()
        if now < next_sweep:
            return next_sweep
        self._sweep(now)
        return now + _SWEEP_EVERY

    def _guarded(self, step: Callable[[Pending], None], pending: Pending) -> None:
        """Run one step for one connection; a bug costs that connection, not the intake."""
        try:
            step(pending)
        except Exception as exc:
            self._warn["error"].warn("closed %s after an intake error: %s", peer(pending.conn), exc)
            self._drop(pending)

    def _drain_wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass

    def _admit(self) -> None:
        while True:
            with self._lock:
                if not self._inbox:
                    return
                conn, keepalive = self._inbox.popleft()
            try:
                conn.socket.setblocking(False)
                pending = Pending(conn, self._rules, time.monotonic())
            except (OSError, ValueError):
                _close(conn)  # closed meanwhile
                continue
            while len(self._held) >= self._limits.max_connections:
                self._shed_one()
            self._held[pending.fd] = pending
            if keepalive:
                self._guarded(self._resume, pending)
            else:
                self._guarded(lambda p: self._watch(p, _READ), pending)

    def _resume(self, pending: Pending) -> None:
        """Take back a keep-alive connection, whose next request may be here already.

        A pipelining client may have sent it into the connection's buffer or the socket.
        """
        pending.buf = pending.conn.rfile.take_unread()
        if pending.buf:
            frame = pending.start_request(pending.since, len(pending.buf))
            if frame.ready(pending.buf):
                self._complete(pending)
                return
        self._follow(pending, pending.read())

    def _shed_one(self) -> None:
        """Close the connection idle the longest; if none is idle, the oldest busy one."""
        victim = next((p for p in self._held.values() if p.idle), None)
        if victim is None:
            victim = next(iter(self._held.values()))
        self._warn["shed"].warn(
            "connection limit (%d) reached: closed the connection from %s (%s for %.1f s)",
            self._limits.max_connections,
            peer(victim.conn),
            "idle" if victim.idle else victim.phase.value,
            time.monotonic() - victim.since,
        )
        self._drop(victim)

    def _on_ready(self, pending: Pending) -> None:
        if self._held.get(pending.fd) is not pending:
            return  # closed earlier in this turn
        self._held.move_to_end(pending.fd)  # most recently active last
        if pending.phase is Phase.ANSWER:
            step = pending.write()
        elif pending.phase is Phase.HANDSHAKE:
            step = pending.handshake()
        else:
            step = pending.read()
        self._follow(pending, step)

    def _follow(self, pending: Pending, step: Step) -> None:
        """Do what a handshake or read step asks for."""
        if step is Step.WANT_READ:
            self._watch(pending, _READ)
        elif step is Step.WANT_WRITE:
            self._watch(pending, _WRITE)
        elif step is Step.COMPLETE:
            self._complete(pending)
        elif step is Step.SENT:
            self._sent(pending)
        else:
            if step is Step.FAILED:
                self._log_failed_handshake(pending)
            self._drop(pending)

    def _log_failed_handshake(self, pending: Pending) -> None:
        exc, who = pending.failure, peer(pending.conn)
        if getattr(exc, "reason", "") == "HTTP_REQUEST":
            self._warn["plain"].warn("%s spoke plain HTTP to the HTTPS port", who)
        else:
            reason = log_reason(exc) if exc is not None else "unknown"
            self._warn["failed"].warn("TLS handshake with %s failed: %s", who, reason)

    def _complete(self, pending: Pending) -> None:
        """The request is whole: answer it here if its answer is made, else hand it over."""
        answer = self._made_answer(pending)
        if answer is None:
            self._hand_over(pending)
            return
        pending.start_answer(answer, time.monotonic())
        self._follow(pending, pending.write())

    def _made_answer(self, pending: Pending) -> Answer | None:
        if self._answer is None or pending.frame is None or isinstance(pending.sock, ssl.SSLSocket):
            return None
        try:
            return self._answer(pending.buf, pending.frame)
        except Exception as exc:  # a bug here costs the fast path, not the request
            self._warn["error"].warn("answering from the intake failed: %s", log_reason(exc))
            return None

    def _sent(self, pending: Pending) -> None:
        """A response went out from here: close, or wait for the next request."""
        if pending.answer is not None and pending.answer.close:
            self._drop(pending)
            return
        pending.to_idle(time.monotonic())
        self._watch(pending, _READ)  # a request already here makes it readable at once

    def _hand_over(self, pending: Pending) -> None:
        """The request is whole: replay it to cheroot and queue the connection for a worker."""
        self._unwatch(pending)
        pending.sock.settimeout(self._idle_timeout)  # blocking again, for the worker
        pending.conn.rfile.replay(pending.buf, pending.clock)
        pending.phase, pending.since = Phase.QUEUED, time.monotonic()
        self._queued.append(pending)
        self._release_queued()

    def _release_queued(self) -> None:
        """Queue waiting requests, oldest first, while the workers' queue has room."""
        while self._queued:
            pending = self._queued[0]
            if self._held.get(pending.fd) is not pending:
                self._queued.popleft()  # shed or expired while it waited
            elif self._dispatch(pending.conn):
                self._queued.popleft()
                del self._held[pending.fd]  # the worker's now
            else:
                return

    def _sweep(self, now: float) -> None:
        for pending in list(self._held.values()):
            if pending.phase is Phase.QUEUED:
                late = now >= pending.since + _QUEUE_WAIT
            else:
                late = now >= pending.deadline()
            if late:
                self._guarded(lambda p: self._expire(p, now), pending)
        for throttle in self._throttles:
            throttle.flush()

    def _expire(self, pending: Pending, now: float) -> None:
        who = peer(pending.conn)
        if pending.phase is Phase.REQUEST:
            assert pending.clock is not None
            pending.discard_input()
            pending.send(_TIMEOUT_ANSWER)
            self._warn["timeout"].warn(
                "answered 408 Request Timeout to %s (%s)", who, pending.clock.why_late(now)
            )
        elif pending.phase is Phase.QUEUED:
            self._warn["busy"].warn(
                "dropped a connection from %s: all workers busy and the queue is full", who
            )
        elif pending.phase is Phase.ANSWER:
            self._warn["stalled"].warn(
                "dropped the connection from %s: it read nothing of its response for %g s",
                who,
                self._idle_timeout,
            )
        elif pending.phase is Phase.HANDSHAKE and pending.heard:
            self._warn["handshake"].warn(
                "TLS handshake with %s timed out after %g s", who, self._limits.handshake_timeout
            )
        else:
            _log.debug("closed %s: idle for %.0f s", who, now - pending.since)
        self._drop(pending)

    # -- plumbing ------------------------------------------------------------------------

    def _watch(self, pending: Pending, events: int) -> None:
        if pending.events == events:
            return
        if pending.events:
            self._selector.modify(pending.sock, events, pending)
        else:
            self._selector.register(pending.sock, events, pending)
        pending.events = events

    def _unwatch(self, pending: Pending) -> None:
        if pending.events:
            self._selector.unregister(pending.sock)
            pending.events = 0

    def _drop(self, pending: Pending) -> None:
        if self._held.get(pending.fd) is pending:
            del self._held[pending.fd]
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._unwatch(pending)
        _close(pending.conn)

    def _close_all(self) -> None:
        with self._lock:
            self._stopping = True
            waiting = [conn for conn, _ in self._inbox]
            self._inbox.clear()
        for pending in list(self._held.values()):
            self._drop(pending)
        for conn in waiting:
            _close(conn)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


def _close(conn: Any) -> None:
    with contextlib.suppress(OSError):
        conn.close()
