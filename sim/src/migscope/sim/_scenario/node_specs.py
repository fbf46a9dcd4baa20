"""The hardware side of a scenario: nodes, their GPUs, MIG instances and the pods holding them.

Shape only: whether a model is catalogued, a layout fits its GPU or a profile exists is
checked while the simulation is built (:mod:`migscope.sim._build`), where the catalogue is.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from migscope.sim._scenario.values import Strict
from migscope.sim._scenario.workload_specs import IdleSpec, WorkloadSpec

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class PodSpec(Strict):
    """The Kubernetes container holding a device."""

    namespace: str = Field(min_length=1, max_length=63)
    pod: str = Field(min_length=1, max_length=253)
    container: str = Field(default="main", min_length=1, max_length=63)


class InstanceSpec(Strict):
    """One MIG instance: profile, optional start placement, workload, optional pod."""

    profile: str
    start: int | None = Field(default=None, ge=0, le=7)
    workload: WorkloadSpec = IdleSpec(pattern="idle")
    pod: PodSpec | None = None


class PowerSpec(Strict):
    """Override of the GPU's power model."""

    idle_watts: float = Field(gt=0)
    max_watts: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> PowerSpec:
        if self.max_watts < self.idle_watts:
            raise ValueError("max_watts must be >= idle_watts")
        return self


class GpuSpec(Strict):
    """One GPU: model, identity, MIG mode and either instances or a whole-GPU workload."""

    model: str | int
    uuid: str | None = Field(default=None, pattern=r"^GPU-[0-9a-fA-F-]{36}$")
    pci_bus_id: str | None = Field(
        default=None, pattern=r"^[0-9a-fA-F]{8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
    )
    mig: bool = False
    mig_pending: bool | None = None
    instances: list[InstanceSpec] = Field(default_factory=list)
    workload: WorkloadSpec | None = None
    pod: PodSpec | None = None
    power: PowerSpec | None = None


class NodeSpec(Strict):
    """One Kubernetes node and its GPUs."""

    name: str = Field(min_length=1, max_length=253)
    driver: str | None = Field(default=None, pattern=r"^\d+\.\d+(\.\d+)?$")
    privileged: bool = True
    gpus: list[GpuSpec] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _dns(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a valid node name (lowercase DNS-1123)")
        return value
