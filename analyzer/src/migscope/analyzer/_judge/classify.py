"""Classify a slice from its window statistics: idle, unallocated, oversized, saturated, healthy.

This is the decision the weekly report and the re-partitioning plan rest on, so it is a pure
function of the statistics, the catalogue and the policy (no I/O, tested with tables), and
every verdict carries the numbers and thresholds that decided it (``evidence``), a
confidence, and one sentence a platform engineer can act on.

The order of the questions (docs/classification.md has examples):

1. No activity or memory sample in the window: ``unknown``.
2. No pod held it for ``allocated.min_fraction`` of the observed window and nothing uses it:
   ``unallocated``. If something *does* use it, pod attribution is probably broken (kubelet
   socket, dcgm-exporter #272); the slice is judged on its use below, with lower confidence.
3. ``idle``: held and p95 activity below the idle threshold, whatever memory it holds:
   idle is about compute, and a notebook that loaded a model and never runs it is the
   canonical idle slice. The memory held is evidence shown with it ("holds 3.1 GiB"). Only
   without an activity series does p95 memory below ``idle.memory_p95_below`` stand in.
4. ``saturated``: p95 activity or peak memory above the saturation thresholds.
5. ``oversized``: a smaller profile of the same GPU model fits the p95 activity (scaled by
   compute slices) and the peak memory with the policy's headroom; the smallest such profile
   is suggested.
6. ``healthy``: no smaller profile fits.

What the data cannot tell is said, not guessed. Without an activity series (Ampere without
DCGM) memory and allocation decide, confidence drops and the reason says "activity unknown
(no GPM/DCGM)"; a smaller profile then counts as fitting only if it has as many compute
slices, and when the answer hinges on the missing number the status is ``unknown``. Missing
memory is treated the same way. Low coverage lowers confidence in proportion.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from migscope.analyzer._judge.policy import Policy, default_policy
from migscope.analyzer._model import JsonValue, SliceStats, json_safe
from migscope.core import GiProfile, GpuModel, UnknownProfileError

ACTIVITY_UNKNOWN = "activity unknown (no GPM/DCGM)"
"""Said in the reason of every verdict made without an activity series."""

MIB = 1 << 20
_VARIANT = re.compile(r"^\d+g\.\d+gb(.*)$", re.IGNORECASE)


class Status(str, Enum):
    """A slice's verdict."""

    IDLE = "idle"
    UNALLOCATED = "unallocated"
    OVERSIZED = "oversized"
    SATURATED = "saturated"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Classification:
    """A verdict with what it rests on.

    Attributes:
        status: The verdict.
        confidence: 0..1; 1 means complete data and every number known.
        evidence: The statistics and thresholds that decided, as JSON values: the report
            shows them next to the verdict, so a reader can check it.
        suggested_profile: For ``oversized``, the smallest profile of the same GPU model that
            fits with headroom; otherwise None.
        reason: One sentence saying why.
    """

    status: Status
    confidence: float
    evidence: Mapping[str, JsonValue]
    suggested_profile: str | None
    reason: str

    def to_dict(self) -> dict[str, JsonValue]:
        """The verdict as JSON values."""
        return {
            "status": self.status.value,
            "confidence": self.confidence,
            "evidence": dict(self.evidence),
            "suggested_profile": self.suggested_profile,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class _Fit:
    """Whether the slice would fit ``profile``: True, False, or None when unknowable."""

    profile: GiProfile
    activity_after: float | None
    memory_after: float | None
    compute_ok: bool | None
    memory_ok: bool | None

    @property
    def fits(self) -> bool:
        return bool(self.compute_ok) and bool(self.memory_ok)

    @property
    def ruled_out(self) -> bool:
        return self.compute_ok is False or self.memory_ok is False

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "profile": self.profile.name,
            "activity_p95_after": _round(self.activity_after),
            "memory_peak_after_ratio": _round(self.memory_after),
            "compute_fits": self.compute_ok,
            "memory_fits": self.memory_ok,
        }


@dataclass(frozen=True)
class _Usage:
    """The statistics the rules compare, with memory as ratios of the slice's memory."""

    activity_p95: float | None
    memory_peak: float | None
    memory_p95: float | None
    memory_peak_ratio: float | None
    memory_p95_ratio: float | None
    total: float | None


def _round(value: float | None, digits: int = 6) -> float | None:
    """Evidence as the report writes it: rounded, and None when not a finite number.

    The sources already keep statistics finite; this is the last guard, because one NaN in
    the evidence makes the JSON report unwritable (``allow_nan=False``).
    """
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _variant(name: str) -> str:
    """``+me``, ``+gfx``, ``-me`` ... of a profile name ("" for a plain one)."""
    match = _VARIANT.match(name)
    return match.group(1).lower() if match else name.lower()


