"""Exporter hardening, configuration side (issue 12, items 4-8; issue 17, certificate expiry).

Each test reproduces one reported defect through the real component: the HTTP server on
loopback, the web-config loader, and the ``migscope-exporter`` console script in a child
process. The one stand-in is the bcrypt comparison of the flood test, which blocks until
released so that "a check is still running" is a fact of the test rather than a matter of
timing; the checker receives it through its documented ``verify`` argument.
"""

from __future__ import annotations

import base64
import http.client
import logging
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from migscope.core._durations import format_duration
from migscope.exporter._http import (
    BasicAuthChecker,
    BasicAuthMiddleware,
    ExporterApp,
    ExporterServer,
    WebConfigError,
    load_web_config,
)
from migscope.exporter._http.auth import MAX_BCRYPT_COST, MAX_CONCURRENT_CHECKS
from migscope.exporter._http.webconfig.tls import build_ssl_context

EXPORTER = str(Path(sys.executable).with_name("migscope-exporter"))
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"  # Debian package: openssl
TIMEOUT = 10.0  # liveness bound for one request or one wait; never a timing assertion
RIGHT = b"wonderland"


def basic(user: str, password: bytes) -> dict[str, str]:
    token = base64.b64encode(user.encode() + b":" + password).decode()
    return {"Authorization": f"Basic {token}"}


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


class Gauge:
    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("migscope_test_up", "Always 1.", value=1.0)


def make_app() -> ExporterApp:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(support_collectors_without_names=True)
    registry.register(Gauge())
    return ExporterApp(registry=registry, health=lambda: (True, "ok"))


@pytest.fixture(scope="module")
def alice_hash() -> str:
    return bcrypt.hashpw(RIGHT, bcrypt.gensalt(rounds=4)).decode()


# --------------------------------------------------------------------------- 4: bcrypt floods


class GatedVerify:
    """bcrypt.checkpw, except that wrong passwords block until the test releases them.

    A blocked call stands for a slow bcrypt (cost 12 takes ~300 ms): while it blocks, the
    check is certainly still running, whatever the machine's speed.
    """

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.calls += 1
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if password != RIGHT:
                assert self.release.wait(30), "the test never released the gated bcrypt"
            return bcrypt.checkpw(password, hashed)
        finally:
            with self._lock:
                self.running -= 1


def test_a_wrong_password_flood_cannot_hold_the_workers(alice_hash: str) -> None:
    """30 clients with wrong passwords: cached scrapes and /healthz are still answered."""
    verify = GatedVerify()
    checker = BasicAuthChecker({"alice": alice_hash}, verify=verify)
    server = ExporterServer(
        BasicAuthMiddleware(make_app(), checker=checker), listen="127.0.0.1:0", threads=8
    )
    server.start()
    statuses: list[int] = []
    flood: list[threading.Thread] = []
    try:
        assert get(server.port, "/metrics", basic("alice", RIGHT))[0] == 200  # now cached

        def guess(i: int) -> None:
            statuses.append(get(server.port, "/metrics", basic("alice", b"guess-%d" % i))[0])

        flood = [threading.Thread(target=guess, args=(i,)) for i in range(30)]
        for t in flood:
            t.start()
        wait_until(lambda: verify.running >= 1, "a wrong password to reach bcrypt")
        # While bcrypt checks of wrong passwords are still running, a scrape with the cached
        # right password and the probe are answered (before the fix: every worker waited on
        # the bcrypt lock, and these requests timed out).
        assert get(server.port, "/metrics", basic("alice", RIGHT))[0] == 200
        assert get(server.port, "/healthz")[0] == 200
        wait_until(lambda: len(statuses) >= 30 - MAX_CONCURRENT_CHECKS, "refused guesses")
        assert verify.running <= MAX_CONCURRENT_CHECKS
    finally:
        verify.release.set()
        for t in flood:
            t.join(TIMEOUT)
        server.stop(timeout=5)
    assert statuses == [401] * 30
    assert verify.most_running <= MAX_CONCURRENT_CHECKS
    assert verify.calls == 1 + MAX_CONCURRENT_CHECKS  # the first login, then one per slot


