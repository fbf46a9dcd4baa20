"""The assembled exporter's health: what restarts it and what does not."""

from __future__ import annotations

from migscope.exporter._runtime import build
from migscope.exporter._settings import load_settings


def test_health_follows_sampling_not_single_gpu_faults() -> None:
    exporter = build(load_settings(overrides={"backend": "sim"}, environ={}), realtime=False)
    assert exporter.health() == (False, "no sample yet")
    exporter.sampler.run_once()
    assert exporter.health() == (True, "ok")
    nvml = exporter.simulation.node("gpu-node-a").nvml
    nvml.faults.lose_gpu(1)
    assert exporter.advance is not None
    exporter.advance(1.0)
    snap = exporter.sampler.run_once()
    assert not next(c for c in snap.collectors if c.name == "sim").success
    assert exporter.health() == (True, "ok"), "one lost GPU is a metric, not a restart"
    nvml.faults.inject_error("nvmlDeviceGetCount", "DRIVER_NOT_LOADED")
    exporter.advance(1.0)
    exporter.sampler.run_once()
    assert exporter.health() == (False, "backend sim reads no GPU")
    exporter.stop()
