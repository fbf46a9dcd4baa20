"""A simulated NVIDIA MIG Manager, with the device plugin and GFD it works with (test fake).

The applier drives MIG re-partitioning the only way the GPU Operator allows: it writes a
mig-parted config into a ConfigMap, sets ``nvidia.com/mig.config=<name>`` on a node and
waits for ``nvidia.com/mig.config.state`` to reach ``success`` or ``failed``. Its tests need
something on the other side of that label that behaves like k8s-mig-manager v0.15
(``reference/mig-manager.md`` §2), failures included. This simulation is that something. It
runs one controller thread per node, as the DaemonSet runs one pod per node, each watching
its own Node through the :class:`~support.kubeapi.KubeApiServer` with the official client
(``fieldSelector=metadata.name=<node>``), and does everything through the API, so tests see
real transitions with real resourceVersions.

What it reproduces, per label change (a relabel to the value already handled is ignored:
no transition at all, so a retry needs a different value, as upstream):

1. read the mig-parted config (YAML under ``config_key`` of the ConfigMap) at that moment;
   a missing ConfigMap, a malformed config or an unknown name → ``failed``;
2. if the GPUs already have the named layout → ``success`` without any disruption;
3. ``pending``; operand deploy labels (``nvidia.com/gpu.deploy.{device-plugin,
   gpu-feature-discovery,dcgm-exporter,dcgm,nvsm}``) that are present and not ``false`` are
   set to ``paused-for-mig-change`` (knob ``pause_operands``);
4. knob ``stuck_pending``: stop here for good, operands paused (gpu-operator #2833);
5. if a pod on the node holds a device of a GPU whose layout changes, the GPU is "in use by
   another client" → ``failed``. A pod holds devices through its containers' requests or
   limits of ``nvidia.com/mig-<profile>`` or its time-sliced ``nvidia.com/mig-<profile>.shared``
   (on any GPU that currently has that profile) or ``nvidia.com/gpu``/``nvidia.com/gpu.shared``
   (on any GPU with MIG disabled, and on a GPU with MIG enabled when the node's
   ``nvidia.com/mig.strategy`` label is ``single``), or, precisely, on the GPU indices
   listed in its annotation :data:`GPU_ANNOTATION` (``"0,2"``). Pods that are Succeeded or
   Failed hold nothing;
6. knob ``reboot``: ``rebooting``, the node's Ready condition goes False for
   ``reboot_seconds``, then ``success`` or ``failed`` per ``reboot_outcome``;
7. knob ``fail``, or a layout the GPU model cannot place (checked with
   :mod:`migscope.core._layout` for catalogued PCI device IDs) → ``failed``;
8. apply: the node's ``status.capacity``/``status.allocatable`` get the new
   ``nvidia.com/mig-<profile>`` counts (mixed strategy; ``nvidia.com/gpu`` counts GPUs with
   MIG off) and resources that went away drop to ``"0"`` as the kubelet leaves them; GFD's
   ``nvidia.com/mig-<profile>.count`` labels follow; operands are restored to ``true``;
   ``success``.

Every failure restores the paused operand labels, except the stuck-pending one. ``delay_s``
waits before every state write. Config entries match GPUs by ``devices`` (``all`` or
indices) and ``device-filter`` (the PCI device ID part); GPUs no entry matches keep their
layout; where several entries match a GPU the last one wins.

For tests' assertions the simulation also keeps records, without acting on them: every
re-creation of GPUs (:attr:`MigManagerSim.recreated`: which GPUs, for which config, and the
pods holding one of them at that moment, read straight from the store), every change refused
because a GPU was in use (:attr:`MigManagerSim.refused_in_use`), and every write made during
a reconcile whose answer showed the node's config label already changed to another value
(:attr:`MigManagerSim.overlaps`: someone relabelled the node while MIG Manager was still
working on the previous change).

Not reproduced: publishing the ``single`` strategy's resources (only ``mixed`` resources and
labels are published; a ``single`` label only changes which pods hold a GPU, step 5), renamed
resources (a test pins such a pod with :data:`GPU_ANNOTATION`), the operand pods themselves
(only their deploy labels), CDI, host systemd units,
the operator's own ``all-disabled`` default label, and per-instance placement (a layout is
the multiset of profiles per GPU). Resource names are ``nvidia.com/mig-<profile>`` with the
profile as the catalogue spells it (``+me`` profiles keep their ``+``; GFD count labels turn
it into ``.``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import kubernetes.client
import kubernetes.watch
import urllib3
import yaml

from migscope.core._catalogue import model_for_pci
from migscope.core._layout import is_valid

from .server import THREAD_PREFIX, KubeApiServer

__all__ = [
    "CONFIG_LABEL",
    "DEPLOY_LABELS",
    "GPU_ANNOTATION",
    "PAUSED",
    "STATE_LABEL",
    "STRATEGY_LABEL",
    "USER_AGENT",
    "Knobs",
    "MigManagerSim",
    "Overlap",
    "Recreation",
    "SimGpu",
]

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
#: GFD's label naming the device plugin's MIG strategy (``single`` makes ``nvidia.com/gpu`` a
#: MIG device on a GPU with MIG enabled).
STRATEGY_LABEL = "nvidia.com/mig.strategy"
PAUSED = "paused-for-mig-change"
DEPLOY_LABELS = tuple(
    f"nvidia.com/gpu.deploy.{c}"
    # ``client``: GPU Operator 26.7's label for third-party GPU clients such as a standalone
    # DRA driver, bounced around a MIG change like the operands.
    for c in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm", "client")
)
#: Pod annotation naming the GPU indices whose devices the pod holds (``"0"``, ``"1,3"``).
GPU_ANNOTATION = "mig-manager-sim.migscope.test/gpus"
#: The ``User-Agent`` of the simulation's requests (tests tell them from the applier's).
USER_AGENT = "mig-manager-sim"

H200_PCI = "0x233510DE"


@dataclass(frozen=True)
class SimGpu:
    """One GPU's MIG state: mode and instances (``{profile: count}``) when enabled."""

    pci_device_id: str = H200_PCI
    mig_enabled: bool = False
    instances: Mapping[str, int] = field(default_factory=dict)

    def normalised(self) -> tuple[str, bool, tuple[tuple[str, int], ...]]:
        """Comparable form: device ID in upper case, zero counts dropped."""
        kept = tuple(sorted((p, n) for p, n in self.instances.items() if n > 0))
        return (self.pci_device_id.upper(), self.mig_enabled, kept if self.mig_enabled else ())


