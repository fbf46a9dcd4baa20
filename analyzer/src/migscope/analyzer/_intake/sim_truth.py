"""The simulator's ground truth over a whole time grid at once: activity, memory, energy.

The simulator answers one instant at a time in pure Python (it runs in the exporter's image,
which has no numpy). Asking it sample by sample costs ~5 µs per call and several calls per
sample, ~50 ms per slice-week. Every workload of :mod:`migscope.sim._workloads` is a closed
form of time, so this module evaluates the same formulas over a numpy array of times, with the
same floating-point operations in the same order, so that the values are the ones the scalar
API gives (bit for bit, except a ``bursty`` workload's integral, which sums the same burst
lengths in another order). A workload or memory model of another type (a subclass, or one
made in Python by a test) is asked sample by sample, as before.

``tests/analyzer/test_simulation_fast.py`` holds these to the scalar API.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from migscope.sim import (
    MIG_RESERVED_BYTES,
    Bursty,
    Constant,
    FixedMemory,
    Idle,
    MemoryModel,
    Periodic,
    SimInstance,
    Trace,
    TraceMemory,
    TraceSeries,
    Workload,
)

Floats = np.ndarray[Any, np.dtype[np.float64]]


class InstanceTruth:
    """One instance's ground truth at the simulated times ``t`` (seconds since the start).

    Attributes:
        activity: Graphics-engine activity ratio at each time.
        memory_used: Bytes in use at each time.
        energy: The instance's share of its GPU's energy since the instance began, joules.
    """

    __slots__ = ("activity", "energy", "memory_used")

    def __init__(self, activity: Floats, memory_used: Floats, energy: Floats) -> None:
        self.activity, self.memory_used, self.energy = activity, memory_used, energy


def instance_truth(inst: SimInstance, t: Floats) -> InstanceTruth:
    """Activity, memory and energy of ``inst`` at the sim times ``t``.

    Energy: the simulator's power model is idle watts plus dynamic watts × GPU-wide activity,
    and the GPU-wide activity is the compute-slice-weighted sum of the instances'. So the
    instance's exact share is its weight of the idle power over its life plus its weighted
    activity integral (:meth:`migscope.sim._gpu.SimGpu.energy_mj`, split per instance).
    """
    workload, power, weight = inst.workload, inst.gpu.power, inst.weight
    level = _level(workload, t)
    memory = _memory(workload.memory, t, level, inst.memory_total - MIG_RESERVED_BYTES)
    begin = inst.segment.begin if inst.segment is not None else 0.0
    base = inst.begin_counters[0]
    energy = weight * power.idle_watts * (t - begin) + weight * power.dynamic_watts * (
        _cumulative(workload, t) - base
    )
    return InstanceTruth(level, memory, energy)


# -- activity level -------------------------------------------------------------------------


def _level(w: Workload, t: Floats) -> Floats:
    """``w.level`` at every time of ``t``."""
    if type(w) is Idle:
        return np.zeros(t.size)
    if type(w) is Constant:
        return np.full(t.size, w.value, dtype=np.float64)
    if type(w) is Periodic:
        on = np.mod(t + w.phase, w.period) < w.on_seconds
        return np.where(on, w.high, w.low)
    if type(w) is Bursty:
        return _bursty_level(w, t)
    if type(w) is Trace:
        duty = _trace_value_at(w.series, t + w.offset) / 100.0
        return np.minimum(1.0, np.maximum(0.0, duty))
    return np.fromiter((w.level(x) for x in t.tolist()), dtype=np.float64, count=t.size)


def _bursts(w: Bursty, t: Floats) -> tuple[Floats, Floats]:
    """Merged burst starts and ends up to the last time of ``t``."""
    until = float(t.max()) if t.size else 0.0
    spans = w.bursts(np.nextafter(until, np.inf))
    table = np.array(spans, dtype=np.float64).reshape(-1, 2)
    return table[:, 0], table[:, 1]


def _bursty_level(w: Bursty, t: Floats) -> Floats:
    """``value`` where a burst covers the time, ``low`` elsewhere."""
    lo, hi = _bursts(w, t)
    if not lo.size:
        return np.full(t.size, w.low, dtype=np.float64)
    k = np.searchsorted(lo, t, side="right") - 1
    inside = (k >= 0) & (t >= 0) & (t < hi[np.maximum(k, 0)])
    return np.where(inside, w.value, w.low)


# -- activity integral ----------------------------------------------------------------------


def _cumulative(w: Workload, t: Floats) -> Floats:
    """``w.cumulative`` at every time of ``t``."""
    if type(w) is Idle:
        return np.zeros(t.size)
    if type(w) is Constant:
        return w.value * np.maximum(t, 0.0)
    if type(w) is Periodic:
        zero = _periodic_from_zero(w, np.array([w.phase], dtype=np.float64))[0]
        return np.where(t <= 0, 0.0, _periodic_from_zero(w, t + w.phase) - zero)
    if type(w) is Bursty:
        return _bursty_cumulative(w, t)
    if type(w) is Trace:
        base = w.series.integral(w.offset)
        return np.where(t <= 0, 0.0, (_trace_integral(w.series, t + w.offset) - base) / 100.0)
    return np.fromiter((w.cumulative(x) for x in t.tolist()), dtype=np.float64, count=t.size)


def _periodic_from_zero(w: Periodic, x: Floats) -> Floats:
    loops, r = np.divmod(x, w.period)
    on = w.on_seconds
    result: Floats = (
        loops * w.per_period + w.high * np.minimum(r, on) + w.low * np.maximum(0.0, r - on)
    )
    return result


def _bursty_cumulative(w: Bursty, t: Floats) -> Floats:
    """``low × t`` plus the burst excess over the time covered by bursts up to ``t``."""
    lo, hi = _bursts(w, t)
    if not lo.size:
        return np.where(t <= 0, 0.0, w.low * t)
    lengths = hi - lo
    before = np.concatenate(([0.0], np.cumsum(lengths)))
    k = np.searchsorted(lo, t, side="right") - 1
    j = np.maximum(k, 0)
    covered = np.where(k >= 0, before[j] + np.minimum(t - lo[j], lengths[j]), 0.0)
    return np.where(t <= 0, 0.0, w.low * t + (w.value - w.low) * covered)


# -- traces ---------------------------------------------------------------------------------


def _trace_arrays(series: TraceSeries) -> tuple[Floats, Floats]:
    """The series' sample times and values as arrays."""
    return np.asarray(series.times, dtype=np.float64), np.asarray(series.values, dtype=np.float64)


