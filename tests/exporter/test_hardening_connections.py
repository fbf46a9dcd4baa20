"""Exporter hardening, connection side (issue 12, items 1-3): dawdling clients cost no worker.

Each attack runs against the real :class:`ExporterServer` over loopback sockets, with its
default 8 workers, while a good client scrapes. The good client's socket timeout (``GOOD``)
is the bound: generous for a loaded 2-core machine, yet shorter than the attackers' hold on
a worker before the fix (the 5 s silence limit, refreshed by every dripped byte, or the
60 s timeout some tests set), so without the fix the good scrape times out. Waits for the
server to cut an attacker are bounded liveness checks too, never assertions on durations.

Certificates are made with the ``openssl`` command (Debian package ``openssl``).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

from migscope.exporter._http import (
    DEFAULT_LIMITS,
    ConnectionLimits,
    ExporterApp,
    ExporterServer,
    load_web_config,
)
from migscope.exporter._http.clientlog import Throttle

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
GOOD = 3.0  # a good scrape must be answered within this (client socket timeout)
TIMEOUT = 12.0  # liveness bound for the server to cut an attacker
WORKERS = 8  # ExporterServer's default, what the attacks outnumber


# --------------------------------------------------------------------------- helpers


class Gauge:
    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("migscope_test_up", "Always 1.", value=1.0)


def make_app() -> ExporterApp:
    registry = CollectorRegistry()
    registry.register(Gauge())
    return ExporterApp(registry=registry, health=lambda: (True, "ok"))


@contextmanager
def serving(**kwargs: Any) -> Iterator[ExporterServer]:
    server = ExporterServer(kwargs.pop("app", None) or make_app(), listen="127.0.0.1:0", **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop(timeout=5)


def scrape(port: int, path: str = "/metrics", *, context: ssl.SSLContext | None = None) -> int:
    """One good request on a fresh connection; raises TimeoutError past ``GOOD``."""
    if context is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=GOOD)
    else:
        conn = http.client.HTTPSConnection("localhost", port, timeout=GOOD, context=context)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        assert body
        return resp.status
    finally:
        conn.close()


def good_scrapes(port: int, *, context: ssl.SSLContext | None = None, rounds: int = 3) -> list[int]:
    """``/metrics`` and ``/healthz`` a few times, spread over about a second and a half."""
    statuses = []
    for _ in range(rounds):
        statuses.append(scrape(port, "/metrics", context=context))
        statuses.append(scrape(port, "/healthz", context=context))
        time.sleep(0.5)
    return statuses


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (EOF or reset); False while it is open."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(timeout)
    return data == b"" or closed_by_peer(sock)


def read_until_closed(sock: socket.socket, timeout: float = TIMEOUT) -> bytes:
    sock.settimeout(timeout)
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def drip_until_answered(sock: socket.socket, chunk: bytes, every: float) -> tuple[bytes, int]:
    """Send ``chunk`` every ``every`` s until the server answers; (answer, bytes sent)."""
    sock.settimeout(every)
    sent = 0
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            sock.sendall(chunk)
            sent += len(chunk)
        except OSError:
            pass  # closed by the server: its answer may still be there to read
        try:
            return sock.recv(4096), sent
        except TimeoutError:
            continue
        except OSError:
            break
    return b"", sent


@dataclass
class Attack:
    """``n`` attacking connections, kept up from one thread.

    ``opener`` connects (and sends whatever an attacker sends first); every ``interval`` each
    live connection gets ``drip`` (nothing if empty). A connection the server closes is
    counted and reopened, as a real attacker would, so the pressure lasts the whole test.
    """

    port: int
    n: int
    opener: Callable[[int], socket.socket]
    drip: bytes = b""
    interval: float = 0.3
    opened: int = 0
    cut: int = 0
    answers: list[bytes] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _socks: list[socket.socket | None] = field(default_factory=list)

    def __enter__(self) -> Attack:
        self._socks = [None] * self.n
        self._thread = threading.Thread(target=self._run, name="attack")
        self._thread.start()
        wait_until(lambda: self.opened >= self.n, "the attackers to connect")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(TIMEOUT)
        for sock in self._socks:
            if sock is not None:
                sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for i, sock in enumerate(self._socks):
                if self._stop.is_set():
                    return
                if sock is None:
                    try:
                        self._socks[i] = self.opener(self.port)
                    except OSError:
                        continue  # shed while connecting; try again next round
                    self.opened += 1
                    continue
                if self._alive(sock):
                    try:
                        if self.drip:
                            sock.send(self.drip)
                        continue
                    except (BlockingIOError, ssl.SSLWantWriteError):
                        continue
                    except OSError:
                        pass
                sock.close()
                self._socks[i] = None
                self.cut += 1
            self._stop.wait(self.interval)

    def _alive(self, sock: socket.socket) -> bool:
        try:
            data = sock.recv(4096)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return True
        except OSError:
            return False
        if data:
            self.answers.append(data)
        return False  # an answer or EOF: the server is done with this one


def plain_opener(first: bytes) -> Callable[[int], socket.socket]:
    def open_(port: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=GOOD)
        if first:
            sock.sendall(first)
        sock.setblocking(False)
        return sock

    return open_


# --------------------------------------------------------------------------- PKI


@dataclass(frozen=True)
class Pki:
    ca: Path
    cert: Path
    key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )  # fmt: skip
    (d / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
    )
    _openssl(
        "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=server",
        cwd=d,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-set_serial", "7", "-out", "server.crt", "-days", "2", "-extfile", "server.ext",
        cwd=d,
    )  # fmt: skip
    return Pki(ca=d / "ca.crt", cert=d / "server.crt", key=d / "server.key")


def tls_server_kwargs(tmp_path: Path, pki: Pki) -> dict[str, Any]:
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {pki.cert}\n  key_file: {pki.key}\n")
    return {"web_config": load_web_config(web)}


def client_context(pki: Pki) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki.ca))


def client_hello(pki: Pki) -> bytes:
    """The first flight of a real TLS client, as bytes (from an in-memory handshake)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = client_context(pki).wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    assert len(hello) > 100
    return hello


