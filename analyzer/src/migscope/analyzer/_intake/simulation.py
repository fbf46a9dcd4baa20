"""Simulated slices: the simulator's ground truth for a window, and the source that serves it.

:func:`simulate_slices` runs the simulator's *ground truth* for a window (graphics activity,
memory used, the pod holding each instance, per-slice energy) straight into arrays, one
slice at a time. It skips NVML calls and text on purpose: a week of a small fleet read back
through the OpenMetrics parser takes ~25 s. The arrays come from the workloads' closed forms
evaluated over the whole window at once (:mod:`~migscope.analyzer._intake.sim_truth`), not
from the simulator's per-instant API: a few milliseconds per slice-week instead of ~50
(``bench/simulate_bench.py``), so ``--simulate`` can stand in for a fleet of thousands.

Several scenarios can run as one fleet (:func:`load_fleet`): the demo uses the built-in
``fleet-mixed`` (H100/A100, a re-partition on day 3) and ``h200-node`` together.
Everything from here is marked simulated, so that no plan made from it reaches a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from migscope.analyzer._intake.base import (
    Origin,
    Resourceless,
    Slices,
    SourceError,
    Window,
    local_stats,
)
from migscope.analyzer._intake.gpu_facts import GpuFacts, parse_driver
from migscope.analyzer._intake.sim_truth import instance_truth
from migscope.analyzer._intake.stats_local import SliceSeries, TimeSeries
from migscope.analyzer._model import Holder, SliceInfo, SliceKey
from migscope.analyzer._options import DEFAULT_STEP_SECONDS, DEFAULT_WINDOW_SECONDS, Progress
from migscope.sim import SimInstance, Simulation, read_scenario_yaml, resolve_scenario


class SimulationSource(Resourceless):
    """The simulated fleet of one or more scenarios (``--simulate a,b``), from its start.

    Args:
        scenarios: Built-in scenario names or scenario files, one fleet.
    """

    simulated = True

    def __init__(self, scenarios: Sequence[str], *, progress: Progress | None = None) -> None:
        self.scenarios = [s.strip() for s in scenarios if s.strip()]
        self.simulation = load_fleet(self.scenarios)
        self._progress = progress

    def origin(self) -> Origin:
        """``{"kind": "simulation", "scenarios": [...]}``."""
        return {"kind": "simulation", "scenarios": list(self.scenarios)}

    def window(self, length_s: float, end: float | None, step_s: float) -> Window:
        """The first ``length_s`` of the simulation; a simulation has no ``--end``."""
        if end is not None:
            raise SourceError("--end goes with --source or --prometheus")
        return simulation_window(self.simulation, window_s=length_s)

    def series(self, window: Window, step_s: float) -> Iterable[SliceSeries]:
        """Every simulated instance of the window, sampled every ``step_s``."""
        length = window[1] - window[0]
        if self._progress is not None:
            self._progress(f"simulating {', '.join(self.scenarios)}: {length / 86400:g} days")
        return simulate_slices(self.simulation, window_s=length, step_s=step_s)

    def slices(self, window: Window, step_s: float) -> Slices:
        """The statistics of every simulated instance over ``window``."""
        return local_stats(self.series(window, step_s), window, step_s)

    def gpus(self) -> Sequence[GpuFacts]:
        """Each simulated GPU with its model and its node's driver (no own profile table)."""
        return [
            GpuFacts(
                node=node.name,
                gpu_uuid=gpu.uuid,
                model=gpu.model.key,
                driver=parse_driver(node.nvml.driver_version),
            )
            for node in self.simulation
            for gpu in node.gpus
        ]

    def notes(self) -> Sequence[str]:
        """Nothing to add: the provenance says it is simulated."""
        return ()


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
        UnknownScenarioError: a name is neither built in nor a file.
        ScenarioError: a scenario is invalid, or two define the same node.
        SourceError: no scenario given.
    """
    if not scenarios:
        raise SourceError("no scenario given")
    paths = [resolve_scenario(os.fspath(s)) for s in scenarios]
    if len(paths) == 1:
        return Simulation.from_scenario(paths[0], seed=seed)
    merged: dict[str, Any] = {}
    for path in paths:
        tree, _ = read_scenario_yaml(path)
        if not isinstance(tree, dict):
            raise SourceError(f"{path}: not a scenario mapping")
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
    """One instance's ground truth at the sim times ``t`` (all of them at once)."""
    gpu = inst.gpu
    truth = instance_truth(inst, t)
    ms = np.round((t + epoch) * 1000.0).astype(np.int64)
    holders: dict[Holder, np.ndarray[Any, np.dtype[np.int64]]] = {}
    if inst.owner is not None:
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
        activity=TimeSeries.of_ms(ms, truth.activity),
        memory_used=TimeSeries.of_ms(ms, truth.memory_used),
        memory_total_bytes=float(inst.memory_total),
        holders=holders,
        energy=(TimeSeries.of_ms(ms, truth.energy),),
    )
