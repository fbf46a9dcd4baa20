"""The scenario file: which nodes, GPUs, MIG layouts, workloads, pods and faults to simulate.

Validated strictly (pydantic v2, unknown keys refused) because a typo in a demo scenario
should fail loudly at load time, naming the field and line, not produce a quietly idle GPU.
Shape is checked here; meaning (catalogue models, placement-valid layouts, trace containers,
cross-references of faults) is checked while building the simulation
(:mod:`migscope.sim._build`), which raises the same one-line :class:`ScenarioError`.
The format is documented in ``docs/scenario.md``.

One module per job: :mod:`.values` (value types), :mod:`.workload_specs`,
:mod:`.node_specs`, :mod:`.fault_specs` and :mod:`.spec` (the models), and :mod:`.loading`
(file to validated scenario, and how a problem names its field and line).
"""

from __future__ import annotations

from migscope.sim._scenario.fault_specs import (
    GpuLostSpec,
    LayoutChangeSpec,
    NvmlErrorSpec,
    SlowCallSpec,
)
from migscope.sim._scenario.loading import (
    ScenarioError,
    format_path,
    line_of,
    load_scenario,
    read_scenario_yaml,
)
from migscope.sim._scenario.node_specs import GpuSpec, InstanceSpec, PodSpec
from migscope.sim._scenario.spec import Scenario
from migscope.sim._scenario.workload_specs import (
    BurstySpec,
    ConstantSpec,
    IdleSpec,
    PeriodicSpec,
    TraceSpec,
    WorkloadSpec,
)

__all__ = [
    "BurstySpec",
    "ConstantSpec",
    "GpuLostSpec",
    "GpuSpec",
    "IdleSpec",
    "InstanceSpec",
    "LayoutChangeSpec",
    "NvmlErrorSpec",
    "PeriodicSpec",
    "PodSpec",
    "Scenario",
    "ScenarioError",
    "SlowCallSpec",
    "TraceSpec",
    "WorkloadSpec",
    "format_path",
    "line_of",
    "load_scenario",
    "read_scenario_yaml",
]
