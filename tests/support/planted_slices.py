"""A week of one MIG slice playing a role: the statistics the safety tests plant.

The property tests of the safety contract (tests/analyzer/test_safety_properties.py, through
the planner) and of the applier's re-check (tests/applier/test_contract.py, through a dry run
against the API test server) build fleets from the same roles, so they build them here. The
numbers sit far from every policy threshold, so that a role decides the verdict on its own.
"""

from __future__ import annotations

from migscope.analyzer._model import Owner, SliceInfo, SliceKey, SliceStats
from migscope.core._gpu_models.gpu_model import GpuModel

WEEK = 7 * 86400.0
STEPS = 10080  # a week at the default 60 s step

ROLES = (
    "idle",  # held, 0 % compute, holds memory: idle (memory held is not use)
    "busy",  # held and computing
    "busy_nopod",  # computing, no pod known: demand, pins its GPU
    "unallocated",  # no pod, nothing in memory
    "unknown",  # no samples
    "low_history",  # 2 hours of samples in a week: below the 24 h minimum
    "idle_memory_only",  # no activity series, quiet memory: idle, but compute never seen
)
PINNING = frozenset({"busy_nopod", "unknown", "low_history", "idle_memory_only"})
"""The roles whose slice must keep its GPU exactly as it is."""


def planted_week(
    model: GpuModel, node: str, gpu: int, gi: int, profile: str, start: int, role: str
) -> tuple[SliceStats, str | None]:
    """The week's statistics of a slice playing ``role``, and the pod holding it (or None).

    The pod is ``team/<node>-g<gpu>-gi<gi>``; its name is returned without the namespace.
    """
    total = float(model.profile(profile).memory_mib) * (1 << 20)
    info = SliceInfo(
        SliceKey(node, gpu, f"GPU-{node}-{gpu}", gi),
        model.key,
        profile,
        mig_uuid=f"MIG-{node}-{gpu}-{gi}",
        placement_start=start,
    )
    pod = f"{node}-g{gpu}-gi{gi}"
    samples, coverage = STEPS, 1.0
    act: float | None = 0.0
    mem: float | None = 0.0
    held = 1.0
    if role == "idle":
        mem = 0.6 * total
    elif role == "busy":
        act, mem = 0.6, 0.6 * total
    elif role == "busy_nopod":
        act, mem, held = 0.6, 0.6 * total, 0.0
    elif role == "unallocated":
        held = 0.0
    elif role == "unknown":
        samples, coverage, act, mem = 0, 0.0, None, None
    elif role == "low_history":
        samples, coverage = 120, 120 / STEPS
    elif role == "idle_memory_only":
        act, mem = None, 0.01 * total
    elif role not in ROLES:
        raise ValueError(f"no such role: {role!r}")
    stats = SliceStats(
        info=info,
        window_start=0.0,
        window_end=WEEK,
        samples=samples,
        expected_samples=STEPS,
        coverage=coverage,
        activity_p50=act,
        activity_p95=act,
        activity_max=act,
        memory_peak_bytes=mem,
        memory_p95_bytes=mem,
        memory_total_bytes=total,
        allocated_fraction=held,
        owners=(Owner("team", pod, held),) if held else (),
        energy_joules=None,
    )
    return stats, pod if held else None