def _trace_value_at(series: TraceSeries, x: Floats) -> Floats:
    """:meth:`TraceSeries.value_at` at every time of ``x``."""
    times, values = _trace_arrays(series)
    found: Floats = values[np.searchsorted(times, np.mod(x, series.period), side="right") - 1]
    return found


def _trace_integral(series: TraceSeries, x: Floats) -> Floats:
    """:meth:`TraceSeries.integral` at every time of ``x``."""
    times, values = _trace_arrays(series)
    prefix = np.asarray(series.prefix, dtype=np.float64)
    loops, position = np.divmod(x, series.period)
    i = np.searchsorted(times, position, side="right") - 1
    partial = prefix[i] + values[i] * (position - times[i])
    return np.where(x <= 0, 0.0, loops * prefix[-1] + partial)


# -- memory ---------------------------------------------------------------------------------


def _memory(model: MemoryModel, t: Floats, level: Floats, capacity: int) -> Floats:
    """``model.at`` at every time of ``t`` (with the level then), bytes."""
    if type(model) is FixedMemory:
        low = model.base.resolve(capacity)
        if model.peak is None:
            return np.full(t.size, float(low))
        high = max(low, model.peak.resolve(capacity))
        scaled: Floats = np.minimum(float(capacity), low + np.rint((high - low) * level))
        return scaled
    if type(model) is TraceMemory:
        fraction = _trace_value_at(model.series, t + model.offset) / model.reference_bytes
        return np.minimum(float(capacity), np.maximum(0.0, np.trunc(fraction * capacity)))
    pairs = zip(t.tolist(), level.tolist(), strict=True)
    return np.fromiter(
        (model.at(x, lv, capacity) for x, lv in pairs), dtype=np.float64, count=t.size
    )