# --------------------------------------------------------------------------- 1: slow drip


def test_slow_drip_clients_cannot_hold_the_workers() -> None:
    """Twice as many clients as workers drip a request head; scrapes and probes answer.

    Before the fix each dripping client held a worker: every byte restarted the 5 s silence
    limit, so the limit never fired and the good scrape queued behind them forever.
    """
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Drip: "
    with (
        serving() as server,
        Attack(server.port, 2 * WORKERS, plain_opener(head), drip=b"a", interval=0.3) as attack,
    ):
        time.sleep(0.7)  # every attacker has dripped: before the fix, each holds a worker
        statuses = good_scrapes(server.port)
        wait_until(lambda: attack.cut > 0, "the server to cut a dripping client")
    assert statuses == [200] * 6
    assert attack.answers
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in attack.answers)


def test_a_dripped_head_is_cut_by_the_minimum_rate(caplog: pytest.LogCaptureFixture) -> None:
    """One byte every 0.3 s: far below 500 bytes/s, cut after the 2 s grace with a 408."""
    with (
        serving() as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock,
    ):
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        answer, _ = drip_until_answered(sock, b"X", every=0.3)
    assert answer.startswith(b"HTTP/1.1 408 ")
    lines = [r.getMessage() for r in caplog.records if "408" in r.getMessage()]
    assert any(f"below {DEFAULT_LIMITS.min_rate:g} bytes/s" in line for line in lines), lines


