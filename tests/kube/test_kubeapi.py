"""The API test server, driven only through the official kubernetes client over HTTP.

Each test pins one behaviour of kube-apiserver that the applier relies on (status codes,
Status bodies, resourceVersion rules, patch formats, selectors, watch, eviction, faults), so
that a regression in the fake shows up here rather than as a confusing applier failure.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import kubernetes.client
import pytest
import urllib3
from kubernetes import watch
from kubernetes.client import ApiException
from support.kubeapi import (
    Delay,
    Drop,
    EndWatch,
    ExpireWatch,
    Faults,
    KubeApiServer,
    Respond,
    config_map,
    lease,
    node,
    pdb,
    pod,
)


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def labels_of(core: kubernetes.client.CoreV1Api, name: str) -> dict[str, str]:
    return dict(core.read_node(name).metadata.labels or {})


# ------------------------------------------------------------------------------------ CRUD
def test_create_sets_server_fields_and_get_returns_them(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    before = api.resource_version
    created = core.create_node({"metadata": {"name": "gpu-a", "labels": {"pool": "a"}}})
    assert created.metadata.resource_version == str(before + 1)
    assert created.metadata.generation == 1
    assert len(created.metadata.uid) == 36
    assert created.metadata.creation_timestamp is not None
    assert created.kind == "Node"
    fetched = core.read_node("gpu-a")
    assert fetched.metadata.uid == created.metadata.uid
    assert fetched.metadata.resource_version == created.metadata.resource_version
    assert api.requests[0][:2] == ("POST", "/api/v1/nodes")


def test_missing_object_is_a_404_status(core: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.read_node("nope")
    assert err.value.status == 404
    assert status_of(err.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "nodes"},
        "code": 404,
    }


def test_not_found_names_the_group_of_grouped_resources(api: KubeApiServer) -> None:
    leases = kubernetes.client.CoordinationV1Api(api.client())
    with pytest.raises(ApiException) as err:
        leases.read_namespaced_lease("migscope", "kube-system")
    status = status_of(err.value)
    assert status["message"] == 'leases.coordination.k8s.io "migscope" not found'
    assert status["details"] == {
        "name": "migscope",
        "group": "coordination.k8s.io",
        "kind": "leases",
    }


def test_create_twice_is_409_already_exists(core: kubernetes.client.CoreV1Api) -> None:
    core.create_node({"metadata": {"name": "gpu-a"}})
    with pytest.raises(ApiException) as err:
        core.create_node({"metadata": {"name": "gpu-a"}})
    assert err.value.status == 409
    status = status_of(err.value)
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'nodes "gpu-a" already exists'


def test_generate_name_namespace_and_pod_status_reset(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    body = pod("ignored", "ml", phase="Running")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "train-"
    created = core.create_namespaced_pod("ml", body)
    name = created.metadata.name
    assert name.startswith("train-")
    assert len(name) == len("train-") + 5
    assert created.metadata.namespace == "ml"
    assert created.status.phase == "Pending"  # the create strategy resets pod status
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("other", {"metadata": {"name": "x", "namespace": "ml"}})
    assert err.value.status == 400
    assert "does not match the namespace" in status_of(err.value)["message"]


def test_invalid_label_value_is_422_with_upstream_message(
    core: kubernetes.client.CoreV1Api,
) -> None:
    core.create_node({"metadata": {"name": "gpu-a"}})
    with pytest.raises(ApiException) as err:
        core.patch_node("gpu-a", {"metadata": {"labels": {"nvidia.com/mig.config": "a b"}}})
    status = status_of(err.value)
    assert err.value.status == 422
    assert status["reason"] == "Invalid"
    assert status["message"].startswith(
        'Node "gpu-a" is invalid: metadata.labels: Invalid value: "a b": a valid label must be '
        "an empty string or consist of alphanumeric characters"
    )
    assert status["details"]["causes"][0]["field"] == "metadata.labels"


def test_replace_with_stale_resource_version_conflicts(
    core: kubernetes.client.CoreV1Api,
) -> None:
    core.create_node({"metadata": {"name": "gpu-a"}})
    stale = core.read_node("gpu-a")
    core.patch_node("gpu-a", {"metadata": {"labels": {"touched": "yes"}}})
    stale.metadata.labels = {"mine": "yes"}
    with pytest.raises(ApiException) as err:
        core.replace_node("gpu-a", stale)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    assert status_of(err.value)["message"] == (
        'Operation cannot be fulfilled on nodes "gpu-a": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )
    fresh = core.read_node("gpu-a")
    fresh.metadata.labels = {"mine": "yes"}
    replaced = core.replace_node("gpu-a", fresh)
    assert replaced.metadata.labels == {"mine": "yes"}
    assert int(replaced.metadata.resource_version) == int(fresh.metadata.resource_version) + 1


def test_delete_with_preconditions(api: KubeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    created = core.create_node({"metadata": {"name": "gpu-a"}})
    core.patch_node("gpu-a", {"metadata": {"labels": {"x": "1"}}})
    stale = kubernetes.client.V1DeleteOptions(
        preconditions=kubernetes.client.V1Preconditions(
            resource_version=created.metadata.resource_version
        )
    )
    with pytest.raises(ApiException) as err:
        core.delete_node("gpu-a", body=stale)
    assert err.value.status == 409
    assert status_of(err.value)["message"] == (
        'Operation cannot be fulfilled on nodes "gpu-a": StorageError: invalid object, Code: 4, '
        "Key: /registry/minions/gpu-a, ResourceVersion: 0, AdditionalErrorMsg: Precondition "
        f"failed: ResourceVersion in precondition: {created.metadata.resource_version}, "
        f"ResourceVersion in object meta: {int(created.metadata.resource_version) + 1}"
    )
    done = core.delete_node("gpu-a")  # typed as `object`: the client hands back the dict
    assert done["status"] == "Success"
    assert done["details"] == {"name": "gpu-a", "kind": "nodes", "uid": created.metadata.uid}
    with pytest.raises(ApiException) as gone:
        core.read_node("gpu-a")
    assert gone.value.status == 404


def test_deleting_a_pod_answers_with_the_pod(core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespaced_pod("ml", pod("train-0", "ml"))
    deleted = core.delete_namespaced_pod("train-0", "ml")
    assert deleted.metadata.name == "train-0"
    assert core.list_namespaced_pod("ml").items == []


def test_unchanged_write_keeps_the_resource_version(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    core.create_node({"metadata": {"name": "gpu-a"}})
    first = core.patch_node("gpu-a", {"metadata": {"labels": {"nvidia.com/mig.config": "a"}}})
    second = core.patch_node("gpu-a", {"metadata": {"labels": {"nvidia.com/mig.config": "a"}}})
    assert second.metadata.resource_version == first.metadata.resource_version
    assert api.resource_version == int(first.metadata.resource_version)


def test_generation_follows_spec_changes_only(core: kubernetes.client.CoreV1Api) -> None:
    core.create_node({"metadata": {"name": "gpu-a"}})
    labelled = core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}})
    assert labelled.metadata.generation == 1
    cordoned = core.patch_node("gpu-a", {"spec": {"unschedulable": True}})
    assert cordoned.metadata.generation == 2
    assert cordoned.spec.unschedulable is True


def test_status_subresource_is_separate(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a", allocatable={"nvidia.com/gpu": 1}))
    core.patch_node("gpu-a", {"status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert core.read_node("gpu-a").status.allocatable["nvidia.com/gpu"] == "1"
    core.patch_node_status("gpu-a", {"status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert core.read_node_status("gpu-a").status.allocatable["nvidia.com/gpu"] == "8"
    current = core.read_node("gpu-a")
    current.status.allocatable = {"nvidia.com/gpu": "0"}
    current.metadata.labels = {"after": "replace"}
    replaced = core.replace_node("gpu-a", current)
    assert replaced.metadata.labels == {"after": "replace"}
    assert replaced.status.allocatable["nvidia.com/gpu"] == "8"


def test_dry_run_stores_nothing(api: KubeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    before = api.resource_version
    created = core.create_node({"metadata": {"name": "gpu-a"}}, dry_run="All")
    assert created.metadata.name == "gpu-a"
    assert api.resource_version == before
    assert core.list_node().items == []


# ----------------------------------------------------------------------------------- patches
def test_content_types_the_official_client_sends(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    core.create_node({"metadata": {"name": "gpu-a"}})
    core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}})
    core.patch_node("gpu-a", [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    core.patch_node(
        "gpu-a",
        {"metadata": {"labels": {"c": "3"}}},
        _content_type="application/merge-patch+json",
    )
    custom = kubernetes.client.CustomObjectsApi(api.client())
    custom.create_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cp"}},
    )
    custom.patch_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", "cp", {"spec": {"migManager": {"enabled": True}}}
    )
    patches = [(r.path, r.content_type) for r in api.requests if r.method == "PATCH"]
    assert patches == [
        ("/api/v1/nodes/gpu-a", "application/strategic-merge-patch+json"),
        ("/api/v1/nodes/gpu-a", "application/json-patch+json"),
        ("/api/v1/nodes/gpu-a", "application/merge-patch+json"),
        ("/apis/nvidia.com/v1/clusterpolicies/cp", "application/merge-patch+json"),
    ]
    assert labels_of(core, "gpu-a") == {"a": "1", "b": "2", "c": "3"}


@pytest.mark.parametrize(
    "content_type",
    ["application/merge-patch+json", "application/strategic-merge-patch+json"],
)
def test_null_deletes_labels_and_annotations(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api, content_type: str
) -> None:
    api.create(node("gpu-a", labels={"keep": "1", "drop": "2"}, annotations={"x": "1", "y": "2"}))
    patched = core.patch_node(
        "gpu-a",
        {"metadata": {"labels": {"drop": None, "new": "3"}, "annotations": {"x": None}}},
        _content_type=content_type,
    )
    assert patched.metadata.labels == {"kubernetes.io/hostname": "gpu-a", "keep": "1", "new": "3"}
    assert patched.metadata.annotations == {"y": "2"}


def test_strategic_merge_replaces_taints_and_merges_conditions(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a", taints=[{"key": "a", "effect": "NoSchedule"}]))
    taint = {"key": "migscope.io/reconfiguring", "effect": "NoSchedule"}
    patched = core.patch_node("gpu-a", {"spec": {"taints": [taint]}})
    assert [t.key for t in patched.spec.taints] == ["migscope.io/reconfiguring"]
    pressure = {"type": "MemoryPressure", "status": "False"}
    core.patch_node_status("gpu-a", {"status": {"conditions": [pressure]}})
    ready_false = {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}
    status = core.patch_node_status("gpu-a", {"status": {"conditions": [ready_false]}}).status
    assert [(c.type, c.status) for c in status.conditions] == [
        ("Ready", "False"),
        ("MemoryPressure", "False"),
    ]


def test_json_patch_test_operation_failure_is_422(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a", labels={"nvidia.com/mig.config": "all-disabled"}))
    ops = [
        {"op": "test", "path": "/metadata/labels/nvidia.com~1mig.config", "value": "other"},
        {"op": "replace", "path": "/metadata/labels/nvidia.com~1mig.config", "value": "x"},
    ]
    with pytest.raises(ApiException) as err:
        core.patch_node("gpu-a", ops)
    assert err.value.status == 422
    status = status_of(err.value)
    assert status["reason"] == "Invalid"
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert labels_of(core, "gpu-a")["nvidia.com/mig.config"] == "all-disabled"
    ops[0]["value"] = "all-disabled"
    assert core.patch_node("gpu-a", ops).metadata.labels["nvidia.com/mig.config"] == "x"


@pytest.mark.parametrize(
    "content_type",
    ["application/merge-patch+json", "application/strategic-merge-patch+json"],
)
def test_patch_with_stale_resource_version_conflicts(
    core: kubernetes.client.CoreV1Api, content_type: str
) -> None:
    created = core.create_node({"metadata": {"name": "gpu-a"}})
    rv = created.metadata.resource_version
    core.patch_node("gpu-a", {"metadata": {"labels": {"other": "writer"}}})
    with pytest.raises(ApiException) as err:
        core.patch_node(
            "gpu-a",
            {"metadata": {"resourceVersion": rv, "labels": {"mine": "1"}}},
            _content_type=content_type,
        )
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    current = core.read_node("gpu-a").metadata.resource_version
    patched = core.patch_node(
        "gpu-a",
        {"metadata": {"resourceVersion": current, "labels": {"mine": "1"}}},
        _content_type=content_type,
    )
    assert patched.metadata.labels == {"other": "writer", "mine": "1"}


def test_strategic_merge_of_a_custom_resource_is_415(api: KubeApiServer) -> None:
    custom = kubernetes.client.CustomObjectsApi(api.client())
    custom.create_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cp"}},
    )
    with pytest.raises(ApiException) as err:
        custom.patch_cluster_custom_object(
            "nvidia.com",
            "v1",
            "clusterpolicies",
            "cp",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415
    assert status_of(err.value)["reason"] == "UnsupportedMediaType"


def test_cluster_policy_custom_object_lifecycle(api: KubeApiServer) -> None:
    custom = kubernetes.client.CustomObjectsApi(api.client())
    body = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"mig": {"strategy": "single"}, "migManager": {"config": {"name": "default"}}},
        "status": {"state": "ready"},
    }
    created = custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", body)
    assert "status" not in created  # status subresource: dropped on create
    patched = custom.patch_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        "cluster-policy",
        {"spec": {"mig": {"strategy": "mixed"}, "migManager": {"config": {"name": "custom"}}}},
    )
    assert patched["spec"]["mig"] == {"strategy": "mixed"}
    assert patched["metadata"]["generation"] == 2
    listed = custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["cluster-policy"]
    assert listed["items"][0]["kind"] == "ClusterPolicy"
    deleted = custom.delete_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", "cluster-policy"
    )
    assert deleted["metadata"]["name"] == "cluster-policy"


# --------------------------------------------------------------------------------- selectors
@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("pool=a", ["n1", "n2"]),
        ("pool==a,gpu=h200", ["n1"]),
        ("pool!=a", ["n3", "n4"]),  # != also matches nodes without the key
        ("pool in (a, b)", ["n1", "n2", "n3"]),
        ("pool notin (a)", ["n3", "n4"]),
        ("gpu", ["n1", "n3"]),
        ("!gpu", ["n2", "n4"]),
        ("slices>3", ["n1"]),
        ("", ["n1", "n2", "n3", "n4"]),
    ],
)
def test_label_selectors(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api, selector: str, names: list[str]
) -> None:
    api.create(node("n1", labels={"pool": "a", "gpu": "h200", "slices": "7"}))
    api.create(node("n2", labels={"pool": "a", "slices": "3"}))
    api.create(node("n3", labels={"pool": "b", "gpu": "a100"}))
    api.create(node("n4"))
    found = core.list_node(label_selector=selector).items
    assert [n.metadata.name for n in found] == names


def test_malformed_label_selector_is_400(core: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.list_node(label_selector="pool in a")
    assert err.value.status == 400
    assert status_of(err.value)["reason"] == "BadRequest"


def test_field_selectors_across_namespaces(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(pod("wait-a", "team-a", phase="Pending"))
    api.create(pod("run-a", "team-a", node_name="gpu-1"))
    api.create(pod("wait-b", "team-b", phase="Pending"))
    api.create(pod("done-b", "team-b", node_name="gpu-1", phase="Succeeded"))

    def names(**kwargs: Any) -> list[str]:
        found = core.list_pod_for_all_namespaces(**kwargs).items
        return [f"{p.metadata.namespace}/{p.metadata.name}" for p in found]

    assert names(field_selector="status.phase=Pending") == ["team-a/wait-a", "team-b/wait-b"]
    assert names(field_selector="spec.nodeName=gpu-1,status.phase!=Succeeded") == ["team-a/run-a"]
    assert names(field_selector="spec.nodeName=") == ["team-a/wait-a", "team-b/wait-b"]
    assert names(field_selector="metadata.namespace==team-b") == [
        "team-b/done-b",
        "team-b/wait-b",
    ]
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(field_selector="spec.gpu=1")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == "field label not supported: spec.gpu"


def test_list_carries_resource_version_and_paginates(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    for name in ("n1", "n2", "n3"):
        api.create(node(name))
    first = core.list_node(limit=2)
    assert [n.metadata.name for n in first.items] == ["n1", "n2"]
    assert first.metadata.resource_version == str(api.resource_version)
    assert first.metadata.remaining_item_count == 1
    rest = core.list_node(limit=2, _continue=first.metadata._continue)
    assert [n.metadata.name for n in rest.items] == ["n3"]
    assert rest.metadata._continue is None


# ------------------------------------------------------------------------------------- watch
def until_bookmark(api: KubeApiServer, func: Any, count: int, **kwargs: Any) -> list[Any]:
    """Watch until ``count`` events arrived, then ask for a bookmark and stop at it.

    Everything written before the watch started is delivered before that bookmark, so the
    returned events are exactly what the watch saw, without waiting for a timeout.
    """
    stream = watch.Watch().stream(func, allow_watch_bookmarks=True, **kwargs)
    events: list[Any] = []
    try:
        for event in stream:
            if event["type"] == "BOOKMARK":
                break
            events.append(event)
            if len(events) == count:
                api.bookmark()
    finally:
        stream.close()
    return events


def collect(stream: Any, count: int, events: list[dict[str, Any]], done: threading.Event) -> None:
    for event in stream:
        events.append(event)
        if len(events) >= count:
            break
    done.set()


def test_watch_resumes_after_a_resource_version(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    listed = core.list_node()
    core.patch_node("gpu-a", {"metadata": {"labels": {"step": "1"}}})
    core.create_node({"metadata": {"name": "gpu-b"}})
    core.delete_node("gpu-b")
    events = until_bookmark(
        api, core.list_node, 3, resource_version=listed.metadata.resource_version
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("MODIFIED", "gpu-a"),
        ("ADDED", "gpu-b"),
        ("DELETED", "gpu-b"),
    ]
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    assert rvs == sorted(rvs)
    assert rvs[-1] == api.resource_version


def test_watch_without_resource_version_starts_with_the_current_state(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    api.create(node("gpu-b"))
    events = until_bookmark(api, core.list_node, 2)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "gpu-a"),
        ("ADDED", "gpu-b"),
    ]


def test_watch_bookmarks_carry_only_a_resource_version(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    rv = core.list_node().metadata.resource_version
    w = watch.Watch()
    events: list[dict[str, Any]] = []
    done = threading.Event()
    stream = w.stream(
        core.list_node, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=5
    )
    reader = threading.Thread(target=collect, args=(stream, 2, events, done))
    reader.start()
    time.sleep(0.2)
    core.patch_node("gpu-a", {"metadata": {"labels": {"x": "1"}}})
    time.sleep(0.2)
    api.bookmark()
    assert done.wait(5)
    reader.join()
    assert [e["type"] for e in events] == ["MODIFIED", "BOOKMARK"]
    assert events[1]["raw_object"] == {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(api.resource_version)},
    }
    assert w.resource_version == str(api.resource_version)


def test_periodic_bookmarks_and_initial_events_end() -> None:
    with KubeApiServer(bookmark_interval=0.1) as api:
        api.create(node("gpu-a"))
        core = kubernetes.client.CoreV1Api(api.client())
        stream = watch.Watch().stream(
            core.list_node,
            allow_watch_bookmarks=True,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            resource_version="",
        )
        events = []
        try:
            for event in stream:
                events.append(event)
                if len(events) == 3:
                    break
        finally:
            stream.close()
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "BOOKMARK"]
    assert events[1]["raw_object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"
    }
    assert "annotations" not in events[2]["raw_object"]["metadata"]


def test_watch_is_a_chunked_stream_of_json_lines(api: KubeApiServer) -> None:
    api.create(node("gpu-a"))
    api.faults.add(EndWatch(after_events=1), times=1)
    with urllib3.PoolManager() as http:
        response = http.request("GET", f"{api.url}/api/v1/nodes?watch=1", preload_content=False)
        assert response.headers["Transfer-Encoding"] == "chunked"
        chunks = list(response.stream(amt=None))
        response.release_conn()
    assert len(chunks) == 1
    assert chunks[0].endswith(b"\n")
    event = json.loads(chunks[0])
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "gpu-a")


def test_watch_from_a_compacted_resource_version_gets_410(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    old = core.list_node().metadata.resource_version
    core.patch_node("gpu-a", {"metadata": {"labels": {"x": "1"}}})
    api.compact()
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_node, resource_version=old):
            pass
    assert err.value.status == 410
    assert err.value.reason == f"Expired: too old resource version: {old} ({api.resource_version})"
    watches = [r for r in api.requests if r.query.get("watch") == "true"]
    assert len(watches) == 2  # the client retries a 410 once, from the same version


def test_watch_with_timeout_seconds_ends_quietly(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    rv = core.list_node().metadata.resource_version
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=1))
    elapsed = time.monotonic() - started
    assert events == []
    assert 0.9 <= elapsed < 3.0
    assert [r.query.get("timeoutSeconds") for r in api.requests if r.query.get("watch")] == ["1"]


def test_watch_sees_objects_leave_and_enter_its_selection(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a", labels={"pool": "a"}))
    rv = core.list_node().metadata.resource_version
    core.patch_node("gpu-a", {"metadata": {"labels": {"pool": "b"}}})
    core.patch_node("gpu-a", {"metadata": {"labels": {"other": "x"}}})
    core.patch_node("gpu-a", {"metadata": {"labels": {"pool": "a"}}})
    events = until_bookmark(api, core.list_node, 2, label_selector="pool=a", resource_version=rv)
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]
    assert events[0]["object"].metadata.labels["pool"] == "b"


def test_watch_across_namespaces_with_field_selector(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    api.create(pod("a", "team-a", phase="Pending"))
    api.create(pod("b", "team-b", node_name="gpu-1"))
    api.create(pod("c", "team-c", phase="Pending"))
    events = until_bookmark(
        api,
        core.list_pod_for_all_namespaces,
        2,
        field_selector="status.phase=Pending",
        resource_version=rv,
    )
    assert [e["object"].metadata.name for e in events] == ["a", "c"]


def test_concurrent_writers_and_a_watcher(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    rv = core.list_node().metadata.resource_version
    events: list[dict[str, Any]] = []
    done = threading.Event()
    stream = watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=10)
    reader = threading.Thread(target=collect, args=(stream, 80, events, done))
    reader.start()

    def writer(index: int) -> None:
        mine = kubernetes.client.CoreV1Api(api.client())
        for step in range(10):
            mine.patch_node("gpu-a", {"metadata": {"labels": {f"w{index}": str(step)}}})

    writers = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    assert done.wait(10)
    reader.join()
    assert api.resource_version == int(rv) + 80
    assert labels_of(core, "gpu-a") == {
        "kubernetes.io/hostname": "gpu-a",
        **{f"w{i}": "9" for i in range(8)},
    }
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    assert rvs == list(range(int(rv) + 1, int(rv) + 81))


# ---------------------------------------------------------------------------------- eviction
def evict(core: kubernetes.client.CoreV1Api, name: str, namespace: str = "ml") -> Any:
    body = kubernetes.client.V1Eviction(
        metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=namespace)
    )
    return core.create_namespaced_pod_eviction(name, namespace, body)


def seed_pods(api: KubeApiServer, count: int, *, ready: int | None = None) -> None:
    for i in range(count):
        is_ready = ready is None or i < ready
        api.create(pod(f"w-{i}", "ml", labels={"app": "infer"}, ready=is_ready))


def test_eviction_without_a_budget_deletes_the_pod(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    seed_pods(api, 1)
    evict(core, "w-0")
    assert core.list_namespaced_pod("ml").items == []
    evictions = [r for r in api.requests if r.path.endswith("/eviction")]
    # The client sends V1Eviction as built: no apiVersion/kind unless the caller sets them.
    assert evictions[0].body == {"metadata": {"name": "w-0", "namespace": "ml"}}


def test_eviction_refused_by_min_available_is_429(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    seed_pods(api, 2)
    api.create(pdb("infer", "ml", match_labels={"app": "infer"}, min_available=2))
    with pytest.raises(ApiException) as err:
        evict(core, "w-0")
    assert err.value.status == 429
    status = status_of(err.value)
    assert status["reason"] == "TooManyRequests"
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget infer needs 2 healthy pods and has 2 currently",
        }
    ]
    assert len(core.list_namespaced_pod("ml").items) == 2
    budget = api.get("policy/v1", "PodDisruptionBudget", "infer", "ml")["status"]
    assert (budget["currentHealthy"], budget["desiredHealthy"]) == (2, 2)
    assert budget["disruptionsAllowed"] == 0


def test_eviction_spends_max_unavailable_then_refuses(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    seed_pods(api, 3)
    api.create(pdb("infer", "ml", match_labels={"app": "infer"}, max_unavailable=1))
    rv = core.list_namespaced_pod("ml").metadata.resource_version
    evict(core, "w-0")
    with pytest.raises(ApiException) as err:
        evict(core, "w-1")
    assert err.value.status == 429
    assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == ["w-1", "w-2"]
    events = until_bookmark(api, core.list_namespaced_pod, 1, namespace="ml", resource_version=rv)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("DELETED", "w-0")]


@pytest.mark.parametrize(
    ("pods", "spec", "allowed"),
    [
        (4, {"min_available": "50%"}, 2),
        (3, {"min_available": "50%"}, 1),  # 1.5 rounds up to 2 pods that must stay
        (3, {"max_unavailable": "30%"}, 1),  # 0.9 rounds up to 1 disruption
        (4, {"max_unavailable": "50%"}, 2),
        (3, {"min_available": 0}, 3),
    ],
)
def test_eviction_with_percentages(
    api: KubeApiServer,
    core: kubernetes.client.CoreV1Api,
    pods: int,
    spec: dict[str, Any],
    allowed: int,
) -> None:
    seed_pods(api, pods)
    api.create(pdb("infer", "ml", match_labels={"app": "infer"}, **spec))
    codes = []
    for i in range(pods):
        try:
            evict(core, f"w-{i}")
            codes.append(201)
        except ApiException as exc:
            codes.append(exc.status)
    assert codes == [201] * allowed + [429] * (pods - allowed)
    assert len(core.list_namespaced_pod("ml").items) == pods - allowed


def test_eviction_of_unready_and_pending_pods(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    seed_pods(api, 3, ready=2)
    api.create(pod("starting", "ml", labels={"app": "infer"}, phase="Pending"))
    api.create(pdb("infer", "ml", match_labels={"app": "infer"}, min_available=2))
    evict(core, "starting")  # Pending: no budget check
    evict(core, "w-2")  # unready, and the 2 ready pods still meet the budget
    with pytest.raises(ApiException) as err:
        evict(core, "w-0")
    assert err.value.status == 429
    assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == ["w-0", "w-1"]


def test_eviction_errors(api: KubeApiServer, core: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        evict(core, "ghost")
    assert missing.value.status == 404
    assert status_of(missing.value)["message"] == 'pods "ghost" not found'
    seed_pods(api, 2)
    api.create(pdb("one", "ml", match_labels={"app": "infer"}, max_unavailable=1))
    api.create(pdb("two", "ml", match_labels={"app": "infer"}, max_unavailable=1))
    with pytest.raises(ApiException) as several:
        evict(core, "w-0")
    assert several.value.status == 500
    assert status_of(several.value)["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )


# ------------------------------------------------------------------------------------ leases
def test_lease_acquisition_race_has_one_winner(api: KubeApiServer) -> None:
    api.create(lease("migscope-applier", "migscope"))
    barrier = threading.Barrier(2)
    outcomes: dict[str, int] = {}

    def acquire(identity: str) -> None:
        leases = kubernetes.client.CoordinationV1Api(api.client())
        current = leases.read_namespaced_lease("migscope-applier", "migscope")
        barrier.wait()
        current.spec.holder_identity = identity
        try:
            leases.replace_namespaced_lease("migscope-applier", "migscope", current)
            outcomes[identity] = 200
        except ApiException as exc:
            outcomes[identity] = exc.status

    threads = [threading.Thread(target=acquire, args=(who,)) for who in ("alpha", "beta")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes.values()) == [200, 409]
    winner = next(who for who, code in outcomes.items() if code == 200)
    held = api.get("coordination.k8s.io/v1", "Lease", "migscope-applier", "migscope")
    assert held["spec"]["holderIdentity"] == winner


def test_put_creates_a_lease_but_not_a_node(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    leases = kubernetes.client.CoordinationV1Api(api.client())
    body = lease("migscope-applier", "migscope", holder="alpha")
    # *_with_http_info answers the legacy (data, status, headers) tuple.
    data, status, _ = leases.replace_namespaced_lease_with_http_info(
        "migscope-applier", "migscope", body
    )
    assert status == 201
    assert data.spec.holder_identity == "alpha"
    with pytest.raises(ApiException) as err:
        core.replace_node("gpu-a", node("gpu-a"))
    assert err.value.status == 404


def test_lease_creation_race_has_one_winner(api: KubeApiServer) -> None:
    barrier = threading.Barrier(4)
    codes: list[int] = []
    lock = threading.Lock()

    def create(identity: str) -> None:
        leases = kubernetes.client.CoordinationV1Api(api.client())
        body = lease("migscope-applier", "migscope", holder=identity)
        barrier.wait()
        try:
            leases.create_namespaced_lease("migscope", body)
            code = 201
        except ApiException as exc:
            code = exc.status
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=create, args=(f"p{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [201, 409, 409, 409]


# ------------------------------------------------------------------------------------ events
def test_core_and_events_k8s_io_events(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    core.create_namespaced_event(
        "migscope",
        {
            "metadata": {"generateName": "gpu-a."},
            "involvedObject": {"kind": "Node", "name": "gpu-a"},
            "reason": "MigReconfigured",
            "message": "all-balanced applied",
            "type": "Normal",
        },
    )
    found = core.list_namespaced_event("migscope", field_selector="involvedObject.name=gpu-a")
    assert [e.reason for e in found.items] == ["MigReconfigured"]
    events_v1 = kubernetes.client.EventsV1Api(api.client())
    events_v1.create_namespaced_event(
        "migscope",
        {
            "metadata": {"name": "gpu-a.1"},
            "eventTime": "2025-01-01T00:00:00.000000Z",
            "regarding": {"kind": "Node", "name": "gpu-a"},
            "reason": "MigReconfigured",
            "action": "Reconfigure",
            "reportingController": "migscope.io/applier",
            "reportingInstance": "applier-0",
            "type": "Normal",
        },
    )
    listed = events_v1.list_namespaced_event("migscope", field_selector="regarding.name=gpu-a")
    assert [e.metadata.name for e in listed.items] == ["gpu-a.1"]


# ------------------------------------------------------------------------------------ faults
def test_fault_fails_n_times_then_lets_requests_through(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    rule = api.faults.add(Respond(500), method="GET", path=r"^/api/v1/nodes/gpu-a$", times=2)
    codes = []
    for _ in range(3):
        try:
            core.read_node("gpu-a")
            codes.append(200)
        except ApiException as exc:
            codes.append(exc.status)
    assert codes == [500, 500, 200]
    assert rule.hits == 2
    assert core.list_node().items[0].metadata.name == "gpu-a"  # other paths untouched


def test_fault_conflict_and_throttling_bodies(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    api.faults.add(Respond(409), method="PATCH", times=1)
    api.faults.add(Respond(429, retry_after=7), method="PATCH", times=1)
    with pytest.raises(ApiException) as conflict:
        core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}})
    assert status_of(conflict.value)["reason"] == "Conflict"
    with pytest.raises(ApiException) as throttled:
        core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}})
    assert throttled.value.status == 429
    assert throttled.value.headers["Retry-After"] == "7"
    assert status_of(throttled.value)["details"] == {"retryAfterSeconds": 7}
    assert core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}}).metadata.labels["a"]


def test_urllib3_retries_get_on_503_with_retry_after(api: KubeApiServer) -> None:
    # The official client keeps urllib3's default Retry(3): a GET answered 503 with
    # Retry-After is retried after sleeping, invisibly to the caller. Retry-After: 0 keeps
    # this test fast.
    api.create(node("gpu-a"))
    api.faults.add(Respond(503, retry_after=0, body={"kind": "Status"}), method="GET", times=1)
    core = kubernetes.client.CoreV1Api(api.client())
    assert core.read_node("gpu-a").metadata.name == "gpu-a"
    assert [r.method for r in api.requests if r.path == "/api/v1/nodes/gpu-a"] == ["GET", "GET"]


def test_delay_drives_a_client_read_timeout(
    api: KubeApiServer,
) -> None:
    api.create(node("gpu-a"))
    api.faults.add(Delay(1.0), method="GET", path="/nodes/gpu-a$", times=1)
    core = kubernetes.client.CoreV1Api(api.client(retries=False))
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.read_node("gpu-a", _request_timeout=0.2)
    assert time.monotonic() - started < 0.9
    assert core.read_node("gpu-a", _request_timeout=2).metadata.name == "gpu-a"


def test_dropped_connection_is_retried_for_get_but_not_for_patch(api: KubeApiServer) -> None:
    api.create(node("gpu-a"))
    core = kubernetes.client.CoreV1Api(api.client())
    api.faults.add(Drop(), method="GET", times=1)
    assert core.read_node("gpu-a").metadata.name == "gpu-a"  # urllib3 retried it
    api.faults.add(Drop(), method="PATCH", times=1)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}})
    assert "a" not in labels_of(core, "gpu-a")


def test_ended_watch_is_resumed_by_the_client_from_its_last_version(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("gpu-a"))
    rv = core.list_node().metadata.resource_version
    for step in range(3):
        core.patch_node("gpu-a", {"metadata": {"labels": {"step": str(step)}}})
    api.faults.add(EndWatch(after_events=1), times=1)
    api.faults.add(ExpireWatch(after_events=1), times=1)
    events: list[dict[str, Any]] = []
    done = threading.Event()
    stream = watch.Watch().stream(core.list_node, resource_version=rv)
    collect(stream, 3, events, done)
    assert [e["object"].metadata.labels["step"] for e in events] == ["0", "1", "2"]
    watches = [r.query["resourceVersion"] for r in api.requests if r.query.get("watch")]
    assert watches == [rv, str(int(rv) + 1), str(int(rv) + 2)]


def test_fault_probability_is_deterministic_for_a_seed() -> None:
    def pattern(seed: int) -> list[bool]:
        faults = Faults(seed=seed)
        faults.add(Respond(503), probability=0.5)
        plans = [faults.plan("GET", "/api/v1/nodes", is_watch=False) for _ in range(20)]
        return [plan.respond is not None for plan in plans]

    assert pattern(7) == pattern(7)
    assert pattern(7) != pattern(8)
    assert 3 < sum(pattern(7)) < 17


def test_bearer_token() -> None:
    with KubeApiServer(token="s3cret") as secured:
        secured.create(node("gpu-a"))
        good = kubernetes.client.CoreV1Api(secured.client())
        assert good.read_node("gpu-a").metadata.name == "gpu-a"
        for token in ("wrong", None):
            bad = kubernetes.client.CoreV1Api(secured.client(token=token))
            with pytest.raises(ApiException) as err:
                bad.read_node("gpu-a")
            assert err.value.status == 401
            assert status_of(err.value)["reason"] == "Unauthorized"


def test_config_map_round_trip_and_hooks(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    seen: list[tuple[str, str]] = []
    remove = api.on_change(
        lambda change: seen.append((change.type, change.object["metadata"]["name"])),
        api_version="v1",
        kind="ConfigMap",
    )
    core.create_namespaced_config_map(
        "gpu-operator", config_map("mig-parted", "gpu-operator", {"config.yaml": "version: v1"})
    )
    core.patch_namespaced_config_map("mig-parted", "gpu-operator", {"data": {"other.yaml": "x"}})
    api.create(node("gpu-a"))
    remove()
    core.delete_namespaced_config_map("mig-parted", "gpu-operator")
    assert seen == [("ADDED", "mig-parted"), ("MODIFIED", "mig-parted")]


def test_discovery_serves_the_dynamic_client(api: KubeApiServer) -> None:
    from kubernetes.dynamic import DynamicClient

    api.create(node("gpu-a"))
    dynamic = DynamicClient(api.client())
    nodes = dynamic.resources.get(api_version="v1", kind="Node")
    assert [n.metadata.name for n in nodes.get().items] == ["gpu-a"]
    policies = dynamic.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    assert policies.namespaced is False