def _size(profile: GiProfile) -> tuple[int, int, int]:
    return (profile.memory_slices, profile.compute_slices, profile.memory_mib)


def _current_profile(stats: SliceStats, model: GpuModel | None) -> GiProfile | None:
    if model is None:
        return None
    try:
        return model.profile(stats.info.profile)
    except UnknownProfileError:
        return None


def _family(model: GpuModel, current: GiProfile) -> list[GiProfile]:
    """Profiles a slice may move to: those of the same variant.

    A ``+me`` slice keeps its media engines, and a plain one is not offered the GPU's single
    ``+me`` instance.
    """
    variant = _variant(current.name)
    return [p for p in model.profiles if _variant(p.name) == variant]


def _usage(stats: SliceStats, current: GiProfile | None) -> _Usage:
    total = stats.memory_total_bytes
    if total is None and current is not None:
        total = float(current.memory_mib * MIB)
    if not total or total <= 0:
        total = None
    peak, p95 = stats.memory_peak_bytes, stats.memory_p95_bytes
    known = total is not None and peak is not None and p95 is not None
    return _Usage(
        activity_p95=stats.activity_p95,
        memory_peak=peak if known else None,
        memory_p95=p95 if known else None,
        memory_peak_ratio=peak / total if known and peak is not None and total else None,
        memory_p95_ratio=p95 / total if known and p95 is not None and total else None,
        total=total,
    )


def _fit(usage: _Usage, current: GiProfile, target: GiProfile, policy: Policy) -> _Fit:
    """Would the slice run on ``target`` with the policy's headroom, per dimension?

    With activity unknown, only a target with at least as many compute slices is known to
    fit on compute (nothing is scaled, nothing guessed); the same for memory.
    """
    head = policy.oversized
    activity_after = memory_after = None
    if usage.activity_p95 is not None:
        activity_after = usage.activity_p95 * current.compute_slices / target.compute_slices
        compute_ok: bool | None = activity_after <= head.activity_p95_at_most
    else:
        compute_ok = True if target.compute_slices >= current.compute_slices else None
    if usage.memory_peak is not None:
        memory_after = usage.memory_peak / (target.memory_mib * MIB)
        memory_ok: bool | None = memory_after <= head.memory_peak_at_most
    else:
        memory_ok = True if target.memory_mib >= current.memory_mib else None
    return _Fit(target, activity_after, memory_after, compute_ok, memory_ok)


def _smaller(model: GpuModel, current: GiProfile) -> list[GiProfile]:
    """Profiles that take no more compute and memory slices than ``current``, smallest first."""
    return sorted(
        (
            p
            for p in _family(model, current)
            if p.compute_slices <= current.compute_slices
            and p.memory_slices <= current.memory_slices
            and _size(p) != _size(current)
        ),
        key=_size,
    )


def _larger(model: GpuModel, current: GiProfile) -> list[GiProfile]:
    """Profiles that take at least the compute and memory slices of ``current``, smallest first."""
    return sorted(
        (
            p
            for p in _family(model, current)
            if p.compute_slices >= current.compute_slices
            and p.memory_slices >= current.memory_slices
            and _size(p) != _size(current)
        ),
        key=_size,
    )


def _holds(usage: _Usage) -> str:
    """Memory held, as evidence next to an idle verdict ("holds 3.1 GiB (4.4% of 70.0 GiB)")."""
    if usage.memory_p95 is None:
        return "memory held unknown"
    return (
        f"holds {_gib(usage.memory_p95)} at p95 ({_pct(usage.memory_p95_ratio)} of "
        f"{_gib(usage.total)})"
    )


def _pct(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value * 100:.1f}%"


def _gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value / (1 << 30):.1f} GiB"


