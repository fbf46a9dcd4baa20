"""The simulated MIG Manager, driven the way the applier will drive the real one.

The tests set ``nvidia.com/mig.config`` with the official client and watch what comes back
through the API test server: the ``nvidia.com/mig.config.state`` transitions, the operand
deploy labels, the node's Ready condition and its ``nvidia.com/mig-*`` allocatable, for the
success path and for each failure mode of ``reference/mig-manager.md`` §2.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import kubernetes.client
import pytest
from support.kubeapi import ExpireWatch, KubeApiServer, config_map, node, pod
from support.kubeapi.mig_manager import (
    CONFIG_LABEL,
    GPU_ANNOTATION,
    PAUSED,
    STATE_LABEL,
    Knobs,
    MigManagerSim,
    SimGpu,
)

CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-balanced:
    - device-filter: ["0x233510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    - device-filter: ["0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  all-1g.18gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
  all-3g.71gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.71gb": 2}
  gpu0-balanced:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
  impossible:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.71gb": 2, "1g.18gb": 1}
"""

BALANCED = {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
DEPLOY = {
    "nvidia.com/gpu.deploy.device-plugin": "true",
    "nvidia.com/gpu.deploy.dcgm-exporter": "true",
    "nvidia.com/gpu.deploy.dcgm": "false",
}


@pytest.fixture
def core(api: KubeApiServer) -> kubernetes.client.CoreV1Api:
    api.create(config_map("default-mig-parted-config", "gpu-operator", {"config.yaml": CONFIG}))
    api.create(node("gpu-a", labels=DEPLOY))
    return kubernetes.client.CoreV1Api(api.client())


def history(api: KubeApiServer, name: str, read: Callable[[dict[str, Any]], Any]) -> list[Any]:
    """Values of ``read(node)`` after each write to the node, consecutive repeats folded."""
    seen: list[Any] = []

    def record(change: Any) -> None:
        if change.object["metadata"]["name"] == name and change.type != "DELETED":
            value = read(change.object)
            if not seen or seen[-1] != value:
                seen.append(value)

    api.on_change(record, api_version="v1", kind="Node")
    return seen


def label(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda obj: obj["metadata"].get("labels", {}).get(key)


def ready(obj: dict[str, Any]) -> str:
    return next(c["status"] for c in obj["status"]["conditions"] if c["type"] == "Ready")


def relabel(core: kubernetes.client.CoreV1Api, name: str, **labels: str) -> int:
    """Set labels (``config=`` for the MIG config); returns the node's new resourceVersion."""
    wanted = {CONFIG_LABEL if k == "config" else k: v for k, v in labels.items()}
    patched = core.patch_node(name, {"metadata": {"labels": wanted}})
    return int(patched.metadata.resource_version)


def mig_allocatable(core: kubernetes.client.CoreV1Api, name: str) -> dict[str, str]:
    status = core.read_node(name).status
    assert status.capacity == status.allocatable
    return {k: v for k, v in status.allocatable.items() if k.startswith("nvidia.com/")}


def test_success_path_updates_allocatable_and_restores_operands(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    plugin = history(api, "gpu-a", label("nvidia.com/gpu.deploy.device-plugin"))
    dcgm = history(api, "gpu-a", label("nvidia.com/gpu.deploy.dcgm"))
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}) as mig:
        assert mig_allocatable(core, "gpu-a") == {"nvidia.com/gpu": "1"}
        relabel(core, "gpu-a", config="all-balanced")
        final = mig.wait_for_state("gpu-a", "success")
        assert mig.states("gpu-a") == ["pending", "success"]
        assert mig_allocatable(core, "gpu-a") == {
            "nvidia.com/gpu": "0",
            "nvidia.com/mig-1g.18gb": "2",
            "nvidia.com/mig-2g.35gb": "1",
            "nvidia.com/mig-3g.71gb": "1",
        }
        labels = final["metadata"]["labels"]
        assert labels["nvidia.com/mig-1g.18gb.count"] == "2"
        assert labels["nvidia.com/mig.strategy"] == "mixed"
        assert mig.gpus("gpu-a") == [SimGpu(mig_enabled=True, instances=BALANCED)]
        assert mig.errors == []
    assert plugin == ["true", PAUSED, "true"]
    assert dcgm == ["false"]  # already off: left alone


def test_same_value_relabel_is_ignored(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}, knobs={"gpu-a": Knobs(fail=True)}) as mig:
        relabel(core, "gpu-a", config="all-balanced")
        mig.wait_for_state("gpu-a", "failed")
        mig.knobs("gpu-a").fail = False
        # Same config value (with another label, so the node really changes): ignored.
        rv = relabel(core, "gpu-a", config="all-balanced", retry="1")
        mig.wait_until_seen("gpu-a", rv)
        assert mig.reconciles("gpu-a") == 1
        assert mig.states("gpu-a") == ["pending", "failed"]
        # A different value is what makes MIG Manager try again.
        relabel(core, "gpu-a", config="all-1g.18gb")
        mig.wait_for_state("gpu-a", "success")
        assert mig.reconciles("gpu-a") == 2
        assert mig_allocatable(core, "gpu-a")["nvidia.com/mig-1g.18gb"] == "7"