@dataclass
class Knobs:
    """Per-node failure modes; read at each step, so tests may change them at any time.

    Attributes:
        fail: The apply step fails (``failed``).
        stuck_pending: Stop after ``pending`` with the operands paused, forever.
        reboot: Go through ``rebooting`` (node NotReady for ``reboot_seconds``).
        reboot_outcome: The state after the reboot.
        reboot_seconds: How long the node is NotReady.
        delay_s: Seconds to wait before each state write.
        pause_operands: Pause the operand deploy labels during a change.
        device_plugin: The device plugin and GFD run on the node and advertise its MIG
            devices; False for a node whose devices NVIDIA's DRA driver publishes instead
            (:class:`~support.kubeapi.dra_plugin.DraPluginSim`).
    """

    fail: bool = False
    stuck_pending: bool = False
    reboot: bool = False
    reboot_outcome: Literal["success", "failed"] = "success"
    reboot_seconds: float = 0.2
    delay_s: float = 0.0
    pause_operands: bool = True
    device_plugin: bool = True


@dataclass(frozen=True)
class Recreation:
    """A change that reached the GPUs, or was refused because they were in use (a record).

    Attributes:
        node: The node.
        config: The config name being applied.
        gpus: Indices of the GPUs whose layout the change re-creates.
        holders: ``namespace/name`` of the pods holding a device on one of those GPUs at
            that moment (as :data:`GPU_ANNOTATION` or the requests say).
    """

    node: str
    config: str
    gpus: tuple[int, ...]
    holders: tuple[str, ...]


@dataclass(frozen=True)
class Overlap:
    """The node's config label read ``seen`` while MIG Manager was applying ``applying``."""

    node: str
    applying: str
    seen: str | None


class _Stopped(Exception):
    pass


