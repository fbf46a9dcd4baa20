"""DCGM's numbers: field ids, entity groups, return codes and blank sentinels, and decoding.

These are facts of DCGM's C API (``dcgm_fields.h``,
``dcgm_structs.h``), stable across versions, that every other part of the backend reads. Field
constants were renamed in DCGM 4.6 but the integer ids never change, so the ids are used. A
value DCGM does not have is a *blank* sentinel (``DCGM_FP64_BLANK`` = 2**47 and up,
``DCGM_INT64_BLANK``, int32 blanks stored in int64, ``<<<...>>>`` strings); :func:`decode`
turns each into ``None`` (absent), never 0.
"""

from __future__ import annotations

import math
from typing import Any

# Field ids (stable; the names changed in DCGM 4.6).
F_NAME = 50
F_NVML_INDEX = 52
F_UUID = 54
F_POWER = 155
F_ENERGY = 156
F_FB_TOTAL = 250
F_FB_FREE = 251
F_FB_USED = 252
ACTIVITY_FIELDS = (
    ("graphics", 1001),
    ("sm_active", 1002),
    ("sm_occupancy", 1003),
    ("tensor", 1004),
    ("dram", 1005),
)
"""(Activity attribute, DCGM profiling field id) for the activity migscope publishes."""
SLICE_FIELDS = (F_FB_TOTAL, F_FB_FREE, F_FB_USED, *(f for _, f in ACTIVITY_FIELDS))
GPU_FIELDS = (F_POWER, *SLICE_FIELDS)
"""Power only on GPU entities: on a GPU-I entity DCGM would repeat the board's value."""
FIELD_NAMES = {
    F_POWER: "power",
    F_ENERGY: "energy",
    F_FB_TOTAL: "FB total",
    F_FB_FREE: "FB free",
    F_FB_USED: "FB used",
    1001: "GR engine active",
    1002: "SM active",
    1003: "SM occupancy",
    1004: "tensor active",
    1005: "DRAM active",
}

# Entity groups, flags and modes (dcgm_fields.py / dcgm_structs.py).
FE_GPU = 1
FE_GPU_I = 4
FE_GPU_CI = 5
LIVE_DATA = 0x1
GROUP_EMPTY = 1
MODE_AUTO = 1

# dcgmReturn_t codes (dcgm_structs.h), stable across versions.
_ST_NOT_SUPPORTED = -6
_ST_UNINITIALIZED = -10
_ST_NO_DATA = -14
_ST_NOT_WATCHED = -16
ST_GPU_IS_LOST = -18
_ST_CONNECTION_NOT_VALID = -21
ST_LIBRARY_NOT_FOUND = -25
_ST_FIELD_UNSUPPORTED_BY_API = -32
_ST_PROFILING_NOT_SUPPORTED = -36
_ST_INSTANCE_NOT_FOUND = -45
_ST_COMPUTE_INSTANCE_NOT_FOUND = -46
ABSENT = frozenset(
    {_ST_NOT_SUPPORTED, _ST_NO_DATA, _ST_FIELD_UNSUPPORTED_BY_API, _ST_PROFILING_NOT_SUPPORTED}
)
"""Statuses that mean "no such value here", not "something is wrong"."""
STALE = frozenset({_ST_INSTANCE_NOT_FOUND, _ST_COMPUTE_INSTANCE_NOT_FOUND, _ST_NOT_WATCHED})
"""Statuses of a GPU-I entity that mean our hierarchy is out of date (re-partitioned)."""
SESSION_GONE = frozenset({_ST_UNINITIALIZED, _ST_CONNECTION_NOT_VALID, ST_LIBRARY_NOT_FOUND})
"""Statuses after which nothing more can be read on this connection."""

# Blank sentinels (dcgm_structs.h, dcgmvalue.py): a blank is this value or above; int32 blanks
# (0x7ffffff0 + 0..15) may arrive widened into an int64 field.
_INT32_BLANK = 0x7FFFFFF0
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0
MIB = 1024 * 1024

Values = dict[tuple[int, int], dict[int, tuple[int, Any]]]
"""(entity group, entity id) -> field id -> (status, decoded value or None)."""


def error_code(exc: BaseException) -> int | None:
    """The ``dcgmReturn_t`` of a ``DCGMError`` (its ``value``), or None for other errors."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def text(value: Any) -> str:
    """A C string field (bytes from ctypes, or already text) as text."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def decode(fv: Any) -> Any:
    """A field value's payload by its type, or None for DCGM's blank sentinels."""
    kind = chr(int(fv.fieldType)) if fv.fieldType else ""
    if kind == "d":
        dbl = float(fv.value.dbl)
        return None if math.isnan(dbl) or dbl >= _FP64_BLANK else dbl
    if kind == "i":
        i64 = int(fv.value.i64)
        if i64 >= _INT64_BLANK or _INT32_BLANK <= i64 < _INT32_BLANK + 16:
            return None
        return i64
    if kind == "s":
        value = text(fv.value.str)
        return None if value.startswith("<<<") and ">>>" in value else value
    return None
