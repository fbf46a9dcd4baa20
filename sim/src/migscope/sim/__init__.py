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
    from migscope.sim._clock import DEFAULT_START, SimClock
    from migscope.sim._faults import FaultInjector, InjectedError, SlowCall
    from migscope.sim._gpu import MIG_RESERVED_BYTES, PodOwner, SimGpu, SimInstance
    from migscope.sim._nvml import SimNvml
    from migscope.sim._scenario.loading import ScenarioError, load_scenario, read_scenario_yaml
    from migscope.sim._scenario.spec import Scenario
    from migscope.sim._scenarios import BUILTIN_SCENARIOS, DEMO_SCENARIO, resolve_scenario
    from migscope.sim._simulation import PodAssignment, SimNode, Simulation
    from migscope.sim._traces import TraceError, TraceSeries, load_containers, load_series
    from migscope.sim._workloads import (
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
    "DEFAULT_START": "_clock",
    "SimClock": "_clock",
    "FaultInjector": "_faults",
    "InjectedError": "_faults",
    "SlowCall": "_faults",
    "MIG_RESERVED_BYTES": "_gpu",
    "PodOwner": "_gpu",
    "SimGpu": "_gpu",
    "SimInstance": "_gpu",
    "SimNvml": "_nvml",
    "ScenarioError": "_scenario.loading",
    "load_scenario": "_scenario.loading",
    "read_scenario_yaml": "_scenario.loading",
    "Scenario": "_scenario.spec",
    "BUILTIN_SCENARIOS": "_scenarios",
    "DEMO_SCENARIO": "_scenarios",
    "resolve_scenario": "_scenarios",
    "PodAssignment": "_simulation",
    "SimNode": "_simulation",
    "Simulation": "_simulation",
    "TraceError": "_traces",
    "TraceSeries": "_traces",
    "load_containers": "_traces",
    "load_series": "_traces",
    "ActivityMix": "_workloads",
    "Bursty": "_workloads",
    "Constant": "_workloads",
    "FixedMemory": "_workloads",
    "Idle": "_workloads",
    "MemoryModel": "_workloads",
    "Periodic": "_workloads",
    "Trace": "_workloads",
    "TraceMemory": "_workloads",
    "Workload": "_workloads",
    "WorkloadSample": "_workloads",
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