def test_unknown_config_fails_without_disruption(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    plugin = history(api, "gpu-a", label("nvidia.com/gpu.deploy.device-plugin"))
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}) as mig:
        relabel(core, "gpu-a", config="all-7g.141gb")
        mig.wait_for_state("gpu-a", "failed")
        assert mig.states("gpu-a") == ["failed"]
        assert mig.gpus("gpu-a") == [SimGpu()]
        assert mig_allocatable(core, "gpu-a") == {"nvidia.com/gpu": "1"}
    assert plugin == ["true"]


def test_config_is_read_when_the_label_changes(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}) as mig:
        core.patch_namespaced_config_map(
            "default-mig-parted-config",
            "gpu-operator",
            {"data": {"config.yaml": CONFIG.replace("all-3g.71gb:", "custom-3g:")}},
        )
        relabel(core, "gpu-a", config="custom-3g")
        mig.wait_for_state("gpu-a", "success")
        assert mig.gpus("gpu-a") == [SimGpu(mig_enabled=True, instances={"3g.71gb": 2})]


def test_layout_already_applied_is_success_without_pending(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    plugin = history(api, "gpu-a", label("nvidia.com/gpu.deploy.device-plugin"))
    gpu = SimGpu(mig_enabled=True, instances=BALANCED)
    with MigManagerSim(api, {"gpu-a": [gpu]}) as mig:
        relabel(core, "gpu-a", config="all-balanced")
        mig.wait_for_state("gpu-a", "success")
        assert mig.states("gpu-a") == ["success"]
    assert plugin == ["true"]


def test_stuck_pending_keeps_operands_paused(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    knobs = {"gpu-a": Knobs(stuck_pending=True)}
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}, knobs=knobs) as mig:
        rv = relabel(core, "gpu-a", config="all-balanced")
        mig.wait_until_seen("gpu-a", rv)
        labels = core.read_node("gpu-a").metadata.labels
        assert labels[STATE_LABEL] == "pending"
        assert labels["nvidia.com/gpu.deploy.device-plugin"] == PAUSED
        assert labels["nvidia.com/gpu.deploy.dcgm-exporter"] == PAUSED
        assert mig.states("gpu-a") == ["pending"]
        assert mig.gpus("gpu-a") == [SimGpu()]


@pytest.mark.parametrize("outcome", ["success", "failed"])
def test_reboot_path(api: KubeApiServer, core: kubernetes.client.CoreV1Api, outcome: str) -> None:
    readiness = history(api, "gpu-a", ready)
    knobs = {"gpu-a": Knobs(reboot=True, reboot_outcome=outcome, reboot_seconds=0.1)}  # type: ignore[arg-type]
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}, knobs=knobs) as mig:
        relabel(core, "gpu-a", config="all-balanced")
        mig.wait_for_state("gpu-a", outcome)
        assert mig.states("gpu-a") == ["pending", "rebooting", outcome]
        applied = outcome == "success"
        assert mig.gpus("gpu-a")[0].mig_enabled is applied
        assert ("nvidia.com/mig-3g.71gb" in mig_allocatable(core, "gpu-a")) is applied
        labels = core.read_node("gpu-a").metadata.labels
        assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert readiness == ["True", "False", "True"]


