"""What runs on a slice in a scenario: the workload patterns and their activity mix.

Each pattern (``idle``, ``constant``, ``periodic``, ``bursty``, ``trace``) is its own model,
told apart by ``pattern:``, so that a key of another pattern is an error, not ignored. The
simulation turns a spec into a :mod:`migscope.sim._workloads` workload.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from migscope.sim._scenario.values import Bytes, Duration, MemoryAmount, Ratio, Strict
from migscope.sim._workloads import ActivityMix


class MixSpec(Strict):
    """Activity ratios as fractions of graphics activity (see :class:`ActivityMix`)."""

    sm: Ratio = ActivityMix.sm
    occupancy: Ratio = ActivityMix.occupancy
    tensor: Ratio = ActivityMix.tensor
    dram: Ratio = ActivityMix.dram
    fp16: Ratio = 0.0
    fp32: Ratio = 0.0
    fp64: Ratio = 0.0
    integer: Ratio = 0.0

    def to_mix(self) -> ActivityMix:
        """The workload-layer value."""
        return ActivityMix(**self.model_dump())


class _WorkloadBase(Strict):
    memory: MemoryAmount | None = None
    memory_peak: MemoryAmount | None = None
    processes: int | None = Field(default=None, ge=0, le=64)
    mix: MixSpec = MixSpec()


class IdleSpec(_WorkloadBase):
    """No activity; memory 0 unless given (then one process holds it)."""

    pattern: Literal["idle"]


class ConstantSpec(_WorkloadBase):
    """Steady activity ``level``."""

    pattern: Literal["constant"]
    level: Ratio


class PeriodicSpec(_WorkloadBase):
    """Square wave: ``high`` for ``duty`` of each ``period``, else ``low``."""

    pattern: Literal["periodic"]
    period: Duration
    duty: Ratio
    high: Ratio = 1.0
    low: Ratio = 0.0
    phase: Duration = 0.0

    @field_validator("period")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("period must be > 0")
        return value


class BurstySpec(_WorkloadBase):
    """Poisson bursts: ``rate`` per hour, each ``burst`` long at ``level``, else ``low``."""

    pattern: Literal["bursty"]
    rate: float = Field(gt=0.0, le=3600.0)
    burst: Duration
    level: Ratio = 1.0
    low: Ratio = 0.0

    @field_validator("burst")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("burst must be > 0")
        return value


class TraceSpec(_WorkloadBase):
    """Replay of a GenTD26 duty-cycle trace (and its memory trace)."""

    pattern: Literal["trace"]
    container: str | int = 0
    duty_file: str | None = None
    memory_file: str | None = None
    memory_reference: Bytes = 80 * 2**30
    offset: Duration = 0.0


WorkloadSpec = Annotated[
    IdleSpec | ConstantSpec | PeriodicSpec | BurstySpec | TraceSpec,
    Field(discriminator="pattern"),
]
