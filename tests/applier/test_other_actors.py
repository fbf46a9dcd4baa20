"""The applier beside other actors and under errors that do not go away (issue 20).

A fault run found the applier overwriting an admin's label on rollback, reporting another
actor's config as its own change, ending a run on one 500 during a rollback with the node
left cordoned on the new label, cordoning a node for good on a permanent 403 from the
Eviction API, and stopping a whole run on a node deleted mid-change. Each case here failed
on the code before the fix.

The other actor is played the way a person with ``kubectl label`` plays it: a write straight
into the API test server's store, made from a thread the moment MIG Manager (the sim) shows
``pending`` for our change, so the applier meets it as it would in a cluster.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.kubeapi import Respond, pod
from support.kubeapi.mig_manager import CONFIG_LABEL, STATE_LABEL, Knobs

from applier.cluster import TARGET, Cluster, plan, running_cluster
from applier.test_faults import NODE_PATH, FlakyKube
from applier.test_resume import make_applier
from migscope.applier._steps import read_progress
from migscope.kube import ApiError

ADMIN = "team-special"  # a config in the ConfigMap: MIG Manager applies it too


def _admin_relabels_when_pending(c: Cluster, node: str = "gpu-a") -> threading.Event:
    """When the node shows ``pending`` for our target, an admin relabels it to ADMIN."""
    done = threading.Event()

    def on_change(change: Any) -> None:
        labels = change.object["metadata"].get("labels") or {}
        ours = (labels.get(CONFIG_LABEL), labels.get(STATE_LABEL)) == (TARGET, "pending")
        if change.object["metadata"]["name"] == node and ours and not done.is_set():
            done.set()
            threading.Thread(
                target=c.api.patch,
                args=("v1", "Node", node, {"metadata": {"labels": {CONFIG_LABEL: ADMIN}}}),
                daemon=True,
            ).start()

    c.api.on_change(on_change, api_version="v1", kind="Node")
    return done


def _settled_on(c: Cluster, value: str, node: str = "gpu-a") -> None:
    def settled(n: dict[str, Any]) -> bool:
        labels = n["metadata"]["labels"]
        return (labels.get(CONFIG_LABEL), labels.get(STATE_LABEL)) == (value, "success")

    c.api.wait_for("v1", "Node", node, settled, timeout=10.0)


@pytest.mark.parametrize("ours_fails", [True, False], ids=["ours-fails", "ours-succeeds"])
def test_an_admin_relabel_while_pending_is_left_alone_and_reported_not_ours(
    ours_fails: bool,
) -> None:
    """Items 4 and 7: the rollback put our previous label back over the admin's; a change
    that MIG Manager finished for the admin's config was reported "applied", rc 0."""
    knobs = {"gpu-a": Knobs(fail=ours_fails, delay_s=0.3)}
    with running_cluster(knobs=knobs) as c:
        relabelled = _admin_relabels_when_pending(c)
        (out,) = c.applier().run(plan()).outcomes
        assert relabelled.is_set()
        assert out.result == "failed", out.reason
        assert "not ours" in out.reason
        assert f"left {CONFIG_LABEL}={ADMIN} alone" in out.reason
        c.mig.knobs("gpu-a").fail = False
        _settled_on(c, ADMIN)  # MIG Manager went on to the admin's config, untouched
        node = c.node()
        assert node["metadata"]["labels"][CONFIG_LABEL] == ADMIN
        assert not node["spec"].get("unschedulable")  # our cordon is undone all the same
        progress = read_progress(node)
        assert progress is not None
        assert progress.step.value == "failed"


def test_a_relabel_between_the_rollbacks_read_and_its_patch_is_left_alone() -> None:
    """Item 4: the rollback's patch carries the resourceVersion it decided on; an admin's
    relabel in between makes it a conflict, re-read and decided again (the old code wrote
    our previous label over it on the retry)."""
    with running_cluster(knobs={"gpu-a": Knobs(fail=True)}) as c:
        kube = FlakyKube(c.api.client(retries=False))
        # Node patches: 1 intent, 2 cordon, 3 label, 4 the rollback.
        kube.before[4] = lambda: c.api.patch(
            "v1", "Node", "gpu-a", {"metadata": {"labels": {CONFIG_LABEL: ADMIN}}}
        )
        (out,) = make_applier(c, kube, "first").run(plan()).outcomes
        assert out.result == "failed"
        assert f"left {CONFIG_LABEL}={ADMIN} alone" in out.reason
        assert [p["metadata"]["labels"] for p in kube.label_writes()] == [
            {CONFIG_LABEL: TARGET, STATE_LABEL: None}
        ]
        c.api.wait_for("v1", "Node", "gpu-a", lambda n: not n["spec"].get("unschedulable"))
        assert c.labels()[CONFIG_LABEL] == ADMIN


