"""NVML's return codes as the backend reads them, the faults it acts on, the privilege it lacks.

Which codes mean "absent" (NOT_SUPPORTED is not an error), "the MIG handle went stale" (MIG
Manager re-partitioned the GPU) or "the session is gone" is one decision, shared by the reads,
the enumeration and GPM.

NO_PERMISSION on a GPU-instance query is a deployment fault, not a GPU fault, and the operator
needs to read *which* privilege in one line (:func:`privilege_message`). NVML lists GPU
instances only for a privileged caller (nvml.h: ``nvmlDeviceGetGpuInstances``,
``...GetGpuInstanceById`` and ``...GetGpuInstancePossiblePlacements`` "Requires privileged
user"; NVML_ERROR_NO_PERMISSION otherwise). NVIDIA's MIG guide: only root or a holder of
CAP_SYS_ADMIN has every nvidia-capability implicitly; in a container the NVIDIA Container
Toolkit mounts the MIG monitor capability for ``NVIDIA_MIG_MONITOR_DEVICES=all``, which it
honours only with CAP_SYS_ADMIN (docs/install.md#privileges has the sources). The enumeration
records which calls said NO_PERMISSION on a MIG-enabled GPU; the backend notes the message on
its collector every cycle while that lasts, so ``migscope_collector_success`` stays 0 and the
status book logs the line once, when the state changes, not once per cycle.
"""

from __future__ import annotations

from collections.abc import Iterable
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
GPU-instance query is also recorded: :func:`privilege_message`)."""
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


PRIVILEGE_ADVICE = (
    "the container needs CAP_SYS_ADMIN and NVIDIA_MIG_MONITOR_DEVICES=all "
    "(docs/install.md#privileges)"
)
"""The missing privilege, as the chart's ``exporter.migMonitor.enabled`` grants it."""


def privilege_message(refused: Iterable[str]) -> str:
    """One line naming the missing privilege and the NVML calls that were refused."""
    calls = ", ".join(sorted(set(refused)))
    return f"cannot list GPU instances: NVML says no permission ({calls}); {PRIVILEGE_ADVICE}"
