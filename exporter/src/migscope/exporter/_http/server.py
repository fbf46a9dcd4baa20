"""The exporter's HTTP server: cheroot, hardened for a node agent that must not wedge.

cheroot gives a bounded pool of worker threads, TLS through Python's :mod:`ssl` and a
graceful stop, without an async framework. Its defaults do not suit an exporter that any
pod on the node network can reach, so :class:`ExporterServer` changes them:

* **Workers only see whole requests.** cheroot hands a connection to a worker as soon as it
  is readable and the worker blocks reading it; eight clients that drip bytes, or finish a
  TLS handshake and say nothing, would stall every scrape. Here every connection waits in
  :class:`.intake.Intake` (one thread, non-blocking sockets) through its TLS handshake and
  until its request has fully arrived, under deadlines and a minimum rate
  (:class:`.limits.ConnectionLimits`); only then does a worker get it.
* **The TLS handshake runs in the intake, not in the accept loop.** cheroot performs it in
  the thread that accepts connections, where one silent client stops all new connections.
* **Made answers skip the workers.** A plain ``GET /metrics`` whose answer the
  application has already made (text body of the current snapshot, rendered and gzipped
  once) is sent by the intake itself, byte for byte what a worker would send
  (:mod:`.fastpath`); only without basic auth, and only over plain HTTP.
* **Limits.** Request headers are capped (16 KiB by default; cheroot's default is
  unlimited), the queue of complete requests waiting for a worker is bounded, the
  connections waiting for a request are bounded by shedding the one idle the longest, and
  every problem with a client (bad request line, huge header, timeout, failed handshake) is
  one log line, never a traceback (throttled when a client floods, see :mod:`.clientlog`).

The web-config file, when given, supplies the TLS context, the basic-auth users (see
:mod:`.auth`) and the extra response headers; :func:`protect` applies the last two to any
WSGI app.
"""

from __future__ import annotations

import logging
import math
import queue
import signal
import socket
import sys
import threading
from collections.abc import Collection, Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

import bcrypt
from cheroot import wsgi

from migscope.exporter._http.app import ExporterApp, HeadersMiddleware
from migscope.exporter._http.auth import (
    DEFAULT_PUBLIC_PATHS,
    BasicAuthChecker,
    BasicAuthMiddleware,
    Verify,
)
from migscope.exporter._http.clientlog import Throttle, log_reason
from migscope.exporter._http.connection import Connection, TLSAdapter
from migscope.exporter._http.fastpath import CachedMetrics
from migscope.exporter._http.intake import Intake
from migscope.exporter._http.limits import DEFAULT_LIMITS, ConnectionLimits
from migscope.exporter._http.webconfig import WebConfig

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

_log = logging.getLogger(__name__)

_MAX_BODY_BYTES = 64 * 1024


def parse_listen_address(listen: str) -> tuple[str, int]:
    """Split a Go-style listen address into ``(host, port)``; ``""`` means every interface.

    Accepted: ``:9400``, ``0.0.0.0:9400``, ``[::]:9400``, ``[::1]:9400``, ``localhost:0``
    (port 0 picks a free port). The format is node_exporter's ``--web.listen-address``,
    so the same Helm values work for both.

    Raises:
        ValueError: With the address and what is wrong with it.
    """
    host, colon, port_text = listen.strip().rpartition(":")
    if not colon:
        raise ValueError(f"listen address {listen!r}: missing port (write e.g. :9400)")
    if host.startswith("[") or host.endswith("]"):
        if not (host.startswith("[") and host.endswith("]")) or len(host) < 3:
            raise ValueError(f"listen address {listen!r}: unbalanced brackets")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(
            f"listen address {listen!r}: put an IPv6 address in brackets, e.g. [::1]:9400"
        )
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"listen address {listen!r}: port must be a number in 0..65535")
    return host, int(port_text)


