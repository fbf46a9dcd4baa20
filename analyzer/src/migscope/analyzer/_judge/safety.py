"""Which slices pin their GPU: the planner-side half of the safety contract.

"Never destroy what you cannot see is idle." A plan may re-create a GPU (which destroys every
instance on it, see :mod:`migscope.core._disruption`) only when every slice on it has a
verdict resting on enough evidence. This module decides, per slice, whether it *pins* its
GPU, and says why in words the report prints; the pipeline freezes pinned GPUs for the
planner, and :func:`migscope.core._disruption.violations` re-checks the outcome (the applier
runs the same check on the plan it is handed).

A slice pins its GPU when:

- its verdict is ``unknown`` (nothing to judge by, or an uncatalogued profile);
- it was observed for less than the policy's ``evidence.min_history_hours``;
- it is busy (healthy, saturated, oversized) but no pod is known to hold it: the pod that
  uses it cannot be named, so it cannot be moved;
- a DRA ResourceClaim held it in the window and the series named the claim but not its pod
  (dcgm-exporter's DRA series may lack pod labels): held, whatever its verdict, and the pod
  that would lose its device cannot be named;
- it is ``idle`` on memory alone (no activity series): compute was never seen.

And the whole fleet is pinned while its history (the longest any slice was observed) is
below the minimum: a single scrape or a fresh install is a snapshot, not a basis for a plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from migscope.analyzer._judge.classify import Classification, Status
from migscope.analyzer._judge.demand import BUSY_STATUSES, is_held
from migscope.analyzer._judge.policy import Policy
from migscope.analyzer._model import SliceStats


def pin_reason(stats: SliceStats, verdict: Classification, *, policy: Policy) -> str | None:
    """Why this slice must keep its GPU as it is, or None when the plan may change the GPU."""
    status = verdict.status
    if status is Status.UNKNOWN:
        return "verdict unknown"
    need, have = policy.evidence.min_history_hours, stats.observed_hours
    if have < need:
        return f"{_hours(have)} of history, {_hours(need)} needed"
    unnamed = sorted({o.who for o in stats.owners if not o.pod})
    if unnamed:
        return f"held through {', '.join(unnamed)}, its pod unknown"
    if status in BUSY_STATUSES and (not is_held(stats, policy=policy) or stats.main_owner is None):
        return f"{status.value} and no pod known to hold it"
    if status is Status.IDLE and stats.activity_p95 is None:
        return "idle on memory alone (activity unknown)"
    return None


@dataclass(frozen=True)
class History:
    """How much history the analysis has, against what a plan needs.

    Attributes:
        hours: The longest any current slice was observed, hours.
        needed: The policy's minimum, hours.
    """

    hours: float
    needed: float

    @property
    def enough(self) -> bool:
        """Whether any change may be recommended at all."""
        return self.hours >= self.needed

    def sentence(self) -> str:
        """What the report says when there is too little (:func:`snapshot_sentence`)."""
        return snapshot_sentence(self.hours, self.needed)

    def as_dict(self) -> dict[str, float | bool]:
        """JSON shape (report ``evidence``)."""
        return {
            "history_hours": round(self.hours, 4),
            "min_history_hours": self.needed,
            "enough_for_a_plan": self.enough,
        }


def snapshot_sentence(hours: float, needed: float) -> str:
    """What a report says when ``hours`` of history are below the ``needed`` minimum.

    One wording for the analysis' note (:meth:`History.sentence`) and for what reads a
    report, which has only its ``evidence`` numbers (the Markdown report, the CLI's summary).
    """
    return (
        f"no change recommended: {_hours(hours)} of history, {_hours(needed)} "
        "needed (policy evidence.min_history_hours); slices are classified as a snapshot"
    )


def _hours(value: float) -> str:
    if value < 1.0:
        return f"{value * 60:.0f} min"
    return f"{value:.1f} h"