class MigManagerSim:
    """MIG Manager + device plugin for the given nodes (see the module docstring).

    Args:
        api: The server the nodes live in.
        nodes: ``{node name: [SimGpu, ...]}``: each node's GPUs as they are at the start.
        config_namespace: Namespace of the mig-parted ConfigMap.
        config_name: Its name (the operator's default is ``default-mig-parted-config``).
        config_key: The key holding the YAML.
        knobs: Failure modes per node (default: all off).

    Usage::

        with MigManagerSim(api, {"gpu-a": [SimGpu()]}) as mig:
            core.patch_node("gpu-a", {"metadata": {"labels": {CONFIG_LABEL: "all-balanced"}}})
            mig.wait_for_state("gpu-a", "success")
    """

    def __init__(
        self,
        api: KubeApiServer,
        nodes: Mapping[str, Sequence[SimGpu]],
        *,
        config_namespace: str = "gpu-operator",
        config_name: str = "default-mig-parted-config",
        config_key: str = "config.yaml",
        knobs: Mapping[str, Knobs] | None = None,
    ) -> None:
        self.api = api
        self.config_namespace = config_namespace
        self.config_name = config_name
        self.config_key = config_key
        self._lock = threading.Lock()
        self._gpus = {name: list(gpus) for name, gpus in nodes.items()}
        self._knobs = {name: Knobs() for name in nodes}
        self._knobs.update(knobs or {})
        self._transitions: list[tuple[str, str]] = []
        self._reconciles: dict[str, int] = dict.fromkeys(nodes, 0)
        self._seen: dict[str, int] = dict.fromkeys(nodes, 0)
        self._errors: list[str] = []
        self._recreated: list[Recreation] = []
        self._refused: list[Recreation] = []
        self._overlaps: list[Overlap] = []
        self._stop = threading.Event()
        self._controllers: list[_NodeController] = []

    # ----------------------------------------------------------------------------- lifecycle
    def start(self) -> MigManagerSim:
        """Publish each node's devices, then start one controller per node."""
        self._stop.clear()
        for name in self._gpus:
            controller = _NodeController(self, name)
            controller.publish_devices()
            self._controllers.append(controller)
        for controller in self._controllers:
            controller.start()
        return self

    def stop(self) -> None:
        """Stop and join every controller thread (idempotent)."""
        self._stop.set()
        for controller in self._controllers:
            controller.halt()
        self._controllers.clear()

    def __enter__(self) -> MigManagerSim:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------- state
    def knobs(self, node: str) -> Knobs:
        """The node's failure modes (mutable)."""
        return self._knobs[node]

    def gpus(self, node: str) -> list[SimGpu]:
        """The node's GPUs as the simulated hardware has them now."""
        with self._lock:
            return list(self._gpus[node])

    def _set_gpus(self, node: str, gpus: Sequence[SimGpu]) -> None:
        with self._lock:
            self._gpus[node] = list(gpus)

    @property
    def transitions(self) -> list[tuple[str, str]]:
        """Every ``(node, state)`` written, in order."""
        with self._lock:
            return list(self._transitions)

    def states(self, node: str) -> list[str]:
        """The states written for one node, in order."""
        return [s for n, s in self.transitions if n == node]

    def reconciles(self, node: str) -> int:
        """How many label changes the node's controller acted on."""
        with self._lock:
            return self._reconciles[node]

    @property
    def errors(self) -> list[str]:
        """API errors the controllers met (they log and carry on, as the real one does)."""
        with self._lock:
            return list(self._errors)

    @property
    def recreated(self) -> list[Recreation]:
        """Every change that re-created GPUs, in order, with the pods holding them then."""
        with self._lock:
            return list(self._recreated)

    @property
    def refused_in_use(self) -> list[Recreation]:
        """Every change that failed because a pod held a device on a GPU it changes."""
        with self._lock:
            return list(self._refused)

    @property
    def overlaps(self) -> list[Overlap]:
        """Relabels seen while a change was still in progress on the node (see above)."""
        with self._lock:
            return list(self._overlaps)

    def wait_for_state(self, node: str, state: str, *, timeout: float = 5.0) -> dict[str, Any]:
        """Wait until the node's ``mig.config.state`` label is ``state``; returns the node."""
        return self.api.wait_for(
            "v1",
            "Node",
            node,
            lambda obj: obj["metadata"].get("labels", {}).get(STATE_LABEL) == state,
            timeout=timeout,
        )

    def wait_until_seen(
        self, node: str, resource_version: int | str, *, timeout: float = 5.0
    ) -> None:
        """Wait until the node's controller has handled the Node at ``resource_version``.

        After this, a test can assert that the controller *ignored* a change (a same-value
        relabel): it has seen it and done nothing.
        """
        wanted = int(resource_version)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._seen[node] >= wanted:
                    return
            time.sleep(0.01)
        raise TimeoutError(f"{node}: handled up to {self._seen[node]}, wanted {wanted}")

    def _record(self, node: str, state: str) -> None:
        with self._lock:
            self._transitions.append((node, state))

    def _note_error(self, text: str) -> None:
        with self._lock:
            self._errors.append(text)

    def _note_recreation(self, record: Recreation, *, refused: bool) -> None:
        with self._lock:
            (self._refused if refused else self._recreated).append(record)

    def _note_overlap(self, record: Overlap) -> None:
        with self._lock:
            self._overlaps.append(record)

    def _count_reconcile(self, node: str) -> None:
        with self._lock:
            self._reconciles[node] += 1

    def _mark_seen(self, node: str, resource_version: str | None) -> None:
        with self._lock:
            self._seen[node] = max(self._seen[node], int(resource_version or 0))


