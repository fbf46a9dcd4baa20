"""The Prometheus API client against a real Prometheus 2.42 and a real VictoriaMetrics 1.79.

Every data test runs on both engines, loaded with the same known history; where the engines
differ (NaN samples, error types, points limit, stats), the test says how, so a change in
either engine shows up here. Faults a healthy server will not produce on demand (503, 429
with Retry-After, HTML pages, broken JSON, dropped connections, a slow answer) come from
``FaultProxy``, a real HTTP server on loopback that answers from a script or forwards to the
real engine: the client's sockets, timeouts and headers are exercised for real, and no
``httpx.MockTransport`` is needed. Retry waits go through an injected ``sleep`` that records
the delays instead of sleeping, so nothing here asserts on timing.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import httpx
import numpy as np
import pytest
from support.prometheus import (
    FaultProxy,
    HistorySeries,
    ManagedServer,
    PrometheusServer,
    Reply,
    ServerStartError,
    free_port,
    requires_prometheus,
)
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusQueryError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
    QueryResult,
    QueryStats,
    Series,
)
from migscope.analyzer._intake.promql import selector

# 8 hours ago on the hour (a multiple of every step used below), 6 hours of 1-minute samples.
T0 = (int(time.time()) // 3600 - 8) * 3600
STEP = 60
N = 361
NODES = ("node-a", "node-b")


def activity(node: int, i: int) -> float:
    return ((i * (node + 3)) % 100) / 100


HISTORY = [
    HistorySeries(
        "test_activity_ratio",
        {"node": name, "gpu": str(k), "gpu_instance_id": str(k + 1)},
        [(T0 + i * STEP, activity(k, i)) for i in range(N)],
    )
    for k, name in enumerate(NODES)
] + [
    HistorySeries("test_special", {"case": case}, [(T0 + 60, value)])
    for case, value in (("nan", math.nan), ("pos", math.inf), ("neg", -math.inf))
]

VECTOR_JSON = json.dumps(
    {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {"node": "x"}, "value": [T0, "NaN"]}],
        },
    }
)
BAD_SAMPLE_JSON = json.dumps(
    {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "many"]}]},
    }
)
BAD_SAMPLE_JSON = json.dumps(
    {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "many"]}]},
    }
)
LOGGER = "migscope.analyzer._intake.prometheus"

ENGINES = [
    pytest.param("prometheus", marks=requires_prometheus),
    pytest.param("victoria-metrics", marks=requires_victoria),
]


@pytest.fixture(scope="module", params=ENGINES)
def server(request: pytest.FixtureRequest) -> Iterator[ManagedServer]:
    cls = PrometheusServer if request.param == "prometheus" else VictoriaServer
    with cls(HISTORY) as srv:
        yield srv


def is_prometheus(server: ManagedServer) -> bool:
    return isinstance(server, PrometheusServer)


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make_client(url: str, sleeps: list[float], **kwargs: object) -> PrometheusClient:
    kwargs.setdefault("trust_env", False)
    return PrometheusClient(url, sleep=sleeps.append, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def client(server: ManagedServer, sleeps: list[float]) -> Iterator[PrometheusClient]:
    with make_client(server.url, sleeps) as c:
        yield c


def one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------------------------
# Data on both engines


def test_instant_query_returns_the_backfilled_sample(client: PrometheusClient) -> None:
    result = client.query(selector("test_activity_ratio", node="node-a"), at=T0 + 10 * STEP)

    assert isinstance(result, QueryResult)
    assert result.result_type == "vector"
    assert result.warnings == ()
    assert len(result) == 1
    sample = result[0]
    assert dict(sample.labels) == {
        "__name__": "test_activity_ratio",
        "node": "node-a",
        "gpu": "0",
        "gpu_instance_id": "1",
    }
    assert sample.timestamp == T0 + 10 * STEP
    assert sample.value == activity(0, 10)


def test_instant_query_accepts_an_aware_datetime(client: PrometheusClient) -> None:
    at = datetime.fromtimestamp(T0 + 20 * STEP, tz=timezone.utc)
    result = client.query(selector("test_activity_ratio", node="node-b"), at=at)
    assert [(s.timestamp, s.value) for s in result] == [(T0 + 20 * STEP, activity(1, 20))]


def test_scalar_result_is_one_unlabelled_sample(client: PrometheusClient) -> None:
    result = client.query("scalar(sum(test_activity_ratio))", at=T0 + 5 * STEP)
    # Prometheus says "scalar"; VictoriaMetrics answers with a vector of one unlabelled sample.
    assert result.result_type in ("scalar", "vector")
    assert [(dict(s.labels), s.value) for s in result] == [({}, activity(0, 5) + activity(1, 5))]


def test_range_query_returns_every_step_in_order(client: PrometheusClient) -> None:
    result = client.query_range(
        selector("test_activity_ratio", node="node-b"),
        start=T0,
        end=T0 + 3600,
        step=timedelta(minutes=1),
    )
    assert result.result_type == "matrix"
    assert len(result) == 1
    series = result[0]
    assert isinstance(series, Series)
    assert series.labels["node"] == "node-b"
    np.testing.assert_array_equal(series.timestamps, T0 + STEP * np.arange(61))
    np.testing.assert_array_equal(series.values, [activity(1, i) for i in range(61)])
    assert len(series) == 61
    assert list(series.points())[3] == (T0 + 3 * STEP, activity(1, 3))


def test_label_values_filtered_by_match(client: PrometheusClient) -> None:
    assert client.label_values("node", start=T0, end=T0 + 3600) == list(NODES)
    special = selector("test_special", case=["pos", "neg"])
    assert client.label_values("case", match=special, start=T0, end=T0 + 3600) == ["neg", "pos"]
    with pytest.raises(ValueError, match="invalid label name"):
        client.label_values("node/../../admin")


def test_nan_and_infinities(server: ManagedServer, client: PrometheusClient) -> None:
    found = {s.labels["case"]: s.value for s in client.query("test_special", at=T0 + 60)}
    assert found["pos"] == math.inf
    assert found["neg"] == -math.inf
    if is_prometheus(server):
        assert math.isnan(found["nan"])
    else:  # VictoriaMetrics drops NaN samples when it evaluates a query
        assert "nan" not in found


def test_stats_are_the_servers_own_timings(server: ManagedServer, sleeps: list[float]) -> None:
    with make_client(server.url, sleeps) as c:
        result = c.query_range("sum(test_activity_ratio)", start=T0, end=T0 + 3600, step=STEP)
        usage = c.usage
    if is_prometheus(server):
        assert isinstance(result.stats, QueryStats)
        assert result.stats.eval_total_time is not None
        assert result.stats.eval_total_time > 0
        assert result.stats.total_queryable_samples is not None
        assert result.stats.total_queryable_samples > 0
        assert usage.requests_with_stats == 1
        assert usage.server_eval_seconds == result.stats.eval_total_time
    else:  # VictoriaMetrics ignores stats=all
        assert result.stats is None
        assert usage.requests_with_stats == 0
    assert usage.requests == 1
    assert usage.bytes_received > 0

    with make_client(server.url, sleeps, stats=False) as c:
        assert c.query("sum(test_activity_ratio)", at=T0).stats is None


def test_bad_promql_is_a_query_error_with_the_servers_message(
    server: ManagedServer, client: PrometheusClient, sleeps: list[float]
) -> None:
    query = "sum(" + " + ".join(["test_activity_ratio"] * 30) + " +"
    with pytest.raises(PrometheusQueryError) as caught:
        client.query(query)
    exc = caught.value
    message = one_line(exc)
    assert exc.server_message
    assert " ".join(exc.server_message.split())[:80] in message
    assert exc.query == query
    assert query[:150] in message
    assert query not in message  # cut to 200 characters
    assert message.endswith("...")
    assert f"{server.url}/api/v1/query" in message
    if is_prometheus(server):
        assert (exc.status_code, exc.error_type) == (400, "bad_data")
        assert "parse error" in exc.server_message
    else:  # VictoriaMetrics puts the HTTP status in errorType
        assert (exc.status_code, exc.error_type) == (422, "422")
    assert sleeps == []  # never retried
    assert client.usage.requests == 1


def test_end_before_start_and_bad_steps_are_refused_locally(client: PrometheusClient) -> None:
    with pytest.raises(ValueError, match="before start"):
        client.query_range("up", start=T0 + 60, end=T0, step=STEP)
    with pytest.raises(ValueError, match="step"):
        client.query_range("up", start=T0, end=T0 + 60, step=0)
    with pytest.raises(ValueError, match="naive"):
        client.query("up", at=datetime(2026, 1, 1))  # naive: the point of the test
    assert client.usage.requests == 0


# --------------------------------------------------------------------------------------------
# Retries through a scripted front end, on both engines


def test_503_and_502_then_success_is_retried(
    server: ManagedServer, client: PrometheusClient, sleeps: list[float]
) -> None:
    html = Reply(
        503, "<html><body>Service Unavailable</body></html>", {"Content-Type": "text/html"}
    )
    gateway = Reply(502, "upstream connect error", {"Content-Type": "text/plain"})
    expr = selector("test_activity_ratio", node="node-a")
    with (
        FaultProxy(server.url, replies=[html, gateway]) as proxy,
        make_client(proxy.url, sleeps) as flaky,
    ):
        result = flaky.query(expr, at=T0 + 600)
        assert len(proxy.requests) == 3
    assert len(sleeps) == 2
    assert sleeps[1] > sleeps[0]  # exponential backoff
    assert result.requests == 3
    assert result == client.query(expr, at=T0 + 600)


def test_dropped_connection_is_retried(server: ManagedServer, sleeps: list[float]) -> None:
    with (
        FaultProxy(server.url, replies=[Reply(drop=True)]) as proxy,
        make_client(proxy.url, sleeps) as c,
    ):
        result = c.query_range("test_activity_ratio", start=T0, end=T0 + 600, step=STEP)
    assert len(sleeps) == 1
    assert len(result) == 2


def test_path_prefix_is_joined(sleeps: list[float], engine_with_prefix: ManagedServer) -> None:
    prefixed = engine_with_prefix.url
    assert prefixed.endswith(("/prometheus", "/select/0/prometheus"))
    expected = [(T0 + 600, activity(0, 10))]
    expr = selector("test_activity_ratio", node="node-a")
    for base in (prefixed, prefixed + "/", prefixed + "/api/v1", prefixed + "/api/v1/"):
        with make_client(base, sleeps) as c:
            assert [(s.timestamp, s.value) for s in c.query(expr, at=T0 + 600)] == expected
            assert c.base_url == prefixed + "/"

    with (
        make_client(engine_with_prefix.root_url, sleeps) as c,
        pytest.raises(PrometheusResponseError) as caught,
    ):
        c.query(expr)
    message = one_line(caught.value)
    assert f"{engine_with_prefix.root_url}/api/v1/query" in message
    if isinstance(engine_with_prefix, PrometheusServer):
        assert caught.value.status_code == 404
        assert "path prefix" in message
    else:  # vmselect answers 400 in plain text, naming the flag
        assert caught.value.status_code == 400
        assert "wrong path prefix?" in message
        assert "http.pathPrefix" in message
    assert sleeps == []


@pytest.fixture(
    params=[
        pytest.param(("prometheus", "/prometheus"), marks=requires_prometheus),
        pytest.param(("victoria-metrics", "/select/0/prometheus"), marks=requires_victoria),
    ]
)
def engine_with_prefix(request: pytest.FixtureRequest) -> Iterator[ManagedServer]:
    engine, prefix = request.param
    srv: ManagedServer
    if engine == "prometheus":
        srv = PrometheusServer(HISTORY[:1], route_prefix=prefix)
    else:
        srv = VictoriaServer(HISTORY[:1], path_prefix=prefix)
    with srv:
        yield srv


# --------------------------------------------------------------------------------------------
# Faults of the server itself


def test_connection_refused_is_unreachable_after_retries(sleeps: list[float]) -> None:
    port = free_port()  # nothing listens there now
    with (
        make_client(f"http://127.0.0.1:{port}", sleeps, retries=2) as c,
        pytest.raises(PrometheusUnreachable) as caught,
    ):
        c.query("up")
    message = one_line(caught.value)
    assert message.startswith(f"cannot reach Prometheus at http://127.0.0.1:{port}/api/v1/query")
    assert "3 attempts" in message
    assert "refused" in message.lower()
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(sleeps) == 2


@requires_prometheus
def test_a_stopped_server_is_unreachable(sleeps: list[float]) -> None:
    srv = PrometheusServer(HISTORY[:1]).start()
    url = srv.url
    with make_client(url, sleeps, retries=1) as c:
        assert len(c.query("test_activity_ratio", at=T0)) == 1
        srv.stop()
        with pytest.raises(PrometheusUnreachable, match="cannot reach Prometheus"):
            c.query("test_activity_ratio", at=T0)
    assert len(sleeps) == 1


def test_slow_server_is_a_timeout_and_not_retried(sleeps: list[float]) -> None:
    slow = Reply(200, VECTOR_JSON, delay=30)
    with (
        FaultProxy(default=slow) as proxy,
        make_client(proxy.url, sleeps, timeout=httpx.Timeout(0.3, connect=5)) as c,
    ):
        with pytest.raises(PrometheusTimeout) as caught:
            c.query("sum(rate(x[5m]))")
        assert len(proxy.requests) == 1
    message = one_line(caught.value)
    assert "did not answer within 0.3 s (read timeout)" in message
    assert "sum(rate(x[5m]))" in message
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert sleeps == []


@requires_prometheus
def test_query_timeout_on_the_server_is_a_timeout_and_not_retried(sleeps: list[float]) -> None:
    # A 1 ms budget for a 21,600-step subquery over two series: Prometheus answers
    # 503 {"errorType": "timeout", "error": "query timed out in expression evaluation"}.
    with (
        PrometheusServer(HISTORY[:2], extra_args=["--query.timeout=1ms"]) as prom,
        make_client(prom.url, sleeps) as c,
        pytest.raises(PrometheusTimeout) as caught,
    ):
        c.query("sum(count_over_time(test_activity_ratio[6h:1s]))", at=T0 + 6 * 3600)
    assert "query timed out" in one_line(caught.value)
    assert sleeps == []


@requires_prometheus
def test_execution_error_422_is_a_query_error(sleeps: list[float]) -> None:
    with (
        PrometheusServer(HISTORY[:2], extra_args=["--query.max-samples=100"]) as prom,
        make_client(prom.url, sleeps) as c,
        pytest.raises(PrometheusQueryError) as caught,
    ):
        c.query("count_over_time(test_activity_ratio[6h])", at=T0 + 6 * 3600)
    assert (caught.value.status_code, caught.value.error_type) == (422, "execution")
    assert "too many samples" in one_line(caught.value)
    assert sleeps == []


@requires_prometheus
def test_warnings_are_kept_on_the_result_and_logged_once(
    sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    # A remote_read endpoint that refuses connections: Prometheus still answers from its own
    # TSDB, with the failed remote read as a warning (partial data), as Thanos does for a
    # store that is down.
    dead = f"http://127.0.0.1:{free_port()}/read"
    with (
        PrometheusServer(HISTORY[:1], remote_read=[dead]) as prom,
        make_client(prom.url, sleeps) as c,
        caplog.at_level(logging.WARNING, logger=LOGGER),
    ):
        first = c.query("test_activity_ratio", at=T0 + 60)
        second = c.query_range("test_activity_ratio", start=T0, end=T0 + 120, step=STEP)
    assert [s.value for s in first] == [activity(0, 1)]
    assert len(second[0]) == 3
    for result in (first, second):
        assert len(result.warnings) == 1
        assert "remote_read" in result.warnings[0]
        assert dead in result.warnings[0]
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 1  # the same warning is logged once per client
    assert "remote_read" in records[0].getMessage()


# --------------------------------------------------------------------------------------------
# TLS and basic auth on a real Prometheus (--web.config.file)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_prometheus(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[PrometheusServer, Path]]:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus not installed (Debian package 'prometheus')")
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed (Debian package 'openssl')")
    bcrypt = pytest.importorskip("bcrypt", reason="bcrypt comes with migscope[exporter]")
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )  # fmt: skip
    (d / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n"
    )
    _openssl(
        "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=prometheus",
        cwd=d,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext",
        cwd=d,
    )  # fmt: skip
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    web_config = (
        f"tls_server_config:\n  cert_file: {d / 'server.crt'}\n  key_file: {d / 'server.key'}\n"
        f"basic_auth_users:\n  alice: {hashed}\n"
    )
    with PrometheusServer(HISTORY[:1], web_config=web_config) as prom:
        yield prom, d / "ca.crt"


def test_tls_with_a_custom_ca_and_basic_auth(
    tls_prometheus: tuple[PrometheusServer, Path], sleeps: list[float]
) -> None:
    prom, ca = tls_prometheus
    url = prom.url
    assert url.startswith("https://")
    expected = [activity(0, 1)]
    with make_client(url, sleeps, ca_file=ca, basic_auth=("alice", "s3cret")) as c:
        assert [s.value for s in c.query("test_activity_ratio", at=T0 + 60)] == expected
    userinfo = url.replace("https://", "https://alice:s3cret@")
    with make_client(userinfo, sleeps, ca_file=ca) as c:
        assert [s.value for s in c.query("test_activity_ratio", at=T0 + 60)] == expected
        assert "s3cret" not in c.base_url
    with make_client(url, sleeps, verify=False, basic_auth=("alice", "s3cret")) as c:
        assert [s.value for s in c.query("test_activity_ratio", at=T0 + 60)] == expected
    assert sleeps == []


def test_wrong_password_is_a_response_error_without_the_password(
    tls_prometheus: tuple[PrometheusServer, Path], sleeps: list[float]
) -> None:
    prom, ca = tls_prometheus
    url = prom.url.replace("https://", "https://alice:wrong-pw@")
    with make_client(url, sleeps, ca_file=ca) as c, pytest.raises(PrometheusResponseError) as e:
        c.query("up")
    message = one_line(e.value)
    assert e.value.status_code == 401
    assert "not authorised" in message
    assert "wrong-pw" not in message
    assert sleeps == []


def test_unknown_ca_is_a_tls_error_and_not_retried(
    tls_prometheus: tuple[PrometheusServer, Path], sleeps: list[float]
) -> None:
    prom, _ = tls_prometheus
    with (
        make_client(prom.url, sleeps, basic_auth=("alice", "s3cret")) as c,
        pytest.raises(PrometheusUnreachable) as caught,
    ):
        c.query("up")
    message = one_line(caught.value)
    assert message.startswith(f"TLS with {prom.url}/api/v1/query failed")
    assert "ca_file" in message
    assert sleeps == []


# --------------------------------------------------------------------------------------------
# What the client sends


def test_auth_headers_params_and_form_fields_are_sent(tmp_path: Path, sleeps: list[float]) -> None:
    with FaultProxy(default=Reply(200, VECTOR_JSON)) as proxy:
        with make_client(
            proxy.url + "/prefix/?dedup=true",
            sleeps,
            bearer_token="tok-1",
            headers={"X-Scope-OrgID": "team-a"},
            params={"nocache": "1"},
        ) as c:
            result = c.query('up{job="x"}', at=T0 + 0.5)
        token = tmp_path / "token"
        token.write_text("rotated-1\n")
        with make_client(proxy.url, sleeps, bearer_token_file=token) as c:
            c.query("up")
            token.write_text("rotated-2\n")
            proxy.push(Reply(200, '{"status": "success", "data": ["a", "b"]}'))
            assert c.label_values("job", match=["up", "down"]) == ["a", "b"]
        token.unlink()
        with (
            make_client(proxy.url, sleeps, bearer_token_file=token) as c,
            pytest.raises(PrometheusError, match="cannot read the bearer token file"),
        ):
            c.query("up")
        with make_client(proxy.url, sleeps, basic_auth=("bob", "pä:ss")) as c:
            proxy.push(Reply(200, '{"status": "success", "data": ["a"]}'))
            assert c.label_values("job", match="up") == ["a"]

    first, second, third, fourth = proxy.requests
    assert math.isnan(result[0].value)  # "NaN" in the JSON envelope
    assert first.method == "POST"
    assert first.path == "/prefix/api/v1/query"
    assert first.headers["authorization"] == "Bearer tok-1"
    assert first.headers["x-scope-orgid"] == "team-a"
    assert first.headers["content-type"] == "application/x-www-form-urlencoded"
    assert first.form() == {
        "query": ['up{job="x"}'],
        "time": [f"{T0}.500"],
        "stats": ["all"],
        "dedup": ["true"],
        "nocache": ["1"],
    }
    assert second.headers["authorization"] == "Bearer rotated-1"
    assert third.headers["authorization"] == "Bearer rotated-2"
    assert third.method == "GET"
    assert third.path.startswith("/api/v1/label/job/values?")
    assert third.form() == {"match[]": ["up", "down"]}
    expected = base64.b64encode("bob:pä:ss".encode()).decode()
    assert fourth.headers["authorization"] == f"Basic {expected}"
    assert fourth.form() == {"match[]": ["up"]}
    assert sleeps == []


# --------------------------------------------------------------------------------------------
# Protocol edge cases from a scripted server


def test_429_waits_as_long_as_retry_after_says(sleeps: list[float]) -> None:
    past = format_datetime(datetime(2020, 1, 1, tzinfo=timezone.utc), usegmt=True)
    replies = [
        Reply(429, "slow down", {"Retry-After": "7", "Content-Type": "text/plain"}),
        Reply(429, "slow down", {"Retry-After": past, "Content-Type": "text/plain"}),
    ]
    with (
        FaultProxy(replies=replies, default=Reply(200, VECTOR_JSON)) as proxy,
        make_client(proxy.url, sleeps) as c,
    ):
        result = c.query("up")
    assert sleeps == [7.0, 0.0]
    assert result.requests == 3
    assert len(result) == 1


def test_retry_after_beyond_max_backoff_gives_up(sleeps: list[float]) -> None:
    too_long = Reply(429, '{"error":"quota"}', {"Retry-After": "120"})
    with (
        FaultProxy(default=too_long) as proxy,
        make_client(proxy.url, sleeps, max_backoff=30) as c,
        pytest.raises(PrometheusResponseError) as caught,
    ):
        c.query("up")
    message = one_line(caught.value)
    assert caught.value.status_code == 429
    assert "retry after 120 s" in message
    assert "quota" in message
    assert sleeps == []


def test_html_error_page_after_every_retry(sleeps: list[float]) -> None:
    page = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body/></html>"
    with (
        FaultProxy(default=Reply(502, page, {"Content-Type": "text/html"})) as proxy,
        make_client(proxy.url, sleeps, retries=2) as c,
        pytest.raises(PrometheusResponseError) as caught,
    ):
        c.query("up")
    message = one_line(caught.value)
    assert message.startswith(f"HTTP 502 from {proxy.url}/api/v1/query after 3 attempts")
    assert "HTML page" in message
    assert "502 Bad Gateway" in message
    assert len(sleeps) == 2


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(200, "<html>Sign in</html>", {"Content-Type": "text/html"}), "HTML page"),
        (Reply(200, "{not json"), "is not JSON"),
        (Reply(200, '{"hello": "world"}'), "not a Prometheus API response"),
        (Reply(200, '{"status": "success"}'), "success without 'data'"),
        (Reply(200, '{"status": "success", "data": []}'), "no resultType"),
        (Reply(200, BAD_SAMPLE_JSON), "malformed sample"),
        (
            Reply(200, '{"status":"success","data":{"resultType":"matrix","result":[]}}'),
            "returned a matrix for an instant query",
        ),
        (Reply(302, "", {"Location": "https://sso.example/login"}), "redirected to https://sso"),
        (Reply(401, "Unauthorized", {"Content-Type": "text/plain"}), "not authorised"),
        (Reply(403, '{"status":"error","error":"tenant"}'), "not authorised"),
        (Reply(404, "404 page not found", {"Content-Type": "text/plain"}), "path prefix"),
        (Reply(200, "not gzip at all", {"Content-Encoding": "gzip"}), "could not read the answer"),
    ],
)
def test_unusable_answers_are_response_errors_and_not_retried(
    reply: Reply, expected: str, sleeps: list[float]
) -> None:
    with (
        FaultProxy(default=reply) as proxy,
        make_client(proxy.url, sleeps) as c,
        pytest.raises(PrometheusResponseError) as caught,
    ):
        c.query("up")
    assert expected in one_line(caught.value)
    assert isinstance(caught.value, PrometheusError)
    assert sleeps == []
    assert len(proxy.requests) == 1


def test_error_envelope_on_200_is_a_query_error(sleeps: list[float]) -> None:
    body = '{"status":"error","errorType":"bad_data","error":"1:5: parse error"}'
    with (
        FaultProxy(default=Reply(200, body)) as proxy,
        make_client(proxy.url, sleeps) as c,
        pytest.raises(PrometheusQueryError, match="parse error"),
    ):
        c.query("up{")
    assert sleeps == []


# --------------------------------------------------------------------------------------------
# Construction


def test_base_url_is_normalised_and_checked() -> None:
    with PrometheusClient("https://mimir.example/prometheus") as c:
        assert c.base_url == "https://mimir.example/prometheus/"
    with PrometheusClient("http://u:p@vm:8481/select/0/prometheus/api/v1/?x=1") as c:
        assert c.base_url == "http://vm:8481/select/0/prometheus/"
    for bad in ("prometheus:9090", "ftp://host/", "http:///path"):
        with pytest.raises(ValueError, match="http"):
            PrometheusClient(bad)
    with pytest.raises(ValueError, match="one of"):
        PrometheusClient("http://h", bearer_token="t", basic_auth=("u", "p"))
    with pytest.raises(ValueError, match="both"):
        PrometheusClient("http://u:p@h", basic_auth=("u", "p"))
    with pytest.raises(ValueError, match="verify=False"):
        PrometheusClient("https://h", ca_file="/etc/ssl/ca.pem", verify=False)


# --------------------------------------------------------------------------------------------
# The test servers themselves


@requires_prometheus
def test_a_server_that_cannot_start_reports_its_log(tmp_path: Path) -> None:
    server = PrometheusServer(extra_args=["--no-such-flag"])
    with pytest.raises(ServerStartError) as caught:
        server.start()
    assert "exited with" in str(caught.value)
    assert "unknown long flag '--no-such-flag'" in str(caught.value)
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url  # stopped and cleaned up

    bad = tmp_path / "bad.om"
    bad.write_text('up{job="x" 1\n# EOF\n')
    with pytest.raises(ServerStartError, match=r"promtool could not backfill bad\.om"):
        PrometheusServer(openmetrics=bad).start()


@requires_victoria
def test_victoria_server_cleans_up_and_loads_more(sleeps: list[float]) -> None:
    with VictoriaServer() as vm, make_client(vm.url, sleeps) as c:
        root = vm.root
        assert c.query("test_activity_ratio", at=T0) == []
        assert vm.load(HISTORY[:1]) == N
        assert [s.value for s in c.query("test_activity_ratio", at=T0 + 60)] == [activity(0, 1)]
    assert not root.exists()
