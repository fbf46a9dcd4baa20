"""Simulated NVML: pynvml's call surface over simulated MIG GPUs, driven by scenario files.

The exporter's real ``nvml`` code path runs unchanged against :class:`SimNvml`, so demos and
tests exercise it without a GPU. Start from a scenario::

    from migscope.sim import Simulation, resolve_scenario

    sim = Simulation.from_scenario(resolve_scenario("h200-node"), seed=7)
    nvml = sim.node("gpu-node-a").nvml  # use like the pynvml module
    nvml.nvmlInit()
    sim.clock.advance(60)  # a minute of simulated time

See ``docs/scenario.md`` for the scenario format and the semantics copied from NVML.

The names below are this distribution's front door: the only names other distributions and the
CLI import from it. Each loads its module on first use (PEP 562), so importing the package
costs nothing until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migscope.core import lazy_exports

if TYPE_CHECKING:
    from migscope.sim.clock import DEFAULT_START, SimClock
    from migscope.sim.faults import FaultInjector, InjectedError, SlowCall
    from migscope.sim.gpu import MIG_RESERVED_BYTES, PodOwner, SimGpu, SimInstance
    from migscope.sim.nvml import SimNvml
    from migscope.sim.scenario.errors import ScenarioError
    from migscope.sim.scenario.loading import load_scenario, read_scenario_yaml
    from migscope.sim.scenario.spec import Scenario
    from migscope.sim.scenarios import BUILTIN_SCENARIOS, DEMO_SCENARIO, resolve_scenario
    from migscope.sim.simulation import PodAssignment, SimNode, Simulation
    from migscope.sim.traces import TraceError, TraceSeries, load_containers, load_series
    from migscope.sim.workloads import (
        ActivityMix,
        Bursty,
        Constant,
        FixedMemory,
        Idle,
        MemoryModel,
        Periodic,
        Trace,
        TraceMemory,
        Workload,
        WorkloadSample,
    )

_HOME = {
    "DEFAULT_START": "clock",
    "SimClock": "clock",
    "FaultInjector": "faults",
    "InjectedError": "faults",
    "SlowCall": "faults",
    "MIG_RESERVED_BYTES": "gpu",
    "PodOwner": "gpu",
    "SimGpu": "gpu",
    "SimInstance": "gpu",
    "SimNvml": "nvml",
    "ScenarioError": "scenario.errors",
    "load_scenario": "scenario.loading",
    "read_scenario_yaml": "scenario.loading",
    "Scenario": "scenario.spec",
    "BUILTIN_SCENARIOS": "scenarios",
    "DEMO_SCENARIO": "scenarios",
    "resolve_scenario": "scenarios",
    "PodAssignment": "simulation",
    "SimNode": "simulation",
    "Simulation": "simulation",
    "TraceError": "traces",
    "TraceSeries": "traces",
    "load_containers": "traces",
    "load_series": "traces",
    "ActivityMix": "workloads",
    "Bursty": "workloads",
    "Constant": "workloads",
    "FixedMemory": "workloads",
    "Idle": "workloads",
    "MemoryModel": "workloads",
    "Periodic": "workloads",
    "Trace": "workloads",
    "TraceMemory": "workloads",
    "Workload": "workloads",
    "WorkloadSample": "workloads",
}
"""Each exported name's module (under ``migscope.sim``)."""

__all__ = [
    "BUILTIN_SCENARIOS",
    "DEFAULT_START",
    "DEMO_SCENARIO",
    "MIG_RESERVED_BYTES",
    "ActivityMix",
    "Bursty",
    "Constant",
    "FaultInjector",
    "FixedMemory",
    "Idle",
    "InjectedError",
    "MemoryModel",
    "Periodic",
    "PodAssignment",
    "PodOwner",
    "Scenario",
    "ScenarioError",
    "SimClock",
    "SimGpu",
    "SimInstance",
    "SimNode",
    "SimNvml",
    "Simulation",
    "SlowCall",
    "Trace",
    "TraceError",
    "TraceMemory",
    "TraceSeries",
    "Workload",
    "WorkloadSample",
    "load_containers",
    "load_scenario",
    "load_series",
    "read_scenario_yaml",
    "resolve_scenario",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