def test_gpu_in_use_by_a_pod_fails_until_it_is_gone(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(pod("infer-0", "ml", node_name="gpu-a", requests={"nvidia.com/mig-1g.18gb": 1}))
    plugin = history(api, "gpu-a", label("nvidia.com/gpu.deploy.device-plugin"))
    gpu = SimGpu(mig_enabled=True, instances={"1g.18gb": 7})
    with MigManagerSim(api, {"gpu-a": [gpu]}) as mig:
        relabel(core, "gpu-a", config="all-balanced")
        mig.wait_for_state("gpu-a", "failed")
        assert mig.states("gpu-a") == ["pending", "failed"]
        assert mig.gpus("gpu-a") == [gpu]
        assert mig_allocatable(core, "gpu-a")["nvidia.com/mig-1g.18gb"] == "7"
        core.delete_namespaced_pod("infer-0", "ml")
        relabel(core, "gpu-a", config="all-3g.71gb")
        mig.wait_for_state("gpu-a", "success")
        assert mig_allocatable(core, "gpu-a")["nvidia.com/mig-1g.18gb"] == "0"
    assert plugin == ["true", PAUSED, "true", PAUSED, "true"]


def test_finished_pods_and_untouched_gpus_do_not_block(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    holds = {"nvidia.com/mig-1g.18gb": 1}
    api.create(
        pod("on-gpu1", "ml", node_name="gpu-a", requests=holds, annotations={GPU_ANNOTATION: "1"})
    )
    api.create(pod("done", "ml", node_name="gpu-a", requests=holds, phase="Succeeded"))
    gpus = [SimGpu(mig_enabled=True, instances={"1g.18gb": 7})] * 2
    with MigManagerSim(api, {"gpu-a": gpus}) as mig:
        relabel(core, "gpu-a", config="gpu0-balanced")
        mig.wait_for_state("gpu-a", "success")
        assert mig.gpus("gpu-a") == [SimGpu(mig_enabled=True, instances=BALANCED), gpus[1]]
        assert mig_allocatable(core, "gpu-a")["nvidia.com/mig-1g.18gb"] == "9"


@pytest.mark.parametrize(
    ("config", "knobs"),
    [("all-balanced", Knobs(fail=True)), ("impossible", Knobs())],
)
def test_apply_failures(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api, config: str, knobs: Knobs
) -> None:
    plugin = history(api, "gpu-a", label("nvidia.com/gpu.deploy.device-plugin"))
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}, knobs={"gpu-a": knobs}) as mig:
        relabel(core, "gpu-a", config=config)
        mig.wait_for_state("gpu-a", "failed")
        assert mig.states("gpu-a") == ["pending", "failed"]
        assert mig.gpus("gpu-a") == [SimGpu()]
    assert plugin == ["true", PAUSED, "true"]


def test_nodes_reconfigure_independently(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    api.create(node("a100-b"))
    nodes = {"gpu-a": [SimGpu()], "a100-b": [SimGpu("0x20B210DE")] * 2}
    knobs = {"a100-b": Knobs(delay_s=0.05)}
    with MigManagerSim(api, nodes, knobs=knobs) as mig:
        relabel(core, "a100-b", config="all-balanced")
        relabel(core, "gpu-a", config="all-balanced")
        mig.wait_for_state("gpu-a", "success")
        mig.wait_for_state("a100-b", "success")
        assert mig_allocatable(core, "a100-b") == {
            "nvidia.com/gpu": "0",
            "nvidia.com/mig-1g.10gb": "4",
            "nvidia.com/mig-2g.20gb": "2",
            "nvidia.com/mig-3g.40gb": "2",
        }
        assert mig_allocatable(core, "gpu-a")["nvidia.com/mig-3g.71gb"] == "1"
        assert mig.transitions.index(("gpu-a", "success")) < mig.transitions.index(
            ("a100-b", "success")
        )
        assert mig.errors == []


def test_expired_watch_makes_the_controller_relist(
    api: KubeApiServer, core: kubernetes.client.CoreV1Api
) -> None:
    # The controller watches with timeoutSeconds, so the client's Watch does not retry a 410
    # itself but raises it; the controller answers like an informer, with a fresh list.
    rule = api.faults.add(ExpireWatch(after_events=0), path="^/api/v1/nodes$", times=2)
    with MigManagerSim(api, {"gpu-a": [SimGpu()]}) as mig:
        deadline = time.monotonic() + 5
        while rule.hits < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        relabel(core, "gpu-a", config="all-balanced")
        mig.wait_for_state("gpu-a", "success")
        assert mig.errors == []
    node_requests = [r for r in api.requests if r.path == "/api/v1/nodes"]
    kinds = ["watch" if r.query.get("watch") else "list" for r in node_requests]
    assert kinds[:5] == ["list", "watch", "list", "watch", "list"]
