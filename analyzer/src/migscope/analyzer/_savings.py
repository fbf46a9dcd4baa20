"""Headline numbers of an analysis: what the window wasted, by namespace, and what a plan frees.

GPU-hours of a slice are its compute-slice share of a GPU times the hours it was observed
in the window (coverage × window), so a slice that existed half the week counts half.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from migscope.analyzer._judge.classify import Status
from migscope.analyzer._result import PoolResult, SliceResult
from migscope.core import GpuModel, UnknownProfileError, find_model


def catalogue_model(key: str | None) -> GpuModel | None:
    """The catalogue's model for ``key``, or None for no key or one the catalogue lacks."""
    if key is None:
        return None
    try:
        return find_model(key)
    except ValueError:
        return None


def _slice_gpu_share(result: SliceResult) -> float:
    """The slice's share of a whole GPU, by compute slices (0 when uncatalogued)."""
    model = catalogue_model(result.stats.info.model)
    if model is None:
        return 0.0
    try:
        return model.profile(result.stats.info.profile).compute_slices / model.compute_slices
    except UnknownProfileError:
        return 0.0


def _excess_share(result: SliceResult) -> float:
    """For an oversized slice: the GPU share its suggested profile would give back."""
    model = catalogue_model(result.stats.info.model)
    suggested = result.verdict.suggested_profile
    if model is None or suggested is None:
        return 0.0
    try:
        now = model.profile(result.stats.info.profile).compute_slices
        then = model.profile(suggested).compute_slices
    except UnknownProfileError:
        return 0.0
    return max(0, now - then) / model.compute_slices


def slice_wasted_gpu_hours(result: SliceResult, hours: float) -> float:
    """GPU-hours the window wasted on one current slice: its part of :func:`savings`' total.

    Idle and unallocated slices waste their whole GPU share, a held oversized slice the share
    its suggested profile would give back, every other slice nothing; each over the hours it
    was observed. The report's per-slice column and the headline total come from here.
    """
    observed = hours * min(1.0, result.stats.coverage)
    if result.status in (Status.IDLE, Status.UNALLOCATED):
        return _slice_gpu_share(result) * observed
    if result.status is Status.OVERSIZED and result.held:
        return _excess_share(result) * observed
    return 0.0


def savings(
    slices: Sequence[SliceResult],
    pools: Sequence[PoolResult],
    *,
    hours: float,
    price: float | None,
) -> dict[str, Any]:
    """Headline savings: what the plan frees and what the window wasted, by namespace.

    GPU-hours of a slice are its compute-slice share of a GPU times the hours it was
    observed in the window (coverage × window), so a slice that existed half the week
    counts half.
    """
    current = [s for s in slices if s.current]
    by_ns: dict[str, dict[str, float]] = defaultdict(
        lambda: {
            "idle_gpu_hours": 0.0,
            "unallocated_gpu_hours": 0.0,
            "oversized_gpu_hours": 0.0,
            "slices": 0.0,
        }
    )
    idle_hours = unalloc_hours = oversized_hours = 0.0
    for s in current:
        owner = s.stats.main_owner
        namespace = owner.namespace if owner is not None else "(unallocated)"
        gh = slice_wasted_gpu_hours(s, hours)
        if s.status is Status.IDLE:
            idle_hours += gh
            by_ns[namespace]["idle_gpu_hours"] += gh
            by_ns[namespace]["slices"] += 1
        elif s.status is Status.UNALLOCATED:
            unalloc_hours += gh
            by_ns["(unallocated)"]["unallocated_gpu_hours"] += gh
            by_ns["(unallocated)"]["slices"] += 1
        elif s.status is Status.OVERSIZED and s.held:
            oversized_hours += gh
            by_ns[namespace]["oversized_gpu_hours"] += gh
            by_ns[namespace]["slices"] += 1
    compute_reclaimable = sum(
        round(_slice_gpu_share(s) * _compute_slices(s))
        for s in current
        if s.status in (Status.IDLE, Status.UNALLOCATED)
    ) + sum(
        round(_excess_share(s) * _compute_slices(s))
        for s in current
        if s.status is Status.OVERSIZED and s.held
    )
    gpus = sum(len(p.plan.gpus) for p in pools)
    busy_before = sum(1 for p in pools for g in p.gpus if any(i.in_use for i in g.instances))
    held_before = {
        (s.stats.info.key.node, s.stats.info.key.gpu)
        for s in current
        if s.held and s.status is not Status.IDLE
    }
    used_after = sum(p.plan.gpus_used for p in pools)
    free_before = gpus - len({k for k in held_before if _in_pools(k, pools)})
    freed = max(0, (gpus - used_after) - free_before)
    wasted = idle_hours + unalloc_hours + oversized_hours
    out: dict[str, Any] = {
        "idle_slices": sum(1 for s in current if s.status is Status.IDLE),
        "unallocated_slices": sum(1 for s in current if s.status is Status.UNALLOCATED),
        "oversized_slices": sum(1 for s in current if s.status is Status.OVERSIZED),
        "compute_slices_reclaimable": compute_reclaimable,
        "gpus_planned": gpus,
        "gpus_in_use_before": gpus - free_before,
        "gpus_pinned_before": busy_before,
        "gpus_used_after": used_after,
        "gpus_freed": freed,
        "gpus_changed": sum(p.plan.gpus_changed for p in pools),
        "nodes_changed": sum(p.plan.nodes_changed for p in pools),
        "unmet_demand": sum(p.plan.unmet_total for p in pools),
        "stranded_compute_slices": sum(p.plan.stranded_compute_slices for p in pools),
        "window_hours": round(hours, 4),
        "gpu_hours_freed": round(freed * hours, 4),
        "idle_gpu_hours": round(idle_hours, 4),
        "unallocated_gpu_hours": round(unalloc_hours, 4),
        "oversized_gpu_hours": round(oversized_hours, 4),
        "wasted_gpu_hours": round(wasted, 4),
        "by_namespace": [
            {
                "namespace": ns,
                "slices": int(v["slices"]),
                "idle_gpu_hours": round(v["idle_gpu_hours"], 4),
                "unallocated_gpu_hours": round(v["unallocated_gpu_hours"], 4),
                "oversized_gpu_hours": round(v["oversized_gpu_hours"], 4),
                "wasted_gpu_hours": round(_wasted(v), 4),
            }
            for ns, v in sorted(by_ns.items(), key=lambda kv: -_wasted(kv[1]))
        ],
        "price_per_gpu_hour": price,
    }
    if price is not None:
        out["wasted_cost"] = round(wasted * price, 2)
        out["freed_cost"] = round(freed * hours * price, 2)
        for row in out["by_namespace"]:
            row["wasted_cost"] = round(row["wasted_gpu_hours"] * price, 2)
    return out


def _wasted(row: dict[str, float]) -> float:
    """A namespace's wasted GPU-hours: idle, unallocated (only "(unallocated)") and oversized."""
    return row["idle_gpu_hours"] + row["unallocated_gpu_hours"] + row["oversized_gpu_hours"]


def _compute_slices(result: SliceResult) -> int:
    """Compute slices of the slice's GPU model (0 when uncatalogued)."""
    model = catalogue_model(result.stats.info.model)
    return model.compute_slices if model is not None else 0


def _in_pools(key: tuple[str, int], pools: Sequence[PoolResult]) -> bool:
    return any((g.node, g.index) == key for p in pools for g in p.gpus)
