"""From a validated scenario to simulated GPUs: models, layouts, workloads, pods.

Everything that needs the catalogue or the trace files is checked here, while building, so
a scenario either builds completely or fails with one :class:`ScenarioError` naming the
field: an unknown model, a profile the model lacks, a layout no placement can hold (with
:func:`migscope.core._layout.is_valid`'s reason), a memory size larger than the instance, a
trace container that is not in the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migscope.core import CatalogueError, GpuModel, find_model, is_valid, parse_pci_device_id
from migscope.sim._gpu import MIG_RESERVED_BYTES, PodOwner, SimGpu, SimInstance
from migscope.sim._ids import derive_seed, gi_id_for, gpu_uuid, pci_bus_id
from migscope.sim._power import PowerModel, default_power
from migscope.sim._scenario import (
    BurstySpec,
    ConstantSpec,
    GpuSpec,
    IdleSpec,
    InstanceSpec,
    PeriodicSpec,
    PodSpec,
    ScenarioError,
    TraceSpec,
    WorkloadSpec,
    format_path,
)
from migscope.sim._traces import TraceError, load_series
from migscope.sim._workloads import (
    Bursty,
    Constant,
    FixedMemory,
    Idle,
    MemoryModel,
    Periodic,
    Size,
    Trace,
    TraceMemory,
    Workload,
)

ErrorFactory = Callable[[Sequence[str | int], str], ScenarioError]
"""Makes a :class:`ScenarioError` for a field path (adds file name and line)."""

_DEFAULT_BUSY_MEMORY = Size(fraction=0.5)


def _plain_error(path: Sequence[str | int], reason: str) -> ScenarioError:
    return ScenarioError(format_path(path), reason)


def _owner(pod: PodSpec | None) -> PodOwner | None:
    return None if pod is None else PodOwner(pod.namespace, pod.pod, pod.container)


def _check_size(
    size: Size | None, capacity: int, path: Sequence[str | int], error: ErrorFactory
) -> None:
    if size is not None and size.nbytes is not None and size.nbytes > capacity:
        raise error(path, f"{size.nbytes} bytes do not fit: the device has {capacity} usable bytes")


def build_workload(
    spec: WorkloadSpec,
    *,
    capacity: int,
    seed: int,
    path: Sequence[str | int],
    error: ErrorFactory = _plain_error,
) -> Workload:
    """A :class:`Workload` from its spec, for a device with ``capacity`` usable bytes.

    Defaults that depend on the pattern: an idle workload holds no memory and runs no
    process unless ``memory`` is given; the others hold half the device's memory and run
    one process; a trace takes its memory from the matching memory trace.
    """
    _check_size(spec.memory, capacity, [*path, "memory"], error)
    _check_size(spec.memory_peak, capacity, [*path, "memory_peak"], error)
    idle = isinstance(spec, IdleSpec)
    base = spec.memory or (Size(fraction=0.0) if idle else _DEFAULT_BUSY_MEMORY)
    memory: MemoryModel = FixedMemory(base, spec.memory_peak)
    holds = not idle or (base.fraction or 0.0) > 0 or (base.nbytes or 0) > 0
    processes = spec.processes if spec.processes is not None else int(holds)
    common: dict[str, Any] = {"mix": spec.mix.to_mix(), "processes": processes}
    if isinstance(spec, IdleSpec):
        return Idle(memory=memory, **common)
    if isinstance(spec, ConstantSpec):
        return Constant(spec.level, memory=memory, **common)
    if isinstance(spec, PeriodicSpec):
        return Periodic(
            period=spec.period,
            duty=spec.duty,
            high=spec.high,
            low=spec.low,
            phase=spec.phase,
            memory=memory,
            **common,
        )
    if isinstance(spec, BurstySpec):
        return Bursty(
            rate=spec.rate,
            burst=spec.burst,
            value=spec.level,
            low=spec.low,
            seed=seed,
            memory=memory,
            **common,
        )
    return _trace(spec, memory, common, path, error)


def _trace(
    spec: TraceSpec,
    fixed: MemoryModel,
    common: dict[str, Any],
    path: Sequence[str | int],
    error: ErrorFactory,
) -> Workload:
    try:
        series = load_series(spec.duty_file, "duty", spec.container)
    except (TraceError, ValueError) as exc:
        field = "duty_file" if spec.duty_file and "not found" in str(exc) else "container"
        raise error([*path, field], str(exc)) from exc
    memory = fixed
    if spec.memory is None:
        try:
            mem_series = load_series(spec.memory_file, "memory", series.container, align=series)
        except (TraceError, ValueError) as exc:
            raise error([*path, "memory_file"], str(exc)) from exc
        memory = TraceMemory(mem_series, spec.memory_reference, spec.offset)
    try:
        return Trace(series=series, offset=spec.offset, memory=memory, **common)
    except ValueError as exc:
        raise error([*path, "container"], str(exc)) from exc


def build_instances(
    gpu: SimGpu,
    specs: Sequence[InstanceSpec | dict[str, Any]],
    generation: int,
    *,
    path: Sequence[str | int] = ("instances",),
    error: ErrorFactory = _plain_error,
) -> list[SimInstance]:
    """The MIG instances of one layout of ``gpu``, placed and with their workloads.

    Instances with a ``start`` keep it; the others are placed by the catalogue's exact
    solver. Accepts dicts (the Python fault API) as well as parsed specs.

    Raises:
        ScenarioError: unknown profile, invalid layout or placement, bad workload.
    """
    parsed: list[InstanceSpec] = []
    for k, raw in enumerate(specs):
        if isinstance(raw, InstanceSpec):
            parsed.append(raw)
            continue
        try:
            parsed.append(InstanceSpec.model_validate(raw))
        except ValueError as exc:
            raise error([*path, k], str(exc).splitlines()[0]) from exc
    model = gpu.model
    for k, spec in enumerate(parsed):
        if not model.has_profile(spec.profile):
            known = ", ".join(p.name for p in model.profiles)
            raise error(
                [*path, k, "profile"], f"{model.key} has no profile {spec.profile!r} ({known})"
            )
    keep = [(s.profile, s.start) for s in parsed if s.start is not None]
    check = is_valid(model, [s.profile for s in parsed], keep=keep)
    if not check.ok:
        raise error(list(path), check.reason or "invalid layout")
    # Match each spec to a placement: fixed starts first, then the solver's in spec order.
    free = list(check.placements)
    chosen: list[int] = [-1] * len(parsed)
    for k, spec in enumerate(parsed):
        if spec.start is not None:
            name = model.profile(spec.profile).name
            slot = next(p for p in free if p.profile.name == name and p.start == spec.start)
            free.remove(slot)
            chosen[k] = slot.start
    for k, spec in enumerate(parsed):
        if chosen[k] < 0:
            name = model.profile(spec.profile).name
            slot = next(p for p in free if p.profile.name == name)
            free.remove(slot)
            chosen[k] = slot.start
    instances = []
    for k, spec in enumerate(parsed):
        profile = model.profile(spec.profile)
        capacity = profile.memory_mib * 2**20 - MIG_RESERVED_BYTES
        gi_id = gi_id_for(model.memory_slices, chosen[k], profile.memory_slices)
        seed = derive_seed(gpu.seed, gpu.node, gpu.index, gi_id, generation)
        workload = build_workload(
            spec.workload, capacity=capacity, seed=seed, path=[*path, k, "workload"], error=error
        )
        instances.append(
            SimInstance(gpu, profile, chosen[k], workload, _owner(spec.pod), generation)
        )
    return instances


def _pci_id(query: str | int, model: GpuModel) -> int | None:
    """The PCI id the scenario named the model by, if it did (an H200 NVL, say)."""
    try:
        wanted = parse_pci_device_id(query)
    except CatalogueError:
        return None
    return wanted if wanted in model.pci_device_ids else None


def _model(spec: GpuSpec, path: Sequence[str | int], error: ErrorFactory) -> GpuModel:
    try:
        return find_model(spec.model)
    except CatalogueError as exc:
        raise error([*path, "model"], str(exc)) from exc


def build_gpu(
    spec: GpuSpec,
    *,
    node: str,
    index: int,
    seed: int,
    path: Sequence[str | int],
    error: ErrorFactory = _plain_error,
) -> SimGpu:
    """One :class:`SimGpu` with its initial layout or whole-GPU workload."""
    model = _model(spec, path, error)
    if spec.mig and (spec.workload is not None or spec.pod is not None):
        field = "workload" if spec.workload is not None else "pod"
        raise error([*path, field], "a MIG-enabled GPU runs workloads in its instances")
    if not spec.mig and spec.instances:
        raise error([*path, "instances"], "instances need 'mig: true'")
    power = default_power(model)
    if spec.power is not None:
        power = PowerModel(spec.power.idle_watts, spec.power.max_watts, "scenario")
    named = isinstance(spec.model, str) and spec.model.strip().lower() in {
        n.lower() for n in model.names
    }
    gpu = SimGpu(
        node=node,
        index=index,
        model=model,
        uuid=spec.uuid or gpu_uuid(seed, node, index),
        pci_bus_id=spec.pci_bus_id or pci_bus_id(index),
        mig_enabled=spec.mig,
        mig_pending=spec.mig if spec.mig_pending is None else spec.mig_pending,
        power=power,
        seed=seed,
        owner=_owner(spec.pod),
        name=str(spec.model).strip() if named else None,
        pci_device_id=_pci_id(spec.model, model),
    )
    if spec.mig:
        gpu.set_layout(
            build_instances(gpu, spec.instances, 0, path=[*path, "instances"], error=error)
        )
    else:
        workload_spec = spec.workload or IdleSpec(pattern="idle")
        gpu.workload = build_workload(
            workload_spec,
            capacity=model.memory_total_bytes - gpu.reserved,
            seed=derive_seed(seed, node, index, "whole"),
            path=[*path, "workload"],
            error=error,
        )
    return gpu
