"""What one analysis found: every slice with its verdict, every pool's demand and plan.

:class:`AnalysisResult` holds them with the savings, the notes and the provenance; its report
(:mod:`migscope.core._spec.v1`) is made in one place,
:func:`migscope.analyzer._report.data.build_report`, from these parts (each slice's
:meth:`SliceResult.to_dict`, :meth:`AnalysisResult.recommendations`,
:meth:`AnalysisResult.what_if_summary`). Every recommendation is checked against the safety
contract (:mod:`migscope.core._disruption`) as it is built.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from migscope.analyzer._judge.claims import ClaimResize, claim_resize
from migscope.analyzer._judge.classify import Classification, Status
from migscope.analyzer._judge.demand import PoolDemand
from migscope.analyzer._judge.safety import History
from migscope.analyzer._judge.workloads import WorkloadAdvice
from migscope.analyzer._model import JsonValue, SliceStats
from migscope.analyzer._plan import GpuState, LowerBound, Plan
from migscope.analyzer._plan.whatif import Replay
from migscope.core import (
    GpuLayouts,
    GpuModel,
    MigPartedConfig,
    SliceOnGpu,
    UnknownProfileError,
    pods_losing_device,
    recreated_gpus,
    violations,
)


@dataclass(frozen=True)
class SliceResult:
    """One slice with its verdict and the part it plays in the plan.

    Attributes:
        stats: Window statistics.
        verdict: The classification.
        current: Exists at the end of the window (False: a re-partition removed it).
        held: A pod held it for at least the policy's allocated fraction.
        in_use: Pinned for the planner (held, busy and right-sized; see the module doc).
        demand_profile: The profile it adds to demand, or None.
        pin: Why it pins its GPU, which the plan must then leave exactly as it is (None: it
            does not; see :mod:`migscope.analyzer._judge.safety`).
    """

    stats: SliceStats
    verdict: Classification
    current: bool
    held: bool
    in_use: bool
    demand_profile: str | None
    pin: str | None = None

    @property
    def status(self) -> Status:
        """Shortcut for ``verdict.status``."""
        return self.verdict.status

    @property
    def claim_resize(self) -> ClaimResize | None:
        """The claim change an oversized slice held through DRA calls for, else None.

        The claim, and the selector its request should carry
        (:mod:`migscope.analyzer._judge.claims`).
        """
        return claim_resize(self.stats, self.verdict)

    def to_dict(self) -> dict[str, JsonValue]:
        """The slice as the report's ``slices[]`` entry."""
        info, owner = self.stats.info, self.stats.main_owner
        return {
            "node": info.key.node,
            "gpu": info.key.gpu,
            "gpu_uuid": info.key.gpu_uuid,
            "gpu_instance_id": info.key.gpu_instance_id,
            "model": info.model,
            "profile": info.profile,
            "placement_start": info.placement_start,
            "mig_uuid": info.mig_uuid,
            "status": self.verdict.status.value,
            "confidence": self.verdict.confidence,
            "reason": self.verdict.reason,
            "suggested_profile": self.verdict.suggested_profile,
            "evidence": dict(self.verdict.evidence),
            "namespace": owner.namespace if owner is not None else None,
            "pod": (owner.pod or None) if owner is not None else None,
            "claim": (owner.claim or None) if owner is not None else None,
            "claim_resize": resize.to_dict() if (resize := self.claim_resize) else None,
            "owners": [o.to_dict() for o in self.stats.owners],
            "energy_joules": self.stats.to_dict()["energy_joules"],
            "hourly": self.stats.hourly.to_dict() if self.stats.hourly is not None else None,
            "current": self.current,
            "in_use": self.in_use,
            "demand_profile": self.demand_profile,
            "pin": self.pin,
        }

    def pods(self) -> tuple[str, ...]:
        """``namespace/pod`` of every pod seen holding the slice in the window.

        A holder known only by its DRA claim names no pod; such a slice pins its GPU
        (:func:`~migscope.analyzer._judge.safety.pin_reason`), so no plan re-creates it unnamed.
        """
        return tuple(sorted({f"{o.namespace}/{o.pod}" for o in self.stats.owners if o.pod}))


@dataclass(frozen=True)
class PoolResult:
    """One pool's demand, plan and bound.

    Attributes:
        pool: Pool key (the GPU model key, optionally refined).
        model: The pool's GPU model.
        gpus: The pool's GPUs as they are now.
        demand: What the pool must offer.
        plan: The planner's answer.
        bound: Bin-packing lower bound on GPUs for the demand.
        replays: The window's hourly demand replayed against layouts: ``current``,
            ``proposed`` and, when asked, ``what_if`` (empty without per-hour data).
    """

    pool: str
    model: GpuModel
    gpus: tuple[GpuState, ...]
    demand: PoolDemand
    plan: Plan
    bound: LowerBound
    replays: Mapping[str, Replay] = field(default_factory=dict)


