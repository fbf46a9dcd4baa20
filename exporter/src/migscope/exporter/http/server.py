"""The exporter's HTTP server: cheroot, hardened for a node agent that must not wedge.

cheroot gives a bounded pool of worker threads, TLS through Python's :mod:`ssl` and a
graceful stop, without an async framework. Three of its defaults do not suit an exporter
that any pod on the node network can reach, so :class:`ExporterServer` changes them:

* **Idle connections do not hold workers.** cheroot hands a new connection to a worker
  at once, and the worker blocks reading it; eight clients that connect and send nothing
  would stall every scrape until the socket timeout. Here a new connection first waits in
  cheroot's selector (as idle keep-alive connections do) and reaches a worker only once it
  has sent something; if it never does, the selector closes it after ``socket_timeout``.
* **The TLS handshake runs in a worker, not in the accept loop.** cheroot performs it in
  the thread that accepts connections, so one client that opens a TCP connection to the
  TLS port and stays silent stops all new connections for the socket timeout. Here the
  socket is wrapped without handshaking, and the worker that reads the first request
  performs the handshake under the same timeout.
* **Limits.** Request headers are capped (16 KiB by default; cheroot's default is
  unlimited), the accepted-connection queue is bounded, and every problem with a client
  (bad request line, huge header, timeout, failed handshake) is one log line, never a
  traceback.

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
import ssl
import sys
import threading
from collections.abc import Collection, Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

import bcrypt
from cheroot import wsgi
from cheroot.makefile import StreamReader, StreamWriter
from cheroot.server import HTTPConnection, HTTPRequest
from cheroot.ssl import Adapter

from migscope.core.errors import one_line
from migscope.exporter.http.app import HeadersMiddleware
from migscope.exporter.http.auth import (
    DEFAULT_PUBLIC_PATHS,
    BasicAuthChecker,
    BasicAuthMiddleware,
    Verify,
)
from migscope.exporter.http.webconfig import WebConfig

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

__all__ = [
    "ExporterServer",
    "parse_listen_address",
    "protect",
]

_log = logging.getLogger(__name__)


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


def _peer(conn: Any) -> str:
    """``addr:port`` of a cheroot connection, for log lines."""
    addr = getattr(conn, "remote_addr", None) or "?"
    port = getattr(conn, "remote_port", None)
    return f"[{addr}]:{port}" if ":" in str(addr) else f"{addr}:{port}"


def _log_reason(exc: BaseException) -> str:
    """``exc`` for a connection's log line: OpenSSL's short reason, else class and message.

    Not bare :func:`~migscope.core.errors.one_line`: a reset, a timeout and an SSL EOF often
    carry the same text or none, so the class is what tells them apart.
    """
    reason = getattr(exc, "reason", None)
    if isinstance(exc, ssl.SSLError) and reason:
        return str(reason)
    if not str(exc).strip():
        return type(exc).__name__
    return f"{type(exc).__name__}: {one_line(exc)}"


_CLOSED_EARLY = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError)


class _Request(HTTPRequest):
    """cheroot's request, logging each error it answers (400, 408, 413, 414) in one line."""

    def simple_response(self, status: Any, msg: str = "") -> None:
        code = str(status)[:3]
        if code[:1] in ("4", "5"):
            detail = f" ({' '.join(str(msg).split())[:200]})" if msg else ""
            _log.warning("answered %s to %s%s", status, _peer(self.conn), detail)
        super().simple_response(status, msg)


class _Connection(HTTPConnection):
    """A cheroot connection that completes a pending TLS handshake in the worker thread."""

    RequestHandlerClass = _Request
    waited_in_selector = False
    _tls_ready = False

    def communicate(self) -> bool:
        sock = self.socket
        if isinstance(sock, ssl.SSLSocket) and not self._tls_ready:
            try:
                sock.do_handshake()
            except _CLOSED_EARLY as exc:
                # A TCP probe (kubelet tcpSocket, a load balancer) connects and closes
                # without a word; that is routine, not worth a warning per probe period.
                _log.debug("%s closed before the TLS handshake: %s", _peer(self), _log_reason(exc))
                return False
            except (ssl.SSLError, OSError) as exc:
                if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", "") == "HTTP_REQUEST":
                    _log.warning("%s spoke plain HTTP to the HTTPS port", _peer(self))
                else:
                    _log.warning("TLS handshake with %s failed: %s", _peer(self), _log_reason(exc))
                return False
            self._tls_ready = True
        return bool(super().communicate())  # type: ignore[no-untyped-call]


