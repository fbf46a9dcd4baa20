"""NVML backend: GPUs, MIG slices, memory, power and GPM activity through nvidia-ml-py.

The backend is handed an NVML *module-like object*: the real ``pynvml`` module on a GPU node,
or :class:`migscope.sim.SimNvml` in demos and tests. Both expose pynvml's functions, structs
and exception classes, so this code path is the same everywhere.

Costs drive the design (median latencies measured on a real H200, tests/fixtures/h200/):
memory ≈7 µs, power ≈1 µs, a GPM sample ≈40 µs, but ``GetMigMode`` and
``GetMaxMigDeviceCount`` ≈150 µs each and the energy counter ≈3 ms. So the slice list (the
enumeration) is cached and refreshed every ``enumerate_interval`` seconds, or at once when a
cached MIG handle stops working (MIG Manager re-partitioned the GPU); energy is read only when
the sampler asks; and GPM keeps one sample per slice from the previous cycle, so each cycle
costs one ``nvmlGpmMigSampleGet`` per slice, like DCGM's rolling buffer.

NVML semantics followed (reference/nvml-dcgm.md): utilisation rates are NOT_SUPPORTED in MIG
mode; power and energy exist for the whole board only; per-slice memory and processes come
from the MIG device handle; per-slice activity is GPM (Hopper and newer) from
``nvmlGpmMigSampleGet(parent, gi_id)``; NOT_SUPPORTED means "absent", not an error.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from migscope.core.catalogue import (
    CatalogueError,
    GiProfile,
    GpuModel,
    find_model,
    normalise_profile_name,
)
from migscope.exporter.backends.base import BackendError, BackendReading, GpuIdentity
from migscope.exporter.backends.status import CycleErrors, StatusBook
from migscope.exporter.model import Activity, CollectorStatus, GpuReading, MigReading

__all__ = ["NvmlBackend"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# (Activity field, pynvml constant) for the GPM metrics migscope publishes.
_GPM_METRICS = (
    ("graphics", "NVML_GPM_METRIC_GRAPHICS_UTIL"),
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)

# NVML return codes (nvml.h), stable across versions.
_UNINITIALIZED = 1
_INVALID_ARGUMENT = 2
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_ABSENT = (_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND)
_STALE_HANDLE = (_NOT_FOUND, _INVALID_ARGUMENT)
_SESSION_GONE = (_UNINITIALIZED, _DRIVER_NOT_LOADED, _LIBRARY_NOT_FOUND)


class _StaleLayout(Exception):
    """A cached MIG handle stopped working: the GPU was re-partitioned under us."""


class _GpuLost(Exception):
    """NVML says the GPU is lost (fell off the bus, XID 79)."""


class _GpmPair:
    """Two GPM samples that swap roles each window, and the activity of the last window."""

    def __init__(self, nvml: Any, call: Callable[..., Any]) -> None:
        self._nvml = nvml
        self._call = call
        self.previous = call(nvml.nvmlGpmSampleAlloc)
        self.current = call(nvml.nvmlGpmSampleAlloc)
        self.primed = False
        self.taken_at = 0.0
        self.activity: Activity | None = None

    def swap(self, now: float) -> None:
        self.previous, self.current = self.current, self.previous
        self.primed = True
        self.taken_at = now

    def free(self) -> None:
        for sample in (self.previous, self.current):
            # Freeing can fail on a lost GPU; there is nothing else to do about it.
            with contextlib.suppress(self._nvml.NVMLError):
                self._call(self._nvml.nvmlGpmSampleFree, sample)


@dataclass
class _Slice:
    gi_id: int
    handle: Any
    uuid: str
    profile: str
    profile_id: int | None
    start: int | None
    size: int | None
    compute_slices: int
    memory_slices: int
    sm_count: int
    gpm: _GpmPair | None = None


@dataclass
class _Gpu(GpuIdentity):
    handle: Any
    gpm_supported: bool
    slices: list[_Slice] = field(default_factory=list)
    gpm: _GpmPair | None = None
    energy_joules: float | None = None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlBackend:
    """Read GPUs and MIG slices through an NVML module (``pynvml`` or the simulator).

    Args:
        nvml: The module-like NVML object.
        enumerate_interval: Seconds between full re-enumerations of GPUs and slices (new
            slices on a GPU that had none appear within this time; destroyed ones at once).
        gpm_interval: Seconds of the GPM activity window. ``nvmlGpmMetricsGet`` costs
            ≈1.2 ms of CPU per slice on a real H200 (tests/fixtures/h200/gpm_cost.json), so
            activity is computed once per window and republished in between; a window close
            to the scrape interval also measures what happened between scrapes instead of
            one second of it.
        clock: Monotonic clock in seconds (injectable for tests).
        name: Backend name for build info (``nvml`` or ``sim``).
    """

    def __init__(
        self,
        nvml: Any,
        *,
        enumerate_interval: float = 10.0,
        gpm_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        name: str = "nvml",
    ) -> None:
        if gpm_interval < 0.1:
            raise ValueError(
                f"gpm_interval must be >= 0.1 s (NVML's GPM refresh), got {gpm_interval}"
            )
        self.name = name
        self._nvml = nvml
        self._interval = enumerate_interval
        self._gpm_interval = gpm_interval
        self._clock = clock
        self._open = False
        self._gpus: list[_Gpu] = []
        self._enumerated_at: float | None = None
        self._driver = ""
        self._book = StatusBook(log)
        self._cycle_started = 0.0
        self._request: tuple[Any, list[Any]] | None = None
        self._broken: dict[int, str] = {}
        """GPUs that failed (lost, cannot enumerate): index -> error, repeated every cycle
        until an enumeration finds them healthy, so the collector stays failed meanwhile."""
        self.calls = 0
        """NVML calls made so far; the benchmark divides cycle time by it."""

    # -- session ---------------------------------------------------------------------------

    def open(self) -> None:
        """Initialise NVML and enumerate; a missing library or driver is one clear line."""
        try:
            self._call(self._nvml.nvmlInit)
        except self._nvml.NVMLError as exc:
            raise BackendError(f"NVML init failed: {exc}") from exc
        except OSError as exc:  # pragma: no cover - ctypes cannot load libnvidia-ml.so.1
            raise BackendError(f"NVML library not loadable: {exc}") from exc
        self._open = True
        self._driver = _text(self._call(self._nvml.nvmlSystemGetDriverVersion))
        self._gpus = []
        self._enumerated_at = None

    def close(self) -> None:
        """Free GPM samples and shut NVML down; safe to call twice."""
        for gpu in self._gpus:
            self._free_gpm(gpu)
        self._gpus = []
        if self._open:
            self._open = False
            with contextlib.suppress(self._nvml.NVMLError):
                self._call(self._nvml.nvmlShutdown)

    # -- one cycle -------------------------------------------------------------------------

    def read(self, *, with_energy: bool) -> BackendReading:
        """Read every GPU once; see the module docstring for what is cached and why."""
        if not self._open:
            self.open()
        errors = CycleErrors()
        started = self._cycle_started = self._clock()
        timer = time.perf_counter()  # durations in real seconds, whatever the injected clock
        try:
            if self._enumerated_at is None or started - self._enumerated_at >= self._interval:
                self._enumerate(errors)
            for message in self._broken.values():
                errors.note("nvml", message)
            readings = []
            for gpu in list(self._gpus):
                reading = self._read_gpu_retrying(gpu, errors, with_energy=with_energy)
                if reading is not None:
                    readings.append(reading)
        except self._nvml.NVMLError as exc:
            # Nothing could be read this cycle (e.g. nvmlDeviceGetCount failed): the sampler
            # publishes a failed snapshot; a lost session is reopened on the next cycle.
            if getattr(exc, "value", None) in _SESSION_GONE:
                self.close()
                raise BackendError(f"NVML session lost: {exc}") from exc
            self._enumerated_at = None
            raise BackendError(f"NVML: {exc}") from exc
        spent = time.perf_counter() - timer
        errors.seconds["nvml"] = (
            spent - errors.seconds.get("gpm", 0.0) - errors.seconds.get("energy", 0.0)
        )
        return BackendReading(tuple(readings), self._driver, self._statuses(errors, with_energy))

    def _read_gpu_retrying(
        self, gpu: _Gpu, errors: CycleErrors, *, with_energy: bool
    ) -> GpuReading | None:
        """Read one GPU; on a stale layout re-enumerate it once and read again."""
        for attempt in (1, 2):
            try:
                return self._read_gpu(gpu, errors, with_energy=with_energy)
            except _StaleLayout:
                log.info("GPU %d (%s): MIG layout changed; re-enumerating", gpu.index, gpu.uuid)
                fresh = self._refresh_gpu(gpu, errors)
                if fresh is None or attempt == 2:
                    if fresh is not None:
                        errors.note("nvml", f"GPU {gpu.index}: layout kept changing during read")
                    return None
                gpu = fresh
            except _GpuLost as exc:
                message = f"GPU {gpu.index}: {exc.__cause__ or 'GPU is lost'}"
                errors.note("nvml", message)
                self._broken[gpu.index] = message
                self._drop(gpu)
                self._enumerated_at = None  # look again next cycle
                return None
        return None  # pragma: no cover - the loop always returns

    def _read_gpu(self, gpu: _Gpu, errors: CycleErrors, *, with_energy: bool) -> GpuReading:
        h = gpu.handle
        power_mw = self._value(errors, "nvml", gpu, lambda: self._nvml.nvmlDeviceGetPowerUsage(h))
        memory = self._value(
            errors,
            "nvml",
            gpu,
            lambda: self._nvml.nvmlDeviceGetMemoryInfo(h, version=self._nvml.nvmlMemory_v2),
        )
        if with_energy:
            t0 = time.perf_counter()
            energy_mj = self._value(
                errors, "energy", gpu, lambda: self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)
            )
            errors.add_time("energy", time.perf_counter() - t0)
            if energy_mj is not None:
                gpu.energy_joules = energy_mj / 1000.0
        activity = None
        if not gpu.mig_enabled and gpu.gpm_supported:
            activity = self._gpm(gpu, errors, None)
        slices = tuple(self._read_slice(gpu, s, errors) for s in gpu.slices)
        return gpu.reading(
            power_watts=None if power_mw is None else power_mw / 1000.0,
            energy_joules=gpu.energy_joules,
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total),
            activity=activity,
            instances=slices,
        )

    def _read_slice(self, gpu: _Gpu, s: _Slice, errors: CycleErrors) -> MigReading:
        memory = self._value(
            errors,
            "nvml",
            gpu,
            lambda: self._nvml.nvmlDeviceGetMemoryInfo(s.handle, version=self._nvml.nvmlMemory_v2),
            via_mig_handle=True,
        )
        procs = self._value(
            errors,
            "nvml",
            gpu,
            lambda: self._nvml.nvmlDeviceGetComputeRunningProcesses(s.handle),
            via_mig_handle=True,
        )
        activity = self._gpm(gpu, errors, s) if gpu.gpm_supported else None
        return MigReading(
            gpu_instance_id=s.gi_id,
            mig_uuid=s.uuid,
            profile=s.profile,
            profile_id=s.profile_id,
            placement_start=s.start,
            placement_size=s.size,
            compute_slices=s.compute_slices,
            memory_slices=s.memory_slices,
            sm_count=s.sm_count,
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total),
            processes=None if procs is None else len(procs),
            activity=activity,
        )

    # -- GPM ---------------------------------------------------------------------------------

    def _gpm(self, gpu: _Gpu, errors: CycleErrors, s: _Slice | None) -> Activity | None:
        """Activity over the last completed GPM window (None until the first one closes).

        Within a window the previous value is returned without touching NVML; at its end one
        new sample is taken and the metrics are computed against the window's first sample.
        """
        owner: _Gpu | _Slice = gpu if s is None else s
        pair = owner.gpm
        t0 = self._cycle_started
        if pair is not None and pair.primed and t0 - pair.taken_at < self._gpm_interval:
            return pair.activity  # inside the window: no NVML call, nothing to time
        nvml = self._nvml
        timer = time.perf_counter()
        try:
            if pair is None:
                pair = owner.gpm = _GpmPair(nvml, self._call)
            try:
                if s is None:
                    self._call(nvml.nvmlGpmSampleGet, gpu.handle, pair.current)
                else:
                    self._call(nvml.nvmlGpmMigSampleGet, gpu.handle, s.gi_id, pair.current)
            except nvml.NVMLError as exc:
                code = getattr(exc, "value", None)
                if code == _GPU_IS_LOST:
                    raise _GpuLost from exc
                if s is not None and code in _STALE_HANDLE:
                    raise _StaleLayout from exc
                if code not in _ABSENT:
                    errors.note("gpm", f"GPU {gpu.index}: GPM sample: {exc}")
                pair.activity = None
                return None
            if pair.primed:
                pair.activity = self._gpm_metrics(pair, gpu, errors)
            pair.swap(t0)
            return pair.activity
        finally:
            errors.add_time("gpm", time.perf_counter() - timer)

    def _gpm_request(self) -> tuple[Any, list[Any]]:
        """One metrics request reused for every slice, and its first entries.

        The struct holds NVML_GPM_METRIC_MAX entries and ctypes builds a new Python object on
        every ``metrics[i]``; reading five values that way cost ≈11 µs per slice on a real H200
        (tests/fixtures/h200/gpm_cost.json). The entries are views into the struct's buffer,
        so they are looked up once.
        """
        if self._request is None:
            request = self._nvml.c_nvmlGpmMetricsGet_t()
            for i, (_attr, const) in enumerate(_GPM_METRICS):
                request.metrics[i].metricId = getattr(self._nvml, const)
            self._request = (request, [request.metrics[i] for i in range(len(_GPM_METRICS))])
        return self._request

    def _gpm_metrics(self, pair: _GpmPair, gpu: _Gpu, errors: CycleErrors) -> Activity | None:
        nvml = self._nvml
        request, entries = self._gpm_request()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(_GPM_METRICS)
        request.sample1 = pair.previous
        request.sample2 = pair.current
        try:
            self._call(nvml.nvmlGpmMetricsGet, request)
        except nvml.NVMLError as exc:
            errors.note("gpm", f"GPU {gpu.index}: GPM metrics: {exc}")
            return None
        values: dict[str, float | None] = {}
        for entry, (attr, _const) in zip(entries, _GPM_METRICS, strict=True):
            value = float(entry.value)
            ok = entry.nvmlReturn == 0 and value == value  # NaN when samples are too close
            values[attr] = min(max(value / 100.0, 0.0), 1.0) if ok else None
        return Activity(**values)

    # -- enumeration -------------------------------------------------------------------------

    def _enumerate(self, errors: CycleErrors) -> None:
        """Rebuild the GPU and slice list, keeping GPM baselines of slices that remain."""
        old = {gpu.uuid: gpu for gpu in self._gpus}
        count = self._call(self._nvml.nvmlDeviceGetCount)
        fresh: list[_Gpu] = []
        self._broken = {}
        for index in range(count):
            try:
                gpu = self._enumerate_gpu(index, old)
            except self._nvml.NVMLError as exc:
                if getattr(exc, "value", None) in _SESSION_GONE:
                    raise
                self._broken[index] = f"GPU {index}: {exc}"
                continue
            fresh.append(gpu)
        kept = {g.uuid for g in fresh}
        for gpu in self._gpus:
            if gpu.uuid not in kept:
                self._free_gpm(gpu)
        self._gpus = fresh
        self._enumerated_at = self._clock()

    def _refresh_gpu(self, gpu: _Gpu, errors: CycleErrors) -> _Gpu | None:
        """Re-enumerate one GPU after a stale handle; replace it in the list."""
        try:
            fresh = self._enumerate_gpu(gpu.index, {gpu.uuid: gpu})
        except self._nvml.NVMLError as exc:
            message = f"GPU {gpu.index}: {exc}"
            errors.note("nvml", message)
            self._broken[gpu.index] = message
            self._drop(gpu)
            return None
        self._gpus = [fresh if g is gpu else g for g in self._gpus]
        return fresh

    def _enumerate_gpu(self, index: int, old: dict[str, _Gpu]) -> _Gpu:
        nvml = self._nvml
        handle = self._call(nvml.nvmlDeviceGetHandleByIndex, index)
        uuid = _text(self._call(nvml.nvmlDeviceGetUUID, handle))
        name = _text(self._call(nvml.nvmlDeviceGetName, handle))
        pci = self._call(nvml.nvmlDeviceGetPciInfo, handle)
        device_id = int(pci.pciDeviceId)
        try:
            model: GpuModel | None = find_model(name, pci_device_id=device_id)
        except CatalogueError:
            model = None
        mig_enabled = self._mig_enabled(handle)
        gpm_supported = self._gpm_supported(handle)
        gpu = _Gpu(
            index=index,
            handle=handle,
            uuid=uuid,
            name=name,
            pci_bus_id=_text(pci.busId),
            pci_device_id=f"0x{device_id:08X}",
            model=model,
            mig_enabled=mig_enabled,
            gpm_supported=gpm_supported,
        )
        previous = old.get(uuid)
        if previous is not None:
            gpu.energy_joules = previous.energy_joules
            if previous.mig_enabled == mig_enabled:
                gpu.gpm, previous.gpm = previous.gpm, None
        if mig_enabled:
            gpu.slices = self._enumerate_slices(gpu, previous)
        if previous is not None:
            self._free_gpm(previous)
        return gpu

    def _mig_enabled(self, handle: Any) -> bool:
        try:
            current, _pending = self._call(self._nvml.nvmlDeviceGetMigMode, handle)
        except self._nvml.NVMLError as exc:
            if getattr(exc, "value", None) in _ABSENT:
                return False  # not MIG-capable
            raise
        return bool(current == self._nvml.NVML_DEVICE_MIG_ENABLE)

    def _gpm_supported(self, handle: Any) -> bool:
        try:
            support = self._call(self._nvml.nvmlGpmQueryDeviceSupport, handle)
        except self._nvml.NVMLError as exc:
            if getattr(exc, "value", None) in _ABSENT:
                return False  # pre-Hopper, or a driver without GPM (FUNCTION_NOT_FOUND)
            raise  # anything else is a real failure: the GPU is reported, retried later
        return bool(support.isSupportedDevice)

    def _enumerate_slices(self, gpu: _Gpu, previous: _Gpu | None) -> list[_Slice]:
        nvml = self._nvml
        reuse = {(s.gi_id, s.uuid): s for s in previous.slices} if previous else {}
        slices: dict[int, _Slice] = {}
        for i in range(self._call(nvml.nvmlDeviceGetMaxMigDeviceCount, gpu.handle)):
            try:
                mig = self._call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, gpu.handle, i)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) == _NOT_FOUND:
                    continue  # an empty MIG device slot
                raise
            gi_id = int(self._call(nvml.nvmlDeviceGetGpuInstanceId, mig))
            if gi_id in slices:
                continue  # a second compute instance of the same GPU instance
            uuid = _text(self._call(nvml.nvmlDeviceGetUUID, mig))
            s = self._describe_slice(gpu, gi_id, mig, uuid)
            kept = reuse.pop((gi_id, uuid), None)
            if kept is not None:
                s.gpm, kept.gpm = kept.gpm, None
            slices[gi_id] = s
        return sorted(
            slices.values(), key=lambda s: (s.start if s.start is not None else 99, s.gi_id)
        )

    def _describe_slice(self, gpu: _Gpu, gi_id: int, mig: Any, uuid: str) -> _Slice:
        """Profile and placement of a GI: from GI info (privileged) or the MIG device name."""
        nvml = self._nvml
        profile_id: int | None = None
        start: int | None = None
        size: int | None = None
        profile: GiProfile | None = None
        name: str | None = None
        try:
            info = self._call(
                nvml.nvmlGpuInstanceGetInfo,
                self._call(nvml.nvmlDeviceGetGpuInstanceById, gpu.handle, gi_id),
            )
            profile_id, start, size = (
                int(info.profileId),
                int(info.placement.start),
                int(info.placement.size),
            )
            if gpu.model is not None:
                profile = gpu.model.profile_by_nvml_id(profile_id)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) not in (*_ABSENT, _NOT_FOUND):
                raise
        if profile is None:
            # "NVIDIA H200 MIG 3g.71gb" -> "3g.71gb": readable without privileges.
            device_name = _text(self._call(nvml.nvmlDeviceGetName, mig))
            name = normalise_profile_name(device_name.rsplit(" MIG ", 1)[-1])
            if gpu.model is not None and gpu.model.has_profile(name):
                profile = gpu.model.profile(name)
        if profile is not None:
            return _Slice(
                gi_id,
                mig,
                uuid,
                profile.name,
                profile.nvml_id if profile_id is None else profile_id,
                start,
                size if size is not None else None,
                profile.compute_slices,
                profile.memory_slices,
                profile.sm_count,
            )
        compute = int(name.split("g.", 1)[0].split(".")[-1]) if name and "g." in name else 0
        return _Slice(
            gi_id, mig, uuid, name or "unknown", profile_id, start, size, compute, size or 0, 0
        )

    # -- helpers -----------------------------------------------------------------------------

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.calls += 1
        return fn(*args, **kwargs)

    def _value(
        self,
        errors: CycleErrors,
        collector: str,
        gpu: _Gpu,
        fn: Callable[[], T],
        *,
        via_mig_handle: bool = False,
    ) -> T | None:
        """A value, or None when NVML does not offer it; lost GPUs propagate.

        Read ``via_mig_handle``, a NOT_FOUND or INVALID_ARGUMENT means the handle went stale:
        the GPU was re-partitioned, which the caller answers by re-enumerating it.
        """
        try:
            return self._call(fn)
        except self._nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == _GPU_IS_LOST:
                raise _GpuLost from exc
            if via_mig_handle and code in _STALE_HANDLE:
                raise _StaleLayout from exc
            if code in _SESSION_GONE:
                raise
            if code not in _ABSENT:
                errors.note(collector, f"GPU {gpu.index}: {exc}")
            return None

    def _drop(self, gpu: _Gpu) -> None:
        self._free_gpm(gpu)
        self._gpus = [g for g in self._gpus if g is not gpu]

    def _free_gpm(self, gpu: _Gpu) -> None:
        owners: list[_Gpu | _Slice] = [gpu, *gpu.slices]
        for owner in owners:
            if owner.gpm is not None:
                owner.gpm.free()
                owner.gpm = None

    def _statuses(self, errors: CycleErrors, with_energy: bool) -> tuple[CollectorStatus, ...]:
        # The main collector carries the backend's name ("nvml", or "sim" on the simulator).
        collectors = [("nvml", self.name), ("gpm", "gpm")]
        return self._book.statuses(errors, collectors, energy="energy" if with_energy else None)
