"""Render the latest snapshot as Prometheus metric families, fresh on every scrape.

A scrape calls :meth:`SnapshotCollector.collect`, which reads two immutable objects — the
sampler's latest :class:`~migscope.exporter.model.Snapshot` and the pod-attribution watcher's
latest owner map — and turns them into new metric families. Nothing here calls NVML, the
kubelet or the network, and nothing carries over from one scrape to the next (the client
library's advice for exporters), so a slice that vanished from the snapshot vanishes from
/metrics, and a slow GPU can never make a scrape slow.

Every family comes from the contract in :mod:`migscope.core.metrics`; the collector cannot
publish a name the contract does not declare.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    UnknownMetricFamily,
)

from migscope.core.metrics import DCGM_COMPAT, METRICS, MetricSpec, metric
from migscope.exporter.model import Activity, CollectorStatus, GpuReading, MigReading, Snapshot

__all__ = ["Owner", "SnapshotCollector"]

MIB = 1024 * 1024


class Owner(Protocol):
    """Who holds a device, as the kubelet's PodResources API reports it."""

    @property
    def namespace(self) -> str: ...  # noqa: D102

    @property
    def pod(self) -> str: ...  # noqa: D102

    @property
    def container(self) -> str: ...  # noqa: D102

    @property
    def resource_name(self) -> str: ...  # noqa: D102


OwnerMap = Mapping[str, Sequence[Owner]]


def _family(spec: MetricSpec) -> Metric:
    """A new, empty family for ``spec`` (counters and info series named as the client wants)."""
    if spec.type == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    if spec.type == "info":
        return InfoMetricFamily(spec.name.removesuffix("_info"), spec.help, labels=spec.labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)


