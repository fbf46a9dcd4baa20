"""Faults and edges of the server-side statistics, against a real Prometheus.

The agreement with the embedded statistics is proven in ``test_stats_agree.py``; here: what a
user sees when the server is down or empty, that missing data stays missing (coverage below
1, activity unknown rather than 0), that node names are matched literally, and that the node
chunking does not change any number.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.prometheus import HistorySeries, PrometheusServer, free_port, requires_prometheus

from migscope.analyzer._intake.dialect import Dialect, NoMigSeriesError
from migscope.analyzer._intake.prometheus import PrometheusClient, PrometheusUnreachable
from migscope.analyzer._intake.stats_promql import remote_slice_stats, snap_window

pytestmark = requires_prometheus

STEP = 60
END = float((int(time.time()) // 3600 - 2) * 3600)
START = END - 4 * 3600
TRICKY = 'n"1.*|(x)'
# Would match TRICKY's regex if the name were pasted into the matcher unescaped.
LOOKALIKE = 'n"1abc|(x)'
NODES = ["alpha", "beta", "gamma", TRICKY, LOOKALIKE]


def _grid(t0: float, t1: float, value: float) -> list[tuple[float, float]]:
    return [(float(t), value) for t in range(int(t0), int(t1) + 1, STEP)]


def _slice(node: str, gi: int, *, act: float | None, t0: float = START, t1: float = END) -> list:
    base = {"node": node, "gpu": "0", "gpu_uuid": f"GPU-{node}", "gpu_instance_id": str(gi)}
    series = [
        HistorySeries("migscope_mig_info", {**base, "profile": "1g.18gb"}, _grid(t0, t1, 1)),
        HistorySeries("migscope_mig_memory_used_bytes", base, _grid(t0, t1, 2.0**30)),
    ]
    if act is not None:
        series.append(HistorySeries("migscope_mig_graphics_active_ratio", base, _grid(t0, t1, act)))
    return series


def _history() -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for i, node in enumerate(NODES):
        out += _slice(node, 1, act=0.1 * (i + 1))
    out += _slice("alpha", 2, act=None)  # Ampere without DCGM: no activity series
    out += _slice("beta", 2, act=0.5, t0=START + 2 * 3600)  # only the last half of the window
    return out


@pytest.fixture(scope="module")
def client() -> Iterator[PrometheusClient]:
    with (
        PrometheusServer(_history()) as server,
        PrometheusClient(server.url, retries=0, trust_env=False) as prom,
    ):
        yield prom


def test_server_down_is_one_line_error() -> None:
    with (
        PrometheusClient(f"http://127.0.0.1:{free_port()}", retries=0) as prom,
        pytest.raises(PrometheusUnreachable) as info,
    ):
        remote_slice_stats(prom, start=START, end=END)
    assert "\n" not in str(info.value)


def test_empty_server_says_no_mig_series() -> None:
    with (
        PrometheusServer() as server,
        PrometheusClient(server.url, retries=0) as prom,
        pytest.raises(NoMigSeriesError, match="no MIG series found"),
    ):
        remote_slice_stats(prom, start=START, end=END)


def test_missing_activity_is_unknown_and_partial_data_lowers_coverage(
    client: PrometheusClient,
) -> None:
    stats = {
        (s.key.node, s.key.gpu_instance_id): s
        for s in remote_slice_stats(client, start=START, end=END, nodes=["alpha", "beta"])
    }
    assert set(stats) == {("alpha", 1), ("alpha", 2), ("beta", 1), ("beta", 2)}
    no_activity = stats[("alpha", 2)]
    assert no_activity.activity_p95 is None
    assert no_activity.activity_max is None
    assert no_activity.memory_peak_bytes == 2.0**30
    assert no_activity.coverage == 1.0
    half = stats[("beta", 2)]
    assert half.coverage == pytest.approx(0.5, abs=1 / 240)
    assert half.activity_p50 == 0.5
    assert stats[("alpha", 1)].allocated_fraction == 0.0
    assert stats[("alpha", 1)].owners == ()


def test_node_names_are_matched_literally(client: PrometheusClient) -> None:
    run = remote_slice_stats(client, start=START, end=END, nodes=[TRICKY])
    got = list(run)
    assert run.nodes == (TRICKY,)
    assert [s.key.node for s in got] == [TRICKY]
    assert got[0].activity_max == pytest.approx(0.4)


def test_chunking_by_node_changes_nothing(client: PrometheusClient) -> None:
    one = remote_slice_stats(client, start=START, end=END, chunk_nodes=100)
    many = remote_slice_stats(client, start=START, end=END, chunk_nodes=2)
    first, second = list(one), list(many)
    assert first == second
    assert len(first) == 7
    assert one.dialect is Dialect.MIGSCOPE
    assert one.node_label == "node"
    assert many.queries > one.queries  # three chunks of queries instead of one
    assert one.server_eval_seconds is not None


def test_window_snaps_to_the_step_grid() -> None:
    # End rounded down to the grid, length rounded up to whole steps (103.3 -> 104).
    assert snap_window(1000.5, 7230.0, 60) == (960.0, 7200.0)
    with pytest.raises(ValueError, match="after its start"):
        snap_window(10.0, 10.0, 60)
    with (
        PrometheusClient("http://127.0.0.1:1", retries=0) as prom,
        pytest.raises(ValueError, match="chunk_nodes"),
    ):
        remote_slice_stats(prom, start=0, end=60, chunk_nodes=0)


def test_no_hourly_buckets_is_accepted(client: PrometheusClient) -> None:
    """``period=None`` (documented: no buckets) used to fail building a negative duration."""
    stats = list(remote_slice_stats(client, start=START, end=END, period=None))
    assert stats
    assert all(s.hourly is None for s in stats)
