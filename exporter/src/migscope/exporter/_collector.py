"""Render the latest snapshot as Prometheus metrics, fresh on every scrape.

A scrape reads two immutable objects — the sampler's latest
:class:`~migscope.exporter._snapshot.Snapshot` and the pod-attribution watcher's latest owner map —
and walks them once. Nothing here calls NVML, the kubelet or the network, and nothing carries
over from one scrape to the next, so a slice that vanished from the snapshot vanishes from
/metrics and a slow GPU can never make a scrape slow.

The walk feeds one of two sinks that must agree (a test compares them): prometheus_client
metric families, for the registry API, and a direct writer of the text format, which
``/metrics`` uses because ``generate_latest`` re-validates and re-escapes every label of every
sample (≈5.6 ms per scrape for 8 GPUs × 7 slices on the CI machine, ≈1 ms here). Every series
name comes from the contract in :mod:`migscope.core._metrics`. dcgm-exporter's series
(``--dcgm-compat``) are written by :mod:`migscope.exporter._dcgm_compat`, after migscope's.
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
)
from prometheus_client.utils import floatToGoString

from migscope.core import (
    GPU_LABELS,
    METRICS,
    MIG_LABELS,
    PREFIX,
    MetricSpec,
)
from migscope.exporter._dcgm_compat import DcgmExposition
from migscope.exporter._snapshot import (
    Activity,
    CollectorStatus,
    GpuReading,
    MigProfileInfo,
    MigReading,
    Snapshot,
)

_SPECS = {spec.name.removeprefix(f"{PREFIX}_"): spec for spec in METRICS}
_ORDER = {spec.name: i for i, spec in enumerate(METRICS)}


class Owner(Protocol):
    """Who holds a device, as the kubelet's PodResources API reports it."""

    @property
    def namespace(self) -> str: ...

    @property
    def pod(self) -> str: ...

    @property
    def container(self) -> str: ...

    @property
    def resource_name(self) -> str: ...


OwnerMap = Mapping[str, Sequence[Owner]]
_Inputs = tuple[Snapshot | None, OwnerMap, tuple[CollectorStatus, ...]]
"""What one render reads: snapshot, owners (DRA merged), the extra collector statuses."""

DraMerge = Callable[[Snapshot | None, OwnerMap], OwnerMap]
"""Adds the owners of devices held through DRA, resolved against the snapshot being rendered,
to the device-plugin owners (:class:`migscope.exporter._attribution.DraResolver`)."""


def _holder(owner: Owner) -> tuple[str, ...]:
    """The label values of a ``*_pod_info`` series after the device's, for one owner.

    Device-plugin owners have no claim; DRA owners (:class:`~migscope.exporter._attribution.
    DraOwner`) carry theirs and say how they were attributed.
    """
    claim = getattr(owner, "claim", "")
    claim_namespace = getattr(owner, "claim_namespace", "")
    how = getattr(owner, "attribution", "device-plugin")
    return (
        owner.namespace,
        owner.pod,
        owner.container,
        owner.resource_name,
        str(claim),
        str(claim_namespace),
        str(how),
    )


