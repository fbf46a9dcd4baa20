"""NVML's return codes as the backend reads them, and the two faults it acts on.

Why its own module: which codes mean "absent" (NOT_SUPPORTED is not an error), "the MIG
handle went stale" (MIG Manager re-partitioned the GPU) or "the session is gone" is one
decision, shared by the reads, the enumeration and GPM.
"""

from __future__ import annotations

from typing import Any

from migscope.core import MigscopeError

# NVML return codes (nvml.h), stable across versions.
_UNINITIALIZED = 1
INVALID_ARGUMENT = 2
_NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
ABSENT = (_NOT_SUPPORTED, NO_PERMISSION, _FUNCTION_NOT_FOUND)
"""Codes that mean "no such value here", not "something is wrong" (NO_PERMISSION on a
GPU-instance query is also recorded: :mod:`.privileges`)."""
STALE_HANDLE = (NOT_FOUND, INVALID_ARGUMENT)
"""Codes of a call on a MIG handle that mean the handle no longer names a MIG device."""
SESSION_GONE = (_UNINITIALIZED, _DRIVER_NOT_LOADED, _LIBRARY_NOT_FOUND)
"""Codes after which nothing more can be read in this NVML session."""


class StaleLayout(MigscopeError):
    """A cached MIG handle stopped working: the GPU was re-partitioned under us."""


class GpuLost(MigscopeError):
    """NVML says the GPU is lost (fell off the bus, XID 79)."""


def code_of(exc: BaseException) -> Any:
    """The NVML return code of an ``NVMLError`` (its ``value``), None for other errors."""
    return getattr(exc, "value", None)


def text(value: Any) -> str:
    """A C string from NVML (bytes on older pynvml, text on newer) as text."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
