"""Times and steps as the Prometheus API takes them: seconds with millisecond precision.

Why a module of its own: every call converts its arguments the same way, and the chunking of
range queries must do its arithmetic on exact integers (milliseconds), never on floats, so
that chunk boundaries land on the step grid.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

#: A point in time: Unix seconds, or a timezone-aware datetime (naive ones are refused as
#: ambiguous).
Timestamp = float | datetime


def to_millis(value: Timestamp, *, what: str) -> int:
    """Unix milliseconds of ``value``: the API takes seconds with ms precision.

    Args:
        value: Unix seconds or an aware datetime.
        what: The argument's name, for the error message.

    Raises:
        ValueError: A naive datetime or a value that is not finite.
        TypeError: Neither a number nor a datetime.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{what} is a naive datetime; give a timezone (e.g. UTC)")
        seconds = value.timestamp()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be Unix seconds or an aware datetime, got {value!r}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{what} must be finite, got {seconds!r}")
    return round(seconds * 1000)


def step_millis(step: float | timedelta) -> int:
    """A step (or chunk span) in whole milliseconds.

    Raises:
        ValueError: Shorter than 1 ms, or not finite.
    """
    seconds = step.total_seconds() if isinstance(step, timedelta) else float(step)
    millis = round(seconds * 1000) if math.isfinite(seconds) else 0
    if millis <= 0:
        raise ValueError(f"step must be at least 1 ms, got {step!r}")
    return millis


def fmt_millis(millis: int) -> str:
    """Seconds with exactly the millisecond precision of ``millis``, no float rounding."""
    sign = "-" if millis < 0 else ""
    whole, frac = divmod(abs(millis), 1000)
    return f"{sign}{whole}.{frac:03d}" if frac else f"{sign}{whole}"


def range_millis(start: Timestamp, end: Timestamp, step: float | timedelta) -> tuple[int, int, int]:
    """``start``, ``end`` and ``step`` of a range query in milliseconds.

    Raises:
        ValueError: ``end`` before ``start``, or a bad time or step.
    """
    start_ms = to_millis(start, what="start")
    end_ms = to_millis(end, what="end")
    step_ms = step_millis(step)
    if end_ms < start_ms:
        raise ValueError(f"end ({fmt_millis(end_ms)}) is before start ({fmt_millis(start_ms)})")
    return start_ms, end_ms, step_ms


def optional_range(start: Timestamp | None, end: Timestamp | None) -> list[tuple[str, str]]:
    """The ``start``/``end`` parameters of the metadata endpoints, for those given."""
    out: list[tuple[str, str]] = []
    if start is not None:
        out.append(("start", fmt_millis(to_millis(start, what="start"))))
    if end is not None:
        out.append(("end", fmt_millis(to_millis(end, what="end"))))
    return out