def test_a_head_that_never_ends_is_cut_at_the_request_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Header lines at a good rate but no end of headers: cut at the request deadline.

    With the rate check off only the deadline can fire; before the fix nothing did until
    the 16 KiB header limit, long after the client's patience here.
    """
    limits = ConnectionLimits(request_timeout=1.5, min_rate=0)
    with (
        serving(limits=limits) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock,
    ):
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        answer, sent = drip_until_answered(sock, b"X-Pad: " + b"p" * 40 + b"\r\n", every=0.1)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert sent < 16 * 1024  # cut by the deadline, not by the header size limit
    assert any("within 1.5 s" in r.getMessage() for r in caplog.records)


def test_slow_request_bodies_cannot_hold_the_workers() -> None:
    """A complete head announcing a body that then drips: the body is waited for off-worker.

    Before the fix the worker read (drained) the announced body after answering 405, one
    dripped byte at a time.
    """
    head = b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    with (
        serving() as server,
        Attack(server.port, 2 * WORKERS, plain_opener(head), drip=b"b", interval=0.3) as attack,
    ):
        time.sleep(0.7)
        statuses = good_scrapes(server.port)
        wait_until(lambda: attack.cut > 0, "the server to cut a dripping body")
    assert statuses == [200] * 6
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in attack.answers)


# --------------------------------------------------------------------------- 2: TLS


def test_idle_tls_clients_cannot_hold_the_workers(tmp_path: Path, pki: Pki) -> None:
    """Three times as many clients as workers finish the handshake, then say nothing.

    Before the fix each held a worker for the 5 s silence limit after its handshake, so a
    good scrape waited behind them (~4.8 s with 8; longer with more).
    """
    context = client_context(pki)

    def idle_tls(port: int) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", port), timeout=GOOD)
        sock = context.wrap_socket(raw, server_hostname="localhost")
        sock.setblocking(False)
        return sock

    with (
        serving(**tls_server_kwargs(tmp_path, pki)) as server,
        Attack(server.port, 3 * WORKERS, idle_tls, interval=0.2),
    ):
        time.sleep(0.3)
        statuses = good_scrapes(server.port, context=context)
    assert statuses == [200] * 6


def test_stalled_and_dripped_handshakes_are_cut_at_the_handshake_deadline(
    tmp_path: Path, pki: Pki
) -> None:
    """Part of a ClientHello, then silence or a byte at a time: closed after the deadline.

    The socket timeout is 60 s, so before the fix (handshake in a worker under the socket
    timeout) these held their workers for a minute, or forever while dripping.
    """
    hello = client_hello(pki)
    limits = ConnectionLimits(handshake_timeout=1.0)
    kwargs = tls_server_kwargs(tmp_path, pki)
    with serving(socket_timeout=60, limits=limits, **kwargs) as server:
        stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(WORKERS)]
        dripped = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(WORKERS)]
        try:
            for sock in stalled:
                sock.sendall(hello[:20])
            statuses = good_scrapes(server.port, context=client_context(pki), rounds=1)

            def all_cut() -> bool:
                for i, sock in enumerate(dripped):
                    with contextlib.suppress(OSError):
                        sock.send(hello[i : i + 1])
                return all(closed_by_peer(s) for s in stalled + dripped)

            wait_until(all_cut, "the handshake deadline to close the stalled handshakes")
        finally:
            for sock in stalled + dripped:
                sock.close()
    assert statuses == [200, 200]


def test_a_request_after_the_handshake_gets_the_same_deadline(tmp_path: Path, pki: Pki) -> None:
    """The request-head rules apply inside TLS as on plain HTTP: a dripped head gets 408."""
    with (
        serving(**tls_server_kwargs(tmp_path, pki)) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as raw,
        client_context(pki).wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        answer, _ = drip_until_answered(sock, b"X", every=0.3)
    assert answer.startswith(b"HTTP/1.1 408 ")


# --------------------------------------------------------------------------- 3: idle floods


def test_an_idle_connection_flood_sheds_the_oldest(caplog: pytest.LogCaptureFixture) -> None:
    """300 silent connections (over the 256 limit): the oldest are closed, scrapes answer.

    Before the fix the connections past 256 went straight to the workers, which waited on
    them for the socket timeout (60 s here), and every scrape timed out.
    """
    n = 300
    limit = DEFAULT_LIMITS.max_connections
    with serving(socket_timeout=60) as server:
        idle = []
        try:
            for _ in range(n):
                idle.append(socket.create_connection(("127.0.0.1", server.port)))
            statuses = good_scrapes(server.port)
            wait_until(
                lambda: all(closed_by_peer(s) for s in idle[: n - limit]),
                "the oldest idle connections to be shed",
            )
            still_open = [not closed_by_peer(s) for s in idle[-(limit - 20) :]]
        finally:
            for sock in idle:
                sock.close()
    assert statuses == [200] * 6
    assert all(still_open)
    shed = [r for r in caplog.records if "connection limit" in r.getMessage()]
    assert 1 <= len(shed) <= 2, [r.getMessage() for r in shed]  # a summary, not one per socket


def test_keepalive_connections_count_towards_the_limit_and_are_shed_too() -> None:
    """A keep-alive connection idle the longest goes first; it is still served until then.

    The socket timeout is 60 s, so only the limit can close the keep-alive connection here.
    """
    limits = ConnectionLimits(max_connections=4)
    with serving(limits=limits, socket_timeout=60) as server:
        keepalive = http.client.HTTPConnection("127.0.0.1", server.port, timeout=GOOD)
        try:
            keepalive.request("GET", "/healthz")
            assert keepalive.getresponse().read() == b"ok\n"
            keepalive.request("GET", "/healthz")  # reused: served from the idle pool
            assert keepalive.getresponse().read() == b"ok\n"
            assert keepalive.sock is not None
            kept = keepalive.sock
            idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
            try:
                wait_until(lambda: closed_by_peer(kept), "the keep-alive connection to be shed")
                assert not any(closed_by_peer(s) for s in idle)
                assert scrape(server.port) == 200
            finally:
                for sock in idle:
                    sock.close()
        finally:
            keepalive.close()


# --------------------------------------------------------------------------- framing


def test_pipelined_requests_and_bodies_are_answered_in_order() -> None:
    """Requests sent back to back, one with a body, on one connection: each answered once."""
    payload = (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    with (
        serving() as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock,
    ):
        sock.sendall(payload)
        answer = read_until_closed(sock)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer) == [b"200", b"405", b"200"]
    assert b"migscope_test_up 1.0" in answer


def test_expect_100_continue_is_answered_once_before_the_body() -> None:
    with (
        serving() as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock,
    ):
        sock.sendall(
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
            b"Expect: 100-continue\r\nConnection: close\r\n\r\n"
        )
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += sock.recv(4096)
        sock.sendall(b"body")
        answer = interim + read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer) == [b"100", b"405"]


def test_malformed_heads_are_still_answered_at_once() -> None:
    """Bare LF line ends and oversized heads get cheroot's answers without a deadline wait."""
    with serving() as server:
        answers = []
        for payload in (
            b"GET /metrics HTTP/1.1\nHost: x\n\n",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000,
            b"GET /" + b"a" * 40_000,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: nine\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
        ):
            with socket.create_connection(("127.0.0.1", server.port), timeout=GOOD) as sock:
                with contextlib.suppress(OSError):
                    sock.sendall(payload)  # stays open: the answer must not wait for EOF
                answers.append(sock.recv(4096).split(b"\r\n")[0])
    assert answers == [
        b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 413 Request Entity Too Large",
        b"HTTP/1.1 414 Request-URI Too Long",
        b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 413 Request Entity Too Large",
    ]