def test_busy_slots_answer_a_new_wrong_password_at_once(
    alice_hash: str, caplog: pytest.LogCaptureFixture
) -> None:
    verify = GatedVerify()
    checker = BasicAuthChecker({"alice": alice_hash}, verify=verify)
    held = [
        threading.Thread(target=checker.check, args=("alice", b"slow-%d" % i))
        for i in range(MAX_CONCURRENT_CHECKS)
    ]
    try:
        for t in held:
            t.start()
        wait_until(lambda: verify.running == MAX_CONCURRENT_CHECKS, "the slots to fill")
        with caplog.at_level(logging.WARNING, logger="migscope.exporter._http.auth"):
            assert checker.check("alice", b"another-guess") is False  # no wait, no bcrypt
            assert checker.check("mallory", b"x") is False
        assert verify.calls == MAX_CONCURRENT_CHECKS
        assert checker.refused_busy == 2
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings  # rate-limited: one line, not one per request
        assert "busy" in warnings[0]
    finally:
        verify.release.set()
        for t in held:
            t.join(TIMEOUT)
    # Once the slots are free, a right password that was never checked logs in as before.
    assert checker.check("alice", RIGHT) is True


def test_a_repeated_wrong_password_does_not_wait_for_its_own_check(alice_hash: str) -> None:
    """A misconfigured scraper repeats one wrong password: known wrong, it never queues."""
    verify = GatedVerify()
    checker = BasicAuthChecker({"alice": alice_hash}, verify=verify)
    verify.release.set()
    assert checker.check("alice", b"old-password") is False  # now known to be wrong
    verify.release.clear()
    first = threading.Thread(target=checker.check, args=("alice", b"old-password"))
    try:
        first.start()
        wait_until(lambda: verify.running == 1, "the repeated check to run")
        results = []
        for _ in range(5):
            results.append(checker.check("alice", b"old-password"))
        assert results == [False] * 5
        assert verify.calls == 2
    finally:
        verify.release.set()
        first.join(TIMEOUT)


# --------------------------------------------------------------------------- 5: bcrypt cost


def _hash_with_cost(cost: int) -> str:
    """A well-formed hash of ``cost`` without paying for it (salt and digest from cost 4)."""
    return bcrypt.hashpw(b"x", bcrypt.gensalt(rounds=4)).decode().replace("$04$", f"${cost}$")


@pytest.mark.parametrize("cost", [MAX_BCRYPT_COST + 1, 31])
def test_a_bcrypt_cost_above_the_limit_is_refused_naming_the_user(
    tmp_path: Path, cost: int
) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  carol: '{_hash_with_cost(cost)}'\n")
    with pytest.raises(WebConfigError) as err:
        load_web_config(path)
    assert str(err.value) == (
        f"web-config {path}: basic_auth_users.carol: bcrypt cost {cost} is above "
        f"{MAX_BCRYPT_COST}, the most migscope accepts (one check would take about "
        f"{format_duration(0.08 * 2 ** (cost - 10))}); make the hash with cost 10 to 12"
    )