def test_one_500_during_a_rollback_is_retried() -> None:
    """Item 5: one failed call in the rollback ended the run, the node cordoned on the new
    label with MIG Manager's ``failed``."""
    with running_cluster(knobs={"gpu-a": Knobs(fail=True)}) as c:
        kube = FlakyKube(c.api.client(retries=False))
        kube.before[4] = lambda: c.api.faults.add(
            Respond(500), method="PATCH", path=NODE_PATH, times=1
        )
        (out,) = make_applier(c, kube, "first").run(plan()).outcomes
        assert out.result == "failed"
        assert "rolled back" in out.reason
        node = c.node()
        assert node["metadata"]["labels"][CONFIG_LABEL] == "all-balanced"
        assert not node["spec"].get("unschedulable")


def test_a_rollback_that_cannot_be_written_says_how_the_node_was_left() -> None:
    """Item 5: the one-line error says in which state the node is (and what comes next)."""
    with running_cluster(knobs={"gpu-a": Knobs(fail=True)}) as c:
        kube = FlakyKube(c.api.client(retries=False))
        kube.before[4] = lambda: c.api.faults.add(Respond(403), method="PATCH", path=NODE_PATH)
        with pytest.raises(ApiError) as caught:
            make_applier(c, kube, "first").run(plan())
        text = str(caught.value)
        assert "\n" not in text
        assert "patch on nodes" in text  # the permission that is missing
        assert f"node gpu-a left cordoned with {CONFIG_LABEL}={TARGET}" in text
        assert f"{STATE_LABEL}=failed" in text
        assert "the next run resumes or rolls it back" in text


def test_a_permanent_403_on_eviction_gives_the_node_up_cleanly() -> None:
    """Item 6: the node stayed cordoned for good, every ``--drain`` rerun stopping on it."""
    with running_cluster() as c:
        c.api.create(pod("train", "ml", node_name="gpu-a", requests={"nvidia.com/mig-2g.35gb": 1}))
        c.api.faults.add(Respond(403), method="POST", path=r"/eviction$")
        for run in ("first", "rerun"):
            report = make_applier(c, FlakyKube(c.api.client(retries=False)), run, drain=True).run(
                plan()
            )
            (out,) = report.outcomes
            assert out.result == "failed", out.reason
            assert "create on pods/eviction" in out.reason
            node = c.node()
            assert not node["spec"].get("unschedulable")
            assert node["metadata"]["labels"][CONFIG_LABEL] == "all-balanced"
            assert c.api.list("v1", "Pod", namespace="ml")  # still running, untouched


def test_a_node_deleted_mid_change_ends_that_node_not_the_run() -> None:
    """Minor: a 404 on the node was retried as transient, then the whole run stopped and
    the next node was never tried."""
    with running_cluster(knobs={"gpu-a": Knobs(stuck_pending=True)}) as c:
        gone = threading.Event()

        def on_change(change: Any) -> None:
            labels = change.object["metadata"].get("labels") or {}
            pending = (labels.get(CONFIG_LABEL), labels.get(STATE_LABEL)) == (TARGET, "pending")
            if change.object["metadata"]["name"] == "gpu-a" and pending and not gone.is_set():
                gone.set()
                threading.Thread(
                    target=c.api.delete, args=("v1", "Node", "gpu-a"), daemon=True
                ).start()

        c.api.on_change(on_change, api_version="v1", kind="Node")
        report = c.applier().run(plan("gpu-a", "gpu-b"))
        by_node = {o.node: o for o in report.outcomes}
        assert gone.is_set()
        assert by_node["gpu-a"].result == "failed"
        assert "node deleted" in by_node["gpu-a"].reason
        assert by_node["gpu-b"].result == "applied", by_node["gpu-b"].reason


def test_a_wrong_namespace_is_refused_before_anything_is_written() -> None:
    """Issue 22, item 4: OpenShift's ``nvidia-gpu-operator`` for ``gpu-operator``: the dry
    run said nothing, ``--apply`` created a stray ConfigMap and Lease, evicted a pod, then
    MIG Manager failed and it rolled back."""
    from migscope.applier._applier import ClusterRefused

    with running_cluster() as c:
        c.api.create(pod("train", "ml", node_name="gpu-a", requests={"nvidia.com/mig-2g.35gb": 1}))
        report = c.applier(apply=False, namespace="nvidia-gpu-operator").run(plan())
        (dry,) = report.outcomes
        assert dry.result == "skipped"
        assert "--namespace" in dry.reason
        assert any("nvidia-gpu-operator" in n for n in report.notes)
        before = c.api.resource_version
        with pytest.raises(ClusterRefused, match="namespace nvidia-gpu-operator holds neither"):
            c.applier(namespace="nvidia-gpu-operator", drain=True).run(plan())
        assert c.api.resource_version == before  # no ConfigMap, no Lease, no eviction
        assert c.api.list("v1", "Pod", namespace="ml")
