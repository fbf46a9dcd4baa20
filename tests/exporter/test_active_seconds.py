"""The ``*_active_seconds_total`` counters: the exact integral of activity, whatever the window.

The production NVML backend runs on the simulated NVML, whose GPM samples are snapshots of the
workload's exact activity integral, so the integral a counter must show at time t is known in
closed form: :meth:`Periodic.cumulative`. The load is bursts of 2.1 s every 7 s (shorter than
any scrape interval), the GPM window slides (10 s refreshed every 1 s cycle): summing
``ratio x cycle`` would integrate a 10 s moving average and miss; the counter must not.
"""

from __future__ import annotations

from typing import Any

import pytest

from migscope.core._metrics import metric
from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._sampler import ActiveIntegral, Sampler
from migscope.exporter._snapshot import Activity
from migscope.sim import Simulation
from migscope.sim._workloads import ActivityMix, Periodic

BURSTS = {"pattern": "periodic", "period": 7.0, "duty": 0.3, "phase": 0.0}
WHOLE = {**BURSTS, "phase": 1.0}
SCENARIO: dict[str, Any] = {
    "seed": 3,
    "nodes": [
        {
            "name": "n",
            "gpus": [
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [{"profile": "3g.71gb", "workload": BURSTS}],
                },
                {"model": "H200", "mig": False, "workload": WHOLE},
            ],
        }
    ],
}
MIX = ActivityMix()


def truth(spec: dict[str, Any], t: float) -> float:
    """Seconds of full graphics activity of the planted load over [0, t]."""
    return Periodic(period=spec["period"], duty=spec["duty"], phase=spec["phase"]).cumulative(t)


def make(window: float = 10.0, refresh: float = 0.0) -> tuple[Simulation, Sampler]:
    sim = Simulation.from_scenario(SCENARIO)
    backend = NvmlBackend(
        sim.node("n").nvml,
        name="sim",
        clock=sim.clock.elapsed,
        gpm_interval=window,
        gpm_refresh=refresh,
    )
    return sim, Sampler(backend, interval=1.0, clock=sim.clock.elapsed, wall=sim.clock.now)


@pytest.mark.parametrize("window", [1.0, 10.0, 30.0])
def test_counter_is_the_exact_integral_every_cycle(window: float) -> None:
    sim, sampler = make(window)
    previous = (0.0, 0.0)
    for _ in range(200):
        t = sim.clock.elapsed()
        snap = sampler.run_once()
        mig, whole = snap.gpus
        a, b = mig.instances[0].active_seconds, whole.active_seconds
        if t == 0:  # one GPM sample: nothing known yet, nothing published
            assert a is None
            assert b is None
        else:
            assert a is not None
            assert b is not None
            assert a.graphics == pytest.approx(truth(BURSTS, t), abs=1e-6)
            assert b.graphics == pytest.approx(truth(WHOLE, t), abs=1e-6)
            assert a.tensor == pytest.approx(MIX.tensor * truth(BURSTS, t), abs=1e-6)
            assert a.sm_active == pytest.approx(MIX.sm * truth(BURSTS, t), abs=1e-6)
            assert a.dram == pytest.approx(MIX.dram * truth(BURSTS, t), abs=1e-6)
            assert (a.graphics, b.graphics) >= previous
            previous = (a.graphics or 0.0, b.graphics or 0.0)
        sim.clock.advance(1.0)


def test_naive_sum_of_gauge_times_cycle_would_miss() -> None:
    """The reason for the window-start bookkeeping: ratio x cycle drifts from the truth."""
    sim, sampler = make(10.0)
    naive = 0.0
    worst = 0.0
    for _ in range(100):
        t = sim.clock.elapsed()
        act = sampler.run_once().gpus[0].instances[0].activity
        naive += 0.0 if act is None or act.graphics is None else act.graphics * 1.0
        worst = max(worst, abs(naive - truth(BURSTS, t)))
        sim.clock.advance(1.0)
    assert worst > 0.5


def test_refresh_between_cycles_publishes_the_integral_at_the_last_refresh() -> None:
    sim, sampler = make(10.0, refresh=5.0)
    for _ in range(60):
        t = sim.clock.elapsed()
        a = sampler.run_once().gpus[0].instances[0].active_seconds
        if t >= 5:
            refreshed = t - t % 5
            assert a is not None
            assert a.graphics == pytest.approx(truth(BURSTS, refreshed), abs=1e-6)
        sim.clock.advance(1.0)


def test_window_start_unknown_falls_back_to_ratio_times_elapsed_and_never_decreases() -> None:
    integral = ActiveIntegral(0.0)
    assert integral.update(None, 0.0) is None
    got = integral.update(Activity(graphics=0.5, window_seconds=None), 2.0)  # DCGM: no window
    assert got is not None
    assert got.graphics == pytest.approx(1.0)
    assert got.tensor is None
    got = integral.update(Activity(graphics=0.0, window_seconds=2.0), 4.0)  # from t=2: +0
    assert got is not None
    assert got.graphics == pytest.approx(1.0)
    got = integral.update(Activity(graphics=0.1, window_seconds=4.0), 6.0)  # from t=2: 1 + 0.4
    assert got is not None
    assert got.graphics == pytest.approx(1.4)
    got = integral.update(Activity(graphics=0.0, window_seconds=6.0), 8.0)  # would be 1.0
    assert got is not None
    assert got.graphics == pytest.approx(1.4)


def test_recreated_instance_starts_again_and_vanished_counters_vanish() -> None:
    sim, sampler = make(10.0)
    for _ in range(30):
        sampler.run_once()
        sim.clock.advance(1.0)
    before = sampler.run_once().gpus[0].instances[0]
    assert before.active_seconds is not None
    assert before.active_seconds.graphics
    node = sim.node("n")
    node.destroy_instance(0, before.gpu_instance_id)
    sim.clock.advance(1.0)
    sampler.run_once()  # the slice has gone: its counters with it
    assert sampler.latest().gpus[0].instances == ()  # type: ignore[union-attr]
    node.create_instance(0, "3g.71gb", workload=BURSTS)
    sim.clock.advance(1.0)
    sampler.run_once()
    sim.clock.advance(1.0)
    after = sampler.run_once().gpus[0].instances[0]
    assert after.mig_uuid != before.mig_uuid
    assert after.active_seconds is not None
    assert after.active_seconds.graphics is not None
    assert after.active_seconds.graphics <= 1.0 + 1e-9  # one second of history at most


def test_exposition_types_and_help() -> None:
    sim, sampler = make(10.0)
    for _ in range(3):
        sampler.run_once()
        sim.clock.advance(1.0)
    text = SnapshotCollector(snapshot=sampler.latest, backend="sim", version="0").render_text()
    for scope in ("gpu", "mig"):
        for kind in ("graphics", "sm", "tensor", "dram"):
            name = metric(f"{scope}_{kind}_active_seconds_total").name
            assert f"# TYPE {name} counter" in text.decode()
            assert f"\n{name}{{" in text.decode()
