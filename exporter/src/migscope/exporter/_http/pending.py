"""One connection in the intake: its non-blocking TLS handshake, reads and writes, step by step.

:class:`Pending` is what :mod:`.intake` keeps per connection until the connection's request
is whole: where it stands (:class:`Phase`), the bytes of the request so far with their
:class:`.framing.RequestFrame` and :class:`.reader.RequestClock`, and, when the intake answers
the request itself (:mod:`.fastpath`), the response still to send. Its
:meth:`Pending.handshake`, :meth:`Pending.read` and :meth:`Pending.write` never block; each
returns a :class:`Step` telling the intake what to do next (wait for the socket, hand the
connection to a worker, close it), so the intake's loop stays about scheduling, deadlines and
limits.
"""

from __future__ import annotations

import enum
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

from migscope.exporter._http.clientlog import CLOSED_EARLY, log_reason, peer
from migscope.exporter._http.framing import RequestFrame
from migscope.exporter._http.limits import ConnectionLimits
from migscope.exporter._http.reader import RequestClock

_log = logging.getLogger(__name__)

_CHUNK = 16 * 1024
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class Phase(enum.Enum):
    """Where a connection in the intake stands."""

    HANDSHAKE = "handshake"  # TLS, not finished
    IDLE = "idle"  # waiting for the first byte of a request
    REQUEST = "request"  # a request has started arriving
    QUEUED = "queued"  # complete, waiting for room in the workers' queue
    ANSWER = "answer"  # the intake is sending the response (see .fastpath)


class Step(enum.Enum):
    """What the intake does after a handshake or read step."""

    WANT_READ = "wait until readable"
    WANT_WRITE = "wait until writable"
    COMPLETE = "hand over to a worker"
    SENT = "response sent"  # by the intake: keep the connection or close it
    CLOSED = "close quietly"  # the client left, or a probe
    FAILED = "close and log"  # see Pending.failure


@dataclass(frozen=True)
class Answer:
    """A response the intake sends itself (see :mod:`.fastpath`): head, body, then close?"""

    head: bytes
    body: bytes
    close: bool


@dataclass(frozen=True)
class RequestRules:
    """The server's limits that shape each request's frame and clock."""

    limits: ConnectionLimits
    silence: float
    max_head: int
    max_body: int


