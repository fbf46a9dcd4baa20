"""A real Prometheus for tests: backfilled with known history, on a free loopback port.

The analyzer's Prometheus source must be tested against the real query engine, not a mock:
PromQL corner cases, the API envelope, escaping and the points-per-series limit are the
server's behaviour, and only the server can say what it is. Debian's ``prometheus`` package
gives both binaries this needs:

* ``promtool tsdb create-blocks-from openmetrics --max-block-duration=168h IN DATADIR`` writes
  the history as TSDB blocks before the server starts (with the default 2h blocks promtool
  re-reads its input once per block: a week takes about 20 times longer);
* ``prometheus`` then serves those blocks from a temporary data dir on ``127.0.0.1:<port>``
  with a minimal config (no scrape targets), a retention long enough for any backfilled
  history, and the default 5 minute lookback.

Usage::

    history = [HistorySeries("migscope_mig_graphics_active_ratio", {"node": "a"}, [(t0, 0.5), ...])]
    with PrometheusServer(history) as prom:
        client = PrometheusClient(prom.url)

The same history helpers (:func:`to_openmetrics`, :func:`to_import_text`) feed
:class:`support.victoria.VictoriaServer`, so one data set can be checked on both engines.
Startup takes about a second; a failed start raises :class:`ServerStartError` with the
server's log in the message. Process handling and the promtool backfill are the product's
own (:mod:`migscope.analyzer._intake.local_prometheus`, what ``--prometheus-embedded`` runs);
this adds history from Python values, ``remote_read``, a route prefix and TLS/auth.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import math
import shutil
import socket
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TextIO

import httpx
import pytest

from migscope.analyzer._intake.local_prometheus import (
    LocalPrometheus,
    ManagedServer,
    ServerStartError,
    free_port,
)

__all__ = [
    "CapturedRequest",
    "FaultProxy",
    "History",
    "HistorySeries",
    "ManagedServer",
    "PrometheusServer",
    "Reply",
    "ServerStartError",
    "free_port",
    "iter_import_lines",
    "requires_prometheus",
    "to_import_text",
    "to_openmetrics",
    "write_openmetrics",
]

#: Skip marker for tests that need the real Prometheus (``make test`` installs it as root).
requires_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus/promtool not installed (Debian package 'prometheus'; "
    "scripts/install-system-deps installs it)",
)


class HistorySeries(NamedTuple):
    """One series of history: a metric name, its labels and ``(unix_seconds, value)`` points.

    A plain ``(name, labels, points)`` tuple works as well. Points must be in increasing time
    order (both backfill paths require it). Values may be NaN or ±Inf. An empty label value
    means "no such label", as in Prometheus.
    """

    name: str
    labels: Mapping[str, str]
    points: Iterable[tuple[float, float]]


#: What the loaders take: HistorySeries or plain ``(name, labels, points)`` tuples.
History = Iterable[tuple[str, Mapping[str, str], Iterable[tuple[float, float]]]]


# --------------------------------------------------------------------------------------------
# History formats


def _escape(value: str) -> str:
    # The label value escapes of both the Prometheus text format and OpenMetrics.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(labels: Mapping[str, str]) -> str:
    kept = [(k, v) for k, v in sorted(labels.items()) if v != ""]
    if not kept:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in kept) + "}"


def _seconds(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else repr(float(t))


def write_openmetrics(history: History, out: TextIO) -> int:
    """Write history as OpenMetrics text (timestamps in seconds, ``# EOF`` last) for promtool.

    Series are grouped by metric name, since OpenMetrics wants each family's samples together.
    No ``# TYPE`` lines: every family is ``unknown``, which promtool accepts for any name.

    Returns:
        The number of samples written.
    """
    by_name: dict[str, list[tuple[Mapping[str, str], Iterable[tuple[float, float]]]]] = {}
    for name, labels, points in history:
        by_name.setdefault(name, []).append((labels, points))
    count = 0
    for name, group in by_name.items():
        for labels, points in group:
            prefix = name + _labels(labels)
            lines = [f"{prefix} {_value(v)} {_seconds(t)}\n" for t, v in points]
            out.writelines(lines)
            count += len(lines)
    out.write("# EOF\n")
    return count


def to_openmetrics(
    history: History,
) -> str:
    """History as OpenMetrics text (see :func:`write_openmetrics`)."""
    out = io.StringIO()
    write_openmetrics(history, out)
    return out.getvalue()


def iter_import_lines(
    history: History,
) -> Iterator[str]:
    """History in the Prometheus text format with millisecond timestamps, one line per sample.

    This is what VictoriaMetrics' ``/api/v1/import/prometheus`` takes (no ``# EOF``).
    """
    for name, labels, points in history:
        prefix = name + _labels(labels)
        for t, v in points:
            yield f"{prefix} {_value(v)} {round(t * 1000)}\n"


def to_import_text(
    history: History,
) -> str:
    """History in VictoriaMetrics' import format (see :func:`iter_import_lines`)."""
    return "".join(iter_import_lines(history))


class PrometheusServer(LocalPrometheus):
    """A real Prometheus serving backfilled history (see the module docstring).

    Args:
        history: Series to backfill with promtool before the start.
        openmetrics: Or an OpenMetrics file (with ``# EOF``) to backfill instead.
        retention: ``--storage.tsdb.retention.time``; long enough that no backfilled block is
            deleted as too old.
        remote_read: ``remote_read`` URLs with ``read_recent: true``. An unreachable one makes
            every query answer with a real ``warnings`` entry (the failed remote read).
        route_prefix: Serve under this path (``--web.route-prefix``), as behind a proxy that
            maps ``https://host/prometheus``; :attr:`url` includes it.
        web_config: Contents of a ``--web.config.file`` (``tls_server_config``,
            ``basic_auth_users``); with ``tls_server_config`` :attr:`url` is ``https``.
            Relative file names in it resolve against :attr:`root`.
        extra_args: More command-line flags (e.g. ``--query.max-samples=100``).
        startup_timeout: Seconds to wait for ``/-/ready``.
    """

    def __init__(
        self,
        history: History = (),
        *,
        openmetrics: str | Path | None = None,
        retention: str = "3650d",
        remote_read: Sequence[str] = (),
        route_prefix: str = "",
        web_config: str | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__(
            openmetrics,
            retention=retention,
            extra_args=extra_args,
            startup_timeout=startup_timeout,
        )
        self.prefix = "/" + route_prefix.strip("/") if route_prefix.strip("/") else ""
        self.web_config = web_config
        if web_config is not None and "tls_server_config" in web_config:
            self.scheme = "https"
        self._history = list(history)
        self.remote_read = list(remote_read)
        self.samples_loaded = 0

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def config_lines(self) -> list[str]:
        """The product's config plus any ``remote_read`` endpoints."""
        config = super().config_lines()
        if self.remote_read:
            config.append("remote_read:")
            for url in self.remote_read:
                config += [f"  - url: {url}", "    read_recent: true", "    remote_timeout: 2s"]
        return config

    def before_start(self) -> None:
        """Write the web config and the history, then let the product backfill it."""
        if self.web_config is not None:
            (self.root / "web.yml").write_text(self.web_config)
        if self.openmetrics is None and self._history:
            self.openmetrics = self.root / "history.om"
            with open(self.openmetrics, "w", encoding="utf-8") as fh:
                self.samples_loaded = write_openmetrics(self._history, fh)
        super().before_start()

    def command(self, port: int) -> list[str]:
        """The product's command line plus the route prefix and web config."""
        return [
            *super().command(port),
            *([f"--web.route-prefix={self.prefix}"] if self.prefix else []),
            *([f"--web.config.file={self.root / 'web.yml'}"] if self.web_config else []),
        ]


# --------------------------------------------------------------------------------------------
# A scriptable HTTP front end, for the faults a healthy server will not produce on demand


@dataclass(frozen=True)
class Reply:
    """A canned answer of :class:`FaultProxy`.

    Attributes:
        status: HTTP status.
        body: Response body (``str`` is sent as UTF-8).
        headers: Response headers (``Content-Type`` defaults to ``application/json``).
        delay: Seconds to wait before answering (a slow server); cut short when the proxy
            stops.
        drop: Close the connection without answering (a crashed or restarted backend).
    """

    status: int = 200
    body: bytes | str = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False


@dataclass(frozen=True)
class CapturedRequest:
    """A request as :class:`FaultProxy` received it."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def form(self) -> dict[str, list[str]]:
        """Query-string and form-body parameters together."""
        query = urllib.parse.urlsplit(self.path).query
        params = urllib.parse.parse_qs(query, keep_blank_values=True)
        for key, values in urllib.parse.parse_qs(
            self.body.decode("utf-8", "replace"), keep_blank_values=True
        ).items():
            params.setdefault(key, []).extend(values)
        return params


class FaultProxy:
    """A real HTTP server on loopback that answers from a script, else forwards upstream.

    Why a real server and not ``httpx.MockTransport``: the client's sockets, timeouts, header
    encoding and connection handling are then exercised for real. Each request takes the next
    queued :class:`Reply`; with the queue empty it is forwarded to ``upstream`` (a real
    Prometheus or VictoriaMetrics), or answered with ``default`` when there is no upstream.
    Every request is recorded in :attr:`requests` (headers lower-cased), so tests can check
    what the client sent (auth headers, form fields, retries).

    Usage::

        replies = [Reply(503), Reply(429, headers={"Retry-After": "2"})]
        with FaultProxy(prom.url, replies=replies) as proxy:
            PrometheusClient(proxy.url).query("up")   # the third attempt reaches Prometheus
    """

    def __init__(
        self,
        upstream: str | None = None,
        *,
        replies: Iterable[Reply] = (),
        default: Reply | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/") if upstream else None
        self.default = default or Reply(502, "no upstream", {"Content-Type": "text/plain"})
        self.requests: list[CapturedRequest] = []
        self._queue: list[Reply] = list(replies)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._http: httpx.Client | None = None
        self._port = 0  # kept after stop(), so messages can still be matched against url

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if not self._port:
            raise RuntimeError("FaultProxy is not started")
        return f"http://127.0.0.1:{self._port}"

    def push(self, *replies: Reply) -> None:
        """Queue answers for the next requests."""
        with self._lock:
            self._queue.extend(replies)

    def _next(self) -> Reply | None:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        return None if self.upstream else self.default

    def start(self) -> FaultProxy:
        """Listen on a free loopback port in a background thread."""
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                captured = CapturedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with proxy._lock:
                    proxy.requests.append(captured)
                reply = proxy._next()
                if reply is None:
                    reply = proxy._forward(captured)
                if reply.delay and proxy._stopping.wait(reply.delay):
                    return
                if reply.drop:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                payload = reply.body.encode() if isinstance(reply.body, str) else reply.body
                headers = {"Content-Type": "application/json", **reply.headers}
                with contextlib.suppress(OSError):
                    self.send_response(reply.status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)

            do_GET = do_POST = _handle

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that gave up (timeout test) is expected, not an error

        self._http = httpx.Client(timeout=60.0, trust_env=False)
        self._server = Server(("127.0.0.1", 0), Handler)
        self._port = self._server.server_address[1]
        # A short poll interval: shutdown() waits for the loop to notice, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fault-proxy",
            daemon=True,
        )
        self._thread.start()
        return self

    def _forward(self, request: CapturedRequest) -> Reply:
        assert self._http is not None
        assert self.upstream is not None
        keep = ("content-type", "accept", "authorization")
        response = self._http.request(
            request.method,
            self.upstream + request.path,
            content=request.body,
            headers={k: v for k, v in request.headers.items() if k in keep},
        )
        content_type = response.headers.get("content-type", "application/json")
        return Reply(response.status_code, response.content, {"Content-Type": content_type})

    def stop(self) -> None:
        """Stop serving, end pending delays, close sockets and the upstream client."""
        self._stopping.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        http_client, self._http = self._http, None
        if http_client is not None:
            http_client.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