class _NodeController:
    """One node's MIG Manager pod: an informer on its Node and the reconfigure flow."""

    def __init__(self, sim: MigManagerSim, node: str) -> None:
        self.sim = sim
        self.node = node
        self.client = sim.api.client(user_agent=USER_AGENT)
        self.core = kubernetes.client.CoreV1Api(self.client)
        self.last_value: str | None = None
        self.applying: str | None = None  # the config of the reconcile in progress (a record)
        self.paused: list[str] = []
        self.watch: kubernetes.watch.Watch | None = None
        self.thread = threading.Thread(
            target=self._run, name=f"{THREAD_PREFIX}-mig-manager-{node}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def halt(self) -> None:
        while self.thread.is_alive():
            watch = self.watch
            if watch is not None:
                watch.stop()
            self.thread.join(timeout=0.05)
        self.client.close()

    # ----------------------------------------------------------------------------- informer
    def _run(self) -> None:
        stop = self.sim._stop
        selector = f"metadata.name={self.node}"
        while not stop.is_set():
            try:
                nodes = self.core.list_node(field_selector=selector)
                for item in nodes.items:
                    self._on_node(self.client.sanitize_for_serialization(item))
                self.watch = kubernetes.watch.Watch()
                for event in self.watch.stream(
                    self.core.list_node,
                    field_selector=selector,
                    resource_version=nodes.metadata.resource_version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=300,
                ):
                    if stop.is_set():
                        break
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._on_node(event["raw_object"])
            except _Stopped:
                return
            except kubernetes.client.ApiException as exc:
                if exc.status != 410:  # 410: relist, as an informer does
                    self.sim._note_error(f"{self.node}: {exc.status} {exc.reason}")
                    stop.wait(0.05)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if not stop.is_set():
                    self.sim._note_error(f"{self.node}: {type(exc).__name__}: {exc}")
                    stop.wait(0.05)

    def _on_node(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata", {})
        value = (meta.get("labels") or {}).get(CONFIG_LABEL)
        try:
            if value is None or value == self.last_value:
                return  # no label, or the value already handled: upstream ignores it
            self.last_value = value
            self.sim._count_reconcile(self.node)
            self.applying = value
            self._reconcile(value, obj)
        except kubernetes.client.ApiException as exc:
            self.sim._note_error(f"{self.node}: reconcile {value}: {exc.status} {exc.reason}")
        finally:
            self.applying = None
            self.sim._mark_seen(self.node, meta.get("resourceVersion"))

    # ---------------------------------------------------------------------------- reconcile
    def _reconcile(self, name: str, obj: Mapping[str, Any]) -> None:
        knobs = self.sim.knobs(self.node)
        current = self.sim.gpus(self.node)
        entries = self._config_entries(name)
        desired = _resolve(entries, current) if entries is not None else None
        if desired is None:
            self._set_state("failed")  # assert --valid-config
            return
        if [g.normalised() for g in desired] == [g.normalised() for g in current]:
            self._set_state("success")  # assert: already applied, no disruption
            return
        self._set_state("pending")
        if knobs.pause_operands:
            self._pause_operands(obj)
        if knobs.stuck_pending:
            return  # the pod-deletion timeout: pending for good, operands paused
        changed = [
            i
            for i, (a, b) in enumerate(zip(current, desired, strict=True))
            if a.normalised() != b.normalised()
        ]
        strategy = ((obj.get("metadata") or {}).get("labels") or {}).get(STRATEGY_LABEL)
        if self._in_use(current, changed, strategy):
            self.sim._note_recreation(
                self._recreation(name, current, changed, strategy), refused=True
            )
            self._fail()  # "In use by another client"
            return
        if knobs.reboot:
            self._set_state("rebooting")
            self._set_ready(False)
            self._sleep(knobs.reboot_seconds)
            self._set_ready(True)
            if knobs.reboot_outcome == "failed":
                self._fail()  # "did not take effect after rebooting"
                return
        if knobs.fail or not all(_placeable(g) for g in desired):
            self._fail()
            return
        self.sim._note_recreation(self._recreation(name, current, changed, strategy), refused=False)
        self.sim._set_gpus(self.node, desired)
        self.publish_devices()
        self._restore_operands()
        self._set_state("success")

    def _config_entries(self, name: str) -> list[Mapping[str, Any]] | None:
        try:
            cm = self.core.read_namespaced_config_map(
                self.sim.config_name, self.sim.config_namespace
            )
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        try:
            config = yaml.safe_load((cm.data or {}).get(self.sim.config_key, ""))
        except yaml.YAMLError:
            return None
        if not isinstance(config, dict) or config.get("version") != "v1":
            return None
        entries = (config.get("mig-configs") or {}).get(name)
        if not isinstance(entries, list) or not entries:
            return None
        for entry in entries:
            if not isinstance(entry, dict) or "devices" not in entry or "mig-enabled" not in entry:
                return None
        return entries

    def _in_use(
        self, current: Sequence[SimGpu], changed: Sequence[int], strategy: str | None
    ) -> bool:
        if not changed:
            return False
        pods = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self.node}")
        for pod in pods.items:
            if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
                continue
            held = _held_gpus(self.client.sanitize_for_serialization(pod), current, strategy)
            if held & set(changed):
                return True
        return False

    def _recreation(
        self, name: str, current: Sequence[SimGpu], changed: Sequence[int], strategy: str | None
    ) -> Recreation:
        """What the change touches and who holds it now (read from the store: no request)."""
        pods = self.sim.api.list("v1", "Pod", field_selector=f"spec.nodeName={self.node}")
        holders = sorted(
            f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
            for p in pods
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and _held_gpus(p, current, strategy) & set(changed)
        )
        return Recreation(self.node, name, tuple(changed), tuple(holders))

    # ------------------------------------------------------------------------------ writes
    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self.sim._stop.wait(seconds):
            raise _Stopped

    def _set_state(self, state: str) -> None:
        self._sleep(self.sim.knobs(self.node).delay_s)
        # Recorded first, so a test that saw the label also sees the transition.
        self.sim._record(self.node, state)
        self._label({STATE_LABEL: state})

    def _fail(self) -> None:
        self._restore_operands()
        self._set_state("failed")

    def _label(self, labels: Mapping[str, str | None]) -> None:
        done = self.core.patch_node(self.node, {"metadata": {"labels": dict(labels)}})
        applying = self.applying
        if applying is not None:
            seen = ((done.metadata.labels if done.metadata else None) or {}).get(CONFIG_LABEL)
            if seen != applying:
                self.sim._note_overlap(Overlap(self.node, applying, seen))

    def _pause_operands(self, obj: Mapping[str, Any]) -> None:
        labels = obj.get("metadata", {}).get("labels") or {}
        fresh = self.core.read_node(self.node).metadata.labels or {}
        labels = {**labels, **fresh}
        self.paused = [
            k for k in DEPLOY_LABELS if k in labels and labels[k] not in ("false", PAUSED)
        ]
        if self.paused:
            self._label(dict.fromkeys(self.paused, PAUSED))

    def _restore_operands(self) -> None:
        if self.paused:
            self._label(dict.fromkeys(self.paused, "true"))
            self.paused = []

    def _set_ready(self, ready: bool) -> None:
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "node is rebooting",
        }
        self.core.patch_node_status(self.node, {"status": {"conditions": [condition]}})

    def publish_devices(self) -> None:
        """Device plugin + GFD: advertise the current layout on the Node."""
        if not self.sim.knobs(self.node).device_plugin:
            return  # a DRA node: the DRA kubelet plugin publishes ResourceSlices instead
        try:
            node = self.client.sanitize_for_serialization(self.core.read_node(self.node))
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return
            raise
        counts = _resources(self.sim.gpus(self.node))
        status = node.get("status") or {}
        patch_status: dict[str, Any] = {}
        for field_name in ("capacity", "allocatable"):
            old = status.get(field_name) or {}
            new: dict[str, str] = {k: "0" for k in old if k.startswith("nvidia.com/")}
            new.update({k: str(v) for k, v in counts.items()})
            patch_status[field_name] = new
        self.core.patch_node_status(self.node, {"status": patch_status})
        old_labels = node["metadata"].get("labels") or {}
        labels: dict[str, str | None] = {
            k: None for k in old_labels if k.startswith("nvidia.com/mig-") and k.endswith(".count")
        }
        for resource, count in counts.items():
            if resource.startswith("nvidia.com/mig-"):
                labels[resource.replace("+", ".") + ".count"] = str(count)
        labels["nvidia.com/mig.strategy"] = "mixed"
        self._label(labels)


