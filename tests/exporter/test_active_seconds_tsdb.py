"""Planted data in both engines: rate() of the counter is the true mean; the gauge aliases.

The simulator runs a bursty load (Poisson bursts of 4 s, shorter than the 30 s scrape
interval) on one slice; the exporter samples every second with its default 10 s GPM window,
and a "scrape" every 30 s keeps what ``/metrics`` says then. That sequence is loaded into a
real Prometheus (promtool backfill) and a real VictoriaMetrics. The true mean activity over
any range is the workload's own integral. ``rate(counter[W])`` must equal it within 1e-6 on
both engines (samples fall on the range's edges: Prometheus 2.x takes both edges,
VictoriaMetrics the sample just before the range, so neither extrapolates), while
``avg_over_time(gauge[W])``, which sees a third of each scrape interval, misses by far more.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.prometheus import HistorySeries, PrometheusServer, requires_prometheus
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._sampler import Sampler
from migscope.sim import Simulation

T0 = 1_700_000_000.0
SCRAPE = 30
HOURS = 2
LOAD = {"pattern": "bursty", "rate": 150, "burst": 4.0}
SCENARIO: dict[str, Any] = {
    "seed": 11,
    "nodes": [
        {
            "name": "n",
            "gpus": [
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [{"profile": "3g.71gb", "workload": LOAD}],
                }
            ],
        }
    ],
}
COUNTER = "migscope_mig_graphics_active_seconds_total"
GAUGE = "migscope_mig_graphics_active_ratio"
WINDOWS = (60, 300, 900, 3600)


def planted() -> tuple[list[HistorySeries], Any]:
    """Scrapes every 30 s of two simulated hours, and the workload (the truth)."""
    sim = Simulation.from_scenario(SCENARIO)
    backend = NvmlBackend(sim.node("n").nvml, name="sim", clock=sim.clock.elapsed)
    sampler = Sampler(backend, interval=1.0, clock=sim.clock.elapsed, wall=sim.clock.now)
    workload = sim.node("n").gpus[0].instances_at(0.0)[0].workload
    counter: list[tuple[float, float]] = []
    gauge: list[tuple[float, float]] = []
    labels = {}
    for second in range(HOURS * 3600 + 1):
        snap = sampler.run_once()
        inst = snap.gpus[0].instances[0]
        labels = {"gpu": "0", "gpu_uuid": snap.gpus[0].uuid, "mig_uuid": inst.mig_uuid}
        if second % SCRAPE == 0 and inst.active_seconds and inst.activity:
            assert inst.active_seconds.graphics is not None
            assert inst.activity.graphics is not None
            counter.append((T0 + second, inst.active_seconds.graphics))
            gauge.append((T0 + second, inst.activity.graphics))
        sim.clock.advance(1.0)
    return [HistorySeries(COUNTER, labels, counter), HistorySeries(GAUGE, labels, gauge)], workload


@pytest.fixture(scope="module")
def plant() -> tuple[list[HistorySeries], Any]:
    return planted()


def true_mean(workload: Any, start: float, end: float) -> float:
    return float(workload.cumulative(end) - workload.cumulative(start)) / (end - start)


def check(url: str, workload: Any) -> None:
    worst_gauge = 0.0
    with PrometheusClient(url, trust_env=False) as client:
        for window in WINDOWS:
            for end in range(3600 + 600, HOURS * 3600 + 1, 600):  # every range inside the data
                truth = true_mean(workload, end - window, end)
                got = client.query(f"rate({COUNTER}[{window}s])", at=T0 + end)
                assert len(got) == 1
                assert got[0].value == pytest.approx(truth, abs=1e-6), (window, end)
                inc = client.query(f"increase({COUNTER}[{window}s])", at=T0 + end)
                assert inc[0].value == pytest.approx(truth * window, abs=1e-6 * window)
                avg = client.query(f"avg_over_time({GAUGE}[{window}s])", at=T0 + end)
                worst_gauge = max(worst_gauge, abs(avg[0].value - truth))
    assert worst_gauge > 0.02  # the gauge sampled every 30 s aliases; the counter does not


@requires_prometheus
def test_rate_of_the_counter_is_the_true_mean_in_prometheus(
    plant: tuple[list[HistorySeries], Any],
) -> None:
    history, workload = plant
    with PrometheusServer(history) as server:
        check(server.url, workload)


@requires_victoria
def test_rate_of_the_counter_is_the_true_mean_in_victoriametrics(
    plant: tuple[list[HistorySeries], Any],
) -> None:
    history, workload = plant
    with VictoriaServer(history, extra_args=["-search.disableCache"]) as server:
        check(server.url, workload)