def _escape(value: str) -> str:
    """A label value escaped for the text format (backslash, double quote, newline)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def _number(value: float) -> str:
    """A sample value exactly as prometheus_client writes it (Go's float formatting)."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


class _Ids:
    """The labels that identify one GPU, slice or collector, shared by its series.

    The text sink renders them once and reuses the string for the dozen series of a slice.
    """

    __slots__ = ("_text", "names", "values")

    def __init__(self, names: tuple[str, ...], values: tuple[str, ...]) -> None:
        self.names = names
        self.values = values
        self._text: str | None = None

    def text(self) -> str:
        if self._text is None:
            self._text = ",".join(
                f'{n}="{_escape(v)}"' for n, v in zip(self.names, self.values, strict=True)
            )
        return self._text


_NO_IDS = _Ids((), ())


class _Sink(Protocol):
    """Where the snapshot walk puts each sample."""

    def add(self, name: str, ids: _Ids, extra: Sequence[str], value: float) -> None: ...


def _family(spec: MetricSpec) -> Metric:
    """A new, empty family for ``spec`` (counters and info series named as the client wants)."""
    if spec.type == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    if spec.type == "info":
        return InfoMetricFamily(spec.name.removesuffix("_info"), spec.help, labels=spec.labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)


def _spec_name(family: Metric) -> str:
    if family.type == "counter":
        return f"{family.name}_total"
    if family.type == "info":
        return f"{family.name}_info"
    return family.name


class _Families:
    """prometheus_client families for one scrape, created from the contract on first use."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, name: str, ids: _Ids, extra: Sequence[str], value: float) -> None:
        spec = _SPECS[name]
        family = self._families.get(spec.name)
        if family is None:
            family = self._families[spec.name] = _family(spec)
        values = [*ids.values, *extra]
        if isinstance(family, InfoMetricFamily):
            family.add_metric(values, {})
        else:
            family.add_metric(values, value)  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[Metric]:
        yield from sorted(self._families.values(), key=lambda f: _ORDER[_spec_name(f)])


class _TextLines:
    """The same samples written straight to the text exposition format 0.0.4."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def add(self, name: str, ids: _Ids, extra: Sequence[str], value: float) -> None:
        spec = _SPECS[name]
        labels = ids.text()
        if extra:
            names = spec.labels[len(ids.names) :]
            rest = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, extra, strict=True))
            labels = f"{labels},{rest}" if labels else rest
        lines = self._lines.get(spec.name)
        if lines is None:
            lines = self._lines[spec.name] = []
        if labels:
            lines.append(f"{spec.name}{{{labels}}} {_number(value)}")
        else:
            lines.append(f"{spec.name} {_number(value)}")

    def text(self) -> str:
        out: list[str] = []
        for spec in METRICS:
            lines = self._lines.get(spec.name)
            if not lines:
                continue
            kind = "gauge" if spec.type == "info" else spec.type
            doc = spec.help.replace("\\", "\\\\").replace("\n", "\\n")
            out.append(f"# HELP {spec.name} {doc}")
            out.append(f"# TYPE {spec.name} {kind}")
            out.extend(lines)
        return "\n".join(out) + "\n" if out else ""


_ACTIVITY_METRICS = (
    ("graphics", "graphics_active_ratio"),
    ("sm_active", "sm_active_ratio"),
    ("sm_occupancy", "sm_occupancy_ratio"),
    ("tensor", "tensor_active_ratio"),
    ("dram", "dram_active_ratio"),
)


_ACTIVE_SECONDS_METRICS = (
    ("graphics", "graphics_active_seconds_total"),
    ("sm_active", "sm_active_seconds_total"),
    ("tensor", "tensor_active_seconds_total"),
    ("dram", "dram_active_seconds_total"),
)
"""Activity integrals (:class:`~migscope.exporter._snapshot.ActiveSeconds`) and their counters."""


