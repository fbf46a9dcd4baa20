"""Scrapes answered by the intake thread itself (issue 24): same bytes, same guarantees.

A plain ``GET /metrics`` whose answer is already made is sent by the intake
(``migscope.exporter._http.fastpath``) instead of a worker. These tests run two servers over
one application, one with the fast path and one without (``fast_path=False``: every request
goes to a worker), send both the same raw bytes and compare the raw responses, status line
and every header included; ``CachedMetrics.answered`` tells which requests the intake
answered, so a request that should not take the fast path is caught if it does. Waits are
bounded liveness checks, never assertions on how long something took.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from support.exporter_snapshot import OWNERS, SNAP

from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._http import ConnectionLimits, ExporterApp, ExporterServer, load_web_config

TIMEOUT = 10.0  # client-side liveness bound


class Gauges:
    """What the registry renders (``name[]``, OpenMetrics): a few fixed series."""

    def describe(self) -> Iterator[Metric]:
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("migscope_test_value", "A value.", labels=["slot"])
        for slot in range(3):
            gauge.add_metric([str(slot)], float(slot))
        yield gauge


class Exposition:
    """A text renderer with the collector's contract: one bytes object until it changes."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.rendered = False
        self.renders = 0

    def render_text(self) -> bytes:
        if not self.rendered:
            self.rendered = True
            self.renders += 1
        return self.body

    def cached_text(self) -> bytes | None:
        return self.body if self.rendered else None

    def change(self, body: bytes) -> None:
        self.body, self.rendered = body, False


def make_app(exposition: Exposition) -> ExporterApp:
    registry = CollectorRegistry()
    registry.register(Gauges())
    return ExporterApp(
        registry=registry,
        health=lambda: (True, "ok"),
        render_text=exposition.render_text,
        cached_text=exposition.cached_text,
    )


BODY = b"".join(b'migscope_test_value{slot="%d"} %d.0\n' % (i, i) for i in range(4000))