def test_the_highest_accepted_cost_loads(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  carol: '{_hash_with_cost(MAX_BCRYPT_COST)}'\n")
    assert set(load_web_config(path).users) == {"carol"}


def test_the_checker_refuses_a_cost_above_the_limit_given_in_code() -> None:
    with pytest.raises(ValueError, match=r"user 'carol': bcrypt cost 31 is above 14"):
        BasicAuthChecker({"carol": _hash_with_cost(31)})


def test_the_exporter_stops_at_start_on_a_cost_31_hash(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  carol: '{_hash_with_cost(31)}'\n")
    port = _free_port()
    result = subprocess.run(
        [EXPORTER, "--backend", "sim", "--web-config", str(path), "--listen", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,  # before the fix it never returned (a cost-31 dummy hash at start)
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("migscope-exporter: error: web-config ")
    assert "basic_auth_users.carol: bcrypt cost 31 is above 14" in result.stderr


# --------------------------------------------------------------------------- 6: null TLS


@pytest.mark.parametrize("null", ["", " null", " ~"])
def test_a_null_tls_section_is_refused_like_an_empty_one(tmp_path: Path, null: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text("tls_server_config: {}\n")
    with pytest.raises(WebConfigError) as empty:
        load_web_config(path)
    path.write_text(f"tls_server_config:{null}\n")
    with pytest.raises(WebConfigError) as err:
        load_web_config(path)
    assert str(err.value) == str(empty.value)
    assert err.value.key == "tls_server_config.cert_file"


# --------------------------------------------------------------------------- 7: name[]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def serving_exporter() -> Iterator[int]:
    """The real ``migscope-exporter`` serving a simulated node; yields its port."""
    port = _free_port()
    proc = subprocess.Popen(
        [EXPORTER, "--backend", "sim", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "the exporter exited"
            try:
                if get(port, "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the exporter never became healthy"
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _family_names(body: bytes) -> set[str]:
    return {f.name for f in text_string_to_metric_families(body.decode())}


@pytest.mark.parametrize(
    "query",
    [
        "name[]=migscope_gpu_info&name[]=migscope_collector_success",
        # Prometheus' `params:` are URL-encoded on the wire: name%5B%5D=...
        "name%5B%5D=migscope_gpu_info&name%5B%5D=migscope_collector_success",
    ],
)
def test_name_filter_selects_the_named_series(serving_exporter: int, query: str) -> None:
    status, body = get(serving_exporter, f"/metrics?{query}")
    assert status == 200
    assert _family_names(body) == {"migscope_gpu_info", "migscope_collector_success"}


def test_name_filter_matches_sample_names_as_prometheus_client_does(
    serving_exporter: int,
) -> None:
    status, full = get(serving_exporter, "/metrics")
    assert status == 200
    everything = _family_names(full)
    assert {"migscope_gpu_info", "migscope_collector_success"} < everything
    assert get(serving_exporter, "/metrics?name[]=no_such_series") == (200, b"")
    # The info family's sample is migscope_gpu_info; a family name alone selects nothing
    # unless it is also a sample name (restricted_registry's rule).
    status, body = get(serving_exporter, "/metrics?name[]=migscope_gpu")
    assert (status, _family_names(body)) == (200, set())


# --------------------------------------------------------------------------- 8: --once, NVML


def _nvml_loads() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_nvml_loads(), reason="NVML loads here; the test needs a machine without")
def test_once_exits_1_in_one_line_when_nvml_does_not_load() -> None:
    result = subprocess.run(
        [EXPORTER, "--backend", "nvml", "--once"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("migscope-exporter: error: backend nvml: NVML init failed")


# --------------------------------------------------------------------------- 17: expiry


def _certificate(directory: Path, name: str, *, days: int) -> tuple[Path, Path]:
    """A self-signed certificate valid from now for ``days`` (negative: already expired)."""
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    subprocess.run(
        [OPENSSL, "req", "-x509", *ec, "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    if days != 1:
        # `x509 -days` re-signs with notAfter = now + days; a negative count has expired.
        subprocess.run(
            [OPENSSL, "x509", "-in", str(cert), "-key", str(key), "-out", str(cert),
             "-days", str(days)],
            check=True, capture_output=True,
        )  # fmt: skip
    return cert, key


def _tls_config(tmp_path: Path, days: int) -> Path:
    cert, key = _certificate(tmp_path, "server", days=days)
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n")
    return path


def _expiry_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "certificate" in r.getMessage()
    ]


def test_an_expired_certificate_loads_with_a_warning_naming_file_and_date(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _tls_config(tmp_path, days=-1)
    with caplog.at_level(logging.WARNING):
        config = load_web_config(path)
    assert config.ssl_context() is not None  # still served: refusing would take down scrapes
    (warning,) = _expiry_warnings(caplog)
    cert = tmp_path / "server.crt"
    assert warning.startswith(
        f"web-config {path}: tls_server_config.cert_file: the certificate in {cert} expired on "
    )
    assert warning.endswith(" UTC")
    caplog.clear()
    # Rebuilding the context (a reload) checks again.
    assert config.tls_server_config is not None
    with caplog.at_level(logging.WARNING):
        build_ssl_context(config.tls_server_config, source=str(path))
    assert len(_expiry_warnings(caplog)) == 1


def test_a_certificate_expiring_within_7_days_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _tls_config(tmp_path, days=3)
    with caplog.at_level(logging.WARNING):
        load_web_config(path)
    (warning,) = _expiry_warnings(caplog)
    assert f"the certificate in {tmp_path / 'server.crt'} expires on " in warning
    assert "(in 2 days)" in warning or "(in 3 days)" in warning


def test_a_certificate_valid_for_weeks_loads_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _tls_config(tmp_path, days=30)
    with caplog.at_level(logging.WARNING):
        load_web_config(path)
    assert _expiry_warnings(caplog) == []
