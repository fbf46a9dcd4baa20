"""The applier against the API test server and the simulated MIG Manager, path by path."""

from __future__ import annotations

import json

import pytest
from support.kubeapi import pdb, pod
from support.kubeapi.mig_manager import CONFIG_LABEL, GPU_ANNOTATION, STATE_LABEL, Knobs

from applier.cluster import (
    BALANCED,
    CONFIGMAP,
    NAMESPACE,
    TARGET,
    TWO_3G,
    plan,
    resources,
    running_cluster,
)
from migscope.applier._lease import Lease, LeaseHeld
from migscope.applier._steps import CHANGES_ANNOTATION, STATE_ANNOTATION, read_progress


def _events(api, node: str) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [
        (e["type"], e["reason"])
        for e in api.list("v1", "Event", namespace="default")
        if e["involvedObject"]["name"] == node
    ]


def test_dry_run_says_what_would_change_and_changes_nothing() -> None:
    with running_cluster() as c:
        before = c.api.resource_version
        report = c.applier(apply=False).run(plan())
        assert c.api.resource_version == before  # not a single write
        assert all(r.method == "GET" for r in c.api.requests)
        (out,) = report.outcomes
        assert out.result == "would-apply"
        text = "\n".join(out.actions)
        assert f"configmap {NAMESPACE}/{CONFIGMAP} key config.yaml: add config {TARGET}" in text
        assert f"label {CONFIG_LABEL}: all-balanced -> {TARGET}" in text
        assert "cordon the node" in text
        assert "GPU(s) [1]" in text
        assert "nvidia.com/mig-3g.71gb=3" in text


def test_apply_relabels_waits_verifies_and_uncordons() -> None:
    with running_cluster() as c:
        report = c.applier().run(plan())
        (out,) = report.outcomes
        assert out.result == "applied", out.reason
        node = c.node()
        labels = node["metadata"]["labels"]
        assert labels[CONFIG_LABEL] == TARGET
        assert labels[STATE_LABEL] == "success"
        assert not node["spec"].get("unschedulable")
        assert node["status"]["allocatable"]["nvidia.com/mig-3g.71gb"] == "3"
        progress = read_progress(node)
        assert progress is not None
        assert progress.step.value == "done"
        assert progress.previous == "all-balanced"
        assert len(json.loads(node["metadata"]["annotations"][CHANGES_ANNOTATION])) == 1
        # The ConfigMap gained the plan's config and kept everyone else's.
        configs = c.configmap()
        assert set(configs) == {"all-disabled", "all-balanced", "team-special", TARGET}
        assert c.mig.gpus("gpu-a")[1].instances == TWO_3G
        assert c.mig.states("gpu-a")[-2:] == ["pending", "success"]
        assert ("Normal", "MigscopeApplied") in _events(c.api, "gpu-a")
        # The other node was not in the plan and was not touched.
        assert c.labels("gpu-b")[CONFIG_LABEL] == "all-balanced"


def test_second_run_finds_nothing_to_do() -> None:
    with running_cluster() as c:
        c.applier().run(plan())
        before = c.api.resource_version
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "unchanged"
        writes = [r for r in c.api.requests if r.method != "GET"]
        assert c.api.resource_version - before <= 2  # the lease only
        assert writes


def test_a_pod_on_a_changed_gpu_skips_the_node_without_drain() -> None:
    with running_cluster() as c:
        c.api.create(
            pod(
                "train",
                "ml",
                node_name="gpu-a",
                requests={"nvidia.com/mig-2g.35gb": 1},
                annotations={GPU_ANNOTATION: "1"},
            )
        )
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "skipped"
        assert "ml/train" in out.reason
        assert "--drain" in out.reason
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        assert not c.node()["spec"].get("unschedulable")
        assert read_progress(c.node()) is None


def test_drain_evicts_and_applies() -> None:
    with running_cluster() as c:
        c.api.create(pod("train", "ml", node_name="gpu-a", requests={"nvidia.com/mig-2g.35gb": 1}))
        (out,) = c.applier(drain=True).run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert c.api.list("v1", "Pod", namespace="ml") == []
        assert not c.node()["spec"].get("unschedulable")


def test_a_pdb_that_never_allows_it_rolls_back_and_uncordons() -> None:
    with running_cluster() as c:
        c.api.create(
            pod(
                "serve",
                "ml",
                node_name="gpu-a",
                labels={"app": "serve"},
                requests={"nvidia.com/mig-1g.18gb": 1},
            )
        )
        c.api.create(pdb("serve", "ml", match_labels={"app": "serve"}, min_available=1))
        (out,) = c.applier(drain=True).run(plan()).outcomes
        assert out.result == "failed"
        assert "drain timed out" in out.reason
        node = c.node()
        assert not node["spec"].get("unschedulable")
        assert node["metadata"]["labels"][CONFIG_LABEL] == "all-balanced"
        assert len(c.api.list("v1", "Pod", namespace="ml")) == 1
        assert ("Warning", "MigscopeRolledBack") in _events(c.api, "gpu-a")


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (Knobs(fail=True), "MIG Manager reported failed"),
        (Knobs(stuck_pending=True), "stuck pending"),
        (Knobs(reboot=True, reboot_outcome="failed"), "rebooting -> failed"),
    ],
    ids=["failed", "stuck-pending", "reboot-failed"],
)
def test_mig_manager_failures_restore_the_label(knobs: Knobs, message: str) -> None:
    with running_cluster(knobs={"gpu-a": knobs}) as c:
        (out,) = c.applier(node_timeout_s=1.5).run(plan()).outcomes
        assert out.result == "failed"
        assert message in out.reason
        node = c.node()
        assert node["metadata"]["labels"][CONFIG_LABEL] == "all-balanced"
        assert not node["spec"].get("unschedulable")
        progress = read_progress(node)
        assert progress is not None
        assert progress.step.value == "failed"


