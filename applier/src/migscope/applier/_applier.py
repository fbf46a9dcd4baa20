"""Apply a plan node by node through the MIG Manager label workflow, safely and resumably.

Per node (reference/mig-manager.md §2 says why each step is there):

1. **Preflight** (:mod:`~migscope.applier._preflight`): the node is Ready, MIG Manager is not
   busy with it (``pending``, ``rebooting``), nobody else cordoned it, a maintenance window
   is open, the per-node and per-cluster daily limits allow a change. A label already naming
   the target with ``success`` needs nothing; with ``failed`` it cannot be retried by
   relabelling (MIG Manager ignores a relabel to the same value) and is reported.
2. **ConfigMap**: the named layout is merged into the mig-parted ConfigMap MIG Manager
   reads (:mod:`~migscope.applier._configmap`), never dropping or rewriting other configs.
3. **Cordon and drain**: the node is cordoned so nothing new lands on devices about to
   vanish. Pods holding devices the change destroys (:func:`~migscope.applier._steps.pods_at_risk`)
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

Steps 2 to 6 are :class:`~migscope.applier._workflow.NodeWorkflow`'s. On failure or timeout
the previous label is restored, the node uncordoned, a Warning Event left, and the run goes
on with the next node. Every step's progress is written in the same patch as the change it
makes (:mod:`~migscope.applier._steps`), so a run killed anywhere is resumed or rolled back by
the next; one applier acts at a time (:mod:`~migscope.applier._lease`).

This module decides *which* nodes to change and in what order: changes an earlier run left
unfinished first, then the plan's, within ``--max-nodes``. Before any of it, the plan's
provenance must allow applying it (:meth:`ApplyPlan.refusal`: not simulated, not stale, not
of unknown origin). A dry run (``apply=False``) goes through the same checks but only reads,
through a :class:`~migscope.kube.ReadOnlyKube`: it takes no Lease, and a change an earlier
run left unfinished is reported (``would-resume``, :mod:`~migscope.applier._describe`), never
resumed or rolled back, because either would write, wait and relabel.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from migscope.applier._audit import Audit
from migscope.applier._clock import SYSTEM_CLOCK, Clock, as_clock
from migscope.applier._configmap import ConfigTarget, find_target
from migscope.applier._describe import change_actions, unfinished
from migscope.applier._dra import node_management
from migscope.applier._lease import Lease
from migscope.applier._outcome import NodeOutcome, RunReport
from migscope.applier._plan import ApplyPlan, NodeChange, PlanRefused
from migscope.applier._preflight import skip_reason
from migscope.applier._settings import ApplySettings
from migscope.applier._steps import (
    CONFIG_LABEL,
    STATE_LABEL,
    NodeProgress,
    Step,
    held_device,
    read_progress,
    requests_of,
)
from migscope.applier._workflow import TRANSIENT, NodeWorkflow, at_risk_now
from migscope.core import MigPartedConfig, MigscopeError
from migscope.kube import ApiError, Conflict, Kube, NotFound, ReadOnlyKube

Obj = dict[str, Any]


DYNAMIC_MIG = (
    "the DRA driver manages this node's MIG slices dynamically (DynamicMIG: it creates a "
    "slice per claim, destroys partitions it did not create and forbids mig-parted beside "
    "it); migscope only observes and advises here"
)
"""Why a DynamicMIG node is never relabelled (docs/dra.md)."""


DEFAULT_OPERATOR_CONFIGMAP = "default-mig-parted-config"
"""The mig-parted ConfigMap the GPU Operator creates in its namespace."""
MIG_MANAGER_APP = "nvidia-mig-manager"
"""The ``app`` label of MIG Manager's pods (the GPU Operator's DaemonSet)."""


class ClusterRefused(MigscopeError):
    """Nothing on this cluster applies ``nvidia.com/mig.config`` (one line: why)."""


class LeaseLost(MigscopeError):
    """The Lease went to another applier mid-run; stopped where the node's record says."""