def _any_host() -> str:
    """``::`` (dual-stack, cheroot clears IPV6_V6ONLY) where IPv6 works, else ``0.0.0.0``.

    Some clusters disable IPv6 in pod network namespaces; binding ``::`` there fails, and
    an exporter that listens on IPv4 only is still better than one that does not start.
    """
    if not socket.has_ipv6:
        return "0.0.0.0"
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::", 0))
    except OSError:
        return "0.0.0.0"
    return "::"


def protect(
    app: WSGIApplication,
    *,
    web_config: WebConfig | None,
    public_paths: Collection[str] = DEFAULT_PUBLIC_PATHS,
    verify: Verify = bcrypt.checkpw,
) -> WSGIApplication:
    """Wrap ``app`` with the web-config's basic auth and response headers.

    Headers go outermost, so 401 responses carry them too.

    Args:
        app: The exporter application.
        web_config: The parsed file; None leaves ``app`` as it is.
        public_paths: Paths served without credentials (default: ``/healthz``).
        verify: The bcrypt comparison, injectable for tests.
    """
    if web_config is None:
        return app
    wrapped = app
    if web_config.users:
        checker = BasicAuthChecker(web_config.users, verify=verify)
        wrapped = BasicAuthMiddleware(wrapped, checker=checker, public_paths=public_paths)
    if web_config.headers:
        wrapped = HeadersMiddleware(wrapped, headers=web_config.headers)
    return wrapped


class _Server(wsgi.Server):
    """cheroot's WSGI server whose connections go through the intake; one-line error logs."""

    ConnectionClass = Connection
    intake_settings: dict[str, Any]
    """Keyword arguments for the :class:`.intake.Intake` built in :meth:`prepare`."""
    answer_log: Throttle | None = None
    """Where workers log the errors they answer (see :class:`.connection.Request`)."""
    _intake: Intake | None = None

    @staticmethod
    def bind_socket(socket_: socket.socket, bind_addr: Any) -> socket.socket:
        # cheroot leaves the socket open when bind() fails (port in use), which leaks a
        # file descriptor per attempt; close it before the error propagates.
        try:
            bound: socket.socket = wsgi.Server.bind_socket(socket_, bind_addr)  # type: ignore[no-untyped-call]
        except OSError:
            socket_.close()
            raise
        return bound

    def prepare(self) -> None:
        super().prepare()
        self.answer_log = Throttle(_log, "error answers")
        self._intake = Intake(self._dispatch, throttles=(self.answer_log,), **self.intake_settings)
        self._intake.start()

    def process_conn(self, conn: Any) -> None:
        # Called by cheroot's accept loop for each new connection (its selector holds no
        # other connection: put_conn below sends idle keep-alive connections to the intake).
        self._to_intake(conn, keepalive=False)

    def put_conn(self, conn: Any) -> None:
        if self.ready:
            self._to_intake(conn, keepalive=True)
        else:
            conn.close()

    def _to_intake(self, conn: Any, *, keepalive: bool) -> None:
        if self._intake is None:
            conn.close()
        else:
            self._intake.add(conn, keepalive=keepalive)

    def _dispatch(self, conn: Any) -> bool:
        """Queue a connection whose request has arrived; False at once if the queue is full."""
        try:
            self.requests.put(conn)  # accepted_queue_timeout=0: never blocks the intake
        except queue.Full:
            return False
        return True

    def stop(self) -> None:
        # The intake first: it closes the connections it holds and closes any added later,
        # so nothing reaches the request queue after cheroot has told the workers to stop.
        if self._intake is not None:
            self._intake.stop()
        super().stop()

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        exc = sys.exc_info()[1] if traceback else None
        text = " ".join(str(msg).split())
        if exc is not None:
            text = f"{text}: {log_reason(exc)}"
        _log.log(level, "%s", text)


