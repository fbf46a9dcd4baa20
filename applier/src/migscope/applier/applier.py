"""Apply a plan node by node through the MIG Manager label workflow, safely and resumably.

Per node (reference/mig-manager.md §2 says why each step is there):

1. **Preflight**: the node is Ready, MIG Manager is not busy with it (``pending``,
   ``rebooting``), nobody else cordoned it, a maintenance window is open, the per-node and
   per-cluster daily limits allow a change. A label already naming the target with
   ``success`` needs nothing; with ``failed`` it cannot be retried by relabelling (MIG
   Manager ignores a relabel to the same value) and is reported.
2. **ConfigMap**: the named layout is merged into the mig-parted ConfigMap MIG Manager
   reads (:mod:`~migscope.applier.configmap`), never dropping or rewriting other configs.
3. **Cordon and drain**: the node is cordoned so nothing new lands on devices about to
   vanish. Pods holding devices the change destroys (:func:`~migscope.applier.steps.pods_at_risk`)
   make the node skipped, or with ``--drain`` are evicted through the Eviction API,
   PodDisruptionBudgets answering 429 retried until a deadline. MIG Manager itself never
   drains user pods; a busy GPU would only make it fail.
4. **Label**: ``nvidia.com/mig.config=<target>`` and the state label cleared in one patch,
   so that the next ``success`` or ``failed`` can only be MIG Manager's answer to *this*
   change (a stale ``success`` from the last one would otherwise pass for it).
5. **Wait**: watch the node until the state is ``success`` or ``failed`` (through
   ``pending`` and ``rebooting``), or the timeout.
6. **Verify and finish**: the node's allocatable ``nvidia.com/mig-*`` counts must match
   the plan; uncordon, record the change time (for the daily limits), an Event.

On failure or timeout the previous label is restored, the node uncordoned, a Warning Event
left, and the run goes on with the next node. Every step's progress is written in the same
patch as the change it makes (:mod:`~migscope.applier.steps`), so a run killed anywhere is
resumed or rolled back by the next, and a step retried after an error first reads that record
(a write whose answer was lost may have landed); one applier acts at a time
(:mod:`~migscope.applier.lease`).

Before any of it, the plan's provenance must allow applying it (:meth:`ApplyPlan.refusal`:
not simulated, not stale, not of unknown origin). A dry run (``apply=False``) goes through
the same checks but only reads, through a :class:`~migscope.kube.ReadOnlyKube`: it
takes no Lease, and a change an earlier run left unfinished is reported (``would-resume``),
never resumed or rolled back, because either would write, wait and relabel.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from migscope.applier.audit import Audit
from migscope.applier.configmap import (
    ConfigMapError,
    ConfigTarget,
    config_present,
    ensure_config,
    find_target,
)
from migscope.applier.lease import Lease
from migscope.applier.plan import ApplyPlan, NodeChange, PlanRefused, Provenance
from migscope.applier.settings import ApplySettings
from migscope.applier.steps import (
    CHANGES_ANNOTATION,
    CONFIG_LABEL,
    STATE_ANNOTATION,
    STATE_LABEL,
    NodeProgress,
    Step,
    advertised,
    changes_within,
    is_ready,
    pods_at_risk,
    read_progress,
    with_change,
)
from migscope.core.errors import MigscopeError
from migscope.core.migparted import MigPartedConfig
from migscope.kube import (
    ApiError,
    Conflict,
    Kube,
    NotFound,
    ReadOnlyKube,
    TooManyRequests,
)

__all__ = ["Applier", "LeaseLost", "NodeOutcome", "RunReport"]

Obj = dict[str, Any]


_ORDER = {
    Step.CONFIGMAP: 0,
    Step.DRAIN: 1,
    Step.WAIT: 2,
    Step.VERIFY: 3,
    Step.ROLLBACK: 4,
    Step.DONE: 5,
    Step.FAILED: 5,
}
"""How far along a change is, to recognise a write that landed although its answer was lost."""


class LeaseLost(MigscopeError):
    """The Lease went to another applier mid-run; stopped where the node's record says."""


class _Abort(Exception):
    """A node's change cannot go on: roll back with this reason."""


