"""The value types of a scenario file: durations, byte sizes, memory amounts, ratios, times.

A scenario is written by hand, so its values take the forms people write (``90s``, ``12GiB``,
``0.5`` of the memory, ``2026-01-05T00:00:00Z``) and are turned into numbers here, once, with
a one-line reason when they cannot be. Every spec model derives from :class:`Strict`, so an
unknown key anywhere is an error, not a silently ignored typo.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from migscope.core import parse_duration
from migscope.sim._units import parse_bytes
from migscope.sim._workloads import Size


class Strict(BaseModel):
    """The base of every scenario spec: unknown keys refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _duration(value: Any) -> float:
    if not isinstance(value, (str, int, float)):
        raise ValueError(f"not a duration: {value!r}")
    return parse_duration(value)


def _bytes(value: Any) -> int:
    if not isinstance(value, (str, int)):
        raise ValueError(f"not a byte size: {value!r}")
    return parse_bytes(value)


def _amount(value: Any) -> Size:
    """A fraction in [0, 1] of the instance's memory, or a size with a unit."""
    if isinstance(value, bool):
        raise ValueError(f"not a memory amount: {value!r}")
    if isinstance(value, float) or (isinstance(value, int) and value in (0, 1)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"a memory fraction must be within 0..1, got {value}")
        return Size(fraction=float(value))
    if isinstance(value, (int, str)):
        return Size(nbytes=parse_bytes(value))
    raise ValueError(f"not a memory amount: {value!r} (use 0.5 or 12GiB)")


def _epoch(value: Any) -> float | None:
    """A start time as epoch seconds: a number, or an ISO 8601 time with a time zone."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a start time: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        raise ValueError(f"not a start time: {value!r}")
    if moment.tzinfo is None:
        raise ValueError("start needs a time zone, e.g. 2026-01-05T00:00:00Z")
    return moment.timestamp()


Duration = Annotated[float, PlainValidator(_duration)]
"""Seconds, written as a number or with units (``90s``, ``1h30m``)."""
Bytes = Annotated[int, PlainValidator(_bytes)]
"""Bytes, written as a number or with a unit (``12GiB``)."""
MemoryAmount = Annotated[Size, PlainValidator(_amount)]
"""A share of an instance's memory (``0.5``) or a size with a unit (``12GiB``)."""
Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
"""A fraction in 0..1."""
StartTime = Annotated[float | None, PlainValidator(_epoch)]
"""The simulation's start as epoch seconds, written as a number or an ISO time with zone."""
