"""The series names each dialect is read from, and which names the file reader must keep.

Why a module of its own: migscope's names come from the exporter's contract
(:mod:`migscope.core.metrics`, so that a renamed metric fails here loudly instead of
silently reading nothing), dcgm-exporter's are spelled here once, and the file reader, the
Prometheus source and the error messages all ask this module which names matter.
"""

from __future__ import annotations

from collections.abc import Iterable

from migscope.core.metrics import PREFIX, metric

__all__ = [
    "DCGM_ACTIVITY",
    "DCGM_FB_FREE",
    "DCGM_FB_USED",
    "DCGM_METRICS",
    "DCGM_PREFIX",
    "DCGM_PRESENCE_PREFERENCE",
    "DIALECT_METRICS",
    "GPU_INFO",
    "GPU_PROFILE_INFO",
    "MIGSCOPE_METRICS",
    "MIGSCOPE_PREFIX",
    "MIG_ACTIVITY",
    "MIG_ENERGY",
    "MIG_INFO",
    "MIG_MEMORY_TOTAL",
    "MIG_MEMORY_USED",
    "MIG_POD_INFO",
    "dcgm_family",
    "indexes",
    "keeps",
    "presence_family",
]

MIGSCOPE_PREFIX = f"{PREFIX}_"
"""What every migscope series name starts with."""

MIG_INFO = metric("mig_info").name
GPU_INFO = metric("gpu_info").name
GPU_PROFILE_INFO = metric("gpu_mig_profile_info").name
MIG_ACTIVITY = metric("mig_graphics_active_ratio").name
MIG_MEMORY_USED = metric("mig_memory_used_bytes").name
MIG_MEMORY_TOTAL = metric("mig_memory_total_bytes").name
MIG_POD_INFO = metric("mig_pod_info").name
MIG_ENERGY = metric("mig_energy_estimated_joules_total").name

DCGM_ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"

MIGSCOPE_METRICS = frozenset(
    {
        MIG_INFO,
        GPU_INFO,
        GPU_PROFILE_INFO,
        MIG_ACTIVITY,
        MIG_MEMORY_USED,
        MIG_MEMORY_TOTAL,
        MIG_POD_INFO,
        MIG_ENERGY,
    }
)
"""The migscope series the analyzer reads."""

DCGM_METRICS = frozenset({DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE})
"""The dcgm-exporter series the analyzer reads."""

DIALECT_METRICS = MIGSCOPE_METRICS | DCGM_METRICS
"""Everything either dialect needs, by exact name (:func:`keeps` also takes other cases)."""

DCGM_PREFIX = "DCGM_"
"""dcgm-exporter's families: ``DCGM_FI_*`` fields and the exporter's own ``DCGM_EXP_*``."""

DCGM_PRESENCE_PREFERENCE = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
)
"""Families that list the GPU instances when activity and framebuffer do not, best first.

They are device-level values that dcgm-exporter copies onto every GPU instance and never
leaves blank, and they are in its default counters; any other family with ``GPU_I_ID``
serves when none of these is there (see :func:`presence_family`).
"""


def dcgm_family(name: str) -> str | None:
    """dcgm-exporter's own spelling of a sample name in any case, or None if it is not one.

    Why: a ``metric_relabel_configs`` that lower-cases names (some fleets do it for every
    exporter) turns ``DCGM_FI_DEV_FB_USED`` into ``dcgm_fi_dev_fb_used``; the analyzer reads
    both. Prefixed or otherwise renamed families are not guessed at.
    """
    upper = name.upper()
    return upper if upper.startswith(DCGM_PREFIX) else None


def keeps(name: str) -> bool:
    """Whether the analyzer needs the samples of ``name``: the ``keep`` of the file reader."""
    return name in MIGSCOPE_METRICS or name.upper() in DCGM_METRICS


def indexes(name: str) -> bool:
    """Whether the analyzer needs the label sets of ``name``: the ``index`` of the reader.

    Every dcgm-exporter family: which of them carry ``GPU_I_ID`` decides the dialect and
    lists the GPU instances (see :func:`presence_family`); error messages name them.
    """
    return dcgm_family(name) is not None


def presence_family(families: Iterable[str]) -> str | None:
    """The family, among dcgm-exporter's families that carry ``GPU_I_ID``, that lists slices.

    Activity and framebuffer families are read anyway, so it is one of the others: the first
    of :data:`DCGM_PRESENCE_PREFERENCE` that is there, else the first by name. One family,
    not all: dcgm-exporter labels every field of a GPU instance alike, so one lists them
    all, and on the Prometheus path each family read costs a scan of its series.

    Args:
        families: dcgm-exporter families (upper case) that carry ``GPU_I_ID``.
    """
    others = sorted(set(families) - DCGM_METRICS)
    for name in DCGM_PRESENCE_PREFERENCE:
        if name in others:
            return name
    return others[0] if others else None
