"""Workload right-sizing (issue 22, item 2): the request each workload should make, in order.

The defect: the plan turns ``ml/llm-serve-0``'s ``7g.141gb`` into a ``4g.71gb`` and drains the
pod, but nothing tells anyone to change the request, so the pod comes back asking for
``nvidia.com/mig-7g.141gb``, which no GPU offers any more, and stays Pending. Here the report
says, per workload, what to ask for, writes the patch and the ``kubectl`` command, and its
next step puts them before the apply commands, in Markdown and HTML alike. Owners come from
the cluster (the API test server, through a kubeconfig), from kube-state-metrics' label sets,
or from the pod's name, said as a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support.kubeapi import KubeApiServer, pod

from migscope.analyzer._analysis import run
from migscope.analyzer._intake.simulation import SimulationSource
from migscope.analyzer._judge.workloads import (
    Workload,
    guess_workload,
    owners_from_kube_state_metrics,
    owners_from_pods,
)
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._report import build_report, validate_report, write_reports
from migscope.cli.main import cli

TOKEN = "owners-token"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result = run(SimulationSource(["fleet-mixed", "h200-node"]), AnalyzeOptions())
    out = tmp_path_factory.mktemp("demo")
    write_reports(result, out)
    return {
        "json": json.loads((out / "report.json").read_text()),
        "md": (out / "report.md").read_text(),
        "html": (out / "report.html").read_text(),
        "yaml": (out / "request-changes.yaml").read_text(),
    }


def _change(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["request_changes"]["workloads"] if c["workload"]["name"] == name)


def test_the_drained_pod_gets_a_request_change(demo: dict[str, Any]) -> None:
    report = demo["json"]
    moved = {p for r in report["recommendations"] for p in r["pods_to_move"]}
    assert "ml/llm-serve-0" in moved, "the plan drains the oversized 7g.141gb"
    change = _change(report, "llm-serve")
    assert change["workload"] == {
        "namespace": "ml",
        "kind": "StatefulSet",
        "name": "llm-serve",
        "source": "guessed",
    }
    assert (change["current_profile"], change["profile"]) == ("7g.141gb", "4g.71gb")
    assert (change["resource_from"], change["resource_to"]) == (
        "nvidia.com/mig-7g.141gb",
        "nvidia.com/mig-4g.71gb",
    )
    # The profile is the one the plan counts as demand for the pod: one sizing rule.
    (slice_,) = [s for s in report["slices"] if s["pod"] == "llm-serve-0" and s["current"]]
    assert change["profile"] == slice_["demand_profile"]
    # A saturated slice grows: its workload asks for the larger profile.
    assert _change(report, "trainer-small")["profile"] == "2g.35gb"
    validate_report(report)


def test_patch_file_and_command_say_the_same(demo: dict[str, Any]) -> None:
    docs = [d for d in yaml.safe_load_all(demo["yaml"]) if d]
    by_name = {d["metadata"]["name"]: d for d in docs}
    doc = by_name["llm-serve"]
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]["namespace"]) == (
        "apps/v1",
        "StatefulSet",
        "ml",
    )
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    limits = container["resources"]["limits"]
    assert limits == {"nvidia.com/mig-4g.71gb": "1", "nvidia.com/mig-7g.141gb": None}
    assert container["resources"]["requests"] == limits
    assert container["name"] == "<container>"  # not known without the cluster: refused as is
    command = _change(demo["json"], "llm-serve")["command"]
    assert command.startswith("kubectl -n ml patch statefulset llm-serve --type strategic -p ")
    patch = json.loads(command.split(" -p ", 1)[1].strip("'"))
    assert patch["spec"] == {k: v for k, v in doc.items() if k == "spec"}["spec"]
    assert "&id" not in demo["yaml"], "no YAML anchors: a reader edits each patch alone"


def test_next_step_orders_requests_then_idle_holders_then_apply(demo: dict[str, Any]) -> None:
    md = demo["md"].split("## Next step", 1)[1].split("\n## ", 1)[0]
    order = [md.index(x) for x in ("1. Change the MIG requests", "2. Scale down", "3. Apply")]
    assert order == sorted(order)
    assert md.index("kubectl -n ml patch statefulset llm-serve") < md.index("migscope apply")
    assert "ml/Pod/forgotten-job (guessed)" in md  # an idle holder on a re-created GPU
    page = demo["html"].split('id="next-step"', 1)[1].split("</div>", 1)[0]
    keys = re.findall(r'<p id="step-([a-z-]+)"', page)
    assert keys == ["requests", "scale-down", "apply", "idle"]
    # Markdown and HTML give the same parts in the same order.
    markers = {
        "requests": "Change the MIG requests",
        "scale-down": "Scale down",
        "apply": "Apply the plan",
        "idle": "Ask the owners",
    }
    assert sorted(markers, key=lambda k: md.index(markers[k])) == keys
    assert 'id="requests">Request changes</h2>' in demo["html"]


def test_idle_holders_are_named_with_their_workload(demo: dict[str, Any]) -> None:
    holders = {h["workload"]["name"]: h for h in demo["json"]["request_changes"]["idle_holders"]}
    assert holders["forgotten-job"]["evicted_by_plan"] is True
    assert holders["forgotten-a100"]["evicted_by_plan"] is False
    skipped = demo["json"]["request_changes"]["skipped"]
    assert any(s.startswith("genai/StatefulSet/sd-serve (guessed): its pods hold") for s in skipped)


def test_a_snapshot_changes_no_request() -> None:
    result = run(SimulationSource(["h200-node"]), AnalyzeOptions(window_s=3600.0))
    assert build_report(result).request_changes is None


@pytest.mark.parametrize(
    ("pod_name", "kind", "name"),
    [
        ("llm-serve-0", "StatefulSet", "llm-serve"),
        ("web-7d4b9c8f6d-x2z4q", "Deployment", "web"),
        ("web-65bd8cc5-q4x2z", "Deployment", "web"),
        ("notebook-alice", "Pod", "notebook-alice"),
        ("job-x2z4q", "Pod", "job-x2z4q"),  # a Job's or a DaemonSet's: no owner guessed
    ],
)
def test_guess_from_the_name(pod_name: str, kind: str, name: str) -> None:
    assert guess_workload("ns", pod_name) == Workload("ns", kind, name, "guessed")


def _owned(name: str, kind: str, owner: str, **labels: str) -> dict[str, Any]:
    p = pod(name, "ml", node_name="gpu-node-a", requests={"nvidia.com/mig-7g.141gb": 1})
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "u", "controller": True}
    ]
    p["metadata"]["labels"] = labels
    p["spec"]["containers"][0]["name"] = "server"
    return p


def test_owners_from_pods() -> None:
    found = owners_from_pods(
        [
            _owned("web-5f6c9-abcde", "ReplicaSet", "web-5f6c9", **{"pod-template-hash": "5f6c9"}),
            _owned("odd-x", "ReplicaSet", "odd-rs"),  # no hash label: the ReplicaSet stays
            _owned("train-1", "Job", "train"),
            pod("bare", "ml", node_name="gpu-node-a"),
        ]
    )
    w = found.workloads
    assert w[("ml", "web-5f6c9-abcde")] == Workload("ml", "Deployment", "web", "cluster")
    assert w[("ml", "odd-x")] == Workload("ml", "ReplicaSet", "odd-rs", "cluster")
    assert w[("ml", "train-1")] == Workload("ml", "Job", "train", "cluster")
    assert w[("ml", "bare")] == Workload("ml", "Pod", "bare", "cluster")
    (req,) = found.containers[("ml", "train-1")]
    assert (req.container, req.resource, req.count) == ("server", "nvidia.com/mig-7g.141gb", 1)


def test_owners_from_kube_state_metrics() -> None:
    found = owners_from_kube_state_metrics(
        [
            {"namespace": "ml", "pod": "a-1", "owner_kind": "ReplicaSet", "owner_name": "a-rs"},
            {"namespace": "ml", "pod": "b-0", "owner_kind": "StatefulSet", "owner_name": "b"},
            {"namespace": "ml", "pod": "c", "owner_kind": "<none>", "owner_name": "<none>"},
        ],
        [{"namespace": "ml", "replicaset": "a-rs", "owner_kind": "Deployment", "owner_name": "a"}],
    )
    source = "kube-state-metrics"
    assert found.workload_of("ml", "a-1") == Workload("ml", "Deployment", "a", source)
    assert found.workload_of("ml", "b-0") == Workload("ml", "StatefulSet", "b", source)
    assert found.workload_of("ml", "c") == Workload("ml", "Pod", "c", source)
    assert found.workload_of("ml", "d-0").source == "guessed"


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(token=TOKEN) as server:
        yield server


def test_owners_read_from_the_cluster(api: KubeApiServer, tmp_path: Path) -> None:
    # The cluster says llm-serve-0 belongs to StatefulSet "llm" (not the name's guess) and
    # its container is "server": the patch names both, and the command needs no editing.
    api.create(_owned("llm-serve-0", "StatefulSet", "llm"))
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "t", "cluster": {"server": api.url}}],
                "users": [{"name": "me", "user": {"token": TOKEN}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "me"}}],
                "current-context": "t",
            }
        )
    )
    args = ["analyze", "--simulate", "h200-node", "--window", "2d", "-o", "json"]
    got = CliRunner().invoke(
        cli,
        [*args, "--kubeconfig", str(config)],
    )
    assert got.exit_code == 0, got.stderr
    report = json.loads(got.stdout)
    change = _change(report, "llm")
    assert change["workload"] == {
        "namespace": "ml",
        "kind": "StatefulSet",
        "name": "llm",
        "source": "cluster",
    }
    assert change["containers"] == ["server"]
    assert '"name":"server"' in change["command"]
    lists = [r for r in api.requests if r.method == "GET" and r.path == "/api/v1/pods"]
    assert any(r.query.get("fieldSelector") == "spec.nodeName=gpu-node-a" for r in lists)
