"""The faults a scenario injects: a GPU lost, a re-partition, slow or failing NVML calls.

The specs name pynvml functions and NVML errors as a person writes them (``nvmlInit``,
``GPU_IS_LOST``, ``15``); both are checked against pynvml here, so that a typo fails at load
time. Whether the node and GPU a fault names exist is checked while building.
"""

from __future__ import annotations

from typing import Annotated, Literal

import pynvml
from pydantic import Field, field_validator

from migscope.sim._nvml_errors import error_code
from migscope.sim._scenario.node_specs import InstanceSpec
from migscope.sim._scenario.values import Duration, Ratio, Strict


def _nvml_function(name: str) -> str:
    if not (name.startswith("nvml") and callable(getattr(pynvml, name, None))):
        raise ValueError(f"{name!r} is not a pynvml function")
    return name


def _nvml_error(value: str | int) -> str | int:
    error_code(value)
    return value


class GpuLostSpec(Strict):
    """The GPU falls off the bus at ``at``."""

    kind: Literal["gpu_lost"]
    node: str
    gpu: int = Field(ge=0)
    at: Duration = 0.0


class LayoutChangeSpec(Strict):
    """The GPU is re-partitioned into ``instances`` at ``at``."""

    kind: Literal["layout_change"]
    node: str
    gpu: int = Field(ge=0)
    at: Duration
    instances: list[InstanceSpec]
    stale_error: str | int = "INVALID_ARGUMENT"

    @field_validator("stale_error")
    @classmethod
    def _error(cls, value: str | int) -> str | int:
        return _nvml_error(value)


class SlowCallSpec(Strict):
    """Named functions take ``delay_ms`` more (real) milliseconds."""

    kind: Literal["slow_call"]
    functions: list[str] = Field(min_length=1)
    delay_ms: float = Field(ge=0, le=60_000)
    node: str | None = None
    gpu: int | None = Field(default=None, ge=0)

    @field_validator("functions")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return [_nvml_function(n) for n in value]


class NvmlErrorSpec(Strict):
    """A named function returns ``error`` (with a probability, a count, a time window)."""

    kind: Literal["nvml_error"]
    function: str
    error: str | int
    node: str | None = None
    gpu: int | None = Field(default=None, ge=0)
    probability: Ratio = 1.0
    count: int | None = Field(default=None, ge=1)
    start: Duration = 0.0
    until: Duration | None = None

    @field_validator("function")
    @classmethod
    def _function(cls, value: str) -> str:
        return _nvml_function(value)

    @field_validator("error")
    @classmethod
    def _error(cls, value: str | int) -> str | int:
        return _nvml_error(value)


FaultSpec = Annotated[
    GpuLostSpec | LayoutChangeSpec | SlowCallSpec | NvmlErrorSpec,
    Field(discriminator="kind"),
]