class Pending:
    """One connection in the intake (see the module docstring)."""

    __slots__ = (
        "answer", "buf", "clock", "conn", "events", "failure", "fd", "frame", "heard", "out",
        "phase", "rules", "since", "sock",
    )  # fmt: skip

    def __init__(self, conn: Any, rules: RequestRules, now: float) -> None:
        """Take ``conn`` (its socket must already be non-blocking for the steps)."""
        self.conn = conn
        self.rules = rules
        self.sock: socket.socket = conn.socket
        self.fd = self.sock.fileno()
        tls = isinstance(self.sock, ssl.SSLSocket) and not conn.tls_ready
        self.phase = Phase.HANDSHAKE if tls else Phase.IDLE
        self.since = now  # start of the phase
        self.heard = False  # any byte during the handshake
        self.events = 0  # what the selector watches for (0: not registered)
        self.failure: BaseException | None = None
        self.buf = bytearray()
        self.frame: RequestFrame | None = None
        self.clock: RequestClock | None = None
        self.answer: Answer | None = None  # the response being sent (phase ANSWER)
        self.out: list[memoryview] = []  # what of it is still to send

    @property
    def idle(self) -> bool:
        """Nothing of a request under way: first to go when the limit is reached."""
        return self.phase is Phase.IDLE or (self.phase is Phase.HANDSHAKE and not self.heard)

    def deadline(self) -> float:
        """When this connection has waited too long in its phase (monotonic seconds)."""
        limits = self.rules.limits
        if self.phase is Phase.HANDSHAKE:
            return self.since + limits.handshake_timeout
        if self.phase in (Phase.IDLE, Phase.ANSWER):  # ANSWER: since the last progress
            return self.since + self.rules.silence
        assert self.clock is not None
        return self.clock.deadline()

    def start_request(self, now: float, received: int) -> RequestFrame:
        """The first bytes of a request (``received`` of them already in ``buf``) are here."""
        rules = self.rules
        self.phase, self.since = Phase.REQUEST, now
        self.frame = RequestFrame(max_head=rules.max_head, max_body=rules.max_body)
        self.clock = RequestClock(now, limits=rules.limits, silence=rules.silence)
        self.clock.add(received, now)
        return self.frame

    def handshake(self) -> Step:
        """Advance the TLS handshake; once done, read what came with its last flight."""
        self.heard = True
        sock = self.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            return Step.WANT_READ
        except ssl.SSLWantWriteError:
            return Step.WANT_WRITE
        except CLOSED_EARLY as exc:
            # A TCP probe (kubelet tcpSocket, a load balancer) connects and closes without
            # a word; that is routine, not worth a warning per probe period.
            _log.debug("%s closed before the TLS handshake: %s", peer(self.conn), log_reason(exc))
            return Step.CLOSED
        except (ssl.SSLError, OSError) as exc:
            self.failure = exc
            return Step.FAILED
        self.conn.tls_ready = True
        self.phase, self.since = Phase.IDLE, time.monotonic()
        return self.read()

    def read(self) -> Step:
        """Read what the client sent, until the socket is drained or the request is whole."""
        while True:
            try:
                data = self.sock.recv(_CHUNK)
            except (BlockingIOError, ssl.SSLWantReadError):
                return Step.WANT_READ
            except ssl.SSLWantWriteError:
                return Step.WANT_WRITE
            except OSError as exc:
                _log.debug("%s: connection lost: %s", peer(self.conn), log_reason(exc))
                return Step.CLOSED
            if not data:  # the client closed its side; cheroot answers what it can
                return Step.COMPLETE if self.buf else Step.CLOSED
            now = time.monotonic()
            frame = self.frame if self.phase is Phase.REQUEST else self.start_request(now, 0)
            assert frame is not None
            assert self.clock is not None
            self.buf += data
            self.clock.add(len(data), now)
            if frame.ready(self.buf):
                return Step.COMPLETE
            if frame.expect_continue and frame.body_pending(len(self.buf)):
                frame.expect_continue = False
                if not self.send(_CONTINUE):
                    return Step.CLOSED
                self.conn.continue_sent = True  # cheroot must not send a second one

    def start_answer(self, answer: Answer, now: float) -> None:
        """Send ``answer`` from here on, with :meth:`write`."""
        self.phase, self.since = Phase.ANSWER, now
        self.answer = answer
        self.out = [memoryview(part) for part in (answer.head, answer.body) if part]
        self.buf, self.frame, self.clock = bytearray(), None, None

    def write(self) -> Step:
        """Send what the socket takes of the response; SENT once it has all gone.

        Each send that makes progress restarts the silence limit, as a worker's socket
        timeout applies to each of its writes.
        """
        while self.out:
            try:
                sent = self.sock.sendmsg(self.out)
            except BlockingIOError:
                return Step.WANT_WRITE
            except OSError as exc:
                _log.debug("%s: connection lost: %s", peer(self.conn), log_reason(exc))
                return Step.CLOSED
            self.since = time.monotonic()
            while sent and self.out:
                first = self.out[0]
                if sent < len(first):
                    self.out[0] = first[sent:]
                    break
                sent -= len(first)
                self.out.pop(0)
        return Step.SENT

    def to_idle(self, now: float) -> None:
        """Wait for the connection's next request (after the intake answered one)."""
        self.phase, self.since = Phase.IDLE, now
        self.answer, self.out = None, []

    def discard_input(self) -> None:
        """Read and drop what the client sent since the last read (at most a few chunks).

        Before an answer and a close: closing a socket with unread input sends a reset,
        which can make the client lose the answer.
        """
        for _ in range(4):
            try:
                if not self.sock.recv(_CHUNK):
                    return
            except (*_WOULD_BLOCK, OSError):
                return

    def send(self, data: bytes) -> bool:
        """Send a short answer without blocking; False if it did not all go."""
        try:
            return self.sock.send(data) == len(data)
        except (*_WOULD_BLOCK, OSError):
            return False
