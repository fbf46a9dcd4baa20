"""One node's change as a resumable sequence of steps, each recorded in the patch that makes it.

From the recorded intent to the end: write the named config into the ConfigMap and cordon
(``configmap``), evict what the change endangers and relabel (``drain``), wait for MIG
Manager's answer (``wait``), check the advertised resources, uncordon and count the change
(``verify``); on any failure restore the previous label and uncordon (``rollback``). Each
step writes its successor into the node's progress annotation in the same patch as its
change (:mod:`~migscope.applier._steps`), so a run killed anywhere is resumed or rolled back
by the next one from exactly where it stopped, and a step retried after an error first reads
that record (a write whose answer was lost may have landed).

:class:`NodeWorkflow` runs the steps of one node at a time; deciding which nodes to change
(and whether at all) is the :class:`~migscope.applier._applier.Applier`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from migscope.applier._audit import Audit
from migscope.applier._clock import Clock
from migscope.applier._configmap import ConfigMapError, ConfigTarget, config_present, ensure_config
from migscope.applier._dra import (
    DRA_PLUGIN_LABELS,
    claim_names,
    dra_pods_at_risk,
    node_management,
    published_resources,
)
from migscope.applier._outcome import NodeOutcome
from migscope.applier._plan import NodeChange
from migscope.applier._settings import ApplySettings
from migscope.applier._steps import (
    CHANGES_ANNOTATION,
    CONFIG_LABEL,
    STATE_ANNOTATION,
    STATE_LABEL,
    NodeProgress,
    Step,
    advertised,
    pods_at_risk,
    read_progress,
    with_change,
)
from migscope.core import MigPartedConfig, MigscopeError
from migscope.kube import ApiError, Conflict, Kube, NotFound, TooManyRequests

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


class _Abort(MigscopeError):
    """A node's change cannot go on: roll back with this reason."""


TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})
"""HTTP statuses worth retrying (0: no answer). A 401 or 403 will answer the same next time."""

ROLLBACK_TRIES = 6
"""Attempts at the rollback's one patch when the API fails transiently (conflicts re-read)."""


def _permission(exc: ApiError, verb: str, resource: str) -> str:
    """The one line saying which permission a 401/403 says is missing."""
    return (
        f"not allowed to {verb} (HTTP {exc.status}): the applier's service account needs "
        f"{resource} (deploy/helm RBAC, docs/applier.md)"
    )


