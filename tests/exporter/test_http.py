"""The exporter's HTTP layer over real loopback sockets: routes, auth, TLS, limits, shutdown.

Everything here talks HTTP to a running :class:`ExporterServer` with http.client or raw
sockets. Certificates are made with the ``openssl`` command in a temporary directory.
Waits are bounded liveness checks (a client timeout, a deadline for threads to exit), never
assertions on how long something took.
"""

from __future__ import annotations

import base64
import gzip
import html.parser
import http.client
import logging
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from migscope.exporter._http import (
    BasicAuthChecker,
    BasicAuthMiddleware,
    ExporterApp,
    ExporterServer,
    load_web_config,
    parse_listen_address,
)

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"  # Debian package: openssl
TIMEOUT = 10.0  # client-side liveness bound for one request


# --------------------------------------------------------------------------- helpers


class DummyCollector:
    """A custom collector as the exporter's: fresh families per scrape.

    ``describe()`` tells the registry its names without a scrape; ``name[]`` filtering
    needs that (or a registry built with ``support_collectors_without_names=True``).
    """

    def __init__(self) -> None:
        self.scrapes = 0

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("migscope_test_slice_memory_used_bytes", "Used memory.")
        yield CounterMetricFamily("migscope_test_energy_joules", "Energy.")

    def collect(self) -> Iterator[Metric]:
        self.scrapes += 1
        gauge = GaugeMetricFamily(
            "migscope_test_slice_memory_used_bytes", "Used memory.", labels=["gpu", "gi"]
        )
        gauge.add_metric(["0", "1"], 1024.0)
        gauge.add_metric(["0", "2"], 2048.0)
        yield gauge
        counter = CounterMetricFamily("migscope_test_energy_joules", "Energy.", labels=["gpu"])
        counter.add_metric(["0"], 12.5)
        yield counter


