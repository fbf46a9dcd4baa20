"""Byte sizes the way people write them in scenario files ("12GiB", "500MB").

Durations are :mod:`migscope.core._durations`, shared with every flag and file.
"""

from __future__ import annotations

import re

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
