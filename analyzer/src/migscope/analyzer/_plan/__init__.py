"""Layout planning: which MIG layout each GPU of a pool should have to cover a demand.

Pure decision code (no I/O): the caller passes the pool as it is now (:class:`GpuState`)
and the demand per profile, and gets a :class:`Plan` back: a layout and placements per
GPU, covered and unmet demand, stranded slices, freed GPUs, the mig-parted config and the
node → config plan. :func:`plan_layouts` solves it exactly (HiGHS MILP, with a time limit
and a proven gap); :func:`greedy_first_fit` and :func:`static_layout` are the baselines it
is measured against, and :func:`lower_bound` the bin-packing bound. See ``docs/planner.md``.
"""

from __future__ import annotations

from migscope.analyzer._plan.baselines import greedy_first_fit, static_layout
from migscope.analyzer._plan.demand_mix import (
    RequestCount,
    demand_from_requests,
    profile_for_milli,
    scale_demand,
)
from migscope.analyzer._plan.pool import GpuState, Instance, PlanInputError, Target, Weights
from migscope.analyzer._plan.result import Plan, config_name
from migscope.analyzer._plan.solver import LowerBound, lower_bound, plan_layouts

__all__ = [
    "GpuState",
    "Instance",
    "LowerBound",
    "Plan",
    "PlanInputError",
    "RequestCount",
    "Target",
    "Weights",
    "config_name",
    "demand_from_requests",
    "greedy_first_fit",
    "lower_bound",
    "plan_layouts",
    "profile_for_milli",
    "scale_demand",
    "static_layout",
]