@dataclass(frozen=True)
class AnalysisResult:
    """Everything one analysis found; its report is made from it by ``_report.data.build_report``.

    Attributes:
        window_start: Window start, Unix seconds.
        window_end: Window end, Unix seconds.
        step: Sample interval the statistics assumed, seconds.
        slices: Every slice with its verdict, sorted by node, GPU and GI id.
        pools: One result per pool, sorted by pool key.
        savings: Headline numbers (see :func:`_savings`).
        mig_parted: Every pool's configs merged into one mig-parted file (None when no
            pool was planned).
        node_configs: ``{node: config}``, the values for ``nvidia.com/mig.config``.
        price_per_gpu_hour: The price used for money figures, if any.
        notes: Things the reader should know (uncatalogued models, unplaceable slices).
        what_if: ``{node or "*": config}`` replayed as the what-if layout, if asked.
        history: How much history the analysis rests on, against the policy's minimum.
        provenance: Where the data came from and when the report was made (the CLI sets
            it; the applier refuses simulated and stale plans on it).
        workloads: The request change each workload should make, and the idle holders to
            scale down (:mod:`~migscope.analyzer._judge.workloads`); None for a snapshot.
    """

    window_start: float
    window_end: float
    step: float
    slices: tuple[SliceResult, ...]
    pools: tuple[PoolResult, ...]
    savings: Mapping[str, Any]
    mig_parted: MigPartedConfig | None
    node_configs: Mapping[str, str]
    price_per_gpu_hour: float | None = None
    notes: tuple[str, ...] = field(default=())
    what_if: Mapping[str, str] | None = None
    history: History | None = None
    provenance: Mapping[str, Any] | None = None
    workloads: WorkloadAdvice | None = None

    @property
    def window_hours(self) -> float:
        """Window length in hours."""
        return (self.window_end - self.window_start) / 3600.0

    def count(self, status: Status) -> int:
        """Current slices with ``status``."""
        return sum(1 for s in self.slices if s.current and s.status is status)

    def recommendations(self) -> list[dict[str, Any]]:
        """One entry per node whose layout the plan changes (see docs/report-schema.md).

        What a change destroys is computed by :mod:`migscope.core._disruption`, the code the
        applier uses too: every GPU whose layout differs is re-created whole, so every pod
        seen on any slice of such a GPU is listed in ``pods_to_move`` and the change is
        disruptive. Each entry is checked against the safety contract before it is returned;
        a violation is a bug in the planner, so it raises rather than reaching a cluster.
        """
        on_node: dict[str, list[SliceResult]] = defaultdict(list)
        for s in self.slices:
            if s.current:
                on_node[s.stats.info.key.node].append(s)
        out: list[dict[str, Any]] = []
        for pool in self.pools:
            by_node: dict[str, list[Any]] = defaultdict(list)
            for gpu in pool.plan.gpus:
                by_node[gpu.node].append(gpu)
            for node_plan in pool.plan.nodes:
                gpus = sorted(by_node[node_plan.node], key=lambda g: g.index)
                if not node_plan.changed:
                    continue
                layouts = [
                    GpuLayouts(
                        g.index,
                        g.current.layout.as_dict(),
                        g.proposed.layout.as_dict(),
                        g.current.mig_enabled,
                        g.proposed.mig_enabled,
                    )
                    for g in gpus
                ]
                slices = [_on_gpu(s, pool.model) for s in on_node[node_plan.node]]
                recreated = recreated_gpus(layouts)
                pods = pods_losing_device(recreated, slices)
                rec: dict[str, Any] = {
                    "node": node_plan.node,
                    "pool": pool.pool,
                    "model": pool.model.key,
                    "current": [{"gpu": g.index, **g.current.as_dict()} for g in gpus],
                    "proposed": [{"gpu": g.index, **g.proposed.as_dict()} for g in gpus],
                    "mig_config": node_plan.mig_config,
                    "disruptive": node_plan.disruptive or bool(pods),
                    "pods_to_move": list(pods),
                    "gpus_recreated": list(recreated),
                    "slices": [x.as_dict() for x in sorted(slices, key=_slice_order)],
                    "gpus": [g.as_dict() for g in gpus],
                }
                broken = violations(rec)
                if broken:
                    raise AssertionError(f"planner broke the safety contract: {broken[0]}")
                out.append(rec)
        return out

    def what_if_summary(self) -> dict[str, Any] | None:
        """The what-if layout's replay over all pools, or None when none was asked for."""
        if self.what_if is None:
            return None
        runs = [p.replays["what_if"] for p in self.pools if "what_if" in p.replays]
        proposed = [p.replays["proposed"] for p in self.pools if "proposed" in p.replays]

        def totals(replays: Sequence[Replay]) -> dict[str, float]:
            demand = sum(r.demand_instance_hours for r in replays)
            unmet = sum(r.unmet_instance_hours for r in replays)
            served = 1.0 - unmet / demand if demand > 0 else 1.0
            return {
                "unmet_instance_hours": round(unmet, 3),
                "demand_instance_hours": round(demand, 3),
                "served_share": round(served, 4),
            }

        return {
            "configs": dict(sorted(self.what_if.items())),
            "pools_replayed": len(runs),
            **totals(runs),
            "proposed": totals(proposed),
        }


def iso_utc(seconds: float) -> str:
    """Unix seconds as the report writes times: ISO 8601 in UTC with a ``Z``."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _on_gpu(result: SliceResult, model: GpuModel) -> SliceOnGpu:
    """A current slice as the safety contract sees it (profile in the catalogue's name)."""
    info = result.stats.info
    try:
        profile = model.profile(info.profile).name
    except UnknownProfileError:
        profile = info.profile
    return SliceOnGpu(info.key.gpu, profile, result.status.value, result.pods(), result.pin)


def _slice_order(s: SliceOnGpu) -> tuple[int, str, str]:
    return (s.gpu, s.profile, s.status)
