"""A whole scenario file: its nodes and faults, the seed and the simulated start time.

The top of the spec tree (:mod:`.node_specs`, :mod:`.workload_specs` and :mod:`.fault_specs`
hold the rest); the format is documented in ``docs/scenario.md``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from migscope.sim._scenario.fault_specs import FaultSpec
from migscope.sim._scenario.node_specs import NodeSpec
from migscope.sim._scenario.values import StartTime, Strict


class Scenario(Strict):
    """A whole simulation: nodes, GPUs, workloads, faults, seed and start time."""

    version: Literal[1] = 1
    description: str | None = None
    seed: int = 0
    start: StartTime = None
    driver: str = Field(default="580.159.04", pattern=r"^\d+\.\d+(\.\d+)?$")
    nodes: list[NodeSpec] = Field(min_length=1)
    faults: list[FaultSpec] = Field(default_factory=list)
