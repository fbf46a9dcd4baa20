"""A small GPU cluster for applier tests: API test server, MIG Manager sim, a plan.

Two H200 nodes with two MIG GPUs each (``all-balanced``: 1g.18gb×2, 2g.35gb, 3g.71gb),
labelled as the GPU Operator leaves them, the operator's ClusterPolicy pointing MIG Manager
at migscope's ConfigMap (which already holds configs someone else wrote), and a plan that
turns GPU 1 of a node into ``3g.71gb×2``.

:class:`SimClock` and :class:`SimTimeKube` run the applier in simulated time, for tests whose
outcome turns on a timeout: time passes only while the applier waits, and only once the
simulated cluster has finished reacting, so a timeout fires when simulated time passes it
and never because a loaded machine ran MIG Manager's simulation slowly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import yaml
from support.kubeapi import KubeApiServer, RecordedRequest, config_map, node
from support.kubeapi.mig_manager import (
    CONFIG_LABEL,
    STATE_LABEL,
    Knobs,
    MigManagerSim,
    SimGpu,
)
from support.kubeapi.mig_manager import USER_AGENT as MIG_MANAGER_AGENT

from migscope.applier._applier import Applier
from migscope.applier._audit import Audit
from migscope.applier._clock import Clock
from migscope.applier._plan import ApplyPlan, GpuChange, NodeChange, Provenance
from migscope.applier._settings import ApplySettings
from migscope.core._migparted import parse_config
from migscope.kube import Kube

NAMESPACE = "gpu-operator"
CONFIGMAP = "migscope-mig-parted-config"
BALANCED = {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
TWO_3G = {"3g.71gb": 2}
EXISTING = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
  team-special:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.141gb": 1}
"""
TARGET = "migscope-h200-split"
PLAN_CONFIGS = parse_config(
    f"""\
version: v1
mig-configs:
  {TARGET}:
    - devices: [0]
      mig-enabled: true
      mig-devices: {{"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}}
    - devices: [1]
      mig-enabled: true
      mig-devices: {{"3g.71gb": 2}}
"""
)
NODES = ("gpu-a", "gpu-b")


def change(name: str = "gpu-a") -> NodeChange:
    """GPU 1 of ``name`` goes from balanced to two 3g."""
    return NodeChange(
        node=name,
        config=TARGET,
        gpus=(GpuChange(0, BALANCED, BALANCED), GpuChange(1, BALANCED, TWO_3G)),
    )


def provenance(
    *, age_s: float = 60.0, simulated: bool = False, kind: str = "prometheus"
) -> Provenance:
    """A plan's provenance: made ``age_s`` ago from a real Prometheus (by default)."""
    created = time.time() - age_s
    source: dict[str, Any] = {"kind": kind, "url": "http://prometheus.monitoring:9090"}
    if kind == "simulation":
        source = {"kind": kind, "scenarios": ["h200-node"]}
    return Provenance(
        kind=kind,
        simulated=simulated or kind == "simulation",
        created_unix=created,
        created=datetime.fromtimestamp(created, tz=timezone.utc).isoformat(),
        source=source,
    )


def plan(*names: str) -> ApplyPlan:
    """A fresh plan from real data changing ``names`` (default: gpu-a)."""
    return ApplyPlan(
        "test", tuple(change(n) for n in (names or ("gpu-a",))), PLAN_CONFIGS, provenance()
    )


def resources(layouts: Sequence[Mapping[str, int]]) -> dict[str, str]:
    total: dict[str, int] = {}
    for layout in layouts:
        for p, n in layout.items():
            total[f"nvidia.com/mig-{p}"] = total.get(f"nvidia.com/mig-{p}", 0) + n
    return {k: str(v) for k, v in total.items()}


@dataclass
class Cluster:
    """The running pieces."""

    api: KubeApiServer
    mig: MigManagerSim
    kube: Kube

    def node(self, name: str = "gpu-a") -> dict[str, Any]:
        return self.api.get("v1", "Node", name)

    def labels(self, name: str = "gpu-a") -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("labels") or {})

    def applier(
        self,
        *,
        sleep: Callable[[float], None] | None = None,
        clock: Clock | Callable[[], float] | None = None,
        **overrides: Any,
    ) -> Applier:
        """An applier with fast timeouts; ``sleep``/``clock`` replace the real ones."""
        settings = ApplySettings(
            **{
                "apply": True,
                "namespace": NAMESPACE,
                "node_timeout_s": 5.0,
                "drain_timeout_s": 2.0,
                "verify_timeout_s": 2.0,
                "poll_s": 0.05,
                "max_nodes": 10,
                "max_changes_per_day": 100,
                **overrides,
            }
        )
        audit = Audit(self.kube if settings.apply else None, actor="test-applier", out=_Sink())
        extra: dict[str, Any] = {}
        if sleep is not None:
            extra["sleep"] = sleep
        if clock is not None:
            extra["clock"] = clock
        return Applier(self.kube, settings, audit=audit, **extra)

    def writes(self) -> list[RecordedRequest]:
        """Requests since the last ``api.clear_requests()`` that could change something
        (anyone's: a write MIG Manager makes is a reaction to one of ours)."""
        return [r for r in self.api.requests if r.method not in ("GET", "HEAD", "OPTIONS")]

    def not_mig_manager(self) -> list[RecordedRequest]:
        """Requests since the last ``api.clear_requests()`` from anyone but MIG Manager (whose
        informers re-list and re-watch on their own schedule)."""
        return [r for r in self.api.requests if r.user_agent != MIG_MANAGER_AGENT]

    def configmap(self) -> dict[str, Any]:
        text = self.api.get("v1", "ConfigMap", CONFIGMAP, NAMESPACE)["data"]["config.yaml"]
        return dict(yaml.safe_load(text)["mig-configs"])


