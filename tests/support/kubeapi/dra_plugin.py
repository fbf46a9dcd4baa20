"""NVIDIA's DRA GPU kubelet plugin for static MIG, beside the simulated MIG Manager (test fake).

No DRA driver runs here, so the applier's DRA tests need something that publishes a node's
MIG devices the way ``gpu-kubelet-plugin`` does (docs/dra-sources.md §1.1, §4): one
ResourceSlice per node of driver ``gpu.nvidia.com``, pool named after the node, each
pre-created MIG device named ``gpu-<minor>-mig-<profile, dots removed>-<GI profile
id>-<placement start>`` with the attributes ``type: mig``, ``profile``, ``uuid`` and
``parentUUID``, a GPU with MIG disabled as ``gpu-<minor>`` (``type: gpu``).

What it reproduces of the real plugin:

* **discovery is a snapshot taken at start**: the slice follows the GPUs (the
  :class:`~support.kubeapi.mig_manager.MigManagerSim`'s state) only when the plugin pod
  starts: when its pod is deleted or evicted (the DaemonSet makes a new one at once) or when
  GPU Operator 26.7's MIG Manager bounces it through the ``nvidia.com/gpu.deploy.client``
  label (``paused-for-mig-change`` back to ``true``), never otherwise;
* the plugin pod carries the driver's Helm label ``dra-driver-nvidia-gpu-component:
  kubelet-plugin``.

Not reproduced: DynamicMIG (a test writes such slices itself), counters, health, CDI,
claims' preparation (the scheduler's allocation is written by the test), the driver's other
attributes and capacities. Device minors are the GPU indices; placements are the first the
catalogue allows for the layout (:func:`migscope.core._layout.is_valid`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from migscope.core._catalogue import model_for_pci
from migscope.core._layout import is_valid

from .mig_manager import H200_PCI, PAUSED, MigManagerSim
from .objects import pod
from .server import KubeApiServer
from .store import Change

__all__ = ["CLIENT_LABEL", "DRIVER", "PLUGIN_LABEL", "DraPluginSim"]

DRIVER = "gpu.nvidia.com"
CLIENT_LABEL = "nvidia.com/gpu.deploy.client"
PLUGIN_LABEL = ("dra-driver-nvidia-gpu-component", "kubelet-plugin")
NAMESPACE = "nvidia-dra-driver-gpu"


def _pname(profile: str) -> str:
    """The driver's ``toRFC1123Compliant(strings.ReplaceAll(profile, ".", ""))``."""
    return re.sub(r"[^a-z0-9-]", "-", profile.replace(".", "").lower()).strip("-")


def _uuid(*parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, "/".join(map(str, parts))))


class DraPluginSim:
    """The GPU kubelet plugin on ``nodes`` of ``mig``'s cluster.

    Args:
        api: The API test server.
        mig: The MIG Manager simulation whose GPUs these nodes have (their knobs should say
            ``device_plugin=False``: no device plugin advertises them).
        nodes: The DRA nodes.
        pci: The GPUs' PCI device ID (for profile ids and placements).
        gpu_uuids: ``{node: [GPU UUID by minor]}`` where the GPUs' UUIDs must be those of
            another simulation of the same node (the exporter's, in an end-to-end chain: one
            physical GPU has one UUID, which the driver publishes and NVML reports); a
            node or minor not listed gets a stable UUID of its own.

    Attributes:
        restarts: ``{node: plugin starts}``, the first included.
    """

    def __init__(
        self,
        api: KubeApiServer,
        mig: MigManagerSim,
        nodes: Iterable[str],
        *,
        pci: str = H200_PCI,
        gpu_uuids: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.api = api
        self.gpu_uuids = {n: tuple(u) for n, u in (gpu_uuids or {}).items()}
        self.mig = mig
        self.nodes = tuple(nodes)
        self.model = model_for_pci(pci)
        self.restarts: dict[str, int] = dict.fromkeys(self.nodes, 0)
        self._removers: list[Any] = []

    def start(self) -> DraPluginSim:
        """Start the plugin on every node (pod and slice)."""
        for node in self.nodes:
            self._start_plugin(node)
        self._removers.append(self.api.on_change(self._on_pod, api_version="v1", kind="Pod"))
        self._removers.append(self.api.on_change(self._on_node, api_version="v1", kind="Node"))
        return self

    def stop(self) -> None:
        """Stop reacting."""
        for remove in self._removers:
            remove()
        self._removers.clear()

    def __enter__(self) -> DraPluginSim:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def slice_name(self, node: str) -> str:
        """The node's ResourceSlice."""
        return f"{node}-{DRIVER}-slice"

    def devices(self, node: str) -> list[dict[str, Any]]:
        """What the plugin would publish now for ``node``'s GPUs."""
        out: list[dict[str, Any]] = []
        for minor, gpu in enumerate(self.mig.gpus(node)):
            given = self.gpu_uuids.get(node, ())
            parent = given[minor] if minor < len(given) else f"GPU-{_uuid(node, minor)}"
            if not gpu.mig_enabled:
                out.append(
                    {
                        "name": f"gpu-{minor}",
                        "attributes": {"type": {"string": "gpu"}, "uuid": {"string": parent}},
                    }
                )
                continue
            check = is_valid(self.model, dict(gpu.instances))
            for placed in check.placements:
                profile = placed.profile
                out.append(
                    {
                        "name": f"gpu-{minor}-mig-{_pname(profile.name)}-{profile.nvml_id}-"
                        f"{placed.start}",
                        "attributes": {
                            "type": {"string": "mig"},
                            "profile": {"string": profile.name},
                            "parentUUID": {"string": parent},
                            "uuid": {"string": f"MIG-{_uuid(node, minor, placed.start)}"},
                        },
                    }
                )
        return out

    def _start_plugin(self, node: str) -> None:
        name = f"nvidia-dra-driver-gpu-kubelet-plugin-{node}"
        try:
            self.api.get("v1", "Pod", name, namespace=NAMESPACE)
        except Exception:
            self.api.create(
                pod(name, NAMESPACE, node_name=node, labels={PLUGIN_LABEL[0]: PLUGIN_LABEL[1]})
            )
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": self.slice_name(node)},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {
                    "name": node,
                    "generation": self.restarts[node] + 1,
                    "resourceSliceCount": 1,
                },
                "devices": self.devices(node),
            },
        }
        try:
            current = self.api.get("resource.k8s.io/v1", "ResourceSlice", self.slice_name(node))
        except Exception:
            self.api.create(body)
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self.api.patch(
                "resource.k8s.io/v1", "ResourceSlice", self.slice_name(node), {"spec": body["spec"]}
            )
        self.restarts[node] += 1

    def _on_pod(self, change: Change) -> None:
        obj = change.object
        labels = obj["metadata"].get("labels") or {}
        node = (obj.get("spec") or {}).get("nodeName")
        plugin = labels.get(PLUGIN_LABEL[0]) == PLUGIN_LABEL[1]
        if change.type == "DELETED" and plugin and node in self.nodes:
            self._start_plugin(node)  # the DaemonSet's new pod discovers again

    def _on_node(self, change: Change) -> None:
        name = change.object["metadata"]["name"]
        if name not in self.nodes or change.old is None:
            return
        before = (change.old["metadata"].get("labels") or {}).get(CLIENT_LABEL)
        after = (change.object["metadata"].get("labels") or {}).get(CLIENT_LABEL)
        if before == PAUSED and after == "true":
            self._start_plugin(name)  # MIG Manager bounced the operator's GPU clients