class _Families:
    """The families of one scrape, created from the contract on first use."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, name: str, labels: Sequence[str], value: float) -> None:
        spec = metric(name)
        family = self._families.get(spec.name)
        if family is None:
            family = self._families[spec.name] = _family(spec)
        values = [str(v) for v in labels]
        if isinstance(family, InfoMetricFamily):
            family.add_metric(values, {})
        else:
            family.add_metric(values, value)  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[Metric]:
        order = {spec.name: i for i, spec in enumerate(METRICS)}
        yield from sorted(self._families.values(), key=lambda f: order[_spec_name(f)])


def _spec_name(family: Metric) -> str:
    if family.type == "counter":
        return f"{family.name}_total"
    if family.type == "info":
        return f"{family.name}_info"
    return family.name


_ACTIVITY_METRICS = (
    ("graphics", "graphics_active_ratio"),
    ("sm_active", "sm_active_ratio"),
    ("sm_occupancy", "sm_occupancy_ratio"),
    ("tensor", "tensor_active_ratio"),
    ("dram", "dram_active_ratio"),
)


class SnapshotCollector:
    """A prometheus_client collector over the sampler's snapshot and the pod owners.

    Args:
        snapshot: Returns the latest snapshot, or None before the first cycle.
        owners: Returns the latest device-ID → owners map (empty when unknown).
        statuses: Returns extra collector statuses (the pod-attribution watcher's).
        backend: ``nvml``, ``dcgm`` or ``sim``, for the build-info series.
        version: migscope's version.
        dcgm_compat: Also emit dcgm-exporter's names for the fields it has, so existing
            dashboards keep working during a migration.
        hostname: The ``Hostname`` label of dcgm-compatible series (dcgm-exporter takes it
            from ``NODE_NAME``).
    """

    def __init__(
        self,
        *,
        snapshot: Callable[[], Snapshot | None],
        owners: Callable[[], OwnerMap] = dict,
        statuses: Callable[[], Iterable[CollectorStatus]] = tuple,
        backend: str,
        version: str,
        dcgm_compat: bool = False,
        hostname: str = "",
    ) -> None:
        self._snapshot = snapshot
        self._owners = owners
        self._statuses = statuses
        self._backend = backend
        self._version = version
        self._dcgm_compat = dcgm_compat
        self._hostname = hostname

    def describe(self) -> list[Metric]:
        """Nothing up front: families depend on the hardware found (skips a first collect)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Build this scrape's families from the latest snapshot and owner map."""
        out = _Families()
        out.add("exporter_build_info", [self._version, platform.python_version(), self._backend], 1)
        snap = self._snapshot()
        owners = self._owners()
        statuses = [*(snap.collectors if snap else ()), *self._statuses()]
        for status in statuses:
            out.add("collector_success", [status.name], 1.0 if status.success else 0.0)
            out.add("collector_duration_seconds", [status.name], status.duration_seconds)
            out.add(
                "collector_last_success_timestamp_seconds",
                [status.name],
                status.last_success or 0.0,
            )
        if snap is not None:
            for gpu in snap.gpus:
                self._gpu(out, gpu, snap.driver_version, owners)
        yield from out
        if self._dcgm_compat and snap is not None:
            yield from self._dcgm(snap, owners)

    def _gpu(self, out: _Families, gpu: GpuReading, driver: str, owners: OwnerMap) -> None:
        ids = [str(gpu.index), gpu.uuid]
        out.add(
            "gpu_info",
            [
                *ids,
                gpu.model or "unknown",
                gpu.name,
                gpu.pci_bus_id,
                gpu.pci_device_id,
                driver,
                "enabled" if gpu.mig_enabled else "disabled",
            ],
            1,
        )
        _maybe(out, "gpu_power_watts", ids, gpu.power_watts)
        _maybe(out, "gpu_energy_joules_total", ids, gpu.energy_joules)
        _maybe(out, "gpu_memory_total_bytes", ids, gpu.memory_total_bytes)
        _maybe(out, "gpu_memory_used_bytes", ids, gpu.memory_used_bytes)
        if gpu.activity is not None and not gpu.mig_enabled:
            for attr, suffix in _ACTIVITY_METRICS:
                if attr == "sm_occupancy":
                    continue  # not part of the whole-GPU contract
                _maybe(out, f"gpu_{suffix}", ids, getattr(gpu.activity, attr))
        if gpu.mig_enabled:
            _maybe(out, "gpu_compute_slices", ids, gpu.compute_slices)
            _maybe(out, "gpu_compute_slices_free", ids, gpu.compute_slices_free)
            _maybe(out, "gpu_memory_slices", ids, gpu.memory_slices)
            _maybe(out, "gpu_memory_slices_free", ids, gpu.memory_slices_free)
            out.add("gpu_mig_layout_info", [*ids, gpu.layout_label], 1)
        for owner in owners.get(gpu.uuid, ()):
            out.add(
                "gpu_pod_info",
                [*ids, owner.namespace, owner.pod, owner.container, owner.resource_name],
                1,
            )
        for inst in gpu.instances:
            self._slice(out, gpu, inst, owners)

    def _slice(self, out: _Families, gpu: GpuReading, inst: MigReading, owners: OwnerMap) -> None:
        ids = [str(gpu.index), gpu.uuid, str(inst.gpu_instance_id), inst.mig_uuid]
        out.add(
            "mig_info",
            [
                *ids,
                inst.profile,
                "" if inst.profile_id is None else str(inst.profile_id),
                "" if inst.placement_start is None else str(inst.placement_start),
                "" if inst.placement_size is None else str(inst.placement_size),
                str(inst.compute_slices),
                str(inst.memory_slices),
            ],
            1,
        )
        for owner in owners.get(inst.mig_uuid, ()):
            out.add(
                "mig_pod_info",
                [*ids, owner.namespace, owner.pod, owner.container, owner.resource_name],
                1,
            )
        activity = inst.activity or Activity()
        for attr, suffix in _ACTIVITY_METRICS:
            _maybe(out, f"mig_{suffix}", ids, getattr(activity, attr))
        _maybe(out, "mig_memory_used_bytes", ids, inst.memory_used_bytes)
        _maybe(out, "mig_memory_total_bytes", ids, inst.memory_total_bytes)
        _maybe(out, "mig_processes", ids, inst.processes)
        _maybe(out, "mig_power_estimated_watts", ids, inst.power_estimated_watts)
        _maybe(out, "mig_energy_estimated_joules_total", ids, inst.energy_estimated_joules)

    def _dcgm(self, snap: Snapshot, owners: OwnerMap) -> Iterator[Metric]:
        """dcgm-exporter's names and labels for the fields it has (``--dcgm-compat``)."""
        slice_labels = [
            "gpu",
            "UUID",
            "device",
            "modelName",
            "GPU_I_PROFILE",
            "GPU_I_ID",
            "Hostname",
            "namespace",
            "pod",
            "container",
        ]
        gpu_labels = ["gpu", "UUID", "device", "modelName", "Hostname"]
        families = {
            spec.name: GaugeMetricFamily(spec.name, spec.help, labels=slice_labels)
            for spec in DCGM_COMPAT
        }
        power = GaugeMetricFamily(
            "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W), whole GPU.", labels=gpu_labels
        )
        # dcgm-exporter names this counter without "_total"; the client library would add
        # it to a counter family, so it goes out untyped to keep dashboards' queries working.
        energy = UnknownMetricFamily(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "Total energy consumption since boot (in mJ), whole GPU.",
            labels=gpu_labels,
        )
        for gpu in snap.gpus:
            base = [str(gpu.index), gpu.uuid, f"nvidia{gpu.index}", gpu.name]
            if gpu.power_watts is not None:
                power.add_metric([*base, self._hostname], gpu.power_watts)
            if gpu.energy_joules is not None:
                energy.add_metric([*base, self._hostname], gpu.energy_joules * 1000.0)
            for inst in gpu.instances:
                holders = owners.get(inst.mig_uuid, ())
                pod = (
                    [holders[0].namespace, holders[0].pod, holders[0].container]
                    if holders
                    else ["", "", ""]
                )
                labels = [*base, inst.profile, str(inst.gpu_instance_id), self._hostname, *pod]
                for spec, value in _dcgm_values(inst):
                    if value is not None:
                        families[spec].add_metric(labels, value)
        yield from families.values()
        yield power
        yield energy


def _dcgm_values(inst: MigReading) -> Iterator[tuple[str, float | None]]:
    activity = inst.activity or Activity()
    yield "DCGM_FI_PROF_GR_ENGINE_ACTIVE", activity.graphics
    yield "DCGM_FI_PROF_SM_ACTIVE", activity.sm_active
    yield "DCGM_FI_PROF_SM_OCCUPANCY", activity.sm_occupancy
    yield "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", activity.tensor
    yield "DCGM_FI_PROF_DRAM_ACTIVE", activity.dram
    used, total = inst.memory_used_bytes, inst.memory_total_bytes
    yield "DCGM_FI_DEV_FB_USED", None if used is None else used / MIB
    yield (
        "DCGM_FI_DEV_FB_FREE",
        None if used is None or total is None else max(total - used, 0) / MIB,
    )


def _maybe(out: _Families, name: str, labels: Sequence[str], value: float | None) -> None:
    """Add a sample unless the value is unknown: absent, never a made-up 0."""
    if value is not None:
        out.add(name, labels, float(value))