class GatedCollector:
    """Blocks its render until released, to hold a scrape in flight."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def collect(self) -> Iterator[Metric]:
        self.entered.set()
        assert self.release.wait(30), "test never released the gated collector"
        yield GaugeMetricFamily("migscope_test_gated", "Held open by the test.", value=1.0)


def registry_with(collector: Any) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def make_app(
    collector: Any | None = None,
    *,
    health: Callable[[], tuple[bool, str]] = lambda: (True, ""),
    **kwargs: Any,
) -> ExporterApp:
    return ExporterApp(
        registry=registry_with(collector or DummyCollector()),
        health=health,
        version="9.9.9-test",
        **kwargs,
    )


@contextmanager
def serving(app: Any, **kwargs: Any) -> Iterator[ExporterServer]:
    kwargs.setdefault("listen", "localhost:0")
    server = ExporterServer(app, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop(timeout=5)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def request(
    server: ExporterServer,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> Response:
    if context is not None:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            "localhost", server.port, timeout=TIMEOUT, context=context
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        body = resp.read()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        conn.close()


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def write_web_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(textwrap.dedent(text))
    return path


def http_log_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("migscope.exporter._http")]


# --------------------------------------------------------------------------- PKI


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_client_cert: Path  # signed by a CA the server does not trust
    other_client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


def _self_signed_ca(cwd: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "30",
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=cwd,
    )  # fmt: skip


def _leaf(cwd: Path, name: str, *, ca: str, ext: str) -> None:
    (cwd / f"{name}.ext").write_text(ext)
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
        cwd=cwd,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-set_serial", str(random.SystemRandom().randrange(1, 2**63)),
        "-out", f"{name}.crt", "-days", "30", "-extfile", f"{name}.ext",
        cwd=cwd,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    # Certificates valid for 30 days: one that expires within 7 days loads with a warning
    # (docs/http.md), which the tests that count warnings must not see.
    d = tmp_path_factory.mktemp("pki")
    _self_signed_ca(d, "ca")
    _self_signed_ca(d, "rogue-ca")
    common = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
    _leaf(
        d,
        "server",
        ca="ca",
        ext=common + "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    _leaf(d, "client", ca="ca", ext=common + "extendedKeyUsage=clientAuth\n")
    _leaf(d, "rogue", ca="rogue-ca", ext=common + "extendedKeyUsage=clientAuth\n")
    return Pki(
        dir=d,
        ca=d / "ca.crt",
        server_cert=d / "server.crt",
        server_key=d / "server.key",
        client_cert=d / "client.crt",
        client_key=d / "client.key",
        other_client_cert=d / "rogue.crt",
        other_client_key=d / "rogue.key",
    )


def tls_web_config(tmp_path: Path, pki: Pki, *extra: str) -> Path:
    """A web-config next to copies of the server files, referenced by relative names."""
    for src in (pki.server_cert, pki.server_key, pki.ca):
        (tmp_path / src.name).write_bytes(src.read_bytes())
    lines = ["tls_server_config:", "  cert_file: server.crt", "  key_file: server.key"]
    lines += [f"  {line}" for line in extra]
    return write_web_config(tmp_path, "\n".join(lines) + "\n")


def client_context(
    pki: Pki, *, cert: tuple[Path, Path] | None = None, max_version: ssl.TLSVersion | None = None
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


# --------------------------------------------------------------------------- /metrics


def test_metrics_serves_valid_exposition_from_the_registry() -> None:
    collector = DummyCollector()
    with serving(make_app(collector)) as server:
        resp = request(server, "/metrics")
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert int(resp.headers["content-length"]) == len(resp.body)
    found = families(resp.body.decode())
    memory = found["migscope_test_slice_memory_used_bytes"]
    assert memory.type == "gauge"
    assert {(s.labels["gi"], s.value) for s in memory.samples} == {("1", 1024.0), ("2", 2048.0)}
    energy = found["migscope_test_energy_joules"]
    assert energy.type == "counter"
    assert energy.samples[0].name == "migscope_test_energy_joules_total"
    assert collector.scrapes == 1


def test_openmetrics_is_negotiated_through_the_accept_header() -> None:
    with serving(make_app()) as server:
        resp = request(
            server,
            "/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"},
        )
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("application/openmetrics-text")
    assert resp.body.endswith(b"# EOF\n")
    names = {f.name for f in openmetrics_families(resp.body.decode())}
    assert "migscope_test_energy_joules" in names


def test_gzip_is_negotiated_and_decodes_to_the_same_exposition() -> None:
    with serving(make_app()) as server:
        plain = request(server, "/metrics")
        zipped = request(server, "/metrics", headers={"Accept-Encoding": "gzip"})
    assert zipped.status == 200
    assert zipped.headers["content-encoding"] == "gzip"
    assert "content-encoding" not in plain.headers
    assert gzip.decompress(zipped.body) == plain.body


# Accept-Encoding -> whether /metrics is gzipped. q=0 means "not acceptable" (RFC 9110
# 12.5.3); qvalue and coding names are case-insensitive; a malformed qvalue refuses its coding;
# identity refused with nothing else acceptable is served anyway (docs/http.md).
ACCEPT_ENCODING_MATRIX: dict[str | None, bool] = {
    None: False,
    "": False,
    "gzip": True,
    "GZIP": True,
    "x-gzip": True,
    "gzip;q=0": False,
    "gzip; q=0": False,
    "gzip;Q=0": False,
    "gzip;q=0.000": False,
    "gzip;q=0.": False,
    "gzip;q=0.001": True,
    "gzip;q=0.5": True,
    "gzip;q=1.000": True,
    "gzip;q=2": False,
    "gzip;q=abc": False,
    "gzip;q=0.0001": False,
    "gzipped": False,
    "deflate, br": False,
    "deflate, gzip, br, zstd": True,
    "br;q=1.0, gzip;q=0.8, *;q=0.1": True,
    "*": True,
    "*;q=0": False,
    "*;q=0, gzip": True,
    "gzip;q=0, *": False,
    "x-gzip;q=0, gzip": True,
    "identity": False,
    "identity;q=0": False,
    "identity;q=0, gzip": True,
    "identity, gzip;q=0.5": False,
    "gzip;q=0.5, *;q=0.9": False,
    "gzip;q=0, identity;q=0": False,
}


@pytest.mark.parametrize("fast_path", [True, False], ids=["text-fast-path", "registry"])
def test_accept_encoding_qvalues_decide_gzip(fast_path: bool) -> None:
    registry = registry_with(DummyCollector())
    render = (lambda: generate_latest(registry)) if fast_path else None
    app = ExporterApp(registry=registry, health=lambda: (True, ""), render_text=render)
    with serving(app) as server:
        plain = request(server, "/metrics")
        answers = {
            value: request(
                server, "/metrics", headers={} if value is None else {"Accept-Encoding": value}
            )
            for value in ACCEPT_ENCODING_MATRIX
        }
    gzipped = {value: r.headers.get("content-encoding") == "gzip" for value, r in answers.items()}
    assert gzipped == ACCEPT_ENCODING_MATRIX
    for value, resp in answers.items():
        assert resp.status == 200, value
        body = gzip.decompress(resp.body) if gzipped[value] else resp.body
        assert body == plain.body, value
        assert resp.headers.get("content-encoding", "gzip") == "gzip", value


def test_name_filter_passes_through_to_prometheus_client() -> None:
    with serving(make_app()) as server:
        resp = request(server, "/metrics?name[]=migscope_test_energy_joules_total")
    assert set(families(resp.body.decode())) == {"migscope_test_energy_joules"}


def test_head_returns_headers_without_a_body() -> None:
    with serving(make_app()) as server:
        get = request(server, "/metrics")
        head = request(server, "/metrics", method="HEAD")
    assert head.status == 200
    assert head.body == b""
    assert head.headers["content-length"] == str(len(get.body))


def test_a_raising_collector_gives_500_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def collect(self) -> Iterator[Metric]:
            raise RuntimeError("NVML went away\nsecond line")
            yield  # pragma: no cover

    with serving(make_app(Broken())) as server:
        failed = request(server, "/metrics")
        health = request(server, "/healthz")
    assert failed.status == 500
    assert health.status == 200
    errors = [r for r in http_log_records(caplog) if "rendering /metrics failed" in r.getMessage()]
    assert len(errors) == 1
    assert errors[0].exc_info is None


# --------------------------------------------------------------------------- /healthz, /, 404, 405


def test_healthz_reports_ok_then_the_failure_reason() -> None:
    state = {"healthy": True, "reason": ""}
    app = make_app(health=lambda: (bool(state["healthy"]), str(state["reason"])))
    with serving(app) as server:
        ok = request(server, "/healthz")
        state.update(healthy=False, reason="sampler: no snapshot for 31 s")
        failing = request(server, "/healthz")
    assert (ok.status, ok.body) == (200, b"ok\n")
    assert failing.status == 503
    assert failing.body == b"sampler: no snapshot for 31 s\n"


def test_healthz_answers_503_when_the_check_itself_raises() -> None:
    def broken() -> tuple[bool, str]:
        raise KeyError("boom")

    with serving(make_app(health=broken)) as server:
        resp = request(server, "/healthz")
    assert resp.status == 503
    assert b"KeyError" in resp.body


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_landing_page_names_the_exporter_and_links_to_metrics() -> None:
    with serving(make_app()) as server:
        page = request(server, "/")
        # Follow the link as a browser would, relative to the page.
        parser = _Links()
        parser.feed(page.body.decode())
        target = "/" + next(h for h in parser.hrefs if h.rstrip("/").endswith("metrics"))
        followed = request(server, target.replace("//", "/"))
    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "migscope exporter 9.9.9-test" in "".join(parser.text)
    assert followed.status == 200
    assert "migscope_test_energy_joules" in families(followed.body.decode())


@pytest.mark.parametrize("path", ["/nope", "/metrics/", "/metricsx", "/Metrics", "/healthz/x"])
def test_unknown_paths_are_404(path: str) -> None:
    with serving(make_app()) as server:
        assert request(server, path).status == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/"])
def test_only_get_and_head_are_allowed(method: str, path: str) -> None:
    with serving(make_app()) as server:
        resp = request(server, path, method=method)
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, HEAD"


# --------------------------------------------------------------------------- concurrency


def test_scrapes_beyond_the_limit_get_a_clean_503_while_healthz_answers() -> None:
    gated = GatedCollector()
    app = make_app(gated, max_concurrent_scrapes=1, scrape_wait_seconds=0)
    with serving(app) as server:
        results: list[Response] = []
        first = threading.Thread(target=lambda: results.append(request(server, "/metrics")))
        first.start()
        try:
            assert gated.entered.wait(TIMEOUT)
            second = request(server, "/metrics")
            health = request(server, "/healthz")
        finally:
            gated.release.set()
            first.join(TIMEOUT)
        after = request(server, "/metrics")
    assert (second.status, second.body) == (503, b"too many concurrent scrapes\n")
    assert second.headers["retry-after"] == "1"
    assert health.status == 200
    assert [r.status for r in results] == [200]
    assert after.status == 200


def test_200_concurrent_scrapes_succeed_or_get_503_and_serving_continues() -> None:
    n = 200
    start = threading.Barrier(n)
    outcomes: list[tuple[int, bytes] | BaseException] = []
    lock = threading.Lock()

    def scrape(server: ExporterServer) -> None:
        try:
            start.wait(TIMEOUT)
            resp = request(server, "/metrics")
            outcome: tuple[int, bytes] | BaseException = (resp.status, resp.body)
        except BaseException as exc:
            outcome = exc
        with lock:
            outcomes.append(outcome)

    with serving(make_app()) as server:
        workers = [threading.Thread(target=scrape, args=(server,)) for _ in range(n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        after = request(server, "/metrics")

    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert not errors, errors[:3]
    assert len(outcomes) == n
    statuses = {o[0] for o in outcomes if isinstance(o, tuple)}
    assert statuses <= {200, 503}
    assert 200 in statuses
    for o in outcomes:
        assert isinstance(o, tuple)
        if o[0] == 200:
            assert "migscope_test_energy_joules" in families(o[1].decode())
        else:
            assert o[1] == b"too many concurrent scrapes\n"
    assert after.status == 200


# --------------------------------------------------------------------------- malformed clients


def _raw_exchange(port: int, payload: bytes) -> bytes:
    """Send ``payload`` and read until the server closes; a reset counts as closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered and closed (or reset) before reading everything
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (ConnectionResetError, TimeoutError):
            pass
        return b"".join(chunks)


