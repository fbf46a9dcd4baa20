"""A node the server lists for the window but answers no statistics for is named in a note.

Issue 20: a store that silently returned nothing for one node gave a smaller fleet and no word
of it. The nodes come from the label index (``/api/v1/label/<node label>/values`` over the
window, :func:`~migscope.analyzer._intake.stats_promql.discovery.find_nodes`); the slices and
their statistics from instant and range queries per chunk of nodes. The two can disagree:

* for real, on a plain Prometheus: its label index answers per block, not per sample, so a
  node whose series ended a few hours before the window (inside the same block) is listed,
  and no query over the window returns anything for it;
* as a Thanos querier with ``partial_response`` does when the store holding one node's
  series does not answer: a :class:`DroppingProxy` in front of the real Prometheus takes that
  node's series out of every query answer and leaves the label index alone (the one fake
  here: no Thanos can run on these machines).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from support.prometheus import (
    CapturedRequest,
    FaultProxy,
    HistorySeries,
    PrometheusServer,
    Reply,
    requires_prometheus,
)

from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_promql import remote_slice_stats
from migscope.analyzer._intake.stats_promql.result import StatsMode, silent_nodes_note
from migscope.cli.main import cli

pytestmark = requires_prometheus

STEP = 60
END = float((int(time.time()) // 3600 - 2) * 3600)
START = END - 4 * 3600
LIVE = ["alpha", "beta", "gamma"]
GONE = "delta"  # its exporter stopped six hours before the window


def _grid(t0: float, t1: float, value: float) -> list[tuple[float, float]]:
    return [(float(t), value) for t in range(int(t0), int(t1) + 1, STEP)]


def _slice(node: str, t0: float, t1: float) -> list[HistorySeries]:
    base = {"node": node, "gpu": "0", "gpu_uuid": f"GPU-{node}", "gpu_instance_id": "1"}
    return [
        HistorySeries("migscope_mig_info", {**base, "profile": "1g.18gb"}, _grid(t0, t1, 1)),
        HistorySeries("migscope_mig_memory_used_bytes", base, _grid(t0, t1, 2.0**30)),
        HistorySeries("migscope_mig_graphics_active_ratio", base, _grid(t0, t1, 0.4)),
    ]


@pytest.fixture(scope="module")
def server() -> Iterator[PrometheusServer]:
    history = [s for node in LIVE for s in _slice(node, START, END)]
    history += _slice(GONE, START - 10 * 3600, START - 6 * 3600)
    with PrometheusServer(history) as prom:
        yield prom


class DroppingProxy(FaultProxy):
    """Forwards to the server, and takes one node's series out of every query's answer."""

    def __init__(self, upstream: str, node: str) -> None:
        super().__init__(upstream)
        self.node = node

    def _forward(self, request: CapturedRequest) -> Reply:
        reply = super()._forward(request)
        if not request.path.startswith("/api/v1/query") or reply.status != 200:
            return reply  # the label index (and build info) answer in full
        body = json.loads(reply.body)
        result = body["data"]["result"]
        if isinstance(result, list):
            body["data"]["result"] = [r for r in result if r["metric"].get("node") != self.node]
        return Reply(reply.status, json.dumps(body), reply.headers)


def _silent_notes(notes: list[str]) -> list[str]:
    return [n for n in notes if "no statistics" in n]


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_a_node_listed_for_the_window_without_data_is_named(
    server: PrometheusServer, mode: StatsMode
) -> None:
    with PrometheusClient(server.url, retries=0, trust_env=False) as prom:
        run = remote_slice_stats(prom, start=START, end=END, stats=mode)
        got = list(run)
        base_url = prom.base_url
    assert run.nodes == tuple(sorted([*LIVE, GONE]))  # the label index lists it...
    assert sorted({s.key.node for s in got}) == LIVE  # ...no query returns it
    notes = _silent_notes(run.notes)
    assert notes == [
        f"{base_url}: 1 node(s) listed for the window returned no statistics, so they are "
        f"not in this report: {GONE} (a store or shard that answered nothing, or series that "
        "ended before the window)"
    ]


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_a_store_that_answers_nothing_for_a_node_is_said(
    server: PrometheusServer, mode: StatsMode
) -> None:
    with (
        DroppingProxy(server.url, "beta") as proxy,
        PrometheusClient(proxy.url, retries=0, trust_env=False) as prom,
    ):
        run = remote_slice_stats(prom, start=START, end=END, stats=mode)
        got = list(run)
    assert sorted({s.key.node for s in got}) == ["alpha", "gamma"]
    (note,) = _silent_notes(run.notes)
    assert ": 2 node(s) listed for the window returned no statistics" in note
    assert f"not in this report: beta, {GONE} (" in note


def test_every_node_with_data_makes_no_note(server: PrometheusServer) -> None:
    with PrometheusClient(server.url, retries=0, trust_env=False) as prom:
        run = remote_slice_stats(prom, start=START, end=END, nodes=LIVE)
        assert len(list(run)) == len(LIVE)
    assert _silent_notes(run.notes) == []


def test_the_report_names_the_nodes_without_data(server: PrometheusServer) -> None:
    with DroppingProxy(server.url, "beta") as proxy:
        result = CliRunner().invoke(
            cli,
            [
                "analyze",
                "--prometheus",
                proxy.url,
                "--end",
                str(int(END)),
                "--window",
                "4h",
                "--pending-pods",
                "off",
                "-q",
                "-o",
                "json",
            ],
        )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {s["node"] for s in report["slices"]} == {"alpha", "gamma"}
    (note,) = _silent_notes(report["notes"])
    assert f"not in this report: beta, {GONE} (" in note


def test_a_long_list_of_nodes_is_cut_short() -> None:
    nodes = tuple(f"node-{i:02d}" for i in range(25))
    note = silent_nodes_note("http://prom:9090/", nodes)
    assert note.startswith("http://prom:9090/: 25 node(s) listed for the window")
    assert ": node-00, node-01," in note
    assert "node-19 and 5 more (" in note
    assert "node-20" not in note
