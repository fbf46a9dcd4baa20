"""Estimate each MIG slice's share of its GPU's measured power.

Hardware measures power for the whole board only; NVML and DCGM have nothing per slice, and
dcgm-exporter's habit of repeating the board figure on every slice makes ``sum()`` over-count
by the number of slices. migscope publishes the measurement once per GPU and an *estimate*
per slice, built so that the slices of a GPU always add up to the measurement:

``P = P_idle + P_dynamic``, with ``P_idle = min(P, idle_watts)``.

* ``P_idle`` — what the board draws doing nothing — is split by memory slices held: a slice
  pays for the part of the GPU it reserves whether it runs or not (that is the cost of an idle
  slice the analyzer reports). Empty slices' idle share is spread over the existing slices.
* ``P_dynamic`` is split by activity × SMs: GPM activity is relative to the slice, so a 7g
  slice at 50 % does more work than a 1g slice at 50 %. When no slice shows activity (or
  activity is unknown, as on Ampere without DCGM) it is split by SMs.

``idle_watts`` is configured per GPU or, by default, the lowest power the exporter has seen on
that GPU since it started (never above the current reading) — conservative early on, exact
once the GPU has been idle once. This follows Kepler's MIG proposal (idle by minimum
observed, active by activity) with CEEMS's SM weighting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SliceLoad:
    """What the estimate needs to know about one slice."""

    memory_slices: int
    sm_count: int
    activity: float | None


def split_power(gpu_watts: float, idle_watts: float, slices: Sequence[SliceLoad]) -> list[float]:
    """Split ``gpu_watts`` over ``slices``; the result sums to ``gpu_watts`` (to rounding).

    Args:
        gpu_watts: Measured board power.
        idle_watts: Board power with nothing running (clamped into ``[0, gpu_watts]``).
        slices: The GPU's slices; an empty sequence yields an empty list.

    Returns:
        One estimate in watts per slice, in the order given.
    """
    if not slices:
        return []
    total = max(gpu_watts, 0.0)
    idle = min(max(idle_watts, 0.0), total)
    dynamic = total - idle
    memory = sum(max(s.memory_slices, 0) for s in slices)
    idle_weights = (
        [max(s.memory_slices, 0) / memory for s in slices]
        if memory
        else [1.0 / len(slices)] * len(slices)
    )
    busy = [max(s.activity or 0.0, 0.0) * max(s.sm_count, 0) for s in slices]
    if sum(busy) > 0:
        dynamic_weights = [b / sum(busy) for b in busy]
    else:
        sms = sum(max(s.sm_count, 0) for s in slices)
        dynamic_weights = [max(s.sm_count, 0) / sms for s in slices] if sms else list(idle_weights)
    return [idle * iw + dynamic * dw for iw, dw in zip(idle_weights, dynamic_weights, strict=True)]
