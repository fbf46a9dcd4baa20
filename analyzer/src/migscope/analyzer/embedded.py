"""Embedded sources: the analyzer's input without a Prometheus server.

Two ways in, both yielding :class:`~migscope.analyzer.stats.SliceSeries` one slice at a time:

- :func:`simulate_slices` runs the simulator's *ground truth* for a window (graphics
  activity, memory used, the pod holding each instance, per-slice energy) straight into
  arrays, one slice at a time. It skips NVML calls and text on purpose: a week of a small
  fleet read back through the OpenMetrics parser takes ~25 s, sampled here it takes ~1 s,
  which is what lets ``migscope demo`` finish in well under a minute.
- :func:`read_openmetrics` reads an OpenMetrics or text exposition file (migscope's or
  dcgm-exporter's series, detected automatically) with the same parser the tests check
  against a real Prometheus.

Several scenarios can run as one fleet (:func:`load_fleet`): the demo uses the built-in
``fleet-mixed`` (H100/A100, a re-partition on day 3) and ``h200-node`` together.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from migscope.analyzer.dialect import indexes, iter_slice_series, keeps
from migscope.analyzer.model import SliceInfo, SliceKey
from migscope.analyzer.openmetrics import read_exposition
from migscope.analyzer.stats import DEFAULT_STEP_SECONDS, SliceSeries, TimeSeries
from migscope.sim import Simulation, resolve_scenario
from migscope.sim.gpu import MIG_RESERVED_BYTES, SimInstance
from migscope.sim.scenario import read_scenario_yaml

__all__ = [
    "DEFAULT_WINDOW_SECONDS",
    "FileSource",
    "load_fleet",
    "read_openmetrics",
    "simulate_slices",
    "simulation_window",
]

DEFAULT_WINDOW_SECONDS = 7 * 86400.0
"""A week: long enough to see weekly cycles, what the report is meant to summarise."""


def load_fleet(
    scenarios: Sequence[str | os.PathLike[str]], *, seed: int | None = None
) -> Simulation:
    """One simulation of one or more scenarios (built-in names or files) as a single fleet.

    Nodes and faults are concatenated; the first scenario's seed, start and driver apply to
    all, so that the fleet shares one clock.

    Args:
        scenarios: Built-in scenario names (``h200-node``) or scenario files.
        seed: Overrides the seed.

    Raises:
        FileNotFoundError: a name is neither built in nor a file.
        ScenarioError: a scenario is invalid, or two define the same node.
        ValueError: no scenario given.
    """
    if not scenarios:
        raise ValueError("no scenario given")
    paths = [resolve_scenario(os.fspath(s)) for s in scenarios]
    if len(paths) == 1:
        return Simulation.from_scenario(paths[0], seed=seed)
    merged: dict[str, Any] = {}
    for path in paths:
        tree, _ = read_scenario_yaml(path)
        if not isinstance(tree, dict):
            raise ValueError(f"{path}: not a scenario mapping")
        if not merged:
            merged = {k: v for k, v in tree.items() if k not in ("nodes", "faults")}
            merged["description"] = " + ".join(Path(p).stem for p in paths)
            merged["nodes"], merged["faults"] = [], []
        merged["nodes"] += list(tree.get("nodes") or [])
        merged["faults"] += list(tree.get("faults") or [])
    return Simulation.from_scenario(merged, seed=seed)


def simulation_window(
    sim: Simulation, *, window_s: float = DEFAULT_WINDOW_SECONDS
) -> tuple[float, float]:
    """``(start, end)`` in Unix seconds of the first ``window_s`` of the simulation."""
    start = sim.clock.start
    return start, start + window_s


def _energy(
    inst: SimInstance, t: np.ndarray[Any, np.dtype[np.float64]], epoch: float
) -> TimeSeries:
    """The slice's share of the GPU's energy, in joules, as a counter over ``t`` (sim seconds).

    The simulator's power model is idle watts plus dynamic watts × GPU-wide activity, and the
    GPU-wide activity is the compute-slice-weighted sum of the instances'. So the instance's
    exact share is its weight of the idle power plus its weighted activity integral.
    """
    gpu, weight = inst.gpu, inst.weight
    begin = inst.segment.begin if inst.segment is not None else 0.0
    base = inst.begin_counters[0]
    values = [
        weight * gpu.power.idle_watts * (x - begin)
        + weight * gpu.power.dynamic_watts * (inst.workload.cumulative(x) - base)
        for x in t.tolist()
    ]
    return TimeSeries.of(t + epoch, values)


def simulate_slices(
    sim: Simulation,
    *,
    window_s: float = DEFAULT_WINDOW_SECONDS,
    step_s: float = DEFAULT_STEP_SECONDS,
) -> Iterator[SliceSeries]:
    """Sample every MIG instance of the simulation over its first ``window_s`` seconds.

    Every instance that exists at some point in the window becomes one slice (a
    re-partition ends some and starts others: both appear, each with samples only while it
    existed). Samples fall at ``step_s, 2·step_s, ... window_s`` seconds after the start, so
    the window ``(start, start + window_s]`` holds ``window_s / step_s`` of them, as a scrape
    once per step would. Only one slice's arrays are held at a time.

    Args:
        sim: The simulation (see :func:`load_fleet`).
        window_s: Window length, seconds.
        step_s: Sample interval, seconds.

    Raises:
        ValueError: the window or step is not positive.
    """
    if not (window_s > 0 and step_s > 0):
        raise ValueError(f"window ({window_s}) and step ({step_s}) must be positive")
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


def _instance_series(
    node: str, inst: SimInstance, t: np.ndarray[Any, np.dtype[np.float64]], epoch: float
) -> SliceSeries:
    """One instance's ground truth at the sim times ``t``."""
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


@dataclass(frozen=True)
class FileSource:
    """An exposition file's slices and the time span its samples cover.

    Attributes:
        path: The file.
        first: First sample time, Unix seconds.
        last: Last sample time, Unix seconds (the default window ends here).
        series: The slices, built one at a time when iterated (iterate once).
        notes: What the dialect reader left out or could only guess, one sentence each
            (:attr:`~migscope.analyzer.dialect.SliceReader.notes`): for the report's notes.
    """

    path: str
    first: float
    last: float
    series: Iterator[SliceSeries]
    notes: tuple[str, ...] = ()


def read_openmetrics(path: str | os.PathLike[str]) -> FileSource:
    """Read an exposition file of either dialect into per-slice series.

    The samples of the families the dialects read are kept (dcgm-exporter's in any letter
    case); of the other dcgm-exporter families only the label sets, which tell the dialect
    and list GPU instances that have neither activity nor framebuffer series.

    Raises:
        ExpositionError: the file cannot be read or parsed (``FILE:LINE: what``).
        NoMigSeriesError: it holds no per-slice series of either dialect.
    """
    found = read_exposition(path, keep=keeps, index=indexes)
    series = iter_slice_series(found)
    span = found.time_range()
    first, last = span if span is not None else (0.0, 0.0)
    return FileSource(os.fspath(path), first, last, series, series.notes)
