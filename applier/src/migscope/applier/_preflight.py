"""Whether a node may be changed now: its state, the plan's safety, windows and daily budgets.

Every reason a node is skipped before anything is written, in the order they are checked,
as data in and one sentence out, so that a dry run and ``--apply`` skip the same nodes for
the same words. reference/mig-manager.md §2 says why each check is there.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from migscope.applier._plan import NodeChange
from migscope.applier._settings import ApplySettings
from migscope.applier._steps import CONFIG_LABEL, STATE_LABEL, changes_within, is_ready

Obj = dict[str, Any]


def skip_reason(
    node: Obj, change: NodeChange, nodes: Sequence[Obj], settings: ApplySettings, now: datetime
) -> str:
    """Why ``change`` must not start on ``node`` now ("" when it may).

    The checks, in order: a label already naming the target with ``failed`` (MIG Manager
    ignores a relabel to the same value); a recommendation that breaks the safety contract;
    the node not Ready, MIG Manager busy with it, or cordoned by someone else; outside the
    maintenance windows; the per-node, then the per-cluster, daily limit reached.

    Args:
        node: The node as read.
        change: Its change (a label already at the target with ``success`` is handled
            before: nothing to do).
        nodes: Every node (for the cluster-wide daily limit).
        settings: Windows and limits.
        now: The applier's clock.

    Returns:
        The reason, one sentence.
    """
    labels = (node.get("metadata") or {}).get("labels") or {}
    if labels.get(CONFIG_LABEL) == change.config and labels.get(STATE_LABEL) == "failed":
        return (
            f"{CONFIG_LABEL} already names {change.config} and MIG Manager reported failed; "
            "it ignores a relabel to the same value: set another config first"
        )
    if change.unsafe:
        more = f" (and {len(change.unsafe) - 1} more)" if len(change.unsafe) > 1 else ""
        return f"the plan breaks the safety contract: {change.unsafe[0]}{more}"
    if not is_ready(node):
        return "node is not Ready"
    if labels.get(STATE_LABEL) in ("pending", "rebooting"):
        return f"MIG Manager is busy with it ({STATE_LABEL}={labels[STATE_LABEL]})"
    if (node.get("spec") or {}).get("unschedulable"):
        return "node is cordoned by someone else"
    if not settings.in_window(now):
        return "outside the maintenance windows"
    if changes_within([node], now) >= settings.max_changes_per_node_per_day:
        return f"changed {settings.max_changes_per_node_per_day} time(s) in the last 24 h already"
    if changes_within(nodes, now) >= settings.max_changes_per_day:
        return f"the cluster had {settings.max_changes_per_day} change(s) in the last 24 h already"
    return ""
