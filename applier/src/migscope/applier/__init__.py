"""Apply recommended MIG layouts through the GPU Operator's MIG Manager, safely.

:mod:`~migscope.applier._applier` decides which nodes to change and runs them;
:mod:`~migscope.applier._workflow` takes one node through the resumable label workflow;
:mod:`~migscope.applier._preflight` says why a node may not be changed now;
:mod:`~migscope.applier._describe` and :mod:`~migscope.applier._outcome` say what a run did or
would do; :mod:`~migscope.applier._plan` reads the analyzer's plan through the report
contract; :mod:`~migscope.applier._steps` records progress on the node and holds the pure
decisions; :mod:`~migscope.applier._configmap`, :mod:`~migscope.applier._lease`,
:mod:`~migscope.applier._audit` and :mod:`~migscope.kube` do one job each;
:mod:`~migscope.applier._clock` is where all of them get the time (tests simulate it).
docs/applier.md explains the workflow, its safety rules and the RBAC it needs.

The names below are this distribution's front door: the only names other distributions and the
CLI import from it. Each loads its module on first use (PEP 562), so importing the package
costs nothing until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migscope.core import lazy_exports

if TYPE_CHECKING:
    from migscope.applier._applier import Applier, ClusterRefused, LeaseLost
    from migscope.applier._lease import LeaseHeld
    from migscope.applier._plan.model import ApplyPlan, PlanRefused
    from migscope.applier._plan.read import load_plan, plan_from_report
    from migscope.applier._settings import DEFAULT_MAX_PLAN_AGE_S, ApplySettings, parse_window_spec

_HOME = {
    "Applier": "_applier",
    "ClusterRefused": "_applier",
    "LeaseLost": "_applier",
    "LeaseHeld": "_lease",
    "ApplyPlan": "_plan.model",
    "PlanRefused": "_plan.model",
    "load_plan": "_plan.read",
    "plan_from_report": "_plan.read",
    "ApplySettings": "_settings",
    "DEFAULT_MAX_PLAN_AGE_S": "_settings",
    "parse_window_spec": "_settings",
}
"""Each exported name's module (under ``migscope.applier``)."""

__all__ = [
    "DEFAULT_MAX_PLAN_AGE_S",
    "Applier",
    "ApplyPlan",
    "ApplySettings",
    "ClusterRefused",
    "LeaseHeld",
    "LeaseLost",
    "PlanRefused",
    "load_plan",
    "parse_window_spec",
    "plan_from_report",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
