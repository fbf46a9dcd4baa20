"""What the exporter says when NVML refuses its GPU-instance queries for want of privileges.

Why its own module: the missing privilege is a deployment fault, not a GPU fault, and the
operator needs to read *which* privilege in one line. NVML lists GPU instances only for a
privileged caller (nvml.h: ``nvmlDeviceGetGpuInstances``, ``...GetGpuInstanceById`` and
``...GetGpuInstancePossiblePlacements`` "Requires privileged user"; NVML_ERROR_NO_PERMISSION
otherwise). NVIDIA's MIG guide: only root or a holder of CAP_SYS_ADMIN has every
nvidia-capability implicitly; in a container the NVIDIA Container Toolkit mounts the MIG
monitor capability for ``NVIDIA_MIG_MONITOR_DEVICES=all``, which it honours only with
CAP_SYS_ADMIN (docs/install.md#privileges has the sources).

The enumeration records which calls said NO_PERMISSION on a MIG-enabled GPU; the backend notes
:func:`message` on its collector every cycle while that lasts, so
``migscope_collector_success`` stays 0 and the status book logs the line once, when the state
changes, not once per cycle.
"""

from __future__ import annotations

from collections.abc import Iterable

ADVICE = (
    "the container needs CAP_SYS_ADMIN and NVIDIA_MIG_MONITOR_DEVICES=all "
    "(docs/install.md#privileges)"
)
"""The missing privilege, as the chart's ``exporter.migMonitor.enabled`` grants it."""


def message(refused: Iterable[str]) -> str:
    """One line naming the missing privilege and the NVML calls that were refused."""
    calls = ", ".join(sorted(set(refused)))
    return f"cannot list GPU instances: NVML says no permission ({calls}); {ADVICE}"
