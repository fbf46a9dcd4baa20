"""Durations and byte sizes the way people write them in scenario files ("90s", "12GiB")."""

from __future__ import annotations

import math
import re

__all__ = ["parse_bytes", "parse_duration"]

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_BYTE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_BYTES = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?", re.IGNORECASE)


def parse_duration(value: str | float) -> float:
    """Seconds from ``value``: a number of seconds or ``"1h30m"``, ``"90s"``, ``"100ms"``.

    Units are ms, s, m, h, d and w; parts add up. Bools are refused because YAML turns
    ``yes`` into ``True`` and a duration of one second would be a silent surprise.

    Raises:
        ValueError: not a duration, negative or not finite.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = value.strip().lower().replace(" ", "")
        if _DURATION_PART.sub("", text) != "" or not text:
            raise ValueError(f"not a duration: {value!r} (use e.g. 90s, 5m, 2h, 1d, 1h30m)")
        seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"duration must be a finite number >= 0, got {value!r}")
    return seconds


def parse_bytes(value: str | int) -> int:
    """Bytes from ``value``: an integer or ``"12GiB"``, ``"500MB"``, ``"1.5 GiB"``.

    Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB) units are both accepted because
    NVML reports MiB while people and the Alibaba traces think in GB.

    Raises:
        ValueError: not a size, or negative.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a byte size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"byte size must be >= 0, got {value}")
        return value
    match = _BYTES.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"not a byte size: {value!r} (use e.g. 12GiB, 500MB, 1048576)")
    number, unit = match.groups()
    return round(float(number) * _BYTE_UNITS[(unit or "b").lower()])