@dataclass
class NodeOutcome:
    """What happened to one node.

    Attributes:
        node: Node name.
        target: The config the plan names.
        result: ``applied``, ``unchanged``, ``would-apply``, ``skipped``, ``failed``,
            ``rolled-back`` (a change from an earlier run undone) or ``would-resume`` (a dry
            run found a change an earlier run left unfinished, and left it alone).
        reason: Why, in one sentence.
        actions: What was (or in a dry run would be) changed, one line each.
    """

    node: str
    target: str
    result: str
    reason: str = ""
    actions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "node": self.node,
            "target": self.target,
            "result": self.result,
            "reason": self.reason,
            "actions": list(self.actions),
        }


@dataclass
class RunReport:
    """One run's outcome, node by node, and the ConfigMap it used."""

    run: str
    dry_run: bool
    configmap: ConfigTarget | None
    outcomes: list[NodeOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: Provenance | None = None
    refusal: str = ""

    def count(self, result: str) -> int:
        """Nodes with this result."""
        return sum(1 for o in self.outcomes if o.result == result)

    @property
    def ok(self) -> bool:
        """No node failed."""
        return not any(o.result == "failed" for o in self.outcomes)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        cm = self.configmap
        return {
            "run": self.run,
            "dry_run": self.dry_run,
            "configmap": None if cm is None else f"{cm.namespace}/{cm.name}",
            "nodes": [o.as_dict() for o in self.outcomes],
            "notes": list(self.notes),
            "provenance": None if self.provenance is None else self.provenance.as_dict(),
            "apply_refused": self.refusal or None,
        }


def _unfinished(node: Obj, progress: NodeProgress, change: NodeChange | None) -> NodeOutcome:
    """What a dry run says about a change an earlier run left mid-way (and does nothing)."""
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


class Applier:
    """Applies plans to one cluster.

    Args:
        kube: The cluster.
        settings: Limits, windows, timeouts, names.
        audit: Log lines and Events (one is made when None).
        clock: Wall clock (Unix seconds), for timeouts and records.
        sleep: How to wait between polls (tests pass a faster one).
    """

    def __init__(
        self,
        kube: Kube,
        settings: ApplySettings,
        *,
        audit: Audit | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        # A dry run reads through a view that refuses every write: read-only by construction.
        self.kube = kube if settings.apply else ReadOnlyKube(kube)
        self.settings = settings
        self.lease = Lease(
            self.kube,
            namespace=settings.namespace,
            name=settings.lease_name,
            identity=settings.identity,
            duration_s=settings.lease_duration_s,
        )
        self.actor = self.lease.identity
        self.audit = audit or Audit(kube if settings.apply else None, actor=self.actor)
        self.clock = clock
        self.sleep = sleep
        self.run_id = uuid.uuid4().hex[:12]
        self._plan_configs: dict[str, MigPartedConfig] = {}

    # -- the run -------------------------------------------------------------------------------

    def run(self, plan: ApplyPlan) -> RunReport:
        """Apply (or with ``apply=False`` describe) the plan; returns every node's outcome.

        A plan ``--apply`` must not apply (:meth:`ApplyPlan.refusal`: simulated, too old, of
        unknown origin) is refused before the cluster is contacted; a dry run describes it
        all the same, the reason first among the notes, so that it shows before it bites.

        Raises:
            PlanRefused: with ``apply``, the plan must not be applied (one line).
            LeaseHeld: another applier is active (and did not finish within the wait).
            LeaseLost: the Lease was taken over mid-run.
            ApiError: the cluster cannot be read at all.
        """
        report = RunReport(self.run_id, not self.settings.apply, None, provenance=plan.provenance)
        report.refusal = self.refusal(plan)
        if report.refusal:
            if self.settings.apply:
                raise PlanRefused(plan.source, report.refusal)
            report.notes.append(f"--apply would refuse this plan: {report.refusal}")
        self.use_plan(plan)
        if self.settings.apply:
            self.lease.acquire(wait_s=self.settings.lease_wait_s)
        try:
            self._run(plan, report)
        finally:
            if self.settings.apply:
                self.lease.release()
        return report

    def _run(self, plan: ApplyPlan, report: RunReport) -> None:
        s = self.settings
        target = find_target(
            self.kube, namespace=s.namespace, name=s.configmap, key=s.configmap_key
        )
        report.configmap = target
        if target.policy is None:
            report.notes.append(
                "no GPU Operator ClusterPolicy found: make sure MIG Manager reads "
                f"configmap {target.namespace}/{target.name}"
            )
        elif not target.policy_points_here:
            report.notes.append(
                f"ClusterPolicy {target.policy} does not point MIG Manager at configmap "
                f"{target.namespace}/{target.name}, so a relabel would fail; run: {target.patch}"
            )
        nodes = self.kube_nodes()
        # Changes a killed run left in flight come first, whatever the new plan says.
        planned = {c.node for c in plan.nodes}
        for node in nodes:
            progress = read_progress(node)
            if progress is not None and not progress.step.terminal:
                name = node["metadata"]["name"]
                change = next((c for c in plan.nodes if c.node == name), None)
                planned.discard(name)
                if not s.apply:
                    # Resuming means waiting, relabelling, uncordoning: never in a dry run.
                    report.outcomes.append(_unfinished(node, progress, change))
                    continue
                # The same change as this plan's: its config may still need writing.
                same = change is not None and change.config == progress.target
                if change is None or not same:
                    change = NodeChange(name, progress.target)
                report.outcomes.append(self._resume(change, progress, target, plan_config=same))
        done_this_run = sum(
            1 for o in report.outcomes if o.result in ("applied", "failed", "would-resume")
        )
        for change in plan.nodes:
            if change.node not in planned:
                continue
            if done_this_run >= s.max_nodes:
                report.outcomes.append(
                    NodeOutcome(
                        change.node, change.config, "skipped", f"--max-nodes {s.max_nodes} reached"
                    )
                )
                continue
            if s.apply and not target.policy_points_here and target.policy is not None:
                report.outcomes.append(
                    NodeOutcome(
                        change.node,
                        change.config,
                        "skipped",
                        f"ClusterPolicy {target.policy} does not read configmap {target.name}",
                    )
                )
                continue
            outcome = self._change(change, target, nodes)
            report.outcomes.append(outcome)
            if outcome.result in ("applied", "failed", "would-apply"):
                done_this_run += 1

    def refusal(self, plan: ApplyPlan) -> str:
        """Why these settings do not let ``--apply`` apply ``plan`` ("" when they do)."""
        return plan.refusal(
            now=self.clock(),
            allow_simulated=self.settings.allow_simulated,
            max_age_s=self.settings.max_plan_age_s,
        )

    def kube_nodes(self) -> list[Obj]:
        """Every node (for the resume scan and the cluster-wide daily limit)."""
        return self.kube.list_nodes()

    def _check_lease(self) -> None:
        if self.settings.apply and self.lease.lost.is_set():
            raise LeaseLost(
                f"lease {self.settings.namespace}/{self.settings.lease_name} was taken over; "
                "stopped (each node's progress is recorded and resumes on the next run)"
            )

    # -- one node ------------------------------------------------------------------------------

    def _change(
        self, change: NodeChange, target: ConfigTarget, nodes: Sequence[Obj], *, attempts: int = 5
    ) -> NodeOutcome:
        s = self.settings
        out = NodeOutcome(change.node, change.config, "skipped")
        try:
            node = self.kube.get_node(change.node)
        except NotFound:
            out.reason = "node not found"
            return out
        labels = (node.get("metadata") or {}).get("labels") or {}
        current, state = labels.get(CONFIG_LABEL), labels.get(STATE_LABEL)
        if current == change.config and state == "success":
            out.result, out.reason = "unchanged", f"already {change.config} (success)"
            return out
        if current == change.config and state == "failed":
            out.reason = (
                f"{CONFIG_LABEL} already names {change.config} and MIG Manager reported failed; "
                "it ignores a relabel to the same value: set another config first"
            )
            return self._skip(node, out)
        if change.unsafe:
            more = f" (and {len(change.unsafe) - 1} more)" if len(change.unsafe) > 1 else ""
            out.reason = f"the plan breaks the safety contract: {change.unsafe[0]}{more}"
            return self._skip(node, out)
        why = self._preflight(node, change, nodes)
        if why:
            out.reason = why
            return self._skip(node, out)
        pods = self.kube.pods_on_node(change.node)
        at_risk = pods_at_risk(change, pods)
        if at_risk and not s.drain:
            out.reason = (
                f"pods hold devices the change destroys: {', '.join(at_risk)} "
                "(use --drain to evict them)"
            )
            return self._skip(node, out)
        out.actions = self._describe(change, target, current, node, at_risk)
        if not s.apply:
            out.result, out.reason = "would-apply", "dry run"
            return out
        progress = NodeProgress(
            run=self.run_id,
            actor=self.actor,
            step=Step.CONFIGMAP,
            target=change.config,
            previous=current,
            message="starting",
        )
        try:
            self._record(node, progress, why="intent recorded before any change")
        except Conflict:
            if attempts <= 1:
                raise
            # The node changed since it was read (the kubelet, GFD): decide again on it as is.
            return self._change(change, target, nodes, attempts=attempts - 1)
        return self._resume(change, progress, target, out=out, plan_config=True)

    def _skip(self, node: Obj, out: NodeOutcome) -> NodeOutcome:
        self.audit.log(out.node, "skip", target=out.target, why=out.reason)
        if self.settings.apply:
            self.audit.event(node, "MigscopeSkipped", f"not changed to {out.target}: {out.reason}")
        return out

    def _preflight(self, node: Obj, change: NodeChange, nodes: Sequence[Obj]) -> str:
        s = self.settings
        labels = (node.get("metadata") or {}).get("labels") or {}
        if not is_ready(node):
            return "node is not Ready"
        if labels.get(STATE_LABEL) in ("pending", "rebooting"):
            return f"MIG Manager is busy with it ({STATE_LABEL}={labels[STATE_LABEL]})"
        if (node.get("spec") or {}).get("unschedulable"):
            return "node is cordoned by someone else"
        now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        if not s.in_window(now):
            return "outside the maintenance windows"
        if changes_within([node], now) >= s.max_changes_per_node_per_day:
            return f"changed {s.max_changes_per_node_per_day} time(s) in the last 24 h already"
        if changes_within(nodes, now) >= s.max_changes_per_day:
            return f"the cluster had {s.max_changes_per_day} change(s) in the last 24 h already"
        return ""

    def _describe(
        self,
        change: NodeChange,
        target: ConfigTarget,
        current: str | None,
        node: Obj,
        at_risk: Sequence[str],
    ) -> list[str]:
        try:
            present = config_present(self.kube, target, change.config)
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

    # -- the resumable part ----------------------------------------------------------------------

    def _resume(
        self,
        change: NodeChange,
        progress: NodeProgress,
        target: ConfigTarget,
        *,
        out: NodeOutcome | None = None,
        plan_config: bool = False,
    ) -> NodeOutcome:
        out = out or NodeOutcome(change.node, progress.target, "failed", actions=[])
        if progress.run != self.run_id:
            out.actions.append(
                f"resumed a change left at step {progress.step.value} by run {progress.run}"
            )
            self.audit.log(
                change.node,
                "resume",
                step=progress.step.value,
                target=progress.target,
                why="a previous run stopped mid-change",
            )
        failures = 0
        try:
            while not progress.step.terminal:
                self._check_lease()
                try:
                    progress = self._advance(change, progress, target, plan_config=plan_config)
                    failures = 0
                except Conflict:
                    failures += 1  # the node changed under us (MIG Manager, kubelet): re-read
                    if failures > 5:
                        raise
                except ApiError as exc:
                    failures += 1
                    if failures > 3:
                        raise  # the run stops; the node's record says where to resume
                    self.audit.log(change.node, "retry", step=progress.step.value, why=str(exc))
                    self.sleep(min(30.0, self.settings.poll_s * 2**failures))
        except _Abort as exc:
            progress = self._rollback(change, progress, str(exc))
        if progress.step is Step.DONE:
            out.result, out.reason = "applied", progress.message
        else:
            out.result, out.reason = "failed", progress.message
        return out

    def _advance(
        self, change: NodeChange, progress: NodeProgress, target: ConfigTarget, *, plan_config: bool
    ) -> NodeProgress:
        node = self.kube.get_node(change.node)
        recorded = read_progress(node)
        if (
            recorded is not None
            and (recorded.run, recorded.target) == (progress.run, progress.target)
            and _ORDER[recorded.step] > _ORDER[progress.step]
        ):
            # A write whose answer was lost (a timeout after the server applied it) landed:
            # go on from what it recorded rather than redo it (cordon, relabel, count).
            return recorded
        if progress.step is Step.CONFIGMAP:
            return self._write_config(change, progress, target, node, plan_config=plan_config)
        if progress.step is Step.DRAIN:
            return self._drain(change, progress, node)
        if progress.step is Step.WAIT:
            return self._wait(change, progress, node)
        if progress.step is Step.VERIFY:
            return self._verify(change, progress, node)
        if progress.step is Step.ROLLBACK:
            return self._rollback(change, progress, progress.message)
        raise AssertionError(progress.step)

    def _write_config(
        self,
        change: NodeChange,
        progress: NodeProgress,
        target: ConfigTarget,
        node: Obj,
        *,
        plan_config: bool,
    ) -> NodeProgress:
        if plan_config and change.config in self._plan_configs:
            try:
                what = ensure_config(self.kube, target, self._plan_configs[change.config])
            except ConfigMapError as exc:
                raise _Abort(str(exc)) from None
            self.audit.log(
                change.node,
                "configmap",
                after=change.config,
                result=what,
                why="MIG Manager resolves the label in this ConfigMap",
            )
        elif not config_present(self.kube, target, change.config):
            raise _Abort(f"config {change.config} is not in configmap {target.name}")
        cordon = not (node.get("spec") or {}).get("unschedulable")
        nxt = progress.at(
            Step.DRAIN,
            "cordoned" if cordon else "already cordoned",
            cordoned=progress.cordoned or cordon,
        )
        patch: Obj = {
            "metadata": {
                "annotations": {STATE_ANNOTATION: nxt.to_json()},
                "resourceVersion": node["metadata"]["resourceVersion"],
            }
        }
        if cordon:
            patch["spec"] = {"unschedulable": True}
        self._patch(change.node, patch)
        if cordon:
            self.audit.log(
                change.node,
                "cordon",
                before=False,
                after=True,
                why="nothing new may land on devices about to vanish",
            )
        return nxt

    def _drain(self, change: NodeChange, progress: NodeProgress, node: Obj) -> NodeProgress:
        deadline = time.monotonic() + self.settings.drain_timeout_s
        while True:
            pods = self.kube.pods_on_node(change.node)
            at_risk = pods_at_risk(change, pods)
            if not at_risk:
                break
            if not self.settings.drain:
                raise _Abort(f"pods hold devices the change destroys: {', '.join(at_risk)}")
            for name in at_risk:
                namespace, _, pod = name.partition("/")
                try:
                    self.kube.evict(namespace, pod)
                    self.audit.log(
                        change.node, "evict", pod=name, why="holds a device the change destroys"
                    )
                except NotFound:
                    continue
                except TooManyRequests as exc:
                    self.audit.log(change.node, "evict-refused", pod=name, why=str(exc))
            if time.monotonic() >= deadline:
                raise _Abort(
                    f"drain timed out after {self.settings.drain_timeout_s:g} s: "
                    f"{', '.join(at_risk)} still there"
                )
            self._check_lease()
            self.sleep(self.settings.poll_s)
        node = self.kube.get_node(change.node)
        nxt = progress.at(Step.WAIT, "label set, waiting for MIG Manager", labelled_at=self.clock())
        self._patch(
            change.node,
            {
                "metadata": {
                    "resourceVersion": node["metadata"]["resourceVersion"],
                    "labels": {CONFIG_LABEL: change.config, STATE_LABEL: None},
                    "annotations": {STATE_ANNOTATION: nxt.to_json()},
                }
            },
        )
        self.audit.log(
            change.node,
            "label",
            before=progress.previous,
            after=change.config,
            why="MIG Manager applies the named config",
        )
        self.audit.event(
            node,
            "MigscopeRelabelled",
            f"{CONFIG_LABEL}: {progress.previous or '(none)'} -> {change.config}",
        )
        return nxt

    def _wait(self, change: NodeChange, progress: NodeProgress, node: Obj) -> NodeProgress:
        started = progress.labelled_at if progress.labelled_at is not None else self.clock()
        deadline = started + self.settings.node_timeout_s
        seen: list[str] = []
        while True:
            state = ((node.get("metadata") or {}).get("labels") or {}).get(STATE_LABEL)
            if state and (not seen or seen[-1] != state):
                seen.append(state)
            if state == "success":
                return progress.at(Step.VERIFY, "MIG Manager reported success")
            if state == "failed":
                raise _Abort(f"MIG Manager reported failed (states seen: {' -> '.join(seen)})")
            left = deadline - self.clock()
            if left <= 0:
                stuck = (
                    " (stuck pending: gpu-operator #2833, operands may stay paused)"
                    if state == "pending"
                    else ""
                )
                raise _Abort(
                    f"timed out after {self.settings.node_timeout_s:g} s waiting for MIG "
                    f"Manager, state {state or '(none)'}{stuck}"
                )
            self._check_lease()
            window = min(left, 30.0)
            began = time.monotonic()
            answered = False
            try:
                for _kind, obj in self.kube.watch_node(
                    change.node,
                    resource_version=node["metadata"]["resourceVersion"],
                    timeout_s=window,
                ):
                    node = obj
                    new = ((obj.get("metadata") or {}).get("labels") or {}).get(STATE_LABEL)
                    if new and (not seen or seen[-1] != new):
                        seen.append(new)
                    if new in ("success", "failed"):
                        answered = True
                        break
            except ApiError:
                pass  # 410 or a dropped stream: read the node again and watch from there
            if not answered and time.monotonic() - began < window:
                self.sleep(self.settings.poll_s)  # the watch ended early: poll, never spin
            node = self.kube.get_node(change.node)

    def _verify(self, change: NodeChange, progress: NodeProgress, node: Obj) -> NodeProgress:
        expected = change.expected_resources()
        deadline = time.monotonic() + self.settings.verify_timeout_s
        have = advertised(node)
        while expected and have != expected and time.monotonic() < deadline:
            self.sleep(self.settings.poll_s)
            node = self.kube.get_node(change.node)
            have = advertised(node)
        mismatch = bool(expected) and have != expected
        message = (
            f"applied {change.config}"
            if not mismatch
            else f"applied {change.config}, but the node advertises {have} instead of {expected}"
        )
        done = progress.at(Step.DONE if not mismatch else Step.FAILED, message)
        now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        patch: Obj = {
            "metadata": {
                "resourceVersion": node["metadata"]["resourceVersion"],
                "annotations": {
                    STATE_ANNOTATION: done.to_json(),
                    CHANGES_ANNOTATION: with_change(node, now),
                },
            }
        }
        if progress.cordoned:
            patch["spec"] = {"unschedulable": False}
        self._patch(change.node, patch)
        self.audit.log(
            change.node,
            "applied" if not mismatch else "verify-failed",
            after=change.config,
            advertised=have,
            expected=expected,
            why=message,
        )
        self.audit.event(
            node,
            "MigscopeApplied" if not mismatch else "MigscopeVerifyFailed",
            message,
            warning=mismatch,
        )
        return done

    def _rollback(self, change: NodeChange, progress: NodeProgress, reason: str) -> NodeProgress:
        for _ in range(5):
            node = self.kube.get_node(change.node)
            labels = (node.get("metadata") or {}).get("labels") or {}
            failed = progress.at(Step.FAILED, f"rolled back: {reason}")
            patch: Obj = {
                "metadata": {
                    "resourceVersion": node["metadata"]["resourceVersion"],
                    "annotations": {STATE_ANNOTATION: failed.to_json()},
                }
            }
            if progress.labelled_at is not None and labels.get(CONFIG_LABEL) != progress.previous:
                patch["metadata"]["labels"] = {CONFIG_LABEL: progress.previous}
            if progress.cordoned:
                patch["spec"] = {"unschedulable": False}
            try:
                self._patch(change.node, patch)
            except Conflict:
                continue
            self.audit.log(
                change.node,
                "rollback",
                before=labels.get(CONFIG_LABEL),
                after=progress.previous,
                why=reason,
            )
            self.audit.event(
                node, "MigscopeRolledBack", f"{change.config} not applied: {reason}", warning=True
            )
            return failed
        raise ApiError(f"node {change.node}: could not record the rollback (kept conflicting)")

    # -- helpers -----------------------------------------------------------------------------------

    def _record(self, node: Obj, progress: NodeProgress, *, why: str) -> None:
        self._patch(
            node["metadata"]["name"],
            {
                "metadata": {
                    "resourceVersion": node["metadata"]["resourceVersion"],
                    "annotations": {STATE_ANNOTATION: progress.to_json()},
                }
            },
        )
        self.audit.log(
            node["metadata"]["name"],
            "record",
            step=progress.step.value,
            target=progress.target,
            why=why,
        )

    def _patch(self, name: str, patch: Mapping[str, Any]) -> Obj:
        return self.kube.patch_node(name, patch)

    def use_plan(self, plan: ApplyPlan) -> None:
        """Remember the plan's named configs (the ConfigMap step writes them)."""
        self._plan_configs = {
            name: plan.config_entries(name) for name in {c.config for c in plan.nodes}
        }
