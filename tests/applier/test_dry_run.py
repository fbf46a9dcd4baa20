"""A dry run is strictly read-only: not one write request, not one sleep, whatever it finds.

A user runs ``migscope apply --plan report.json`` without ``--apply`` to *look*: after an
interrupted ``--apply`` above all, when a node is left mid-change. Resuming that change
there (waiting for MIG Manager, rolling the label back, uncordoning) while printing "dry
run (nothing changed)" is the worst kind of surprise. So every test here counts the write
requests (POST/PUT/PATCH/DELETE) the API test server received during the dry run: zero,
and the clock is the proof it did not wait.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.kubeapi import pod
from support.kubeapi.mig_manager import CONFIG_LABEL, GPU_ANNOTATION, STATE_LABEL, Knobs

from applier.cluster import CONFIGMAP, NAMESPACE, TARGET, Cluster, plan, running_cluster
from applier.test_resume import Died, DyingKube, expire_lease, lease_holder, make_applier, settle
from migscope.applier._applier import Applier
from migscope.applier._audit import Audit
from migscope.applier._settings import ApplySettings
from migscope.applier._steps import STATE_ANNOTATION, NodeProgress, Step, read_progress
from migscope.kube import DryRunWrite, Kube

UNFINISHED_RUN = "0123456789ab"


def _no_sleep(seconds: float) -> None:
    raise AssertionError(f"a dry run slept {seconds} s")


def _leave_mid_change(c: Cluster, step: Step, name: str = "gpu-a") -> NodeProgress:
    """Write what a run killed at ``step`` leaves on the node (cordoned; relabelled from wait)."""
    relabelled = step in (Step.WAIT, Step.VERIFY, Step.ROLLBACK)
    progress = NodeProgress(
        run=UNFINISHED_RUN,
        actor="crashed-applier",
        step=step,
        target=TARGET,
        previous="all-balanced",
        cordoned=True,
        labelled_at=time.time() if relabelled else None,
        message="left by a test",
    )
    patch: dict[str, Any] = {
        "metadata": {"annotations": {STATE_ANNOTATION: progress.to_json()}},
        "spec": {"unschedulable": True},
    }
    if relabelled:
        patch["metadata"]["labels"] = {CONFIG_LABEL: TARGET, STATE_LABEL: None}
    c.api.patch("v1", "Node", name, patch)
    settle(c, name)  # MIG Manager has reacted (to pending, stuck there): the cluster is quiet
    c.api.clear_requests()
    return progress


@pytest.mark.parametrize(
    "step", [Step.CONFIGMAP, Step.DRAIN, Step.WAIT, Step.VERIFY, Step.ROLLBACK], ids=str
)
def test_a_dry_run_reports_an_unfinished_change_and_touches_nothing(step: Step) -> None:
    with running_cluster(knobs={"gpu-a": Knobs(stuck_pending=True)}) as c:
        _leave_mid_change(c, step)
        before = c.node()
        started = time.monotonic()
        report = c.applier(apply=False, node_timeout_s=3.0, sleep=_no_sleep).run(plan())
        took = time.monotonic() - started
        assert c.writes() == []
        assert took < 1.5, f"the dry run took {took:.1f} s: it waited for something"
        assert c.node() == before  # not even the resourceVersion moved
        (out,) = report.outcomes
        assert out.result == "would-resume"
        assert out.node == "gpu-a"
        assert out.target == TARGET
        assert f"unfinished change by run {UNFINISHED_RUN}" in out.reason
        assert f"at step {step.value} (target {TARGET})" in out.reason
        verb = "finish rolling it back" if step is Step.ROLLBACK else "resume it"
        assert f"`--apply` would {verb}" in out.reason
        assert report.ok


def test_a_dry_run_after_a_killed_apply_neither_resumes_nor_takes_the_lease() -> None:
    """The real thing: ``--apply`` killed just after the relabel, its Lease still held."""
    with running_cluster(knobs={"gpu-a": Knobs(stuck_pending=True)}) as c:
        dying = DyingKube(c.api.client(retries=False), die_at=5, after=True)
        with pytest.raises(Died, match="patch_node"):
            make_applier(c, dying, "dead").run(plan())
        settle(c)
        left = read_progress(c.node())
        assert left is not None
        assert left.step is Step.WAIT
        c.api.clear_requests()
        before = c.node()
        started = time.monotonic()
        # The caller's audit can write Events: the dry run must not use it to.
        dry = Applier(
            c.kube,
            ApplySettings(apply=False, namespace=NAMESPACE, node_timeout_s=600.0),
            audit=Audit(c.kube, actor="looker"),
            sleep=_no_sleep,
        )
        report = dry.run(plan("gpu-a", "gpu-b"))
        assert time.monotonic() - started < 1.5
        assert c.writes() == []
        assert c.node() == before
        assert lease_holder(c) == "dead"  # not taken over, not renewed, not released
        outcomes = {o.node: o for o in report.outcomes}
        assert outcomes["gpu-a"].result == "would-resume"
        assert f"by run {left.run}" in outcomes["gpu-a"].reason
        # --max-nodes 1 (the default): the resumed change is the one node this run does.
        assert outcomes["gpu-b"].result == "skipped"
        assert "--max-nodes 1" in outcomes["gpu-b"].reason
        # And the record is intact for the real run, which does resume it.
        expire_lease(c)
        fresh = Kube(c.api.client(retries=False))
        (out, *_) = make_applier(c, fresh, "fresh", node_timeout_s=1.0).run(plan()).outcomes
        assert out.result == "failed"  # stuck pending until the timeout: rolled back
        assert any(f"left at step wait by run {left.run}" in a for a in out.actions)
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        assert not c.node()["spec"].get("unschedulable")


def test_a_dry_run_with_drain_and_skips_writes_nothing() -> None:
    """A fresh plan: pods to evict (--drain), a node someone else cordoned (a skip, which
    --apply records as an Event), a ClusterPolicy pointing elsewhere (a note)."""
    with running_cluster(policy_config="someone-elses-config") as c:
        # The ClusterPolicy names another ConfigMap than the one asked for: a note.
        c.api.create(
            pod(
                "train",
                "ml",
                node_name="gpu-a",
                requests={"nvidia.com/mig-2g.35gb": 1},
                annotations={GPU_ANNOTATION: "1"},
            )
        )
        c.api.patch("v1", "Node", "gpu-b", {"spec": {"unschedulable": True}})
        settle(c, "gpu-b")
        c.api.clear_requests()
        dry = Applier(
            c.kube,
            ApplySettings(
                apply=False, drain=True, namespace=NAMESPACE, max_nodes=5, configmap=CONFIGMAP
            ),
            audit=Audit(c.kube, actor="looker"),
            sleep=_no_sleep,
        )
        report = dry.run(plan("gpu-a", "gpu-b"))
        assert c.writes() == []
        outcomes = {o.node: o for o in report.outcomes}
        assert outcomes["gpu-a"].result == "would-apply"
        assert "evict ml/train (holds a device the change destroys)" in outcomes["gpu-a"].actions
        assert outcomes["gpu-b"].result == "skipped"
        assert "cordoned by someone else" in outcomes["gpu-b"].reason
        assert any("kubectl patch clusterpolicies.nvidia.com" in n for n in report.notes)
        assert len(c.api.list("v1", "Pod", namespace="ml")) == 1


def test_the_dry_run_applier_cannot_write_even_by_mistake() -> None:
    """Belt and braces: a dry run's view of the cluster refuses writes before sending them."""
    with running_cluster() as c:
        dry = c.applier(apply=False)
        with pytest.raises(DryRunWrite, match="patching node gpu-a"):
            dry.kube.patch_node("gpu-a", {"spec": {"unschedulable": True}})
        with pytest.raises(DryRunWrite, match="lease"):
            dry.lease.acquire()
        assert c.writes() == []
        assert dry.kube.get_node("gpu-a")["metadata"]["name"] == "gpu-a"  # reads still work
        assert c.applier(apply=True).kube is c.kube