def test_malformed_requests_get_errors_and_leave_the_server_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    rng = random.Random(1234)
    with serving(make_app()) as server:
        garbage = _raw_exchange(server.port, bytes(rng.randrange(256) for _ in range(4096)))
        no_version = _raw_exchange(server.port, b"GET /metrics\r\n\r\n")
        huge = _raw_exchange(
            server.port,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
        )
        half = _raw_exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        binary_path = _raw_exchange(server.port, b"GET /\x00\xff HTTP/1.1\r\nHost: x\r\n\r\n")
        after = request(server, "/metrics")
    assert garbage.startswith(b"HTTP/1.1 400 ")
    assert no_version.startswith(b"HTTP/1.1 400 ")
    assert huge == b"" or huge.startswith((b"HTTP/1.1 413 ", b"HTTP/1.1 414 ", b"HTTP/1.1 431 "))
    assert not half.startswith(b"HTTP/1.1 200")
    assert not binary_path.startswith(b"HTTP/1.1 200")
    assert after.status == 200
    records = http_log_records(caplog)
    assert any("400 Bad Request" in r.getMessage() for r in records)
    for record in records:
        assert "\n" not in record.getMessage()
        assert record.exc_info is None


_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(b"X-A: a\r\n b\r\n", id="obs-fold-space"),
        pytest.param(b"X-A: a\r\n\tb\r\n", id="obs-fold-tab"),
        pytest.param(b"Accept: text/plain\r\n , application/x\r\n", id="obs-fold-list-field"),
        pytest.param(b"Content-Length: 0\r\n 5\r\n", id="obs-fold-content-length"),
        pytest.param(b"X-A: a\x00b\r\n", id="nul"),
        pytest.param(b"X-A: a\rb\r\n", id="bare-cr"),
        pytest.param(b"X-A: a\x01b\r\n", id="soh"),
        pytest.param(b"X-A: a\x1bb\r\n", id="esc"),
        pytest.param(b"X-A: ab\x7f\r\n", id="del"),
        pytest.param(b"X-A : ab\r\n", id="space-before-colon"),
        pytest.param(b"X A: ab\r\n", id="space-in-name"),
        pytest.param(b": ab\r\n", id="empty-name"),
    ],
)
def test_folded_lines_and_control_characters_in_headers_get_400_and_close(
    fields: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    # RFC 9112 5.2 (obs-fold: reject with 400 or replace by SP), RFC 9110 5.5 (CR, LF, NUL in
    # a value: reject or replace; no other control but HTAB is a field-vchar), RFC 9112 5.1
    # (whitespace between name and colon: reject with 400). The exporter rejects.
    with serving(make_app()) as server:
        answer = _raw_exchange(server.port, _HEAD + fields + b"\r\n" + _HEAD + b"\r\n")
        after = request(server, "/metrics")
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert answer.count(b"HTTP/1.1 ") == 1, "the connection closes after the 400"
    assert after.status == 200
    refused = [r.getMessage() for r in http_log_records(caplog) if "400" in r.getMessage()]
    assert len(refused) == 1
    assert "\n" not in refused[0]


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(b"X-A: a\tb\r\n", id="htab-inside"),
        pytest.param(b"X-A: \t a b \t\r\n", id="ows-around"),
        pytest.param(b"X-A: caf\xc3\xa9 \x80\xff\r\n", id="obs-text"),
        pytest.param(b"X-A:\r\n", id="empty-value"),
        pytest.param(b"x-!#$%&'*+.^_`|~09: v\r\n", id="every-tchar"),
    ],
)
def test_valid_header_fields_are_still_served(fields: bytes) -> None:
    with serving(make_app()) as server:
        answer = _raw_exchange(server.port, _HEAD + fields + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_a_stalled_half_request_times_out_with_408_while_others_are_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with serving(make_app(), threads=2, socket_timeout=1) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as slow:
            slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            during = request(server, "/metrics")
            answer = slow.recv(4096)  # the server gives up on the silent client
        after = request(server, "/metrics")
    assert during.status == 200
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert after.status == 200
    assert any("408" in r.getMessage() for r in http_log_records(caplog))


def test_idle_connections_do_not_hold_the_worker_threads() -> None:
    # Two workers and a long socket timeout: if silent clients held workers, the scrape
    # below would wait 60 s for them and the client would time out instead.
    with serving(make_app(), threads=2, socket_timeout=60) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(6)]
        try:
            resp = request(server, "/metrics")
        finally:
            for sock in idle:
                sock.close()
    assert resp.status == 200