class Applier:
    """Applies plans to one cluster.

    Args:
        kube: The cluster.
        settings: Limits, windows, timeouts, names.
        audit: Log lines and Events (one is made when None).
        clock: Time for records, deadlines and waits (:mod:`~migscope.applier._clock`;
            tests pass simulated time); a bare function is a wall clock (Unix seconds)
            with real deadlines and waits.
        sleep: How to wait between polls instead of the clock's own (tests pass a faster
            one).
    """

    def __init__(
        self,
        kube: Kube,
        settings: ApplySettings,
        *,
        audit: Audit | None = None,
        clock: Clock | Callable[[], float] = SYSTEM_CLOCK,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.clock = as_clock(clock, sleep)
        # A dry run reads through a view that refuses every write: read-only by construction.
        self.kube = kube if settings.apply else ReadOnlyKube(kube)
        self.settings = settings
        self.lease = Lease(
            self.kube,
            namespace=settings.namespace,
            name=settings.lease_name,
            identity=settings.identity,
            duration_s=settings.lease_duration_s,
            clock=self.clock,
        )
        self.actor = self.lease.identity
        self.audit = audit or Audit(
            kube if settings.apply else None, actor=self.actor, clock=self._utc_now
        )
        self.run_id = uuid.uuid4().hex[:12]
        self.workflow = NodeWorkflow(
            self.kube,
            settings,
            audit=self.audit,
            run_id=self.run_id,
            clock=self.clock,
            check_lease=self._check_lease,
        )
        self._plan_configs: dict[str, MigPartedConfig] = {}
        self._plan: ApplyPlan | None = None

    # -- the run -------------------------------------------------------------------------------

    def run(self, plan: ApplyPlan) -> RunReport:
        """Apply (or with ``apply=False`` describe) the plan; returns every node's outcome.

        A plan ``--apply`` must not apply (:meth:`ApplyPlan.refusal`: simulated, too old, of
        unknown origin) is refused before the cluster is contacted; a dry run describes it
        all the same, the reason first among the notes, so that it shows before it bites.

        Args:
            plan: The plan.

        Returns:
            Every node's outcome, the ConfigMap used, notes.

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
        s = self.settings
        # Where MIG Manager reads its config, and whether anything here reads the label at
        # all: decided from reads alone, before the Lease or any other write.
        target = find_target(
            self.kube, namespace=s.namespace, name=s.configmap, key=s.configmap_key
        )
        report.configmap = target
        refused = self._gpu_cluster(target, report) or self._wrong_namespace(target)
        if refused:
            if s.apply:
                raise ClusterRefused(f"refusing to apply: {refused}")
            report.notes.append(f"--apply would refuse: {refused}")
            for planned_change in plan.nodes:
                report.outcomes.append(
                    NodeOutcome(planned_change.node, planned_change.config, "skipped", refused)
                )
            return report
        if s.apply:
            self.lease.acquire(wait_s=s.lease_wait_s)
        try:
            self._run(plan, report, target)
        finally:
            if s.apply:
                self.lease.release()
        return report

    def _run(self, plan: ApplyPlan, report: RunReport, target: ConfigTarget) -> None:
        s = self.settings
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
                    report.outcomes.append(unfinished(node, progress, change))
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

    def _gpu_cluster(self, target: ConfigTarget, report: RunReport) -> str:
        """Why no relabel can work here because a ``GPUCluster`` runs the GPUs ("" if none).

        GPU Operator 26.7's ``GPUCluster`` (exclusive with ``ClusterPolicy``) runs NVIDIA's
        DRA driver and no MIG Manager, so nothing would act on ``nvidia.com/mig.config``. Only
        asked when no ClusterPolicy was found (the two cannot coexist).
        """
        if target.policy is not None:
            return ""
        try:
            clusters = self.kube.gpu_clusters()
        except ApiError as exc:
            if exc.status in TRANSIENT:
                raise
            report.notes.append(f"could not tell whether a GPUCluster manages the GPUs: {exc}")
            return ""
        if not clusters:
            return ""
        name = (clusters[0].get("metadata") or {}).get("name", "?")
        return (
            f"GPUCluster {name} manages this cluster's GPUs through NVIDIA's DRA driver without "
            "MIG Manager, so nothing applies nvidia.com/mig.config here; migscope only observes "
            "and advises (docs/dra.md)"
        )

    def _wrong_namespace(self, target: ConfigTarget) -> str:
        """Why ``--namespace`` is not the GPU Operator's ("" when it looks like it is).

        Checked before anything is written (issue 22: OpenShift's ``nvidia-gpu-operator``
        given for ``gpu-operator`` made ``--apply`` create a stray ConfigMap and Lease, evict a
        pod, then fail). The operator's namespace holds the mig-parted ConfigMap MIG Manager
        reads (the ClusterPolicy's, or the operator's ``default-mig-parted-config``) or runs
        MIG Manager's pods; a namespace with none of them is not it.
        """
        ns = target.namespace
        for name in (target.name, DEFAULT_OPERATOR_CONFIGMAP):
            if self.kube.get_configmap(ns, name) is not None:
                return ""
        for pod in self.kube.list_pods(field_selector=f"metadata.namespace={ns}", page_size=200):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if labels.get("app") == MIG_MANAGER_APP:
                return ""
        return (
            f"namespace {ns} holds neither configmap {target.name} nor the GPU Operator's "
            f"{DEFAULT_OPERATOR_CONFIGMAP}, and runs no MIG Manager: pass the GPU Operator's "
            "namespace with --namespace (gpu-operator; nvidia-gpu-operator on OpenShift)"
        )

    def refusal(self, plan: ApplyPlan) -> str:
        """Why these settings do not let ``--apply`` apply ``plan`` ("" when they do)."""
        return plan.refusal(
            now=self.clock.now(),
            allow_simulated=self.settings.allow_simulated,
            max_age_s=self.settings.max_plan_age_s,
        )

    def kube_nodes(self) -> list[Obj]:
        """Every node (for the resume scan and the cluster-wide daily limit)."""
        return self.kube.list_nodes()

    def use_plan(self, plan: ApplyPlan) -> None:
        """Remember the plan's named configs (the ConfigMap step writes them)."""
        self._plan = plan
        self._plan_configs = {
            name: plan.config_entries(name) for name in {c.config for c in plan.nodes}
        }

    def _utc_now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.now(), tz=timezone.utc)

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
        why = skip_reason(node, change, nodes, s, self._utc_now())
        if why:
            out.reason = why
            return self._skip(node, out)
        slices = self.kube.resource_slices(change.node)
        if node_management(slices) == "dynamic":
            out.reason = DYNAMIC_MIG
            return self._skip(node, out)
        pods = self.kube.pods_on_node(change.node)
        try:
            at_risk = at_risk_now(self.kube, change, node, pods)
        except ApiError as exc:
            if exc.status in TRANSIENT:
                raise
            out.reason = str(exc)
            return self._skip(node, out)
        if at_risk and not s.drain:
            out.reason = (
                f"pods hold devices the change destroys: {', '.join(at_risk)} "
                "(use --drain to evict them)"
            )
            return self._skip(node, out)
        stranded = [] if s.allow_stranding else self._stranded(change, pods, at_risk)
        if stranded:
            out.reason = (
                f"evicting would strand {', '.join(stranded)}: no node of its pool offers "
                "that profile after the plan; change the request first (the report's request "
                "changes), or --allow-stranding"
            )
            return self._skip(node, out)
        out.actions = change_actions(self.kube, change, target, current, node, at_risk)
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
            self.workflow.record(node, progress, why="intent recorded before any change")
        except Conflict:
            if attempts <= 1:
                raise
            # The node changed since it was read (the kubelet, GFD): decide again on it as is.
            return self._change(change, target, nodes, attempts=attempts - 1)
        return self._resume(change, progress, target, out=out, plan_config=True)

    def _resume(
        self,
        change: NodeChange,
        progress: NodeProgress,
        target: ConfigTarget,
        *,
        out: NodeOutcome | None = None,
        plan_config: bool = False,
    ) -> NodeOutcome:
        config = self._plan_configs.get(change.config) if plan_config else None
        return self.workflow.resume(change, progress, target, out=out, config=config)

    def _stranded(
        self, change: NodeChange, pods: Sequence[Obj], at_risk: Sequence[str]
    ) -> list[str]:
        """``pod (resource)`` of the pods to evict that would stay Pending after it.

        Their MIG request is a profile no node of the pool offers after the plan (issue 22,
        item 2); a plan without pools (a ``node-plan.json``, an older report) is not checked.
        """
        plan = self._plan
        offered = plan.offered_after(change.node) if plan is not None else None
        if offered is None:
            return []
        named = set(at_risk)
        out: list[str] = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            name = f"{meta.get('namespace')}/{meta.get('name')}"
            if name not in named:
                continue
            for held in filter(None, map(held_device, sorted(requests_of(pod)))):
                if held.kind == "mig" and held.profile not in offered:
                    out.append(f"{name} ({held.resource})")
        return out

    def _skip(self, node: Obj, out: NodeOutcome) -> NodeOutcome:
        self.audit.log(out.node, "skip", target=out.target, why=out.reason)
        if self.settings.apply:
            self.audit.event(node, "MigscopeSkipped", f"not changed to {out.target}: {out.reason}")
        return out
