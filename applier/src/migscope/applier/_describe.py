"""What a change will do, and what an earlier run left unfinished, in the lines a run reports.

A dry run must say exactly what ``--apply`` would do (the ConfigMap entry, the cordon, each
eviction, the relabel, the GPUs re-created, the resources to expect) while writing nothing;
``--apply`` reports the same lines as what it did. A change an earlier run left mid-way is
never resumed by a dry run (resuming writes, waits and relabels), only described.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from migscope.applier._configmap import ConfigMapError, ConfigTarget, config_present
from migscope.applier._outcome import NodeOutcome
from migscope.applier._plan import NodeChange
from migscope.applier._steps import CONFIG_LABEL, STATE_LABEL, NodeProgress, Step
from migscope.kube import Kube

Obj = dict[str, Any]


def change_actions(
    kube: Kube,
    change: NodeChange,
    target: ConfigTarget,
    current: str | None,
    node: Obj,
    at_risk: Sequence[str],
) -> list[str]:
    """The steps of ``change`` on ``node``, one line each (reads the ConfigMap, writes nothing).

    Args:
        kube: The cluster (read only).
        change: The node's change.
        target: The mig-parted ConfigMap.
        current: The node's config label now.
        node: The node as read.
        at_risk: ``namespace/pod`` holding devices the change destroys.

    Returns:
        The lines; a ConfigMap that cannot be read is one line saying so.
    """
    try:
        present = config_present(kube, target, change.config)
    except ConfigMapError as exc:
        return [f"configmap problem: {exc}"]
    lines = [
        (
            f"configmap {target.namespace}/{target.name} key {target.key}: "
            + ("config already present" if present else f"add config {change.config}")
        ),
    ]
    if not (node.get("spec") or {}).get("unschedulable"):
        lines.append("cordon the node for the change, uncordon after")
    for pod in at_risk:
        lines.append(f"evict {pod} (holds a device the change destroys)")
    lines.append(f"label {CONFIG_LABEL}: {current or '(none)'} -> {change.config}")
    changed = [g.index for g in change.changed_gpus]
    if changed:
        lines.append(f"MIG Manager re-creates every instance on GPU(s) {changed}")
    expected = change.expected_resources()
    if expected:
        lines.append(
            "expect allocatable " + ", ".join(f"{k}={v}" for k, v in sorted(expected.items()))
        )
    return lines


def unfinished(node: Obj, progress: NodeProgress, change: NodeChange | None) -> NodeOutcome:
    """What a dry run says about a change an earlier run left mid-way (and does nothing).

    Args:
        node: The node as read.
        progress: Its recorded progress (not terminal).
        change: This plan's change of the node, if any.

    Returns:
        A ``would-resume`` outcome saying what ``--apply`` would finish, and how.
    """
    name = node["metadata"]["name"]
    labels = (node.get("metadata") or {}).get("labels") or {}
    verb = "finish rolling it back" if progress.step is Step.ROLLBACK else "resume it"
    reason = (
        f"unfinished change by run {progress.run} at step {progress.step.value} "
        f"(target {progress.target}); `--apply` would {verb}"
    )
    if change is not None and change.config != progress.target:
        reason += f"; this plan's {change.config} waits for a later run"
    actions = [
        f"left by {progress.actor or 'an unknown applier'}: {progress.message or '(no message)'}",
        f"label {CONFIG_LABEL}={labels.get(CONFIG_LABEL) or '(none)'}, "
        f"{STATE_LABEL}={labels.get(STATE_LABEL) or '(none)'}; "
        f"a rollback restores {progress.previous or '(no label)'}",
    ]
    if progress.cordoned:
        actions.append("cordoned by that run: uncordoned when the change ends either way")
    if progress.labelled_at is not None:
        when = datetime.fromtimestamp(progress.labelled_at, tz=timezone.utc)
        actions.append(
            f"relabelled at {when.isoformat(timespec='seconds')}; --timeout counts from then"
        )
    return NodeOutcome(name, progress.target, "would-resume", reason, actions)