class _Verdict:
    """Collects the verdict's parts while the rules run."""

    def __init__(self, stats: SliceStats, usage: _Usage, policy: Policy) -> None:
        self.stats = stats
        self.usage = usage
        self.policy = policy
        self.factors: dict[str, float] = {}
        self.thresholds: dict[str, float] = {}
        self.notes: list[str] = []
        self.candidates: list[_Fit] = []
        coverage_factor = min(1.0, stats.coverage / policy.confidence.full_coverage)
        self.factors["coverage"] = round(coverage_factor, 6)
        # Below the minimum history confidence falls in proportion to what is there.
        need, have = policy.evidence.min_history_hours, stats.observed_hours
        if need > 0 and have < need:
            self.factors["history"] = round(have / need, 6)

    def quote(self, *keys: str) -> None:
        every = self.policy.thresholds()
        for key in keys:
            self.thresholds[key] = every[key]

    def finish(
        self, status: Status, reason: str, *, suggested: str | None = None
    ) -> Classification:
        stats, usage = self.stats, self.usage
        confidence = 1.0
        for factor in self.factors.values():
            confidence *= factor
        if status is Status.UNKNOWN and stats.samples == 0:
            confidence = 0.0
        notes = list(self.notes)
        if stats.coverage < self.policy.confidence.full_coverage and stats.samples:
            notes.append(f"coverage {_pct(stats.coverage)}")
        if usage.activity_p95 is None and stats.samples:
            notes.append(ACTIVITY_UNKNOWN)
        if usage.memory_peak is None and stats.samples:
            notes.append("memory unknown")
        sentence = reason if not notes else f"{reason} ({'; '.join(notes)})"
        evidence: dict[str, JsonValue] = {
            "samples": stats.samples,
            "expected_samples": stats.expected_samples,
            "coverage": _round(stats.coverage),
            "allocated_fraction": _round(stats.allocated_fraction),
            "activity_known": usage.activity_p95 is not None,
            "activity_p50": _round(stats.activity_p50),
            "activity_p95": _round(stats.activity_p95),
            "activity_max": _round(stats.activity_max),
            "memory_known": usage.memory_peak is not None,
            "memory_p95_bytes": stats.memory_p95_bytes,
            "memory_peak_bytes": stats.memory_peak_bytes,
            "memory_total_bytes": usage.total,
            "memory_p95_ratio": _round(usage.memory_p95_ratio),
            "memory_peak_ratio": _round(usage.memory_peak_ratio),
            "thresholds": {k: v for k, v in self.thresholds.items()},
            "confidence_factors": {k: v for k, v in self.factors.items()},
        }
        if self.candidates:
            evidence["candidates"] = [fit.to_dict() for fit in self.candidates]
        return Classification(
            status=status,
            confidence=round(max(0.0, min(1.0, confidence)), 4),
            evidence=json_safe(evidence),
            suggested_profile=suggested,
            reason=sentence,
        )


def _observed(hours: float) -> str:
    """Observed history in words: ``168 h``, ``5 min`` (a share of a snapshot is of minutes)."""
    if hours >= 1.0:
        return f"{hours:.3g} h"
    return f"{hours * 60:.3g} min"


