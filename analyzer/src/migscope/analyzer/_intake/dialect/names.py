"""The series names each dialect is read from, and which names the file reader must keep.

migscope's names come from the exporter's contract
(:mod:`migscope.core._metrics`, so that a renamed metric fails here loudly instead of
silently reading nothing), dcgm-exporter's are spelled here once, with their units and the
evidence for each, and the file reader, the Prometheus source and the error messages all ask
this module which names matter.

dcgm-exporter writes the quantities the analyzer reads under two generations of names
(:data:`DCGM_FIELDS`): up to 4.8.x DCGM's old names (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``,
``DCGM_FI_DEV_FB_USED``/``_FREE`` in MiB), from 4.9.0 DCGM 4.7's names, some in new units
(framebuffer in bytes). Every reader groups a quantity's series under its 4.8 name (the
*quantity*: :data:`DCGM_ACTIVITY`, :data:`DCGM_FB_USED`, ...) and converts each series to the
analyzer's units with :func:`unit_scale`, so a scrape of either generation, or of both during
a rollout, gives the same slices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from migscope.core import PREFIX, metric

MIGSCOPE_PREFIX = f"{PREFIX}_"
"""What every migscope series name starts with."""

MIG_INFO = metric("mig_info").name
GPU_INFO = metric("gpu_info").name
GPU_PROFILE_INFO = metric("gpu_mig_profile_info").name
MIG_ACTIVITY = metric("mig_graphics_active_ratio").name
MIG_ACTIVE_SECONDS = metric("mig_graphics_active_seconds_total").name
"""The integral of :data:`MIG_ACTIVITY` (seconds active), which the analyzer prefers to it.

Why: the ratio gauge is the mean of the exporter's last GPM window before a scrape (10 s by
default), so a scrape every 30 s or 60 s sees a third or a sixth of the time and aliases
bursts; the counter's increase between two scrapes over the time between them is the exact
mean of the whole interval. Exporters before the counter (and dcgm-exporter) have only the
gauge, which is read where a slice has no counter value (see
:func:`~migscope.analyzer._intake.stats_local.counter_activity`).
"""
MIG_MEMORY_USED = metric("mig_memory_used_bytes").name
MIG_MEMORY_TOTAL = metric("mig_memory_total_bytes").name
MIG_POD_INFO = metric("mig_pod_info").name
MIG_ENERGY = metric("mig_energy_estimated_joules_total").name

MIB = 1 << 20
"""Bytes per MiB: dcgm-exporter up to 4.8.x reports framebuffer sizes in MiB."""

DCGM_ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
"""The graphics-engine activity of a GPU instance, ratio 0..1 (DCGM field 1001)."""
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
"""Framebuffer used by a GPU instance (DCGM field 252 in MiB, or its bytes successor)."""
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
"""Framebuffer free in a GPU instance (DCGM field 251 in MiB, or its bytes successor)."""
DCGM_FB_CAPACITY = "DCGM_FI_DEV_FB_CAPACITY_BYTES"
"""Framebuffer capacity, bytes: new in dcgm-exporter 4.9.0's defaults (no 4.8 name)."""

DCGM_QUANTITIES = (DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE, DCGM_FB_CAPACITY)
"""What the analyzer reads from dcgm-exporter, each keyed by its first name."""

_DCGM_FIELDS_H = (
    "NVIDIA/DCGM dcgmlib/dcgm_fields.h at v4.6.0 (72fa3fe): "
    "#define DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO 1001, and DCGM_FI_PROF_GR_ENGINE_ACTIVE kept "
    "as its alias: one field, one unit"
)
_RELEASE_4_9 = (
    "dcgm-exporter 4.9.0 release notes (newreleases.io/project/github/NVIDIA/dcgm-exporter/"
    "release/4.9.0): the 23 default fields renamed to DCGM 4.7's names, GPU memory from MiB "
    "to bytes, DCGM_FI_DEV_FB_CAPACITY_BYTES collected by default"
)
_INFERRED_FB = (
    "name inferred, not read: 4.9.0 renames the framebuffer fields to bytes (release notes) "
    "and DCGM names its byte fields <FIELD>_BYTES (DCGM 4.6.1's DCGM_FI_DEV_BAR1_USED_BYTES/"
    "_FREE_BYTES/_CAPACITY_BYTES in NVIDIA/go-dcgm@b7fa315 pkg/dcgm/dcgm_fields.h; 4.9's "
    "DCGM_FI_DEV_FB_CAPACITY_BYTES); 4.9's default-counters.csv was not available to check"
)


@dataclass(frozen=True)
class DcgmField:
    """One name under which dcgm-exporter writes a quantity the analyzer reads, and its unit.

    Attributes:
        name: The series name dcgm-exporter writes (the DCGM field's name).
        quantity: What it measures (one of :data:`DCGM_QUANTITIES`).
        to_base: The analyzer's unit (bytes; ratio 0..1) per unit of the series.
        writers: Which dcgm-exporter releases write it with their default counters.
        evidence: ``verified`` (the name and unit read in ``source``) or ``inferred`` (the
            unit is the source's, the name follows DCGM's naming rule but was not seen).
        source: Where the name and unit come from.
    """

    name: str
    quantity: str
    to_base: float
    writers: str
    evidence: Literal["verified", "inferred"]
    source: str


DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField(
        DCGM_ACTIVITY,
        DCGM_ACTIVITY,
        1.0,
        "up to 4.8.x",
        "verified",
        "tests/fixtures/dcgm/dcgm-exporter-default-counters.csv (d5e5f51): 'Ratio of time the "
        "graphics engine is active.'; real scrapes in tests/fixtures/dcgm/",
    ),
    DcgmField(
        "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
        DCGM_ACTIVITY,
        1.0,
        "4.9.0 and later",
        "verified",
        _DCGM_FIELDS_H + "; " + _RELEASE_4_9,
    ),
    DcgmField(
        DCGM_FB_USED,
        DCGM_FB_USED,
        float(MIB),
        "up to 4.8.x",
        "verified",
        "default-counters.csv (d5e5f51): 'Framebuffer memory used (in MiB).'",
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_USED_BYTES",
        DCGM_FB_USED,
        1.0,
        "4.9.0 and later",
        "inferred",
        _RELEASE_4_9 + "; " + _INFERRED_FB,
    ),
    DcgmField(
        DCGM_FB_FREE,
        DCGM_FB_FREE,
        float(MIB),
        "up to 4.8.x",
        "verified",
        "default-counters.csv (d5e5f51): 'Framebuffer memory free (in MiB).'",
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_FREE_BYTES",
        DCGM_FB_FREE,
        1.0,
        "4.9.0 and later",
        "inferred",
        _RELEASE_4_9 + "; " + _INFERRED_FB,
    ),
    DcgmField(
        DCGM_FB_CAPACITY,
        DCGM_FB_CAPACITY,
        1.0,
        "4.9.0 and later",
        "verified",
        _RELEASE_4_9,
    ),
)
"""Every dcgm-exporter name the analyzer reads, a quantity's older name first.

Where a scrape holds two generations of one quantity for the same slice and time (a 4.9
exporter with a collectors file that lists both), the later one here is read: the bytes
fields are exact where the MiB ones are rounded to whole MiB.
"""

_BY_NAME = {f.name: f for f in DCGM_FIELDS}

MIGSCOPE_METRICS = frozenset(
    {
        MIG_INFO,
        GPU_INFO,
        GPU_PROFILE_INFO,
        MIG_ACTIVITY,
        MIG_ACTIVE_SECONDS,
        MIG_MEMORY_USED,
        MIG_MEMORY_TOTAL,
        MIG_POD_INFO,
        MIG_ENERGY,
    }
)
"""The migscope series the analyzer reads."""

DCGM_METRICS = frozenset(_BY_NAME)
"""The dcgm-exporter series the analyzer reads, every generation's name."""

DIALECT_METRICS = MIGSCOPE_METRICS | DCGM_METRICS
"""Everything either dialect needs, by exact name (:func:`keeps` also takes other cases)."""

DCGM_PREFIX = "DCGM_"
"""dcgm-exporter's families: ``DCGM_FI_*`` fields and the exporter's own ``DCGM_EXP_*``."""

DCGM_PRESENCE_PREFERENCE = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_SM_CLOCK_HERTZ",
    "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ",
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
    "DCGM_FI_DEV_BOARD_POWER_WATTS",
)
"""Families that list the GPU instances when activity and framebuffer do not, best first.

They are device-level values that dcgm-exporter copies onto every GPU instance and never
leaves blank, and they are in its default counters: the 4.8 names, then DCGM's new names of
the same fields, which 4.9.0 writes (``dcgm_fields.h``: ``DCGM_FI_DEV_SM_CLOCK_HERTZ`` 1603
and ``DCGM_FI_DEV_MEMORY_CLOCK_HERTZ`` 1604 in DCGM 4.6.1, NVIDIA/go-dcgm@b7fa315;
``DCGM_FI_DEV_GPU_TEMP_CELSIUS`` 150 and ``DCGM_FI_DEV_BOARD_POWER_WATTS`` 155 in DCGM 4.6.0).
Any other family with ``GPU_I_ID`` serves when none of these is there (see
:func:`presence_family`).
"""


def dcgm_family(name: str) -> str | None:
    """dcgm-exporter's own spelling of a sample name in any case, or None if it is not one.

    Why: a ``metric_relabel_configs`` that lower-cases names (some fleets do it for every
    exporter) turns ``DCGM_FI_DEV_FB_USED`` into ``dcgm_fi_dev_fb_used``; the analyzer reads
    both. Prefixed or otherwise renamed families are not guessed at.
    """
    upper = name.upper()
    return upper if upper.startswith(DCGM_PREFIX) else None


def dcgm_field(name: str) -> DcgmField | None:
    """The dcgm-exporter field a sample name (any letter case) is, if the analyzer reads it."""
    family = dcgm_family(name)
    return _BY_NAME.get(family) if family is not None else None


def unit_scale(name: str) -> float:
    """The analyzer's unit per unit of the series ``name``: 2^20 for a MiB field, else 1.

    migscope's series and dcgm-exporter's ratio and bytes fields are in the analyzer's units
    already; only dcgm-exporter's 4.8 framebuffer fields (MiB) are not.
    """
    field = dcgm_field(name)
    return field.to_base if field is not None else 1.0


def fields_of(quantity: str) -> tuple[DcgmField, ...]:
    """The names ``quantity`` is written under, older first (see :data:`DCGM_FIELDS`)."""
    return tuple(f for f in DCGM_FIELDS if f.quantity == quantity)


def quantity_names(quantity: str, present: Iterable[str] = ()) -> str:
    """How a note names ``quantity``: the fields of it that ``present`` holds, or its key.

    Why: a note about a 4.9 scrape should name the series the user has
    (``DCGM_FI_DEV_FB_USED_BYTES``), not the one the analyzer groups by.
    """
    found = {dcgm_family(n) for n in present}
    names = [f.name for f in fields_of(quantity) if f.name in found]
    return "/".join(names) if names else quantity


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