class SimClock:
    """Simulated time for the applier (a :class:`~migscope.applier._clock.Clock`; test fake).

    Time moves only when the applier waits: :meth:`sleep` first lets the simulated cluster
    finish reacting (``settle``, in real time, however long a loaded machine takes), then
    adds the seconds asked for; :class:`SimTimeKube` adds a watch's timeout when nothing is
    left to deliver. Nothing else moves it, so a deadline passes exactly when the simulated
    waits add up to it. The wall clock starts at the real time (plans, Leases and change
    records are compared with it) and runs ahead of it by the simulated waits. Only the
    applier's own thread uses it (the Lease's renewal thread keeps real time).

    Args:
        settle: ``settle(node)`` returns once the simulated cluster has reacted to every
            write so far to ``node`` (None: to every node).

    Attributes:
        elapsed: Simulated seconds so far.
        sleeps: Every :meth:`sleep` asked for, in order.
    """

    def __init__(self, settle: Callable[[str | None], None]) -> None:
        self.settle = settle
        self.start = time.time()
        self.elapsed = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.start + self.elapsed

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.settle(None)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass."""
        self.elapsed += max(0.0, seconds)


class SimTimeKube(Kube):
    """A :class:`Kube` whose node watches are held in simulated time (test fake).

    A real watch is held by the server until its timeout, in real time. Here a watch first
    lets the cluster settle on the node (:attr:`SimClock.settle`), then delivers, through
    the real watch from the version asked for, everything written to the node up to now,
    and then, as nothing more will happen until the applier acts, ends as at its timeout:
    the :class:`SimClock` advances by ``timeout_s``. A watch the applier leaves on an
    answer takes no simulated time; one the server ends early (a fault) takes none either.
    Every other call is the real one.

    Args:
        api: The API test server (the node's current version is read from its store).
        clock: The applier's clock.
        timeout_s: The client's per-request timeout (real seconds).
    """

    def __init__(self, api: KubeApiServer, clock: SimClock, *, timeout_s: float = 5.0) -> None:
        super().__init__(api.client(retries=False), timeout_s=timeout_s)
        self.server = api
        self.clock = clock

    def watch_node(
        self, name: str, *, resource_version: str, timeout_s: float
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        self.clock.settle(name)
        latest = int(self.server.get("v1", "Node", name)["metadata"]["resourceVersion"])
        caught_up = latest <= int(resource_version)
        if not caught_up:
            for kind, obj in super().watch_node(
                name, resource_version=resource_version, timeout_s=timeout_s
            ):
                yield kind, obj
                if int((obj.get("metadata") or {}).get("resourceVersion") or 0) >= latest:
                    caught_up = True
                    break
        if caught_up:  # held until its timeout with nothing more to deliver
            self.clock.advance(timeout_s)


class _Sink:
    """Swallows the JSON log lines (the audit keeps them in ``lines``)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def cluster_policy(config_name: str | None = CONFIGMAP) -> dict[str, Any]:
    spec: dict[str, Any] = {"migManager": {"enabled": True}}
    if config_name is not None:
        spec["migManager"]["config"] = {"name": config_name, "default": "all-disabled"}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": spec,
    }


@contextmanager
def running_cluster(
    *,
    knobs: Mapping[str, Knobs] | None = None,
    policy_config: str | None = CONFIGMAP,
    token: str | None = None,
) -> Iterator[Cluster]:
    """Start the API server and MIG Manager with two balanced H200 nodes."""
    with KubeApiServer(token=token) as api:
        api.create(cluster_policy(policy_config))
        api.create(config_map(CONFIGMAP, NAMESPACE, {"config.yaml": EXISTING}))
        gpus = {n: [SimGpu(mig_enabled=True, instances=BALANCED)] * 2 for n in NODES}
        for name in NODES:
            api.create(
                node(
                    name,
                    labels={CONFIG_LABEL: "all-balanced", STATE_LABEL: "success"},
                    allocatable={"cpu": "64", **resources([BALANCED, BALANCED])},
                )
            )
        with MigManagerSim(
            api, gpus, config_namespace=NAMESPACE, config_name=CONFIGMAP, knobs=knobs
        ) as mig:
            for name in NODES:  # let each controller handle its node once, then start clean
                mig.wait_until_seen(
                    name, api.get("v1", "Node", name)["metadata"]["resourceVersion"]
                )
            api.clear_requests()
            yield Cluster(api, mig, Kube(api.client(retries=False), timeout_s=5.0))