class SnapshotCollector:
    """A prometheus_client collector over the sampler's snapshot and the pod owners.

    Args:
        snapshot: Returns the latest snapshot, or None before the first cycle.
        owners: Returns the latest device-ID → owners map (empty when unknown).
        statuses: Returns extra collector statuses (the pod-attribution watcher's).
        backend: ``nvml``, ``dcgm`` or ``sim``, for the build-info series.
        version: migscope's version.
        dra: Adds the owners of DRA-held devices, resolved against the snapshot being
            rendered (so a slice and its holder always come from the same cycle); None
            without DRA attribution.
        dcgm: Also emit dcgm-exporter's series for the fields migscope measures, as
            dcgm-exporter writes them (``--dcgm-compat``), so that dashboards and alerts built
            on them keep working; None for migscope's own series only.
    """

    def __init__(
        self,
        *,
        snapshot: Callable[[], Snapshot | None],
        owners: Callable[[], OwnerMap] = dict,
        statuses: Callable[[], Iterable[CollectorStatus]] = tuple,
        backend: str,
        version: str,
        dcgm: DcgmExposition | None = None,
        dra: DraMerge | None = None,
    ) -> None:
        self._dra = dra
        self._snapshot = snapshot
        self._owners = owners
        self._statuses = statuses
        self._backend = backend
        self._version = version
        self._dcgm = dcgm
        self._rendered: tuple[_Inputs, bytes] | None = None

    def describe(self) -> list[Metric]:
        """Nothing up front: families depend on the hardware found (skips a first collect)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """This scrape's families, for a prometheus_client registry."""
        out = _Families()
        snap, owners, _ = self._walk(out)
        yield from out
        if self._dcgm is not None and snap is not None:
            yield from self._dcgm.metrics(snap, owners)

    def render_text(self) -> bytes:
        """This scrape in the text exposition format 0.0.4: what :meth:`collect` says, faster.

        Rendered once per set of inputs: while the snapshot and the owner map are the same
        objects and the extra statuses are equal, every call returns the same bytes object
        (issue 24: a scrape costs no render between two sampling cycles, and callers may
        cache what they derive from it, e.g. a gzipped copy, by its identity). Whatever the
        render reads must come from :meth:`_inputs`.
        """
        inputs = self._inputs()
        cached = self._rendered
        if cached is not None and _same_inputs(cached[0], inputs):
            return cached[1]
        out = _TextLines()
        snap, owners, _ = self._walk(out, inputs)
        text = out.text()
        if self._dcgm is not None and snap is not None:
            text += self._dcgm.text(snap, owners)
        body = text.encode()
        self._rendered = (inputs, body)
        return body

    def cached_text(self) -> bytes | None:
        """What :meth:`render_text` would return now, if that needs no render; else None.

        Never renders: reads the same inputs and compares them with those of the last render.
        The HTTP server's intake thread calls it to answer a scrape without a worker (see
        :mod:`migscope.exporter._http.fastpath`); a None sends the scrape to a worker, which
        renders.
        """
        cached = self._rendered
        if cached is None:
            return None
        return cached[1] if _same_inputs(cached[0], self._inputs()) else None

    def _inputs(self) -> _Inputs:
        """The latest snapshot, owner map (DRA holders merged) and extra statuses."""
        snap = self._snapshot()
        owners = self._owners()
        if self._dra is not None:
            owners = self._dra(snap, owners)
        return snap, owners, tuple(self._statuses())

    def _walk(self, out: _Sink, inputs: _Inputs | None = None) -> _Inputs:
        """Add every series of ``inputs`` (default: the latest) to ``out``, once."""
        build = (self._version, platform.python_version(), self._backend)
        out.add("exporter_build_info", _NO_IDS, build, 1)
        snap, owners, statuses = self._inputs() if inputs is None else inputs
        for status in [*(snap.collectors if snap else ()), *statuses]:
            ids = _Ids(("collector",), (status.name,))
            out.add("collector_success", ids, (), 1.0 if status.success else 0.0)
            out.add("collector_duration_seconds", ids, (), status.duration_seconds)
            last = status.last_success or 0.0
            out.add("collector_last_success_timestamp_seconds", ids, (), last)
        if snap is not None:
            for gpu in snap.gpus:
                self._gpu(out, gpu, snap.driver_version, owners)
        return snap, owners, statuses

    def _gpu(self, out: _Sink, gpu: GpuReading, driver: str, owners: OwnerMap) -> None:
        ids = _Ids(GPU_LABELS, (str(gpu.index), gpu.uuid))
        info = (
            gpu.model or "unknown",
            gpu.name,
            gpu.pci_bus_id,
            gpu.pci_device_id,
            driver,
            "enabled" if gpu.mig_enabled else "disabled",
        )
        out.add("gpu_info", ids, info, 1)
        _maybe(out, "gpu_power_watts", ids, gpu.power_watts)
        _maybe(out, "gpu_energy_joules_total", ids, gpu.energy_joules)
        _maybe(out, "gpu_memory_total_bytes", ids, gpu.memory_total_bytes)
        _maybe(out, "gpu_memory_used_bytes", ids, gpu.memory_used_bytes)
        if gpu.activity is not None and not gpu.mig_enabled:
            for attr, suffix in _ACTIVITY_METRICS:
                if attr != "sm_occupancy":  # not part of the whole-GPU contract
                    _maybe(out, f"gpu_{suffix}", ids, getattr(gpu.activity, attr))
        if gpu.active_seconds is not None and not gpu.mig_enabled:
            for attr, suffix in _ACTIVE_SECONDS_METRICS:
                _maybe(out, f"gpu_{suffix}", ids, getattr(gpu.active_seconds, attr))
        if gpu.mig_enabled:
            _maybe(out, "gpu_compute_slices", ids, gpu.compute_slices)
            _maybe(out, "gpu_compute_slices_free", ids, gpu.compute_slices_free)
            _maybe(out, "gpu_memory_slices", ids, gpu.memory_slices)
            _maybe(out, "gpu_memory_slices_free", ids, gpu.memory_slices_free)
            out.add("gpu_mig_layout_info", ids, (gpu.layout_label,), 1)
        if gpu.mig_profiles:
            table_ids = _Ids(_PROFILE_TABLE_IDS, (str(gpu.index), gpu.uuid))
            for profile in gpu.mig_profiles:
                out.add("gpu_mig_profile_info", table_ids, _profile_labels(profile), 1)
        for owner in owners.get(gpu.uuid, ()):
            out.add("gpu_pod_info", ids, _holder(owner), 1)
        for inst in gpu.instances:
            self._slice(out, gpu, inst, owners)

    def _slice(self, out: _Sink, gpu: GpuReading, inst: MigReading, owners: OwnerMap) -> None:
        values = (str(gpu.index), gpu.uuid, str(inst.gpu_instance_id), inst.mig_uuid)
        ids = _Ids(MIG_LABELS, values)
        info = (
            inst.profile,
            "" if inst.profile_id is None else str(inst.profile_id),
            "" if inst.placement_start is None else str(inst.placement_start),
            "" if inst.placement_size is None else str(inst.placement_size),
            str(inst.compute_slices),
            str(inst.memory_slices),
        )
        out.add("mig_info", ids, info, 1)
        for owner in owners.get(inst.mig_uuid, ()):
            out.add("mig_pod_info", ids, _holder(owner), 1)
        activity = inst.activity or Activity()
        for attr, suffix in _ACTIVITY_METRICS:
            _maybe(out, f"mig_{suffix}", ids, getattr(activity, attr))
        if inst.active_seconds is not None:
            for attr, suffix in _ACTIVE_SECONDS_METRICS:
                _maybe(out, f"mig_{suffix}", ids, getattr(inst.active_seconds, attr))
        _maybe(out, "mig_memory_used_bytes", ids, inst.memory_used_bytes)
        _maybe(out, "mig_memory_total_bytes", ids, inst.memory_total_bytes)
        _maybe(out, "mig_processes", ids, inst.processes)
        _maybe(out, "mig_power_estimated_watts", ids, inst.power_estimated_watts)
        _maybe(out, "mig_energy_estimated_joules_total", ids, inst.energy_estimated_joules)


