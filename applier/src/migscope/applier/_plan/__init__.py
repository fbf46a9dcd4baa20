"""What the applier is asked to do, and how it reads that from the analyzer's files.

:mod:`~migscope.applier._plan.model` holds the plan's types and the rule deciding whether it
may be applied (provenance: not simulated, not stale, of known origin);
:mod:`~migscope.applier._plan.contract` reads the files through the report contract
(:mod:`migscope.core._spec.v1`); :mod:`~migscope.applier._plan.read` builds the plan from them
and re-checks every change against the safety contract; :mod:`~migscope.applier._plan.validate`
refuses a plan whose configs or layouts the MIG catalogue says cannot be built.
"""

from __future__ import annotations

from migscope.applier._plan.model import (
    ApplyPlan,
    GpuChange,
    NodeChange,
    PlanError,
    PlanRefused,
    Provenance,
)
from migscope.applier._plan.read import NO_EVIDENCE, load_plan, plan_from_report

__all__ = [
    "NO_EVIDENCE",
    "ApplyPlan",
    "GpuChange",
    "NodeChange",
    "PlanError",
    "PlanRefused",
    "Provenance",
    "load_plan",
    "plan_from_report",
]
