"""The simulated source as it was: the simulator's scalar API asked sample by sample.

This is ``migscope.analyzer._intake.simulation.simulate_slices`` before it evaluated the
workloads over whole arrays (``sources/sim_truth.py``): every sample calls
``SimInstance.sample``, ``Workload.memory_at`` and ``Workload.cumulative``. Kept as the
reference that ``tests/analyzer/test_simulation_fast.py`` holds the fast path to, and as the
"old path" of ``bench/simulate_bench.py``. Slow on purpose: ~50 ms per slice-week.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from migscope.analyzer._intake.stats_local import SliceSeries, TimeSeries
from migscope.analyzer._model import SliceInfo, SliceKey
from migscope.sim import Simulation
from migscope.sim._gpu import MIG_RESERVED_BYTES, SimInstance

__all__ = ["reference_slices"]

Floats = np.ndarray[Any, np.dtype[np.float64]]


def reference_slices(
    sim: Simulation, *, window_s: float = 7 * 86400.0, step_s: float = 60.0
) -> Iterator[SliceSeries]:
    """Every MIG instance of ``sim`` over its first ``window_s``, one scalar call per sample."""
    epoch = sim.clock.start
    count = int(window_s // step_s)
    grid = step_s * np.arange(1, count + 1, dtype=np.float64)
    for node in sim:
        for gpu in node.gpus:
            if not gpu.mig_enabled:
                continue
            for segment in gpu.segments:
                for inst in segment.instances:
                    alive = grid[(grid >= segment.begin) & (grid < segment.end)]
                    if alive.size:
                        yield _instance_series(node.name, inst, alive, epoch)


def _energy(inst: SimInstance, t: Floats, epoch: float) -> TimeSeries:
    gpu, weight = inst.gpu, inst.weight
    begin = inst.segment.begin if inst.segment is not None else 0.0
    base = inst.begin_counters[0]
    values = [
        weight * gpu.power.idle_watts * (x - begin)
        + weight * gpu.power.dynamic_watts * (inst.workload.cumulative(x) - base)
        for x in t.tolist()
    ]
    return TimeSeries.of(t + epoch, values)


def _instance_series(node: str, inst: SimInstance, t: Floats, epoch: float) -> SliceSeries:
    gpu = inst.gpu
    capacity = inst.memory_total - MIG_RESERVED_BYTES
    activity = np.empty(t.size)
    memory = np.empty(t.size)
    for k, x in enumerate(t.tolist()):
        sample = inst.sample(x)
        activity[k] = sample.activity["graphics"]
        memory[k] = inst.workload.memory_at(x, capacity)
    stamps = t + epoch
    holders = {}
    if inst.owner is not None:
        ms = np.round(stamps * 1000.0).astype(np.int64)
        holders[(inst.owner.namespace, inst.owner.pod)] = ms
    info = SliceInfo(
        key=SliceKey(node, gpu.index, gpu.uuid, inst.gi_id),
        model=gpu.model.key,
        profile=inst.profile.name,
        mig_uuid=inst.uuid,
        placement_start=inst.start,
    )
    return SliceSeries(
        info=info,
        activity=TimeSeries.of(stamps, activity),
        memory_used=TimeSeries.of(stamps, memory),
        memory_total_bytes=float(inst.memory_total),
        holders=holders,
        energy=(_energy(inst, t, epoch),),
    )