def test_stop_closes_idle_clients_and_leaks_no_threads() -> None:
    baseline = {t.ident for t in threading.enumerate()}
    server = ExporterServer(make_app(), listen="localhost:0", threads=4)
    server.start()
    port = server.port
    idle = socket.create_connection(("127.0.0.1", port))
    keepalive = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    try:
        keepalive.request("GET", "/metrics")
        assert keepalive.getresponse().read()
        assert len(threading.enumerate()) > len(baseline)
        server.stop(timeout=5)
        assert idle.recv(1) == b""  # closed by the server, not left hanging
    finally:
        idle.close()
        keepalive.close()
    deadline = time.monotonic() + 10
    while {t.ident for t in threading.enumerate()} - baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    leftover = [t for t in threading.enumerate() if t.ident not in baseline]
    assert leftover == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    with pytest.raises(RuntimeError):
        _ = server.port


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_many_scrapes_leak_no_file_descriptors_or_threads() -> None:
    fds, threads = _open_fds(), {t.ident for t in threading.enumerate()}
    with serving(make_app()) as server:
        for _ in range(500):
            assert request(server, "/metrics").status == 200
        keepalive = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
        try:
            for _ in range(500):
                keepalive.request("GET", "/metrics")
                resp = keepalive.getresponse()
                assert (resp.status, len(resp.read()) > 0) == (200, True)
        finally:
            keepalive.close()
    deadline = time.monotonic() + 10
    while (
        _open_fds() - fds or {t.ident for t in threading.enumerate()} - threads
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_fds() - fds == set()
    assert {t.ident for t in threading.enumerate()} - threads == set()


def test_stop_lets_an_in_flight_scrape_finish() -> None:
    gated = GatedCollector()
    server = ExporterServer(make_app(gated), listen="localhost:0")
    server.start()
    port = server.port
    results: list[Response] = []
    scrape = threading.Thread(target=lambda: results.append(request(server, "/metrics")))
    scrape.start()
    assert gated.entered.wait(TIMEOUT)
    stopper = threading.Thread(target=server.stop, kwargs={"timeout": 20})
    stopper.start()
    # The listening socket closes while the scrape is still held open.
    deadline = time.monotonic() + TIMEOUT
    refused = False
    while not refused and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(0.02)
        except OSError:
            refused = True
    gated.release.set()
    scrape.join(TIMEOUT)
    stopper.join(TIMEOUT)
    assert refused
    assert not stopper.is_alive()
    assert [r.status for r in results] == [200]
    assert b"migscope_test_gated 1.0" in results[0].body


# --------------------------------------------------------------------------- listen addresses


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        (":9400", ("", 9400)),
        ("0.0.0.0:9400", ("0.0.0.0", 9400)),
        ("[::]:9400", ("::", 9400)),
        ("[::1]:0", ("::1", 0)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_listen_addresses_parse(listen: str, expected: tuple[str, int]) -> None:
    assert parse_listen_address(listen) == expected


@pytest.mark.parametrize("listen", ["9400", "::1:9400", "[::1:9400", "host:http", ":70000", ""])
def test_bad_listen_addresses_are_one_line_errors(listen: str) -> None:
    with pytest.raises(ValueError, match="listen address") as err:
        parse_listen_address(listen)
    assert "\n" not in str(err.value)


def test_any_interface_listens_on_ipv4_loopback_and_reports_the_free_port() -> None:
    with serving(make_app(), listen=":0") as server:
        assert server.port > 0
        assert request(server, "/healthz").status == 200


def test_a_port_in_use_fails_at_start() -> None:
    with serving(make_app()) as first:
        second = ExporterServer(make_app(), listen=f"127.0.0.1:{first.port}")
        with pytest.raises(OSError, match="cannot listen on"):
            second.start()
        assert not second.running


# --------------------------------------------------------------------------- basic auth


USERS_YAML = """\
basic_auth_users:
  alice: {alice}
  bob: {bob}
"""


@pytest.fixture(scope="module")
def hashes() -> dict[str, str]:
    return {
        "alice": bcrypt.hashpw(b"wonderland", bcrypt.gensalt(rounds=4)).decode(),
        "bob": bcrypt.hashpw("bäume".encode(), bcrypt.gensalt(rounds=4)).decode(),
    }


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (basic("alice", "wonderland"), 200),
        (basic("bob", "bäume"), 200),
        (basic("alice", "wrong"), 401),
        (basic("alice", "wonderland "), 401),
        (basic("mallory", "wonderland"), 401),
        ({}, 401),
        ({"Authorization": "Basic !!!notbase64"}, 401),
        ({"Authorization": "Bearer abc"}, 401),
        ({"Authorization": "Basic " + base64.b64encode(b"alice").decode()}, 401),
    ],
)
def test_basic_auth_from_web_config(
    tmp_path: Path, hashes: dict[str, str], headers: dict[str, str], status: int
) -> None:
    config = load_web_config(write_web_config(tmp_path, USERS_YAML.format(**hashes)))
    with serving(make_app(), web_config=config) as server:
        resp = request(server, "/metrics", headers=headers)
    assert resp.status == status
    if status == 401:
        assert resp.headers["www-authenticate"] == 'Basic realm="migscope"'
        assert b"migscope_test" not in resp.body
    else:
        assert "migscope_test_energy_joules" in families(resp.body.decode())