def _resolve(entries: Sequence[Mapping[str, Any]], gpus: Sequence[SimGpu]) -> list[SimGpu] | None:
    """The GPUs after applying ``entries``, or None for a config mig-parted would refuse."""
    try:
        return _apply_entries(entries, gpus)
    except (TypeError, ValueError, AttributeError):
        return None


def _apply_entries(
    entries: Sequence[Mapping[str, Any]], gpus: Sequence[SimGpu]
) -> list[SimGpu] | None:
    result = list(gpus)
    for entry in entries:
        devices = entry["devices"]
        filters = entry.get("device-filter")
        if isinstance(filters, str):
            filters = [filters]
        wanted = {str(f).split(":")[0].upper() for f in filters or []}
        for index, gpu in enumerate(gpus):
            if devices != "all" and (not isinstance(devices, list) or index not in devices):
                continue
            if wanted and gpu.pci_device_id.upper() not in wanted:
                continue
            enabled = bool(entry["mig-enabled"])
            layout = entry.get("mig-devices") or {}
            if not isinstance(layout, dict):
                return None
            result[index] = SimGpu(
                gpu.pci_device_id,
                enabled,
                {str(p): int(n) for p, n in layout.items() if int(n) > 0} if enabled else {},
            )
    return result


def _placeable(gpu: SimGpu) -> bool:
    model = model_for_pci(gpu.pci_device_id)
    if model is None or not gpu.mig_enabled or not gpu.instances:
        return True
    if any(not model.has_profile(p) for p in gpu.instances):
        return False
    return is_valid(model, dict(gpu.instances)).ok


