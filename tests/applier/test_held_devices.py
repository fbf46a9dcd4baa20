"""Which device a pod's request names, for every name NVIDIA's device plugin may give it.

Issue 20 found a time-sliced pod (``nvidia.com/mig-1g.18gb.shared``) on a GPU a change
re-created and the applier blind to it. These tables hold the names the plugin advertises:
mixed strategy ``nvidia.com/mig-<profile>``, time-slicing and MPS replicas with
``renameByDefault`` (``.shared``), the single strategy's ``nvidia.com/gpu``, ``+me`` profiles
(which a resource name spells with ``.``), compute-instance profiles, and renamed resources.
"""

from __future__ import annotations

from typing import Any

import pytest

from migscope.applier._plan import GpuChange, NodeChange
from migscope.applier._steps import HeldDevice, held_device, pods_at_risk

BALANCED = {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}


@pytest.mark.parametrize(
    ("resource", "held"),
    [
        ("nvidia.com/mig-1g.18gb", HeldDevice("nvidia.com/mig-1g.18gb", "mig", "1g.18gb")),
        (
            "nvidia.com/mig-1g.18gb.shared",
            HeldDevice("nvidia.com/mig-1g.18gb.shared", "mig", "1g.18gb"),
        ),
        ("nvidia.com/mig-1g.18gb.me", HeldDevice("nvidia.com/mig-1g.18gb.me", "mig", "1g.18gb+me")),
        ("nvidia.com/mig-1g.18gb+me", HeldDevice("nvidia.com/mig-1g.18gb+me", "mig", "1g.18gb+me")),
        (
            "nvidia.com/mig-1g.24gb.me.all",
            HeldDevice("nvidia.com/mig-1g.24gb.me.all", "mig", "1g.24gb+me.all"),
        ),
        ("nvidia.com/mig-1c.3g.71gb", HeldDevice("nvidia.com/mig-1c.3g.71gb", "mig", "3g.71gb")),
        ("nvidia.com/gpu", HeldDevice("nvidia.com/gpu", "gpu")),
        ("nvidia.com/gpu.shared", HeldDevice("nvidia.com/gpu.shared", "gpu")),
        ("nvidia.com/mig-small", HeldDevice("nvidia.com/mig-small", "unknown")),
        ("nvidia.com/shared-a100", HeldDevice("nvidia.com/shared-a100", "unknown")),
        ("cpu", None),
        ("example.com/gpu", None),
    ],
)
def test_held_device(resource: str, held: HeldDevice | None) -> None:
    assert held_device(resource) == held


def _pod(name: str, resources: dict[str, str], *, init: bool = False) -> dict[str, Any]:
    container = {"name": "c", "resources": {"limits": resources}}
    key = "initContainers" if init else "containers"
    return {"metadata": {"namespace": "ml", "name": name}, "spec": {key: [container]}}


def _node(labels: dict[str, str] | None = None, mig: bool = True) -> dict[str, Any]:
    alloc = {"nvidia.com/mig-1g.18gb": "4"} if mig else {"nvidia.com/gpu": "2"}
    return {"metadata": {"labels": labels or {}}, "status": {"allocatable": alloc}}


# GPU 1 goes from balanced to 3g x2 (destroys 1g.18gb, 2g.35gb, 3g.71gb); GPU 0 keeps.
CHANGE = NodeChange(
    "n", "c", gpus=(GpuChange(0, BALANCED, BALANCED), GpuChange(1, BALANCED, {"3g.71gb": 2}))
)
# GPU 1 keeps its layout: nothing changes.
NO_CHANGE = NodeChange(
    "n", "c", gpus=(GpuChange(0, BALANCED, BALANCED), GpuChange(1, BALANCED, BALANCED))
)


@pytest.mark.parametrize(
    ("resources", "node", "at_risk"),
    [
        ({"nvidia.com/mig-2g.35gb": "1"}, _node(), True),
        ({"nvidia.com/mig-2g.35gb.shared": "1"}, _node(), True),
        ({"nvidia.com/mig-7g.141gb": "1"}, _node(), False),  # not on the changed GPU
        ({"nvidia.com/mig-7g.141gb.shared": "1"}, _node(), False),
        ({"nvidia.com/mig-2g.35gb": "0"}, _node(), False),  # asks for none
        ({"nvidia.com/team-slice": "1"}, _node(), True),  # renamed: may be anything
        # nvidia.com/gpu: a MIG device under the single strategy, a whole GPU under mixed.
        ({"nvidia.com/gpu": "1"}, _node({"nvidia.com/mig.strategy": "single"}), True),
        ({"nvidia.com/gpu.shared": "1"}, _node({"nvidia.com/mig.strategy": "single"}), True),
        ({"nvidia.com/gpu": "1"}, _node({"nvidia.com/mig.strategy": "mixed"}), False),
        ({"nvidia.com/gpu": "1"}, _node(), False),  # advertises mig-*: mixed
        ({"nvidia.com/gpu": "1"}, _node(mig=False), True),  # strategy unknown
        ({"nvidia.com/gpu": "1"}, None, True),
        ({"cpu": "4", "memory": "1Gi"}, _node(), False),
    ],
)
def test_pods_at_risk_by_name(resources: dict[str, str], node: Any, at_risk: bool) -> None:
    want = ["ml/p"] if at_risk else []
    assert pods_at_risk(CHANGE, [_pod("p", resources)], node) == want
    assert pods_at_risk(CHANGE, [_pod("p", resources, init=True)], node) == want
    # Nothing is at risk where nothing changes, whatever the pod holds.
    assert pods_at_risk(NO_CHANGE, [_pod("p", resources)], node) == []
