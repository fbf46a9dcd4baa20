"""At the product defaults, the activity counters are exact and fresh within 2 s (issue 24).

The default ``gpm_refresh`` is 2 s (one GPM computation per GPU or slice every other cycle, to
halve the exporter's largest CPU cost); the price is that a counter read at time ``t`` is the
exact integral up to the last refresh, at most 2 s before ``t``. The exporter is built from
its settings with nothing set (only the simulator chosen), over a slice whose load switches on
and off in 30 s steps at a phase that misses the sampling grid. The simulator's GPM samples are
snapshots of the workload's exact integral, so the truth is known in closed form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from migscope.exporter._runtime import build
from migscope.exporter._settings import load_settings
from migscope.sim._workloads import Periodic

STEP = {"pattern": "periodic", "period": 60.0, "duty": 0.5, "phase": 30.4}
"""Off at t = 0, on from 29.6 s to 59.6 s, off to 89.6 s, and so on."""


def _exporter(tmp_path: Path) -> Any:
    scenario = {
        "seed": 5,
        "nodes": [
            {
                "name": "n",
                "gpus": [
                    {
                        "model": "H200",
                        "mig": True,
                        "instances": [{"profile": "3g.71gb", "workload": STEP}],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "step.yaml"
    path.write_text(yaml.safe_dump(scenario))
    settings = load_settings(
        environ={},
        overrides={"backend": "sim", "scenario": str(path), "pod_attribution": False},
    )
    assert settings.gpm_refresh == 2.0  # the default this test is about
    return build(settings, realtime=False)


def test_the_default_counter_is_exact_and_at_most_two_seconds_behind(tmp_path: Path) -> None:
    exporter = _exporter(tmp_path)
    truth = Periodic(period=60.0, duty=0.5, phase=30.4).cumulative
    published = 0
    try:
        exporter.sampler.run_once()
        for second in range(1, 130):
            exporter.advance(1.0)
            (gpu,) = exporter.sampler.run_once().gpus
            counter = gpu.instances[0].active_seconds
            if counter is None or counter.graphics is None:
                assert second <= 2  # nothing known before the first refresh
                continue
            published += 1
            # Never ahead of the load, never more than one refresh (2 s) behind it.
            assert truth(second - 2.0) - 1e-6 <= counter.graphics <= truth(second) + 1e-6
    finally:
        exporter.sampler.stop()
    assert published >= 125


@pytest.mark.parametrize("start", [29.6, 89.6])
def test_a_load_step_shows_in_the_default_counter_within_three_cycles(
    tmp_path: Path, start: float
) -> None:
    """What a scrape every second sees with ``rate(...[2s])``: above half the load at most
    3 s after it starts (one 2 s refresh, then the cycle that publishes it)."""
    exporter = _exporter(tmp_path)
    integral: dict[int, float] = {}
    try:
        exporter.sampler.run_once()
        for second in range(1, int(start) + 8):
            exporter.advance(1.0)
            (gpu,) = exporter.sampler.run_once().gpus
            counter = gpu.instances[0].active_seconds
            if counter is not None and counter.graphics is not None:
                integral[second] = counter.graphics
    finally:
        exporter.sampler.stop()
    seen = next(
        s for s in sorted(integral) if s > start and (integral[s] - integral[s - 2]) / 2 > 0.5
    )
    assert seen - start <= 3.0
    assert (integral[int(start)] - integral[int(start) - 2]) / 2 < 0.5  # not before it starts