def _resources(gpus: Sequence[SimGpu]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for gpu in gpus:
        if gpu.mig_enabled:
            for profile, n in gpu.instances.items():
                key = f"nvidia.com/mig-{profile}"
                counts[key] = counts.get(key, 0) + n
        else:
            counts["nvidia.com/gpu"] = counts.get("nvidia.com/gpu", 0) + 1
    return counts


def _held_gpus(pod: Mapping[str, Any], gpus: Sequence[SimGpu], strategy: str | None) -> set[int]:
    annotation = (pod.get("metadata", {}).get("annotations") or {}).get(GPU_ANNOTATION)
    if annotation is not None:
        return {int(i) for i in annotation.split(",") if i.strip()}
    requested: set[str] = set()
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            for name, amount in (resources.get(section) or {}).items():
                if name.startswith("nvidia.com/") and str(amount) not in ("0", ""):
                    # Time-slicing and MPS replicas (``renameByDefault``) hold the same device.
                    requested.add(name.removesuffix(".shared"))
    profiles = {
        n.removeprefix("nvidia.com/mig-").replace("gb.me", "gb+me")
        for n in requested
        if n.startswith("nvidia.com/mig-")
    }
    whole = "nvidia.com/gpu" in requested
    held: set[int] = set()
    for index, gpu in enumerate(gpus):
        if (
            (whole and not gpu.mig_enabled)
            # The single strategy advertises a GPU's MIG devices as ``nvidia.com/gpu``.
            or (whole and gpu.mig_enabled and strategy == "single")
            or (gpu.mig_enabled and profiles & set(gpu.instances))
        ):
            held.add(index)
    return held
