"""ReadOnlyKube, the dry run's client: every read goes through, every write is refused.

A method added to :class:`Kube` but not to :class:`ReadOnlyKube` would reach the parent's
code with none of its state (ReadOnlyKube wraps a client instead of being one), so the first
test holds the two surfaces equal; the others use the API test server.
"""

from __future__ import annotations

import inspect

import pytest
from support.kubeapi import KubeApiServer, pod

from migscope.kube import DryRunWrite, Kube, ReadOnlyKube

WRITES = {
    "patch_node",
    "evict",
    "create_configmap",
    "replace_configmap",
    "create_event",
    "create_lease",
    "replace_lease",
}


def _public(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")}


def test_read_only_kube_answers_every_public_method_of_kube_itself() -> None:
    missing = _public(Kube) - _public(ReadOnlyKube)
    assert missing == set()


def test_reads_go_through_and_writes_are_refused() -> None:
    api = KubeApiServer()
    with api:
        api.create(
            pod("pending", "team-a", phase="Pending", requests={"nvidia.com/mig-1g.18gb": 1})
        )
        api.create(pod("running", "team-a", node_name="n", requests={"nvidia.com/mig-1g.18gb": 1}))
        with api.client() as client:
            dry = ReadOnlyKube(Kube(client))
            found = list(dry.list_pods(field_selector="status.phase=Pending"))
            assert [p["metadata"]["name"] for p in found] == ["pending"]
            assert dry.get_configmap("gpu-operator", "nope") is None
            written = [r for r in api.requests if r.method != "GET"]
            with pytest.raises(DryRunWrite):
                dry.create_configmap("gpu-operator", {"metadata": {"name": "x"}})
            assert [r for r in api.requests if r.method != "GET"] == written
    assert _public(Kube) >= WRITES