# --------------------------------------------------------------------------- the snapshot


def test_scrapes_and_probes_make_no_nvml_calls() -> None:
    """``/metrics`` (both renderers) and ``/healthz`` read the sampler's snapshot only."""
    from migscope.exporter._runtime import build
    from migscope.exporter._settings import load_settings

    exporter = build(load_settings(overrides={"backend": "sim"}, environ={}), realtime=False)
    exporter.sampler.run_once()
    nvml = exporter.simulation.node("gpu-node-a").nvml
    app = ExporterApp(
        registry=exporter.registry,
        health=exporter.health,
        render_text=exporter.collector.render_text,
    )
    try:
        with serving(app=app) as server:
            before = sum(nvml.calls.values())
            for _ in range(5):
                assert scrape(server.port, "/metrics") == 200  # the text fast path
                assert scrape(server.port, "/healthz") == 200
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=GOOD)
                conn.request("GET", "/metrics", headers={"Accept": "application/openmetrics-text"})
                resp = conn.getresponse()
                assert (resp.status, resp.read().endswith(b"# EOF\n")) == (200, True)
                conn.close()
            assert sum(nvml.calls.values()) == before
            assert before > 0  # the sampler did call NVML: the counter counts
    finally:
        exporter.stop()


# --------------------------------------------------------------------------- limits


@pytest.mark.parametrize(
    "kwargs",
    [
        {"request_timeout": 0},
        {"rate_grace": -1},
        {"handshake_timeout": float("inf")},
        {"min_rate": -5},
        {"max_connections": 0},
    ],
)
def test_limits_that_would_disable_a_protection_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        ConnectionLimits(**kwargs)


def test_client_errors_are_logged_in_one_line_without_tracebacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="migscope.exporter._http")
    with serving(limits=ConnectionLimits(rate_grace=0.5)) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 408 ")
        assert scrape(server.port) == 200
    records = [r for r in caplog.records if r.name.startswith("migscope.exporter._http")]
    assert records
    for record in records:
        assert "\n" not in record.getMessage()
        assert record.exc_info is None


def test_a_flood_of_client_problems_logs_one_warning_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="migscope.test")
    now = [100.0]
    throttle = Throttle(
        logging.getLogger("migscope.test"), "requests timed out", clock=lambda: now[0]
    )
    for i in range(5):
        throttle.warn("answered 408 to client %d", i)
    now[0] += 10.0
    throttle.warn("answered 408 to client %d", 5)
    throttle.warn("answered 408 to client %d", 6)
    throttle.flush()  # within 10 s of the last warning: nothing yet
    now[0] += 10.0
    throttle.flush()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "answered 408 to client 0",
        "answered 408 to client 5 (4 more requests timed out in the 10 s before, "
        "logged at debug level)",
        "1 more requests timed out in the last 10 s (logged at debug level)",
    ]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 5