def test_healthz_is_public_but_everything_else_needs_credentials(
    tmp_path: Path, hashes: dict[str, str]
) -> None:
    config = load_web_config(write_web_config(tmp_path, USERS_YAML.format(**hashes)))
    with serving(make_app(), web_config=config) as server:
        health = request(server, "/healthz")
        landing = request(server, "/")
        missing = request(server, "/nope")
        health_variant = request(server, "/healthz/")
    assert health.status == 200
    assert landing.status == 401
    assert missing.status == 401  # no path enumeration without credentials
    assert health_variant.status == 401


def test_healthz_can_be_protected_too(tmp_path: Path, hashes: dict[str, str]) -> None:
    config = load_web_config(write_web_config(tmp_path, USERS_YAML.format(**hashes)))
    with serving(make_app(), web_config=config, public_paths=()) as server:
        assert request(server, "/healthz").status == 401
        assert request(server, "/healthz", headers=basic("alice", "wonderland")).status == 200


class CountingVerify:
    """bcrypt.checkpw, counted: injected into the checker, not a mock of it."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.calls += 1
        return bcrypt.checkpw(password, hashed)


def test_successful_verifications_are_cached_and_failures_are_not(
    hashes: dict[str, str],
) -> None:
    verify = CountingVerify()
    checker = BasicAuthChecker(hashes, verify=verify)
    app = BasicAuthMiddleware(make_app(), checker=checker)
    with serving(app) as server:

        def status(user: str, password: str) -> int:
            return request(server, "/metrics", headers=basic(user, password)).status

        assert status("alice", "wonderland") == 200
        assert verify.calls == 1
        assert [status("alice", "wonderland") for _ in range(5)] == [200] * 5
        assert verify.calls == 1  # cached
        assert [status("alice", "nope") for _ in range(3)] == [401] * 3
        assert verify.calls == 4  # every failure pays full bcrypt cost
        assert [status("mallory", "wonderland") for _ in range(2)] == [401] * 2
        assert verify.calls == 6  # unknown users are checked against a dummy hash
        assert status("bob", "bäume") == 200
        assert verify.calls == 7
        assert status("alice", "wonderland") == 200
        assert verify.calls == 7


def test_concurrent_first_logins_cost_one_bcrypt(hashes: dict[str, str]) -> None:
    verify = CountingVerify()
    checker = BasicAuthChecker(hashes, verify=verify)
    start = threading.Barrier(40)
    results: list[bool] = []

    def login() -> None:
        start.wait(TIMEOUT)
        results.append(checker.check("alice", b"wonderland"))

    threads = [threading.Thread(target=login) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert results == [True] * 40
    assert verify.calls == 1


def test_passwords_longer_than_bcrypt_accepts_are_rejected_not_crashed(
    hashes: dict[str, str],
) -> None:
    checker = BasicAuthChecker(hashes)
    assert checker.check("alice", b"x" * 100) is False
    assert checker.check("alice", b"wonderland") is True


def test_web_config_headers_are_on_every_response(tmp_path: Path, hashes: dict[str, str]) -> None:
    path = write_web_config(
        tmp_path,
        USERS_YAML.format(**hashes)
        + "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
        + "    X-Content-Type-Options: nosniff\n",
    )
    with serving(make_app(), web_config=load_web_config(path)) as server:
        responses = [
            request(server, "/metrics", headers=basic("alice", "wonderland")),
            request(server, "/metrics"),
            request(server, "/healthz"),
            request(server, "/nope", headers=basic("alice", "wonderland")),
        ]
    assert [r.status for r in responses] == [200, 401, 200, 404]
    for resp in responses:
        assert resp.headers["x-frame-options"] == "deny"
        assert resp.headers["x-content-type-options"] == "nosniff"


# --------------------------------------------------------------------------- TLS


def test_tls_serves_https_that_verifies_against_the_ca(tmp_path: Path, pki: Pki) -> None:
    config = load_web_config(tls_web_config(tmp_path, pki))
    with serving(make_app(), web_config=config) as server:
        assert server.scheme == "https"
        resp = request(server, "/metrics", context=client_context(pki))
        with pytest.raises(ssl.SSLCertVerificationError):
            request(server, "/metrics", context=ssl.create_default_context())
    assert resp.status == 200
    assert "migscope_test_energy_joules" in families(resp.body.decode())


def test_require_and_verify_client_cert(tmp_path: Path, pki: Pki) -> None:
    config = load_web_config(
        tls_web_config(
            tmp_path,
            pki,
            "client_auth_type: RequireAndVerifyClientCert",
            "client_ca_file: ca.crt",
        )
    )
    with serving(make_app(), web_config=config) as server:
        trusted = request(
            server,
            "/metrics",
            context=client_context(pki, cert=(pki.client_cert, pki.client_key)),
        )
        with pytest.raises((ssl.SSLError, ConnectionError)):
            request(server, "/metrics", context=client_context(pki))
        with pytest.raises((ssl.SSLError, ConnectionError)):
            request(
                server,
                "/metrics",
                context=client_context(pki, cert=(pki.other_client_cert, pki.other_client_key)),
            )
        after = request(
            server,
            "/healthz",
            context=client_context(pki, cert=(pki.client_cert, pki.client_key)),
        )
    assert trusted.status == 200
    assert after.status == 200


def test_min_version_tls13_rejects_a_tls12_client(tmp_path: Path, pki: Pki) -> None:
    config = load_web_config(tls_web_config(tmp_path, pki, "min_version: TLS13"))
    with serving(make_app(), web_config=config) as server:
        with pytest.raises(ssl.SSLError):
            request(
                server,
                "/metrics",
                context=client_context(pki, max_version=ssl.TLSVersion.TLSv1_2),
            )
        modern = request(server, "/metrics", context=client_context(pki))
    assert modern.status == 200


def test_tls12_client_is_served_by_default(tmp_path: Path, pki: Pki) -> None:
    config = load_web_config(tls_web_config(tmp_path, pki))
    with serving(make_app(), web_config=config) as server:
        resp = request(
            server, "/healthz", context=client_context(pki, max_version=ssl.TLSVersion.TLSv1_2)
        )
    assert resp.status == 200


def test_silent_and_plain_http_clients_do_not_block_the_tls_port(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_web_config(tls_web_config(tmp_path, pki))
    with serving(make_app(), web_config=config, threads=2, socket_timeout=60) as server:
        silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        try:
            plain = _raw_exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            resp = request(server, "/metrics", context=client_context(pki))
        finally:
            for sock in silent:
                sock.close()
    assert not plain.startswith(b"HTTP/1.1 200")
    assert resp.status == 200
    assert any("plain HTTP" in r.getMessage() for r in http_log_records(caplog))


def test_tcp_probes_on_the_tls_port_are_not_warnings(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_web_config(tls_web_config(tmp_path, pki))
    with serving(make_app(), web_config=config) as server:
        for _ in range(3):  # what a kubelet tcpSocket probe does
            socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT).close()
        with pytest.raises(ssl.SSLError):  # a client that distrusts the server's CA
            request(server, "/healthz", context=ssl.create_default_context())
        assert request(server, "/healthz", context=client_context(pki)).status == 200
    warnings = [r for r in http_log_records(caplog) if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "TLS handshake with" in warnings[0].getMessage()


def test_web_config_with_tls_and_basic_auth_together(
    tmp_path: Path, pki: Pki, hashes: dict[str, str]
) -> None:
    path = tls_web_config(tmp_path, pki)
    path.write_text(path.read_text() + USERS_YAML.format(**hashes))
    with serving(make_app(), web_config=load_web_config(path)) as server:
        anonymous = request(server, "/metrics", context=client_context(pki))
        alice = request(
            server,
            "/metrics",
            context=client_context(pki),
            headers=basic("alice", "wonderland"),
        )
    assert anonymous.status == 401
    assert alice.status == 200


# --------------------------------------------------------------------------- SIGTERM


SIGTERM_SCRIPT = """\
import logging, pathlib, sys, time
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from migscope.exporter._http import ExporterApp, ExporterServer