class NodeWorkflow:
    """Takes one node's change from its recorded progress to ``done`` or ``failed``.

    Args:
        kube: The cluster (writable: a dry run never gets here).
        settings: Timeouts, ``--drain``, the poll interval.
        audit: Log lines and Events.
        run_id: This run's id (a record with another is resumed from an earlier run).
        clock: Time for records, deadlines and waits between polls.
        check_lease: Raises when the Lease was lost (called between steps and polls).
    """

    def __init__(
        self,
        kube: Kube,
        settings: ApplySettings,
        *,
        audit: Audit,
        run_id: str,
        clock: Clock,
        check_lease: Callable[[], None],
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.audit = audit
        self.run_id = run_id
        self.clock = clock
        self.check_lease = check_lease

    def record(self, node: Obj, progress: NodeProgress, *, why: str) -> None:
        """Write ``progress`` on ``node`` (guarded by its resourceVersion) and log it.

        Raises:
            Conflict: the node changed since it was read.
        """
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

    def resume(
        self,
        change: NodeChange,
        progress: NodeProgress,
        target: ConfigTarget,
        *,
        out: NodeOutcome | None = None,
        config: MigPartedConfig | None = None,
    ) -> NodeOutcome:
        """Run the change's steps from ``progress`` until it is done or rolled back.

        Args:
            change: The node's change.
            progress: Where it stands (recorded on the node).
            target: The mig-parted ConfigMap.
            out: The outcome to complete (a new one when None).
            config: The plan's named config to write into the ConfigMap; None when the
                change is not this plan's (a resumed one), whose config must be there already.

        Returns:
            ``applied`` or ``failed``, with the last step's message.

        Raises:
            ApiError: the cluster kept failing (the node's record says where to resume).
            LeaseLost: through ``check_lease``.
        """
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
                self.check_lease()
                try:
                    progress = self._advance(change, progress, target, config=config)
                    failures = 0
                except Conflict:
                    failures += 1  # the node changed under us (MIG Manager, kubelet): re-read
                    if failures > 5:
                        raise
                except NotFound as exc:
                    if not self._node_gone(change.node):
                        raise
                    # A deleted node ends its own change, not the run: nothing is left to undo.
                    out.result, out.reason = "failed", f"node deleted mid-change ({exc})"
                    self.audit.log(change.node, "node-gone", step=progress.step.value, why=str(exc))
                    return out
                except ApiError as exc:
                    if exc.status not in TRANSIENT and progress.step is not Step.VERIFY:
                        # Permanent (401, 403, 422...): the same call fails again on every
                        # retry and every rerun; give the node up cleanly now. (After MIG
                        # Manager's success, a rollback would re-partition again: not then.)
                        raise _Abort(f"{exc} (not retried: HTTP {exc.status})") from exc
                    failures += 1
                    if failures > 3 or exc.status not in TRANSIENT:
                        left = self.left_state(change.node)
                        raise ApiError(f"{exc}; {left}", exc.status) from exc
                    self.audit.log(change.node, "retry", step=progress.step.value, why=str(exc))
                    self.clock.sleep(min(30.0, self.settings.poll_s * 2**failures))
        except _Abort as exc:
            progress = self._rollback(change, progress, str(exc))
        if progress.step is Step.DONE:
            out.result, out.reason = "applied", progress.message
        else:
            out.result, out.reason = "failed", progress.message
        return out

    def _node_gone(self, name: str) -> bool:
        """Whether the node no longer exists (a NotFound was about it, not about a pod)."""
        try:
            self.kube.get_node(name)
        except NotFound:
            return True
        except ApiError:
            return False
        return False

    def left_state(self, name: str) -> str:
        """How the node was left, for the one line that ends a run: label, state, cordon.

        Read once, best effort: an API that just failed may fail again, and then the record
        on the node (what the next run resumes from) is all that can be said.
        """
        try:
            node = self.kube.get_node(name)
        except ApiError:
            return (
                f"node {name} left as its migscope.io/apply record says (could not be read); "
                "the next run resumes or rolls it back"
            )
        labels = (node.get("metadata") or {}).get("labels") or {}
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        recorded = read_progress(node)
        step = recorded.step.value if recorded is not None else "none"
        return (
            f"node {name} left {'cordoned' if cordoned else 'schedulable'} with "
            f"{CONFIG_LABEL}={labels.get(CONFIG_LABEL) or '(none)'}, "
            f"{STATE_LABEL}={labels.get(STATE_LABEL) or '(none)'}, recorded step {step}; "
            "the next run resumes or rolls it back"
        )

    def _advance(
        self,
        change: NodeChange,
        progress: NodeProgress,
        target: ConfigTarget,
        *,
        config: MigPartedConfig | None,
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
            return self._write_config(change, progress, target, node, config=config)
        if progress.step is Step.DRAIN:
            return self._drain(change, progress)
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
        config: MigPartedConfig | None,
    ) -> NodeProgress:
        if config is not None:
            try:
                what = ensure_config(self.kube, target, config)
            except ConfigMapError as exc:
                raise _Abort(str(exc)) from exc
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

    def _drain(self, change: NodeChange, progress: NodeProgress) -> NodeProgress:
        deadline = self.clock.monotonic() + self.settings.drain_timeout_s
        strategy_of = self.kube.get_node(change.node)  # its MIG strategy label, allocatable
        while True:
            pods = self.kube.pods_on_node(change.node)
            at_risk = at_risk_now(self.kube, change, strategy_of, pods)
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
                except ApiError as exc:
                    if exc.status in (401, 403):
                        # Every rerun would hit it again with the node cordoned: give up now.
                        raise _Abort(
                            f"evicting {name}: "
                            + _permission(exc, "evict pods", "create on pods/eviction")
                        ) from exc
                    raise
            if self.clock.monotonic() >= deadline:
                raise _Abort(
                    f"drain timed out after {self.settings.drain_timeout_s:g} s: "
                    f"{', '.join(at_risk)} still there"
                )
            self.check_lease()
            self.clock.sleep(self.settings.poll_s)
        node = self.kube.get_node(change.node)
        nxt = progress.at(
            Step.WAIT, "label set, waiting for MIG Manager", labelled_at=self.clock.now()
        )
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
        started = progress.labelled_at if progress.labelled_at is not None else self.clock.now()
        deadline = started + self.settings.node_timeout_s
        seen: list[str] = []
        while True:
            _still_ours(node, progress)
            state = ((node.get("metadata") or {}).get("labels") or {}).get(STATE_LABEL)
            if state and (not seen or seen[-1] != state):
                seen.append(state)
            if state == "success":
                return progress.at(Step.VERIFY, "MIG Manager reported success")
            if state == "failed":
                raise _Abort(f"MIG Manager reported failed (states seen: {' -> '.join(seen)})")
            left = deadline - self.clock.now()
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
            self.check_lease()
            window = min(left, 30.0)
            began = self.clock.monotonic()
            answered = False
            try:
                for _kind, obj in self.kube.watch_node(
                    change.node,
                    resource_version=node["metadata"]["resourceVersion"],
                    timeout_s=window,
                ):
                    node = obj
                    if _label(obj) != progress.target:
                        break  # relabelled by someone else: the loop's check says so
                    new = ((obj.get("metadata") or {}).get("labels") or {}).get(STATE_LABEL)
                    if new and (not seen or seen[-1] != new):
                        seen.append(new)
                    if new in ("success", "failed"):
                        answered = True
                        break
            except ApiError:
                pass  # 410 or a dropped stream: read the node again and watch from there
            if not answered and self.clock.monotonic() - began < window:
                self.clock.sleep(self.settings.poll_s)  # the watch ended early: poll, never spin
            node = self.kube.get_node(change.node)

    def _verify(self, change: NodeChange, progress: NodeProgress, node: Obj) -> NodeProgress:
        _still_ours(node, progress)
        expected = change.expected_resources()
        started = self.clock.monotonic()
        deadline = started + self.settings.verify_timeout_s
        have = advertised(node)
        # A node whose MIG devices NVIDIA's DRA driver publishes advertises no allocatable
        # nvidia.com/mig-*: there the new layout shows in its ResourceSlices instead.
        dra = bool(expected) and not have and self._dra_static(change.node)
        if dra:
            have = published_resources(self.kube.resource_slices(change.node))
        restarted = False
        while expected and have != expected and self.clock.monotonic() < deadline:
            if (
                dra
                and not restarted
                and self.clock.monotonic() - started >= (self.settings.verify_timeout_s / 2)
            ):
                # The kubelet plugin discovers MIG devices once, at start: restart it.
                restarted = self._restart_dra_plugin(change.node)
            self.clock.sleep(self.settings.poll_s)
            node = self.kube.get_node(change.node)
            if dra:
                have = published_resources(self.kube.resource_slices(change.node))
            else:
                have = advertised(node)
        _still_ours(node, progress)  # its resourceVersion guards the patch below
        mismatch = bool(expected) and have != expected
        where = "its ResourceSlices publish" if dra else "the node advertises"
        message = (
            f"applied {change.config}"
            if not mismatch
            else f"applied {change.config}, but {where} {have} instead of {expected}"
        )
        done = progress.at(Step.DONE if not mismatch else Step.FAILED, message)
        now = datetime.fromtimestamp(self.clock.now(), tz=timezone.utc)
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

    def _dra_static(self, name: str) -> bool:
        """Whether NVIDIA's DRA driver publishes the node's pre-created MIG devices."""
        return node_management(self.kube.resource_slices(name)) == "static"

    def _restart_dra_plugin(self, name: str) -> bool:
        """Evict the node's DRA kubelet plugin pod(s) so that they re-discover MIG devices.

        The plugin's discovery is a snapshot taken at start (docs/dra-sources.md §1.1); the
        driver's docs say to restart it after re-partitioning. GPU Operator 26.7 does so
        itself for plugins that select ``nvidia.com/gpu.deploy.client``; this is for the
        others. The Eviction API (the permission ``--drain`` already needs) lets the
        DaemonSet start a fresh pod. Returns whether any pod was evicted.
        """
        evicted = False
        for pod in self.kube.pods_on_node(name):
            meta = pod.get("metadata") or {}
            labels = meta.get("labels") or {}
            if not any(labels.get(k) == v for k, v in DRA_PLUGIN_LABELS):
                continue
            who = f"{meta.get('namespace')}/{meta.get('name')}"
            try:
                self.kube.evict(str(meta.get("namespace")), str(meta.get("name")))
            except NotFound:
                continue
            except ApiError as exc:
                self.audit.log(name, "dra-plugin-restart-refused", pod=who, why=str(exc))
                continue
            evicted = True
            self.audit.log(
                name,
                "dra-plugin-restart",
                pod=who,
                why="the DRA kubelet plugin discovers MIG devices only at start",
            )
        return evicted

    def _rollback(self, change: NodeChange, progress: NodeProgress, reason: str) -> NodeProgress:
        """Undo what is still ours: our label, our cordon; record ``failed``.

        Only what this change did and nobody changed since is restored: the label goes back
        to the previous value only while it still names our target (an admin or another
        tool that relabelled the node meanwhile keeps theirs, and the outcome says so), and
        every patch carries the resourceVersion it was decided on, so a label changed
        between the read and the patch is a conflict, re-read and decided again. Transient
        API errors are retried; when the rollback cannot be written, the error says how the
        node was left.
        """
        tries = 0
        while True:
            tries += 1
            try:
                return self._rollback_once(change, progress, reason)
            except Conflict:
                if tries >= ROLLBACK_TRIES:
                    raise ApiError(
                        f"node {change.node}: could not record the rollback (kept conflicting); "
                        f"{self.left_state(change.node)}"
                    ) from None
            except NotFound as exc:
                if self._node_gone(change.node):
                    return progress.at(Step.FAILED, f"rolled back: {reason}; node deleted ({exc})")
                raise
            except ApiError as exc:
                if exc.status not in TRANSIENT or tries >= ROLLBACK_TRIES:
                    detail = (
                        _permission(exc, "patch nodes", "patch on nodes")
                        if exc.status in (401, 403)
                        else str(exc)
                    )
                    raise ApiError(
                        f"rolling back {change.node} ({reason}) failed: {detail}; "
                        f"{self.left_state(change.node)}",
                        exc.status,
                    ) from exc
                self.audit.log(change.node, "retry", step=Step.ROLLBACK.value, why=str(exc))
                self.clock.sleep(min(30.0, self.settings.poll_s * 2**tries))

    def _rollback_once(
        self, change: NodeChange, progress: NodeProgress, reason: str
    ) -> NodeProgress:
        node = self.kube.get_node(change.node)
        labels = (node.get("metadata") or {}).get("labels") or {}
        now = labels.get(CONFIG_LABEL)
        message = f"rolled back: {reason}"
        restore = False
        if progress.labelled_at is not None and now != progress.previous:
            if now == progress.target:
                restore = True
            else:
                message += (
                    f"; left {CONFIG_LABEL}={now or '(none)'} alone: set by someone else "
                    f"after ours ({progress.target})"
                )
        failed = progress.at(Step.FAILED, message)
        patch: Obj = {
            "metadata": {
                "resourceVersion": node["metadata"]["resourceVersion"],
                "annotations": {STATE_ANNOTATION: failed.to_json()},
            }
        }
        if restore:
            patch["metadata"]["labels"] = {CONFIG_LABEL: progress.previous}
        if progress.cordoned:
            patch["spec"] = {"unschedulable": False}
        self._patch(change.node, patch)
        self.audit.log(
            change.node,
            "rollback",
            before=now,
            after=progress.previous if restore else now,
            why=message,
        )
        self.audit.event(
            node, "MigscopeRolledBack", f"{change.config} not applied: {message}", warning=True
        )
        return failed

    def _patch(self, name: str, patch: Mapping[str, Any]) -> Obj:
        return self.kube.patch_node(name, patch)


def at_risk_now(kube: Kube, change: NodeChange, node: Obj, pods: list[Obj]) -> list[str]:
    """``namespace/pod`` of the node's pods that may hold a device the change destroys.

    Both ways a pod can hold a MIG device: its requests (the device plugin,
    :func:`~migscope.applier._steps.pods_at_risk`) and its ResourceClaims (DRA,
    :func:`~migscope.applier._dra.dra_pods_at_risk`, which tells a claimed device's GPU by
    UUID where it can), the claims read live; then narrowed by :func:`_as_the_plan_says`.

    Raises:
        ApiError: the node's ResourceSlices or a pod's claim cannot be read (a 403 says which
            permission is missing: without it, DRA holders cannot be seen).
    """
    at_risk = set(pods_at_risk(change, pods, node))
    refs = {
        (str((p.get("metadata") or {}).get("namespace")), name)
        for p in pods
        for name in claim_names(p)
    }
    if not refs:
        return _as_the_plan_says(change, pods, at_risk)
    claims: dict[tuple[str, str], Obj] = {}
    try:
        slices = kube.resource_slices(change.node)
        for namespace, name in sorted(refs):
            claim = kube.get_resource_claim(namespace, name)
            if claim is not None:
                claims[(namespace, name)] = claim
    except ApiError as exc:
        if exc.status in (401, 403):
            raise ApiError(
                "cannot see which pods hold MIG devices through DRA: "
                + _permission(
                    exc,
                    "read resourceclaims",
                    "get on resourceclaims and list on resourceslices (resource.k8s.io)",
                ),
                exc.status,
            ) from exc
        raise
    held = dra_pods_at_risk(change, pods, claims, slices)
    at_risk.update(held.pods)
    return _as_the_plan_says(change, pods, at_risk, held.on_changed_gpu)


def _as_the_plan_says(
    change: NodeChange, pods: list[Obj], broad: set[str], seen: frozenset[str] = frozenset()
) -> list[str]:
    """The broad rule's pods, narrowed to what the plan knows of each pod's GPUs.

    The device plugin's rule cannot tell which GPU a pod's device is on (nor can the DRA
    rule for a device whose GPU the slices and the plan do not both name), so it names
    every holder of a destroyed profile, on changed GPUs or not (issue 22: ``--drain``
    evicted 11 pods where the report named 8). The report knows each pod's GPUs (its
    per-GPU slices, from the
    exporter's MIG UUIDs): a pod the plan placed, and that existed when the plan was made, is
    at risk exactly when one of its GPUs is re-created. A pod the plan does not place, or
    one created since (a restarted StatefulSet pod may hold another device under the same
    name), keeps the broad rule. The plan's ``pods_to_move`` on the node are always named,
    and so are the pods ``seen`` live on a changed GPU (a DRA claim's device whose GPU the
    node's ResourceSlices name by UUID): what the cluster shows now outweighs where the
    report saw the pod.
    """
    if not change.placed:
        return sorted(broad | seen)
    placed = dict(change.placed)
    changed = {g.index for g in change.changed_gpus}
    out: set[str] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        gpus = placed.get(name)
        if name in seen:
            out.add(name)
        elif gpus is None or not _existed_by(meta, change.placed_at):
            if name in broad:
                out.add(name)
        elif set(gpus) & changed or name in change.pods_to_move:
            out.add(name)
    return sorted(out)


def _existed_by(meta: Mapping[str, Any], when: float | None) -> bool:
    """Whether the pod was created no later than ``when`` (unknown: no)."""
    stamp = meta.get("creationTimestamp")
    if when is None or not isinstance(stamp, str):
        return False
    try:
        created = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    return created.timestamp() <= when


def _label(node: Obj) -> str | None:
    return ((node.get("metadata") or {}).get("labels") or {}).get(CONFIG_LABEL)


def _still_ours(node: Obj, progress: NodeProgress) -> None:
    """Abort when someone else relabelled the node after our change.

    MIG Manager then works on *their* config: waiting on, verifying or counting it as ours
    would report their layout as our change (issue 20: "applied", rc 0, on another config).
    The rollback that follows leaves their label alone.
    """
    label = _label(node)
    if progress.labelled_at is not None and label != progress.target:
        raise _Abort(
            f"not ours: {CONFIG_LABEL} was changed to {label or '(none)'} by someone else "
            f"while MIG Manager worked on {progress.target}"
        )