def test_a_reboot_that_succeeds_is_waited_for() -> None:
    with running_cluster(knobs={"gpu-a": Knobs(reboot=True, reboot_seconds=0.3)}) as c:
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert "rebooting" in c.mig.states("gpu-a")


def test_cluster_policy_reading_another_configmap_stops_with_the_patch() -> None:
    with running_cluster(policy_config=None) as c:
        report = c.applier().run(plan())
        (out,) = report.outcomes
        assert out.result == "skipped"
        assert "does not read configmap" in out.reason
        (note,) = report.notes
        assert "kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge" in note
        assert CONFIGMAP in note
        assert c.labels()[CONFIG_LABEL] == "all-balanced"


def test_limits_and_max_nodes() -> None:
    with running_cluster() as c:
        report = c.applier(max_nodes=1).run(plan("gpu-a", "gpu-b"))
        assert [o.result for o in report.outcomes] == ["applied", "skipped"]
        assert "--max-nodes 1" in report.outcomes[1].reason
        # gpu-a changed today: a second change within 24 h is refused.
        report = c.applier(max_nodes=5).run(plan("gpu-b"))
        assert report.outcomes[0].result == "applied"
        report = c.applier(max_changes_per_day=2).run(
            plan("gpu-a")
        )  # gpu-a is already at the target: unchanged regardless
        assert report.outcomes[0].result == "unchanged"


def test_a_second_applier_is_refused_while_the_first_holds_the_lease() -> None:
    with running_cluster() as c:
        first = Lease(c.kube, namespace=NAMESPACE, identity="first", duration_s=60)
        first.acquire()
        try:
            with pytest.raises(LeaseHeld, match=r"another applier holds lease .*\(first"):
                c.applier().run(plan())
            assert c.labels()[CONFIG_LABEL] == "all-balanced"
        finally:
            first.release()
        (out,) = c.applier().run(plan()).outcomes  # released: the next one may act
        assert out.result == "applied"


def test_allocatable_is_what_the_plan_says() -> None:
    with running_cluster() as c:
        c.applier().run(plan())
        want = resources([BALANCED, TWO_3G])
        alloc = c.node()["status"]["allocatable"]
        assert {
            k: v for k, v in alloc.items() if k.startswith("nvidia.com/mig-") and v != "0"
        } == want
        assert STATE_ANNOTATION in c.node()["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("resource", "labels"),
    [
        # The device plugin's time-slicing (and MPS) name for a replica of a MIG device.
        ("nvidia.com/mig-2g.35gb.shared", {}),
        # The single strategy: every MIG device is advertised as nvidia.com/gpu.
        ("nvidia.com/gpu", {"nvidia.com/mig.strategy": "single"}),
        ("nvidia.com/gpu.shared", {"nvidia.com/mig.strategy": "single"}),
        # A resource renamed in the plugin's sharing config: any device at all.
        ("nvidia.com/team-a-slice", {}),
    ],
)
def test_every_name_the_device_plugin_gives_a_mig_device_is_at_risk(
    resource: str, labels: dict[str, str]
) -> None:
    """Issue 20, item 1: a time-sliced pod's slice was re-created under it ("applied", rc 0)."""
    with running_cluster() as c:
        if labels:
            c.api.patch("v1", "Node", "gpu-a", {"metadata": {"labels": labels}})
        c.api.create(
            pod(
                "shared",
                "ml",
                node_name="gpu-a",
                requests={resource: 1},
                annotations={GPU_ANNOTATION: "1"},  # the sim: it holds a device of GPU 1
            )
        )
        (out,) = c.applier().run(plan()).outcomes
        assert out.result == "skipped", out.reason
        assert "ml/shared" in out.reason
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        assert c.mig.recreated == []
        (dry,) = c.applier(apply=False).run(plan()).outcomes
        assert dry.result == "skipped"
        assert "ml/shared" in dry.reason


def test_the_mig_manager_sim_sees_a_time_sliced_pod_as_holding_its_gpu() -> None:
    """The sim had the applier's blind spot: a ``.shared`` pod did not hold its device."""
    with running_cluster() as c:
        c.api.create(
            pod("shared", "ml", node_name="gpu-a", requests={"nvidia.com/mig-2g.35gb.shared": 1})
        )
        c.api.patch("v1", "Node", "gpu-a", {"metadata": {"labels": {CONFIG_LABEL: "team-special"}}})
        c.mig.wait_for_state("gpu-a", "failed")
        assert [r.holders for r in c.mig.refused_in_use] == [("ml/shared",)]
