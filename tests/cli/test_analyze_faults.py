"""``migscope analyze --prometheus`` when the server misbehaves: the run either copes or says why.

A real Prometheus holds the last day of the simulated ``h200-node`` (so the CLI's window,
which ends now, finds it), with a ``remote_read`` endpoint that is down: every answer then
carries a real "partial data" warning, as Thanos gives when a store is missing. A
:class:`~support.prometheus.FaultProxy` in front scripts the faults a healthy server will not
produce on demand: gateway errors, a persistent 500, a slow answer, a garbage body.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from support.prometheus import (
    FaultProxy,
    HistorySeries,
    PrometheusServer,
    Reply,
    free_port,
    requires_prometheus,
)

from migscope.analyzer._intake.backfill import iter_history
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices
from migscope.cli.main import cli
from migscope.sim import resolve_scenario

pytestmark = requires_prometheus
DAY = 86400.0


def _recent_history(tmp: Path) -> list[HistorySeries]:
    """The last day of ``h200-node``, moved so that it ends a minute ago."""
    tree = yaml.safe_load(Path(resolve_scenario("h200-node")).read_text())
    start = (int(time.time()) // 60) * 60 - DAY - 60
    tree["start"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    path = tmp / "recent.yaml"
    path.write_text(yaml.safe_dump(tree))
    slices = simulate_slices(load_fleet([path]), window_s=DAY, step_s=60.0)
    return [
        HistorySeries(name, labels, zip((ms / 1000.0).tolist(), values.tolist(), strict=True))
        for name, labels, ms, values in iter_history(slices)
    ]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    history = _recent_history(tmp_path_factory.mktemp("recent"))
    dead = f"http://127.0.0.1:{free_port()}/read"
    with PrometheusServer(history, remote_read=[dead]) as server:
        yield server


def _analyze(url: str, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["analyze", "--prometheus", url, "--window", "1d", *extra])
    return result.exit_code, result.stdout, result.stderr


def test_gateway_errors_are_retried_and_partial_data_is_said(
    prometheus: PrometheusServer,
) -> None:
    gateway = Reply(502, "upstream connect error", {"Content-Type": "text/plain"})
    busy = Reply(503, "<html>busy</html>", {"Content-Type": "text/html"})
    with FaultProxy(prometheus.url, replies=[gateway, busy]) as proxy:
        code, out, err = _analyze(proxy.url, "-o", "json")
        assert code == 0, err
        assert len(proxy.requests) > 2
    report = json.loads(out)
    statuses = {s["status"] for s in report["slices"]}
    assert {"idle", "unallocated", "oversized"} <= statuses
    partial = [n for n in report["notes"] if "may rest on partial data" in n]
    # Each distinct warning once (the label-values API of a Prometheus with remote_read
    # also warns "not implemented"), the failed remote read among them.
    assert len(partial) == len(set(partial)) >= 1
    assert sum("remote_read" in n for n in partial) == 1


@pytest.mark.parametrize(
    ("reply", "extra", "message"),
    [
        (Reply(500, "boom", {"Content-Type": "text/plain"}), (), "HTTP 500"),
        (Reply(200, "not json at all", {"Content-Type": "text/plain"}), (), "not JSON"),
        (
            Reply(200, '{"status": "success", "data": []}'),  # a server without any series
            (),
            "no MIG series",
        ),
        (Reply(200, "{}", delay=5.0), ("--timeout", "0.5"), "did not answer within 0.5 s"),
    ],
    ids=["500", "garbage", "empty", "slow"],
)
def test_a_failing_server_is_one_line(reply: Reply, extra: tuple[str, ...], message: str) -> None:
    with FaultProxy(default=reply) as proxy:
        code, out, err = _analyze(proxy.url, *extra)
    assert code == 1
    assert out == ""
    assert err.startswith("migscope: error: ")
    assert err.count("\n") == 1, err
    assert message in err