class ExporterServer:
    """Serves a WSGI app on one address, over HTTP or HTTPS, until stopped.

    ``start()`` binds (so a port in use fails at once, loudly) and serves from a background
    thread; ``stop()`` closes the listening socket and idle connections, lets in-flight
    requests finish, and joins every thread it started. ``serve_forever_until_signal()`` is
    the entry point for the ``migscope exporter`` command.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        listen: str = ":9400",
        web_config: WebConfig | None = None,
        threads: int = 8,
        public_paths: Collection[str] = DEFAULT_PUBLIC_PATHS,
        socket_timeout: int = 5,
        shutdown_timeout: float = 10.0,
        max_header_bytes: int = 16 * 1024,
        queue_size: int | None = None,
        backlog: int = 128,
        limits: ConnectionLimits = DEFAULT_LIMITS,
        fast_path: bool = True,
    ) -> None:
        """Configure the server; nothing is bound until :meth:`start`.

        Args:
            app: The exporter's WSGI application (usually :class:`.ExporterApp`).
            listen: ``host:port`` as node_exporter writes it (``:9400``, ``[::]:9400``,
                ``localhost:0``).
            web_config: TLS, basic auth and headers; None serves plain HTTP to anyone,
                which is the zero-configuration default.
            threads: Worker threads, i.e. requests handled at once; keep it above the
                app's scrape limit so ``/healthz`` answers while scrapes run.
            public_paths: Paths exempt from basic auth (not from TLS).
            socket_timeout: Seconds a client may stay silent mid-request, how long an
                idle connection is kept, and the limit on each write of a response.
            shutdown_timeout: Default grace period for in-flight requests on stop.
            max_header_bytes: Largest request line plus headers; larger gets 413/414.
            queue_size: Complete requests waiting for a worker; default ``8 * threads``.
            backlog: The kernel's queue of not yet accepted connections.
            limits: Deadlines, minimum rate and connection limit for connections whose
                request has not fully arrived (see :class:`.limits.ConnectionLimits`).
            fast_path: Let the intake thread answer plain ``GET /metrics`` requests whose
                answer ``app`` (an :class:`.ExporterApp`) has already made (see
                :mod:`.fastpath`); never with basic auth. False: every request goes to a
                worker (tests compare the two).
        """
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._host, self._requested_port = parse_listen_address(listen)
        self._listen = listen
        self._web_config = web_config
        self._ssl_context = web_config.ssl_context() if web_config is not None else None
        self._app = protect(app, web_config=web_config, public_paths=public_paths)
        self._made = (
            app
            if fast_path
            and isinstance(app, ExporterApp)
            and not (web_config is not None and web_config.users)
            else None
        )
        self._threads = threads
        self._socket_timeout = socket_timeout
        self._shutdown_timeout = shutdown_timeout
        self._max_header_bytes = max_header_bytes
        self._queue_size = queue_size if queue_size is not None else 8 * threads
        self._backlog = backlog
        self._limits = limits
        self._server: _Server | None = None
        self.cached_metrics: CachedMetrics | None = None
        """What answers made ``/metrics`` answers in the intake (None: no fast path)."""
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] | None = None
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        """The bound port (the real one when ``listen`` asked for port 0)."""
        return self.address[1]

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``; only valid between start and stop."""
        if self._address is None:
            raise RuntimeError("the server is not started")
        return self._address

    @property
    def scheme(self) -> str:
        """``https`` when the web-config enables TLS, else ``http``."""
        return "https" if self._ssl_context is not None else "http"

    @property
    def running(self) -> bool:
        """True between a successful :meth:`start` and :meth:`stop`."""
        return self._server is not None

    def start(self) -> None:
        """Bind and start serving in a background thread.

        Raises:
            OSError: The address cannot be bound (in use, not local, permission).
            RuntimeError: Already started.
        """
        with self._lock:
            if self._server is not None:
                raise RuntimeError("the server is already started")
            host = self._host or _any_host()
            server = _Server(
                (host, self._requested_port),
                self._app,
                numthreads=self._threads,
                max=self._threads,
                server_name="migscope",
                request_queue_size=self._backlog,
                timeout=self._socket_timeout,
                shutdown_timeout=math.ceil(self._shutdown_timeout),
                accepted_queue_size=self._queue_size,
                accepted_queue_timeout=0,  # the intake must never wait for the queue
            )
            server.software = "migscope"
            server.max_request_header_size = self._max_header_bytes
            server.max_request_body_size = _MAX_BODY_BYTES
            server.intake_settings = {
                "limits": self._limits,
                "idle_timeout": float(self._socket_timeout),
                "max_head": self._max_header_bytes,
                "max_body": _MAX_BODY_BYTES,
            }
            if self._made is not None:
                server.intake_settings["answer"] = self._cached_metrics(server).answer
            if self._ssl_context is not None:
                server.ssl_adapter = TLSAdapter(self._ssl_context)
            try:
                server.prepare()
            except OSError as exc:
                raise OSError(exc.errno, f"cannot listen on {self._listen}: {exc}") from exc
            bound = server.socket.getsockname()
            self._address = (str(bound[0]), int(bound[1]))
            thread = threading.Thread(target=self._serve, args=(server,), name="migscope-http")
            thread.start()
            self._server, self._thread = server, thread
        _log.info(
            "serving %s on %s (port %d, %d threads, TLS %s, basic auth %s)",
            self.scheme,
            self._listen,
            self.port,
            self._threads,
            "on" if self._ssl_context is not None else "off",
            "on" if self._web_config is not None and self._web_config.users else "off",
        )

    def _cached_metrics(self, server: _Server) -> CachedMetrics:
        """The intake's answerer for made ``/metrics`` answers, with cheroot's settings."""
        assert self._made is not None
        extra = self._web_config.headers if self._web_config is not None else None
        self.cached_metrics = CachedMetrics(
            self._made,
            headers=HeadersMiddleware(self._made, headers=extra) if extra else None,
            server_name=server.server_name,
            protocol=server.protocol,
            keepalive_timeout=server.timeout,
            can_keep_alive=lambda: bool(server.can_add_keepalive_connection),
        )
        return self.cached_metrics

    @staticmethod
    def _serve(server: _Server) -> None:
        try:
            server.serve()
        except Exception as exc:
            _log.error("HTTP server stopped: %s", log_reason(exc))

    def stop(self, timeout: float | None = None) -> None:
        """Stop accepting, let in-flight requests finish, and join the server's threads.

        Idle keep-alive connections are closed at once; a request still running after
        ``timeout`` seconds has its socket closed. Safe to call twice.

        Args:
            timeout: Grace period for in-flight requests; default ``shutdown_timeout``.
        """
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None or thread is None:
            return
        grace = self._shutdown_timeout if timeout is None else timeout
        server.shutdown_timeout = max(1, math.ceil(grace))
        server.stop()
        thread.join(grace + 5)
        self._address = None
        _log.info("stopped serving on %s", self._listen)

    def serve_forever_until_signal(
        self,
        *,
        signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
        grace: float | None = None,
    ) -> signal.Signals:
        """Serve until SIGTERM or SIGINT, then stop gracefully; returns the signal.

        Kubernetes sends SIGTERM and waits ``terminationGracePeriodSeconds`` (30 s by
        default) before SIGKILL, so the default grace of ``shutdown_timeout`` (10 s) fits.
        Must run in the main thread (Python delivers signals only there). The previous
        handlers are restored before returning.

        Args:
            signals: Signals that stop the server.
            grace: Grace period for in-flight requests; default ``shutdown_timeout``.

        Raises:
            RuntimeError: Called off the main thread, or the server thread died on its own.
        """
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                "serve_forever_until_signal must run in the main thread "
                "(Python delivers signals only there)"
            )
        stop = threading.Event()
        received: list[signal.Signals] = []

        def on_signal(signum: int, frame: FrameType | None) -> None:
            received.append(signal.Signals(signum))
            stop.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in signals}
        try:
            if not self.running:
                self.start()
            while not stop.wait(timeout=1.0):
                thread = self._thread
                if thread is None or not thread.is_alive():
                    raise RuntimeError("the HTTP server stopped unexpectedly")
            _log.info("received %s; stopping gracefully", received[0].name)
            self.stop(grace)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self.running and not received:
                self.stop(0)
        return received[0]

    def __enter__(self) -> ExporterServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
