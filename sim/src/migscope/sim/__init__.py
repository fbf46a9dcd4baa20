"""Simulated NVML: pynvml's call surface over simulated MIG GPUs, driven by scenario files.

The exporter's real ``nvml`` code path runs unchanged against :class:`SimNvml`, so demos and
tests exercise it without a GPU. Start from a scenario::

    from migscope.sim import Simulation, resolve_scenario

    sim = Simulation.from_scenario(resolve_scenario("h200-node"), seed=7)
    nvml = sim.node("gpu-node-a").nvml  # use like the pynvml module
    nvml.nvmlInit()
    sim.clock.advance(60)  # a minute of simulated time

See ``docs/scenario.md`` for the scenario format and the semantics copied from NVML.
"""

from migscope.sim.clock import DEFAULT_START, SimClock
from migscope.sim.faults import FaultInjector, InjectedError, SlowCall
from migscope.sim.gpu import PodOwner, SimGpu, SimInstance
from migscope.sim.nvml import SimNvml
from migscope.sim.scenario import Scenario, ScenarioError, load_scenario
from migscope.sim.scenarios import BUILTIN_SCENARIOS, DEMO_SCENARIO, resolve_scenario
from migscope.sim.simulation import PodAssignment, SimNode, Simulation
from migscope.sim.traces import TraceError, TraceSeries, load_containers, load_series
from migscope.sim.workloads import ActivityMix, Workload, WorkloadSample

__all__ = [
    "BUILTIN_SCENARIOS",
    "DEFAULT_START",
    "DEMO_SCENARIO",
    "ActivityMix",
    "FaultInjector",
    "InjectedError",
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
    "TraceError",
    "TraceSeries",
    "Workload",
    "WorkloadSample",
    "load_containers",
    "load_scenario",
    "load_series",
    "resolve_scenario",
]
