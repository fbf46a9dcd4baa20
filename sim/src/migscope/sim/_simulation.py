"""A whole simulated fleet from a scenario: nodes, their NVML objects and their pods.

``Simulation.from_scenario(resolve_scenario("h200-node"), seed=7)`` builds every node
of the scenario on one shared :class:`SimClock`; ``sim.node("node-a").nvml`` is that node's
NVML object for the exporter, and ``sim.node("node-a").pod_assignments()`` the pods holding
its devices for the kubelet PodResources fake.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from migscope.sim._build import build_gpu, build_instances
from migscope.sim._clock import SimClock
from migscope.sim._gpu import SimGpu, SimInstance
from migscope.sim._nvml import SimNvml
from migscope.sim._nvml_errors import error_code
from migscope.sim._scenario import (
    GpuLostSpec,
    LayoutChangeSpec,
    NvmlErrorSpec,
    Scenario,
    ScenarioError,
    SlowCallSpec,
    format_path,
    line_of,
    load_scenario,
)


class PodAssignment(NamedTuple):
    """One device held by one container, as kubelet's PodResources ``List`` reports it.

    Attributes:
        device_id: ``MIG-<uuid>`` or ``GPU-<uuid>`` (what the device plugin advertises).
        namespace: Pod namespace.
        pod: Pod name.
        container: Container name.
        resource_name: ``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>`` (mixed strategy).
    """

    device_id: str
    namespace: str
    pod: str
    container: str
    resource_name: str


class SimNode:
    """One simulated node: its GPUs and the NVML object that serves them."""

    def __init__(self, name: str, gpus: Sequence[SimGpu], nvml: SimNvml) -> None:
        self.name = name
        self.gpus = tuple(gpus)
        self.nvml = nvml
        self._held: tuple[tuple[object, ...], tuple[PodAssignment, ...]] | None = None

    def __repr__(self) -> str:
        return f"SimNode({self.name!r}, gpus={len(self.gpus)})"

    def instances(self, t: float | None = None) -> list[SimInstance]:
        """The MIG instances alive at ``t`` (default: now), GPU by GPU."""
        when = self.nvml.clock.elapsed() if t is None else t
        return [inst for gpu in self.gpus for inst in gpu.instances_at(when)]

    def create_instance(
        self,
        gpu: int,
        profile: str,
        *,
        start: int | None = None,
        workload: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> SimInstance:
        """Create one GPU instance on GPU ``gpu`` at ``at`` (default: now), beside the others.

        What NVIDIA's DRA driver does per claim under DynamicMIG (``NodePrepareResources``
        creates a GI and its CI at the allocated placement): the other instances keep their
        GI ids, UUIDs and handles; enumeration shows the new one from ``at``. It has no
        device-plugin owner: a pod holds it through a claim, which the kubelet fake serves
        (its name: :attr:`SimInstance.dra_device_name`).

        Args:
            gpu: NVML index of a MIG-enabled GPU.
            profile: Profile name (``1g.18gb``).
            start: Placement start in memory slices; the first free one by default.
            workload: Workload spec as in a scenario (idle by default).
            at: Seconds of simulated time; after the GPU's last layout change.

        Raises:
            ValueError: no such GPU, MIG disabled, the profile does not fit there, or ``at``
                is out of order.
        """
        target = self._gpu(gpu)
        when = self.nvml.clock.elapsed() if at is None else at
        current = target.segment_at(when).instances if target.mig_enabled else ()
        specs: list[dict[str, Any]] = [
            {"profile": i.profile.name, "start": i.start} for i in current
        ]
        new: dict[str, Any] = {"profile": profile, "start": start}
        if workload is not None:
            new["workload"] = dict(workload)
        try:
            built = build_instances(target, [*specs, new], target.next_generation())
        except ScenarioError as exc:
            raise ValueError(str(exc)) from exc
        instance = built[-1]
        target.add_instance(when, instance)
        return instance

    def destroy_instance(
        self,
        gpu: int,
        gi_id: int,
        *,
        at: float | None = None,
        stale_error: int | str = "INVALID_ARGUMENT",
    ) -> SimInstance:
        """Destroy GPU instance ``gi_id`` of GPU ``gpu`` at ``at`` (DynamicMIG's unprepare).

        Calls on its MIG device and GPU-instance handles fail with ``stale_error`` from then
        on; its UUID is unknown to ``nvmlDeviceGetHandleByUUID``. The others stay.

        Raises:
            ValueError: no such GPU or GPU instance, or ``at`` out of order.
        """
        when = self.nvml.clock.elapsed() if at is None else at
        return self._gpu(gpu).remove_instance(when, gi_id, error_code(stale_error))

    def _gpu(self, index: int) -> SimGpu:
        if not 0 <= index < len(self.gpus):
            raise ValueError(f"node {self.name} has no GPU {index} (it has {len(self.gpus)})")
        return self.gpus[index]

    def pod_assignments(self, t: float | None = None) -> tuple[PodAssignment, ...]:
        """Devices held by pods at ``t`` (default: now); a re-partition changes them.

        The same tuple object comes back until what it is made of changes (a MIG GPU's layout
        segment, whose instances and their owners are fixed when it is made, or a whole GPU's
        owner): the exporter asks on every scrape, and its render cache compares the owners by
        identity first (a real kubelet watcher also answers with the same map until it
        refreshes).
        """
        when = self.nvml.clock.elapsed() if t is None else t
        key = [gpu.segment_at(when) if gpu.mig_enabled else gpu.owner for gpu in self.gpus]
        if self._held is not None and _same(self._held[0], key):
            return self._held[1]
        held: list[tuple[str, Any, str]] = []
        for gpu in self.gpus:
            if gpu.mig_enabled:
                instances = gpu.instances_at(when)
                held.extend((i.uuid, i.owner, i.profile.resource_name) for i in instances)
            else:
                held.append((gpu.uuid, gpu.owner, "nvidia.com/gpu"))
        out = tuple(
            PodAssignment(device_id, owner.namespace, owner.pod, owner.container, resource)
            for device_id, owner, resource in held
            if owner is not None
        )
        self._held = (tuple(key), out)
        return out


def _same(before: Sequence[object], now: Sequence[object]) -> bool:
    """Whether two keys hold the very same objects, in order."""
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


class Simulation:
    """Every node of a scenario on one clock.

    Attributes:
        scenario: The validated scenario.
        seed: The seed in use (the scenario's, or the one given to :meth:`from_scenario`).
        clock: The shared simulated clock.
        nodes: Nodes by name, in scenario order.
    """

    def __init__(
        self, scenario: Scenario, nodes: Mapping[str, SimNode], seed: int, clock: SimClock
    ) -> None:
        self.scenario = scenario
        self.nodes = dict(nodes)
        self.seed = seed
        self.clock = clock

    def __repr__(self) -> str:
        return f"Simulation(nodes={list(self.nodes)}, seed={self.seed}, clock={self.clock!r})"

    def __iter__(self) -> Iterator[SimNode]:
        return iter(self.nodes.values())

    def node(self, name: str) -> SimNode:
        """The node called ``name``.

        Raises:
            KeyError: no such node (the message lists the known ones).
        """
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r} (nodes: {', '.join(self.nodes)})") from None

    @classmethod
    def from_scenario(
        cls,
        source: str | Path | Mapping[str, Any],
        *,
        seed: int | None = None,
        clock: SimClock | None = None,
    ) -> Simulation:
        """Build a simulation from a scenario file or an already-parsed mapping.

        Args:
            source: Path to a YAML scenario, or its content as a mapping.
            seed: Overrides the scenario's seed (same seed → same UUIDs, GI ids, bursts).
            clock: The clock to use; by default a manual clock starting at the scenario's
                ``start``.

        Raises:
            ScenarioError: the scenario is invalid (one line naming the field).
        """
        scenario, tree = load_scenario(source)
        name = None if isinstance(source, Mapping) else str(source)
        return _Builder(scenario, tree, name).build(seed, clock)


class _Builder:
    """Builds a :class:`Simulation`, turning problems into located ScenarioErrors."""

    def __init__(self, scenario: Scenario, tree: yaml.Node | None, source: str | None) -> None:
        self.scenario, self.tree, self.source = scenario, tree, source

    def error(self, path: Sequence[str | int], reason: str) -> ScenarioError:
        return ScenarioError(
            format_path(path), reason, line=line_of(self.tree, path), source=self.source
        )

    def build(self, seed: int | None, clock: SimClock | None) -> Simulation:
        sc = self.scenario
        seed = sc.seed if seed is None else seed
        clock = clock or SimClock(sc.start)
        nodes: dict[str, SimNode] = {}
        uuids: dict[str, str] = {}
        for n, node_spec in enumerate(sc.nodes):
            if node_spec.name in nodes:
                raise self.error(["nodes", n, "name"], f"duplicate node name {node_spec.name!r}")
            gpus = []
            for g, gpu_spec in enumerate(node_spec.gpus):
                path: list[str | int] = ["nodes", n, "gpus", g]
                gpu = build_gpu(
                    gpu_spec, node=node_spec.name, index=g, seed=seed, path=path, error=self.error
                )
                if gpu.uuid in uuids:
                    raise self.error([*path, "uuid"], f"UUID already used by {uuids[gpu.uuid]}")
                uuids[gpu.uuid] = format_path(path)
                gpus.append(gpu)
            nvml = SimNvml(
                gpus,
                clock=clock,
                driver=node_spec.driver or sc.driver,
                privileged=node_spec.privileged,
                node=node_spec.name,
                seed=seed,
                builder=_runtime_layout,
            )
            nodes[node_spec.name] = SimNode(node_spec.name, gpus, nvml)
        for f, fault in enumerate(sc.faults):
            self._apply_fault(nodes, ["faults", f], fault)
        return Simulation(sc, nodes, seed, clock)

    def _apply_fault(self, nodes: dict[str, SimNode], path: list[str | int], fault: Any) -> None:
        targets = list(nodes.values())
        if fault.node is not None:
            if fault.node not in nodes:
                raise self.error([*path, "node"], f"no node {fault.node!r} in the scenario")
            targets = [nodes[fault.node]]
        for node in targets:
            if fault.gpu is not None and fault.gpu >= len(node.gpus):
                raise self.error(
                    [*path, "gpu"],
                    f"node {node.name} has {len(node.gpus)} GPU(s), no GPU {fault.gpu}",
                )
            faults = node.nvml.faults
            if isinstance(fault, GpuLostSpec):
                faults.lose_gpu(fault.gpu, at=fault.at)
            elif isinstance(fault, LayoutChangeSpec):
                gpu = node.gpus[fault.gpu]
                if not gpu.mig_enabled:
                    raise self.error(
                        [*path, "gpu"], f"GPU {fault.gpu} of {node.name} has MIG disabled"
                    )
                instances = build_instances(
                    gpu,
                    fault.instances,
                    gpu.next_generation(),
                    path=[*path, "instances"],
                    error=self.error,
                )
                try:
                    gpu.schedule_layout(fault.at, instances, error_code(fault.stale_error))
                except ValueError as exc:
                    raise self.error([*path, "at"], str(exc)) from exc
            elif isinstance(fault, SlowCallSpec):
                faults.slow(fault.functions, fault.delay_ms, gpu=fault.gpu)
            elif isinstance(fault, NvmlErrorSpec):
                faults.inject_error(
                    fault.function,
                    fault.error,
                    gpu=fault.gpu,
                    probability=fault.probability,
                    count=fault.count,
                    start=fault.start,
                    until=fault.until,
                )


def _runtime_layout(gpu: SimGpu, specs: Sequence[Any], generation: int) -> list[SimInstance]:
    """Layouts given through the Python fault API: errors name the field, not a file line."""
    return build_instances(gpu, specs, generation)
