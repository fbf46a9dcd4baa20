"""Pending pods' MIG requests: the arithmetic by hand, then through the official client.

The API side runs against :class:`support.kubeapi.KubeApiServer`, a real HTTP server with
the list semantics the reader relies on (``fieldSelector=status.phase=Pending`` across
namespaces, ``limit``/``continue`` pages), reached through a kubeconfig file exactly as a
user's would be.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support.kubeapi import KubeApiServer, pod

from migscope.analyzer._intake.kube_pending import (
    list_pending_pods,
    pending_demand,
    pod_mig_requests,
)
from migscope.cli.main import cli
from migscope.kube import Kube, KubeError, api_client

TOKEN = "s3cret-token"


def _container(name: str, resources: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "x", "resources": resources, **extra}


def test_effective_request_is_containers_sum_or_largest_init() -> None:
    spec = {
        "spec": {
            "containers": [
                _container("a", {"limits": {"nvidia.com/mig-1g.18gb": "1"}}),  # limits only
                _container("b", {"requests": {"nvidia.com/mig-1g.18gb": 2}, "limits": {}}),
            ],
            "initContainers": [
                _container("init", {"limits": {"nvidia.com/mig-1g.18gb": "4"}}),
                _container("init2", {"limits": {"nvidia.com/mig-3g.71gb": "1"}}),
                _container(
                    "sidecar",
                    {"limits": {"nvidia.com/mig-2g.35gb": "1"}},
                    restartPolicy="Always",
                ),
            ],
        }
    }
    assert pod_mig_requests(spec) == {
        "nvidia.com/mig-1g.18gb": 4,  # max(1 + 2, 4)
        "nvidia.com/mig-3g.71gb": 1,
        "nvidia.com/mig-2g.35gb": 1,  # a restartable init container runs alongside
    }


def test_only_unscheduled_pods_count() -> None:
    def p(name: str, **kw: Any) -> dict[str, Any]:
        return pod(name, "ml", phase="Pending", **kw)

    bound = p("pulling", requests={"nvidia.com/mig-1g.18gb": 1}, node_name="node-a")
    deleting = p("going", requests={"nvidia.com/mig-1g.18gb": 1})
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    found = pending_demand(
        [
            p("wait", requests={"nvidia.com/mig-1g.18gb": 2, "cpu": "1"}),
            p("whole", requests={"nvidia.com/gpu": 1}),
            p("cpu-only", requests={"cpu": "1"}),
            bound,
            deleting,
        ]
    )
    assert found.profiles == {"1g.18gb": 2}
    assert found.pods == ("ml/wait",)
    assert found.whole_gpu_pods == ("ml/whole",)
    assert found.as_pending() == [("1g.18gb", 2)]
    assert len(found.notes()) == 2


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(token=TOKEN) as server:
        yield server


def _kubeconfig(tmp_path: Path, url: str, token: str = TOKEN) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": url}}],
                "users": [{"name": "me", "user": {"token": token}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "me"}}],
                "current-context": "test",
            }
        )
    )
    return str(path)


def test_lists_every_page_through_a_kubeconfig(api: KubeApiServer, tmp_path: Path) -> None:
    for k in range(1203):
        profile = "1g.18gb" if k % 3 else "3g.71gb"
        api.create(
            pod(
                f"job-{k}",
                f"team-{k % 4}",
                phase="Pending",
                requests={f"nvidia.com/mig-{profile}": 1},
            )
        )
    api.create(pod("running", "team-0", node_name="n", requests={"nvidia.com/mig-7g.141gb": 1}))
    with api_client(_kubeconfig(tmp_path, api.url)) as client:
        found = pending_demand(list_pending_pods(Kube(client)))
    assert found.profiles == {"1g.18gb": 802, "3g.71gb": 401}
    assert len(found.pods) == 1203
    lists = [r for r in api.requests if r.method == "GET" and r.path == "/api/v1/pods"]
    assert len(lists) == 3  # 500 + 500 + 203
    assert all(r.query.get("fieldSelector") == "status.phase=Pending" for r in lists)
    assert all(r.query.get("limit") == "500" for r in lists)


def test_wrong_token_is_one_line(api: KubeApiServer, tmp_path: Path) -> None:
    with (
        api_client(_kubeconfig(tmp_path, api.url, token="wrong")) as client,
        pytest.raises(KubeError, match="HTTP 401"),
    ):
        list(list_pending_pods(Kube(client)))


def test_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match="no such kubeconfig file"):
        api_client(str(tmp_path / "nope"))


def _analyze(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner(env=env).invoke(
        cli, ["analyze", "--simulate", "h200-node", "--window", "1d", *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_analyze_adds_pending_pods_to_demand(api: KubeApiServer, tmp_path: Path) -> None:
    for k in range(3):
        api.create(pod(f"wait-{k}", "ml", phase="Pending", requests={"nvidia.com/mig-3g.71gb": 1}))
    code, out, err = _analyze("--kubeconfig", _kubeconfig(tmp_path, api.url), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    (pool,) = report["pools"]
    assert pool["demand"]["pending"] == {"3g.71gb": 3}
    assert pool["demand"]["total"]["3g.71gb"] >= 3
    assert any("3 unscheduled pod(s) ask for MIG slices: 3g.71gb×3" in n for n in report["notes"])


def test_pending_on_without_credentials_is_one_line(tmp_path: Path) -> None:
    env = {"KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path)}
    code, _, err = _analyze("--pending-pods", "on", env=env)
    assert code == 1
    assert err.count("\n") == 1
    assert "pending pods: no Kubernetes credentials" in err


def test_pending_auto_without_credentials_is_a_note(tmp_path: Path) -> None:
    env = {"KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path)}
    code, out, err = _analyze("--pending-pods", "auto", "-o", "json", env=env)
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any(n.startswith("pending pods not read: no Kubernetes credentials") for n in notes)
