"""An NVML error on ANY call the exporter makes: it keeps sampling and serving, and says so once.

The list of calls is not hand-written: a healthy run of the production backend on the
simulator records every NVML function it uses, and each one is then made to fail.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._sampler import Sampler
from migscope.sim import Simulation

SCENARIO: dict[str, Any] = {
    "seed": 3,
    "nodes": [
        {
            "name": "node-a",
            "gpus": [
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {"profile": "3g.71gb", "workload": {"pattern": "constant", "level": 0.6}},
                        {"profile": "2g.35gb"},
                    ],
                },
                {"model": "H100-80GB", "workload": {"pattern": "constant", "level": 0.4}},
            ],
        }
    ],
}


def build() -> tuple[Simulation, Sampler, SnapshotCollector]:
    sim = Simulation.from_scenario(SCENARIO)
    backend = NvmlBackend(
        sim.node("node-a").nvml,
        name="sim",
        clock=sim.clock.elapsed,
        gpm_interval=1.0,
        enumerate_interval=2.0,
    )
    sampler = Sampler(backend, interval=1.0, energy_interval=2.0, clock=sim.clock.elapsed)
    collector = SnapshotCollector(snapshot=sampler.latest, backend="sim", version="t")
    return sim, sampler, collector


def _functions_used() -> list[str]:
    sim, sampler, _ = build()
    for _ in range(4):
        sampler.run_once()
        sim.clock.advance(1.0)
    sampler.stop()
    return sorted(sim.node("node-a").nvml.calls)


FUNCTIONS = _functions_used()


def test_the_recorded_call_list_is_the_real_one() -> None:
    assert {"nvmlDeviceGetMemoryInfo", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet"} <= set(FUNCTIONS)
    assert len(FUNCTIONS) >= 20


@pytest.mark.parametrize("error", ["UNKNOWN", "GPU_IS_LOST", "NOT_SUPPORTED", "TIMEOUT"])
@pytest.mark.parametrize("function", FUNCTIONS)
def test_an_error_on_any_call_keeps_the_exporter_serving(
    function: str, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    sim, sampler, collector = build()
    sampler.run_once()
    sim.clock.advance(1.0)
    caplog.set_level(logging.INFO)
    nvml = sim.node("node-a").nvml
    rule = nvml.faults.inject_error(function, error)
    saw_failure = False
    for _ in range(5):
        sim.clock.advance(1.0)
        snap = sampler.run_once()
        saw_failure |= any(not c.success for c in snap.collectors)
        text = collector.render_text().decode()
        families = {f.name for f in text_string_to_metric_families(text)}
        assert "migscope_collector_success" in families
    if rule.hits and error != "NOT_SUPPORTED":
        assert saw_failure, f"{function} failed with {error} and no collector said so"
    for record in caplog.records:
        assert record.exc_info is None, f"traceback logged for {function} {error}"
        assert "\n" not in record.getMessage()
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) <= 3, [r.getMessage() for r in lines]
    sim.node("node-a").nvml.faults.clear()
    sampler.stop()