class _TLSAdapter(Adapter):
    """Wraps accepted sockets for TLS without handshaking (see the module docstring).

    It carries a ready :class:`ssl.SSLContext` built from the web-config; cheroot's
    builtin adapter would build its own from file names and cannot set client
    verification or TLS versions.
    """

    def __init__(self, context: ssl.SSLContext) -> None:
        # Adapter.__init__ only stores file names this adapter does not use.
        self.certificate = self.private_key = self.certificate_chain = None
        self.ciphers = None
        self.private_key_password = None
        self.context = context

    def bind(self, sock: socket.socket) -> socket.socket:
        return sock

    def wrap(self, sock: socket.socket) -> tuple[ssl.SSLSocket, dict[str, str]]:
        wrapped = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, self.get_environ()

    def get_environ(self) -> dict[str, str]:
        return {"wsgi.url_scheme": "https", "HTTPS": "on"}

    def makefile(self, sock: socket.socket, mode: str = "r", bufsize: int = -1) -> Any:
        if bufsize < 0:
            bufsize = 8192
        return (
            StreamReader(sock, mode, bufsize) if "r" in mode else StreamWriter(sock, mode, bufsize)
        )


class _Server(wsgi.Server):
    """cheroot's WSGI server with idle-connection parking and one-line error logs."""

    ConnectionClass = _Connection

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

    def process_conn(self, conn: Any) -> None:
        if not getattr(conn, "waited_in_selector", True) and self.can_add_keepalive_connection:
            # A brand-new connection: park it in the selector until it sends something.
            conn.waited_in_selector = True
            self.put_conn(conn)
            return
        conn.waited_in_selector = True
        try:
            self.requests.put(conn)
        except queue.Full:
            _log.warning(
                "dropped a connection from %s: all workers busy and the queue is full",
                _peer(conn),
            )
            conn.close()

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        exc = sys.exc_info()[1] if traceback else None
        text = " ".join(str(msg).split())
        if exc is not None:
            text = f"{text}: {_log_reason(exc)}"
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
            socket_timeout: Seconds a client may stay silent mid-request (and how long an
                idle connection is kept).
            shutdown_timeout: Default grace period for in-flight requests on stop.
            max_header_bytes: Largest request line plus headers; larger gets 413/414.
            queue_size: Accepted connections waiting for a worker; default ``8 * threads``.
            backlog: The kernel's queue of not yet accepted connections.
        """
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._host, self._requested_port = parse_listen_address(listen)
        self._listen = listen
        self._web_config = web_config
        self._ssl_context = web_config.ssl_context() if web_config is not None else None
        self._app = protect(app, web_config=web_config, public_paths=public_paths)
        self._threads = threads
        self._socket_timeout = socket_timeout
        self._shutdown_timeout = shutdown_timeout
        self._max_header_bytes = max_header_bytes
        self._queue_size = queue_size if queue_size is not None else 8 * threads
        self._backlog = backlog
        self._server: _Server | None = None
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
                accepted_queue_timeout=1,
            )
            server.software = "migscope"
            server.max_request_header_size = self._max_header_bytes
            server.max_request_body_size = 64 * 1024
            server.keep_alive_conn_limit = 256
            if self._ssl_context is not None:
                server.ssl_adapter = _TLSAdapter(self._ssl_context)
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

    @staticmethod
    def _serve(server: _Server) -> None:
        try:
            server.serve()
        except Exception as exc:
            _log.error("HTTP server stopped: %s", _log_reason(exc))

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