@contextmanager
def serving(app: ExporterApp, **kwargs: Any) -> Iterator[ExporterServer]:
    server = ExporterServer(app, listen="127.0.0.1:0", **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop(timeout=5)


@contextmanager
def two_servers(app: ExporterApp, **kwargs: Any) -> Iterator[tuple[ExporterServer, ExporterServer]]:
    """The same app served with the fast path and without it."""
    with serving(app, **kwargs) as fast, serving(app, fast_path=False, **kwargs) as worker:
        assert fast.cached_metrics is not None
        assert worker.cached_metrics is None
        yield fast, worker


def answered(server: ExporterServer) -> int:
    assert server.cached_metrics is not None
    return server.cached_metrics.answered


def connect(server: ExporterServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)


def read_response(sock: socket.socket, buf: bytearray, *, head_only: bool = False) -> bytes:
    """One whole response (head, ``Content-Length`` body) from ``sock``; ``buf`` keeps the rest."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a whole head: {bytes(buf)!r}"
        buf += chunk
    end = buf.index(b"\r\n\r\n") + 4
    length = 0
    for line in bytes(buf[:end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    total = end + (0 if head_only else length)
    while len(buf) < total:
        chunk = sock.recv(1 << 20)
        assert chunk, "connection closed mid-body"
        buf += chunk
    response = bytes(buf[:total])
    del buf[:total]
    return response


def closed(sock: socket.socket) -> bool:
    """Whether the peer has closed ``sock`` (after everything it sent was read)."""
    sock.settimeout(TIMEOUT)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def exchange(
    server: ExporterServer, raw: bytes, responses: int = 1, *, head_only: bool = False
) -> tuple[list[bytes], bool]:
    """Send ``raw`` on a new connection; the responses, and whether the server then closed."""
    with connect(server) as sock:
        sock.sendall(raw)
        buf = bytearray()
        got = [read_response(sock, buf, head_only=head_only) for _ in range(responses)]
        assert not buf
        sock.shutdown(socket.SHUT_WR)  # so that a kept connection ends too
        return got, closed(sock)


def date_of(response: bytes) -> bytes:
    """The ``Date`` line (cheroot's error answers have none)."""
    return next((line for line in response.split(b"\r\n") if line.startswith(b"Date: ")), b"")


def same_second(
    fast: ExporterServer, worker: ExporterServer, raw: bytes, **kwargs: Any
) -> tuple[tuple[list[bytes], bool], tuple[list[bytes], bool]]:
    """Both servers' answers to ``raw``, retried until their ``Date`` headers agree."""
    for _ in range(5):
        a = exchange(fast, raw, **kwargs)
        b = exchange(worker, raw, **kwargs)
        if [date_of(r) for r in a[0]] == [date_of(r) for r in b[0]]:
            return a, b
    raise AssertionError("the two answers never fell within one second")


def get(
    target: str = "/metrics", *, version: str = "1.1", headers: dict[str, str] | None = None
) -> bytes:
    fields = {"Host": "localhost", "Accept": "text/plain;version=0.0.4", **(headers or {})}
    lines = [f"GET {target} HTTP/{version}", *(f"{k}: {v}" for k, v in fields.items() if v)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def warm(server: ExporterServer, *, gzip: bool = False) -> None:
    """One scrape through a worker renders (and gzips) the body the fast path sends."""
    exchange(server, get(headers={"Accept-Encoding": "gzip" if gzip else ""}))


HEADERS_YAML = """\
http_server_config:
  headers:
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
"""

FAST_REQUESTS = {
    "identity": get(),
    "gzip": get(headers={"Accept-Encoding": "gzip"}),
    "gzip-qvalues": get(headers={"Accept-Encoding": "br;q=1.0, gzip;q=0.8, *;q=0.1"}),
    "no-accept": get(headers={"Accept": ""}),
    "accept-any": get(headers={"Accept": "*/*"}),
    "prometheus": get(
        "/metrics?collect%5Bx%5D=1&module=a",
        headers={
            "Accept": "application/openmetrics-text;version=1.0.0;q=0.5,"
            "text/plain;version=0.0.4;q=0.4,*/*;q=0.1",
            "Accept-Encoding": "gzip",
            "User-Agent": "Prometheus/3.0.0",
            "X-Prometheus-Scrape-Timeout-Seconds": "10",
        },
    ),
    "connection-close": get(headers={"Connection": "close"}),
    "connection-Close": get(headers={"Connection": "Close"}),  # cheroot: not "close"
    "http10": get(version="1.0"),
    "http10-keepalive": get(version="1.0", headers={"Connection": "Keep-Alive"}),
    "http10-keepalive-lowercase": get(version="1.0", headers={"Connection": "keep-alive"}),
}


@pytest.mark.parametrize("extra_headers", [False, True], ids=["plain", "web-config-headers"])
@pytest.mark.parametrize("name", list(FAST_REQUESTS))
def test_fast_answers_are_the_workers_answers_byte_for_byte(
    tmp_path: Path, name: str, extra_headers: bool
) -> None:
    config = None
    if extra_headers:
        (tmp_path / "web.yml").write_text(HEADERS_YAML)
        config = load_web_config(tmp_path / "web.yml")
    exposition = Exposition(BODY)
    with two_servers(make_app(exposition), web_config=config) as (fast, worker):
        warm(worker, gzip=True)
        warm(worker)
        before = answered(fast)
        (ours, ours_closed), (theirs, theirs_closed) = same_second(
            fast, worker, FAST_REQUESTS[name]
        )
        assert answered(fast) > before, "the intake did not answer it"
    assert ours == theirs
    assert ours_closed == theirs_closed
    assert ours[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert (b"X-Frame-Options: deny\r\n" in ours[0]) == extra_headers
    assert exposition.renders == 1  # only the warm-up rendered


NOT_FAST_REQUESTS: dict[str, tuple[bytes, int]] = {
    "name-filter": (get("/metrics?name[]=migscope_test_value"), 1),
    "name-filter-encoded": (get("/metrics?name%5B%5D=migscope_test_value"), 1),
    "openmetrics": (get(headers={"Accept": "application/openmetrics-text; version=1.0.0"}), 1),
    "head": (get().replace(b"GET ", b"HEAD ", 1), 1),
    "post": (
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        1,
    ),
    "empty-body": (get(headers={"Content-Length": "0"}), 1),
    # The first goes to a worker (bytes follow it); the second, alone once the worker has
    # answered the first, may be answered by the intake: see the test below.
    "pipelined": (get() + get(), 2),
    "other-path": (get("/metrics/"), 1),
    "healthz": (get("/healthz"), 1),
    "fragment": (get("/metrics#x"), 1),
    "leading-empty-line": (b"\r\n" + get(), 1),
    "http09-ish": (get(version="2.0"), 1),
}


@pytest.mark.parametrize("name", list(NOT_FAST_REQUESTS))
def test_requests_the_fast_path_must_not_take_get_the_workers_answer(name: str) -> None:
    raw, count = NOT_FAST_REQUESTS[name]
    with two_servers(make_app(Exposition(BODY))) as (fast, worker):
        warm(fast, gzip=True)
        warm(fast)
        before = answered(fast)
        head_only = name == "head"
        ours, theirs = same_second(fast, worker, raw, responses=count, head_only=head_only)
        # In the pipelined case the intake may answer the second request (one per try).
        allowed = 0 if count == 1 else 5
        assert answered(fast) - before <= allowed, "the intake answered it"
    assert ours == theirs


def test_pipelined_requests_are_answered_in_order_the_first_by_a_worker() -> None:
    exposition = Exposition(BODY)
    with serving(make_app(exposition)) as server:
        warm(server)
        gzipped = get(headers={"Accept-Encoding": "gzip"})  # not gzipped yet: a worker
        other = get("/healthz")
        (first, second, third), _ = exchange(server, get() + other + gzipped, responses=3)
        assert first.endswith(BODY)
        assert second.endswith(b"\r\n\r\nok\n")
        assert b"Content-Encoding: gzip" in third
        assert answered(server) == 0  # each had bytes after it, or needed a worker
        (fourth, fifth), _ = exchange(server, get("/healthz") + get(), responses=2)
        assert fourth.endswith(b"ok\n")
        assert fifth.endswith(BODY)
        assert answered(server) == 1  # the last, alone after the worker's answer


def test_a_body_not_rendered_yet_is_rendered_by_a_worker_then_served_from_the_intake() -> None:
    exposition = Exposition(BODY)
    with two_servers(make_app(exposition)) as (fast, worker):
        gzipped = get(headers={"Accept-Encoding": "gzip"})
        first, _ = exchange(fast, gzipped)  # nothing rendered: a worker renders and gzips
        assert (exposition.renders, answered(fast)) == (1, 0)
        second, _ = exchange(fast, gzipped)
        assert (exposition.renders, answered(fast)) == (1, 1)
        assert first[0].split(b"\r\n\r\n", 1)[1] == second[0].split(b"\r\n\r\n", 1)[1]
        exposition.change(BODY + b"migscope_test_new 1.0\n")  # a new snapshot
        third, _ = exchange(fast, get())  # identity: rendered by a worker
        assert (exposition.renders, answered(fast)) == (2, 1)
        fourth, _ = exchange(fast, gzipped)  # new body not gzipped yet: a worker again
        assert answered(fast) == 1
        fifth, _ = exchange(fast, gzipped)
        assert (exposition.renders, answered(fast)) == (2, 2)
        assert fourth[0].split(b"\r\n\r\n", 1)[1] == fifth[0].split(b"\r\n\r\n", 1)[1]
        assert third[0].endswith(b"migscope_test_new 1.0\n")
        assert worker.cached_metrics is None


def test_with_basic_auth_every_request_goes_to_a_worker(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"wonderland", bcrypt.gensalt(rounds=4)).decode()
    yaml = f"basic_auth_users:\n  alice: {hashed}\n" + HEADERS_YAML
    (tmp_path / "web.yml").write_text(yaml)
    exposition = Exposition(BODY)
    with serving(make_app(exposition), web_config=load_web_config(tmp_path / "web.yml")) as server:
        assert server.cached_metrics is None
        token = "YWxpY2U6d29uZGVybGFuZA=="  # alice:wonderland
        for _ in range(3):
            (ok,), _ = exchange(server, get(headers={"Authorization": f"Basic {token}"}))
            assert ok.startswith(b"HTTP/1.1 200 OK\r\n")
            (refused,), _ = exchange(server, get())
            assert refused.startswith(b"HTTP/1.1 401 Unauthorized\r\n")
            assert b"migscope_test_value" not in refused


def test_keep_alive_goes_on_after_fast_answers_and_connection_close_closes() -> None:
    with serving(make_app(Exposition(BODY))) as server:
        warm(server)
        with connect(server) as sock:
            buf = bytearray()
            for _ in range(5):
                sock.sendall(get())
                response = read_response(sock, buf)
                assert response.endswith(BODY)
            assert answered(server) == 5
            sock.sendall(get(headers={"Connection": "close"}))
            last = read_response(sock, buf)
            assert b"\r\nConnection: close\r\n" in last
            assert answered(server) == 6
            assert not buf
            assert closed(sock)


def test_http10_without_keep_alive_is_closed_after_its_answer() -> None:
    with serving(make_app(Exposition(BODY))) as server:
        warm(server)
        with connect(server) as sock:
            sock.sendall(get(version="1.0"))
            buf = bytearray()
            assert read_response(sock, buf).endswith(BODY)
            assert closed(sock)
        assert answered(server) == 1


@pytest.fixture
def big_exposition() -> Exposition:
    """A body larger than any socket buffers on loopback, so a client that reads nothing
    leaves the intake with most of it unsent."""
    return Exposition(b"migscope_test_padding 1.0\n" * (16 * 1024 * 1024 // 26))


def stalled_client(server: ExporterServer) -> socket.socket:
    """A client that asks for /metrics and never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(TIMEOUT)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(get())
    return sock


def full_scrape(server: ExporterServer, length: int) -> int:
    with connect(server) as sock:
        sock.sendall(get(headers={"Connection": "close"}))
        buf = bytearray()
        response = read_response(sock, buf)
    assert response.startswith(b"HTTP/1.1 200 OK\r\n")
    assert len(response) > length
    return len(response)


def test_a_client_that_never_reads_is_dropped_and_blocks_no_one(
    big_exposition: Exposition, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="migscope.exporter._http")
    with serving(make_app(big_exposition), socket_timeout=1) as server:
        warm(server)
        size = len(big_exposition.body)
        stalled = [stalled_client(server) for _ in range(3)]
        try:
            wait_until(lambda: answered(server) == 3, "the stalled clients' answers to start")
            # The intake keeps serving while three answers wait for their readers.
            for _ in range(3):
                full_scrape(server, size)
            assert answered(server) == 6
            wait_until(
                lambda: caplog.text.count("read nothing of its response") == 3,
                "the stalled clients to be dropped",
            )
            for sock in stalled:
                received = drain(sock)
                assert received < size  # cut off, not served whole
        finally:
            for sock in stalled:
                sock.close()


def test_a_client_that_never_reads_counts_against_the_connection_limit(
    big_exposition: Exposition, caplog: pytest.LogCaptureFixture
) -> None:
    limits = ConnectionLimits(max_connections=1)
    with serving(make_app(big_exposition), limits=limits) as server:
        warm(server)
        with stalled_client(server) as stalled:
            wait_until(lambda: answered(server) == 1, "the stalled client's answer to start")
            # The only slot is taken by the answer in progress: a new scrape sheds it.
            full_scrape(server, len(big_exposition.body))
            assert drain(stalled) < len(big_exposition.body)
    assert "connection limit (1) reached" in caplog.text
    assert "(answer for" in caplog.text


def drain(sock: socket.socket) -> int:
    """Read until the server's close; how many bytes came."""
    sock.settimeout(TIMEOUT)
    total = 0
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(1 << 20):
            total += len(chunk)
    return total


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_concurrent_fast_scrapes_all_get_the_whole_body() -> None:
    with serving(make_app(Exposition(BODY))) as server:
        warm(server)
        errors: list[BaseException] = []

        def scraper() -> None:
            try:
                with connect(server) as sock:
                    buf = bytearray()
                    for _ in range(20):
                        sock.sendall(get())
                        assert read_response(sock, buf).endswith(BODY)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=scraper) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT * 3)
        assert not errors
        assert answered(server) == 160


def test_the_collectors_cached_text_never_renders() -> None:
    state: dict[str, object] = {"snap": SNAP}
    collector = SnapshotCollector(
        snapshot=lambda: state["snap"],  # type: ignore[arg-type,return-value]
        owners=lambda: dict(OWNERS),  # a new, equal map per call
        backend="sim",
        version="0",
    )
    assert collector.cached_text() is None  # nothing rendered yet, and still nothing
    assert collector.cached_text() is None
    body = collector.render_text()
    assert collector.cached_text() is body
    state["snap"] = replace(SNAP, taken_at=SNAP.taken_at + 1)
    assert collector.cached_text() is None  # a new snapshot: not rendered by asking
    assert collector.cached_text() is None
    assert collector.render_text() is not body


def test_web_config_yaml_is_valid_for_the_tests(tmp_path: Path) -> None:
    (tmp_path / "web.yml").write_text(textwrap.dedent(HEADERS_YAML))
    assert dict(load_web_config(tmp_path / "web.yml").headers) == {
        "X-Frame-Options": "deny",
        "X-Content-Type-Options": "nosniff",
    }