def classify(
    stats: SliceStats, *, model: GpuModel | None, policy: Policy | None = None
) -> Classification:
    """Decide a slice's status from its statistics.

    Args:
        stats: The slice's window statistics.
        model: The slice's GPU model from the catalogue, or None if it is not catalogued
            (then no smaller profile can be evaluated).
        policy: Thresholds; the packaged default when None.

    Returns:
        The verdict with its evidence, confidence and reason.
    """
    policy = policy or default_policy()
    current = _current_profile(stats, model)
    usage = _usage(stats, current)
    verdict = _Verdict(stats, usage, policy)
    act, mem_p95, mem_peak = usage.activity_p95, usage.memory_p95_ratio, usage.memory_peak_ratio

    if act is None:
        verdict.factors["activity_unknown"] = policy.confidence.activity_unknown_factor
    if mem_peak is None:
        verdict.factors["memory_unknown"] = policy.confidence.memory_unknown_factor
    if stats.samples == 0 or (act is None and mem_peak is None):
        what = "no activity or memory samples in the window"
        if stats.samples:
            what = "neither activity nor memory (with the slice's size) is known"
        return verdict.finish(Status.UNKNOWN, f"Nothing to judge by: {what}.")

    idle = policy.idle
    quiet_memory = mem_p95 is None or mem_p95 < idle.memory_p95_below
    # Idle is about compute: memory held is not use. Only without an activity series does
    # memory stand in for it (and such a verdict never lets the plan change the GPU).
    quiet_compute = act < idle.activity_p95_below if act is not None else quiet_memory
    held = stats.allocated_fraction >= policy.allocated.min_fraction
    verdict.quote("allocated.min_fraction", "idle.activity_p95_below", "idle.memory_p95_below")

    if not held:
        if quiet_compute and quiet_memory:
            return verdict.finish(
                Status.UNALLOCATED,
                f"No pod held this slice (held {_pct(stats.allocated_fraction)} of the "
                f"observed window, under {_pct(policy.allocated.min_fraction)}) and nothing "
                f"used it (p95 activity {_pct(act)}, p95 memory {_pct(mem_p95)}).",
            )
        verdict.factors["unattributed_use"] = policy.confidence.unattributed_use_factor
        verdict.notes.append("in use although no pod held it: is pod attribution working?")

    if held and quiet_compute:
        owner = stats.main_owner
        who = owner.who if owner is not None else "a pod"
        if act is not None:
            why = f"p95 activity {_pct(act)} < {_pct(idle.activity_p95_below)}"
        else:
            why = f"p95 memory {_pct(mem_p95)} < {_pct(idle.memory_p95_below)} (activity unknown)"
        return verdict.finish(
            Status.IDLE,
            f"Held by {who} for {_pct(stats.allocated_fraction)} of the "
            f"{_observed(stats.observed_hours)} it was seen, but unused: "
            f"{why}; {_holds(usage)}.",
        )

    sat = policy.saturated
    verdict.quote("saturated.activity_p95_above", "saturated.memory_peak_above")
    hot = []
    if act is not None and act > sat.activity_p95_above:
        hot.append(f"p95 activity {_pct(act)} > {_pct(sat.activity_p95_above)}")
    if mem_peak is not None and mem_peak > sat.memory_peak_above:
        hot.append(f"peak memory {_pct(mem_peak)} > {_pct(sat.memory_peak_above)} of the slice")
    if hot:
        return verdict.finish(
            Status.SATURATED,
            f"The slice is a bottleneck: {' and '.join(hot)}.",
        )

    if model is None or current is None:
        where = "GPU model" if model is None else f"profile {stats.info.profile!r}"
        return verdict.finish(
            Status.UNKNOWN,
            f"In use (p95 activity {_pct(act)}, peak memory {_pct(mem_peak)}), but the "
            f"{where} is not in the catalogue, so smaller profiles cannot be evaluated.",
        )

    verdict.quote("oversized.activity_p95_at_most", "oversized.memory_peak_at_most")
    verdict.candidates = [_fit(usage, current, p, policy) for p in _smaller(model, current)]
    fitting = [fit for fit in verdict.candidates if fit.fits]
    if fitting:
        best = fitting[0]
        return verdict.finish(
            Status.OVERSIZED,
            f"{best.profile.name} would do: p95 activity {_pct(act)} on "
            f"{current.compute_slices} compute slices becomes {_pct(best.activity_after)} on "
            f"{best.profile.compute_slices}, peak memory {_gib(usage.memory_peak)} is "
            f"{_pct(best.memory_after)} of {_gib(best.profile.memory_mib * MIB)} "
            f"(headroom: at most {_pct(policy.oversized.activity_p95_at_most)} and "
            f"{_pct(policy.oversized.memory_peak_at_most)}).",
            suggested=best.profile.name,
        )
    undecided = [fit for fit in verdict.candidates if not fit.ruled_out]
    if undecided:
        missing = "activity" if act is None else "memory"
        return verdict.finish(
            Status.UNKNOWN,
            f"{undecided[0].profile.name} might do, but {missing} is unknown, so whether "
            f"{current.name} is larger than needed cannot be told.",
        )
    if not verdict.candidates:
        reason = (
            f"{current.name} is the smallest profile; p95 activity {_pct(act)} and peak "
            f"memory {_pct(mem_peak)} fit it."
        )
    else:
        reason = (
            f"{current.name} fits its use and no smaller profile does with headroom "
            f"(p95 activity {_pct(act)}, peak memory {_pct(mem_peak)})."
        )
    return verdict.finish(Status.HEALTHY, reason)


def right_size(stats: SliceStats, *, model: GpuModel | None, policy: Policy | None = None) -> str:
    """The profile this slice's use needs: what demand should count it as.

    The smallest smaller profile that fits with the ``oversized`` headroom (what
    :func:`classify` suggests for an oversized slice); for a saturated slice the smallest
    larger profile that would leave that headroom, or the largest one when none would (its
    use is censored at the ceiling, so the true need may be larger still); otherwise the
    current profile. Unknown activity or memory is never guessed: the profile must then keep
    at least the current compute slices or memory. A slice whose GPU model or profile is not
    catalogued keeps its profile.

    Args:
        stats: The slice's window statistics.
        model: The slice's GPU model from the catalogue, or None.
        policy: Thresholds; the packaged default when None.

    Returns:
        A profile name of ``model``.
    """
    policy = policy or default_policy()
    current = _current_profile(stats, model)
    if model is None or current is None or stats.samples == 0:
        return stats.info.profile
    usage = _usage(stats, current)
    for candidate in _smaller(model, current):
        if _fit(usage, current, candidate, policy).fits:
            return candidate.name
    sat = policy.saturated
    busy = usage.activity_p95 is not None and usage.activity_p95 > sat.activity_p95_above
    full = usage.memory_peak_ratio is not None and usage.memory_peak_ratio > sat.memory_peak_above
    saturated = busy or full
    if not saturated:
        return current.name
    larger: Sequence[GiProfile] = _larger(model, current)
    for candidate in larger:
        if _fit(usage, current, candidate, policy).fits:
            return candidate.name
    return larger[-1].name if larger else current.name