_PROFILE_TABLE_IDS = _SPECS["gpu_mig_profile_info"].labels[:2]
"""``gpu``, ``gpu_uuid``: the profile table names its GPU as the slice families do."""


def _same_inputs(a: _Inputs, b: _Inputs) -> bool:
    """The snapshot by identity (replaced each cycle, never changed), the rest by value.

    Owners by identity first: the kubelet watcher and the DRA merge hand out the same map
    until it changes; a source that builds a new map per call (the simulator's) is compared
    by value, which costs far less than a render.
    """
    return a[0] is b[0] and (a[1] is b[1] or a[1] == b[1]) and a[2] == b[2]


def _profile_labels(p: MigProfileInfo) -> tuple[str, ...]:
    """The label values of one ``migscope_gpu_mig_profile_info`` series after the GPU's."""
    return (
        p.profile,
        str(p.profile_id),
        str(p.compute_slices),
        str(p.memory_mib),
        str(p.sm_count),
        str(p.max_instances),
        ",".join(str(start) for start in p.placements),
        "" if p.placement_size is None else str(p.placement_size),
        str(p.copy_engines),
        str(p.decoders),
        str(p.encoders),
        str(p.jpegs),
        str(p.ofas),
    )


def _maybe(out: _Sink, name: str, ids: _Ids, value: float | None) -> None:
    """Add a sample unless the value is unknown: absent, never a made-up 0."""
    if value is not None:
        out.add(name, ids, (), float(value))