flags = pathlib.Path(sys.argv[1])

class Slow:
    def collect(self):
        (flags / "entered").touch()
        while not (flags / "release").exists():
            time.sleep(0.01)
        yield GaugeMetricFamily("migscope_test_slow", "Held by the test.", value=1.0)

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
registry = CollectorRegistry()
registry.register(Slow())
app = ExporterApp(registry=registry, health=lambda: (True, ""))
server = ExporterServer(app, listen="127.0.0.1:0", shutdown_timeout=30)
server.start()
print(server.port, flush=True)
received = server.serve_forever_until_signal()
print("exited after", received.name, flush=True)
"""


def test_sigterm_finishes_the_in_flight_scrape_then_exits_0(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"
    script.write_text(SIGTERM_SCRIPT)
    flags = tmp_path / "flags"
    flags.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(flags)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr_lines: list[str] = []
    stopping = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stderr_lines.append(line)
            if "stopping gracefully" in line:
                stopping.set()

    reader = threading.Thread(target=read_stderr)
    reader.start()
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        results: list[tuple[int, bytes]] = []

        def scrape() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("GET", "/metrics")
                resp = conn.getresponse()
                results.append((resp.status, resp.read()))
            finally:
                conn.close()

        client = threading.Thread(target=scrape)
        client.start()
        deadline = time.monotonic() + TIMEOUT
        while not (flags / "entered").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (flags / "entered").exists()
        proc.send_signal(signal.SIGTERM)
        assert stopping.wait(TIMEOUT), "".join(stderr_lines)
        assert proc.poll() is None  # still finishing the scrape
        (flags / "release").touch()
        client.join(30)
        rc = proc.wait(30)
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
    assert rc == 0, "".join(stderr_lines)
    assert len(results) == 1
    assert results[0][0] == 200
    assert b"migscope_test_slow 1.0" in results[0][1]
    assert "exited after SIGTERM" in out
    assert not any("Traceback" in line for line in stderr_lines)


def test_serve_until_signal_refuses_to_run_off_the_main_thread() -> None:
    server = ExporterServer(make_app(), listen="localhost:0")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.serve_forever_until_signal()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(TIMEOUT)
    assert len(errors) == 1
    assert isinstance(errors[0], RuntimeError)
    assert "main thread" in str(errors[0])
    assert not server.running
