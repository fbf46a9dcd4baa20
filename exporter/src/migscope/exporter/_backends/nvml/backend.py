"""The NVML backend itself: a session, and one reading of every GPU and slice per cycle.

Why this module: it holds the session (init, shutdown), the cycle (re-enumerate when due,
read each GPU, re-enumerate a GPU once whose MIG handles went stale, drop a lost one) and
the rule for one value (absent, noted error, or a fault that changes the cycle). What is
cached and how GPM windows work live in :mod:`.inventory` and :mod:`.gpm`.

NVML semantics followed (reference/nvml-dcgm.md): utilisation rates are NOT_SUPPORTED in MIG
mode; power and energy exist for the whole board only; per-slice memory and processes come
from the MIG device handle; NOT_SUPPORTED means "absent", not an error. Energy is read only
when the sampler asks (≈3 ms per GPU).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from migscope.exporter._backends.base import BackendError, BackendReading
from migscope.exporter._backends.nvml.codes import (
    ABSENT,
    GPU_IS_LOST,
    SESSION_GONE,
    STALE_HANDLE,
    GpuLost,
    StaleLayout,
    code_of,
    text,
)
from migscope.exporter._backends.nvml.gpm import GpmReader
from migscope.exporter._backends.nvml.inventory import Enumerator, NvmlGpu, NvmlSlice, free_gpm
from migscope.exporter._backends.status import CycleErrors, StatusBook
from migscope.exporter._snapshot import CollectorStatus, GpuReading, MigReading

# The package's name, as before it was split: log configuration refers to it.
log = logging.getLogger("migscope.exporter._backends.nvml")

T = TypeVar("T")


class NvmlBackend:
    """Read GPUs and MIG slices through an NVML module (``pynvml`` or the simulator).

    Args:
        nvml: The module-like NVML object.
        enumerate_interval: Seconds between full re-enumerations of GPUs and slices (new
            slices on a GPU that had none appear within this time; destroyed ones at once).
        gpm_interval: Seconds the GPM activity averages (the window). A window close to the
            scrape interval measures what happened between scrapes instead of one second of
            it; a shorter one shows a change of load sooner, with more noise (:mod:`.gpm`).
        gpm_refresh: Seconds between two computations of a GPU's or slice's activity; 0 (the
            default) recomputes it every cycle over the window that ends then. Each refresh
            costs one GPM sample and one ``nvmlGpmMetricsGet`` (≈1.2 ms of CPU on a real
            H200, tests/fixtures/h200/gpm_cost.json) per slice; ``gpm_refresh=gpm_interval``
            is the cost (and the lag) of fixed windows.
        clock: Monotonic clock in seconds (injectable for tests).
        name: Backend name for build info (``nvml`` or ``sim``).
    """

    def __init__(
        self,
        nvml: Any,
        *,
        enumerate_interval: float = 10.0,
        gpm_interval: float = 10.0,
        gpm_refresh: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        name: str = "nvml",
    ) -> None:
        if gpm_interval < 0.1:
            raise ValueError(
                f"gpm_interval must be >= 0.1 s (NVML's GPM refresh), got {gpm_interval}"
            )
        if gpm_refresh < 0:
            raise ValueError(f"gpm_refresh must be >= 0 s, got {gpm_refresh}")
        self.name = name
        self._nvml = nvml
        self._interval = enumerate_interval
        self._clock = clock
        self._open = False
        self._gpus: list[NvmlGpu] = []
        self._enumerated_at: float | None = None
        self._driver = ""
        self._book = StatusBook(log)
        self._cycle_started = 0.0
        self._gpm = GpmReader(nvml, self._call, gpm_interval, gpm_refresh)
        self._enumerator = Enumerator(nvml, self._call)
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
        self._driver = text(self._call(self._nvml.nvmlSystemGetDriverVersion))
        self._gpus = []
        self._enumerated_at = None

    def close(self) -> None:
        """Free GPM samples and shut NVML down; safe to call twice."""
        for gpu in self._gpus:
            free_gpm(gpu)
        self._gpus = []
        if self._open:
            self._open = False
            with contextlib.suppress(self._nvml.NVMLError):
                self._call(self._nvml.nvmlShutdown)

    # -- one cycle -------------------------------------------------------------------------

    def read(self, *, with_energy: bool) -> BackendReading:
        """Read every GPU once; see the package docstring for what is cached and why."""
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
            for gpu in self._gpus:
                # Before any reading's error: the missing privilege is the line to log.
                if gpu.privilege_error is not None:
                    errors.note("nvml", f"GPU {gpu.index}: {gpu.privilege_error}")
            self._look_for_new_instances(errors)
            readings = []
            for gpu in list(self._gpus):
                reading = self._read_gpu_retrying(gpu, errors, with_energy=with_energy)
                if reading is not None:
                    readings.append(reading)
        except self._nvml.NVMLError as exc:
            # Nothing could be read this cycle (e.g. nvmlDeviceGetCount failed): the sampler
            # publishes a failed snapshot; a lost session is reopened on the next cycle.
            if code_of(exc) in SESSION_GONE:
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
        self, gpu: NvmlGpu, errors: CycleErrors, *, with_energy: bool
    ) -> GpuReading | None:
        """Read one GPU; on a stale layout re-enumerate it once and read again."""
        for attempt in (1, 2):
            try:
                return self._read_gpu(gpu, errors, with_energy=with_energy)
            except StaleLayout:
                log.info("GPU %d (%s): MIG layout changed; re-enumerating", gpu.index, gpu.uuid)
                fresh = self._refresh_gpu(gpu, errors)
                if fresh is None or attempt == 2:
                    if fresh is not None:
                        errors.note("nvml", f"GPU {gpu.index}: layout kept changing during read")
                    return None
                gpu = fresh
            except GpuLost as exc:
                message = f"GPU {gpu.index}: {exc.__cause__ or 'GPU is lost'}"
                errors.note("nvml", message)
                self._broken[gpu.index] = message
                self._drop(gpu)
                self._enumerated_at = None  # look again next cycle
                return None
        return None  # pragma: no cover - the loop always returns

    def _read_gpu(self, gpu: NvmlGpu, errors: CycleErrors, *, with_energy: bool) -> GpuReading:
        h = gpu.handle
        if gpu.profiles_error is not None:
            errors.note("nvml", f"GPU {gpu.index}: {gpu.profiles_error}")
        if gpu.minor_error is not None:
            errors.note("nvml", f"GPU {gpu.index}: {gpu.minor_error}")
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
            activity = self._gpm.activity(gpu, errors, None, self._cycle_started)
        slices = tuple(self._read_slice(gpu, s, errors) for s in gpu.slices)
        return gpu.reading(
            power_watts=None if power_mw is None else power_mw / 1000.0,
            energy_joules=gpu.energy_joules,
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total),
            memory_reserved_bytes=None if memory is None else int(memory.reserved),
            activity=activity,
            instances=slices,
            mig_profiles=gpu.profiles,
            minor=gpu.minor,
        )

    def _read_slice(self, gpu: NvmlGpu, s: NvmlSlice, errors: CycleErrors) -> MigReading:
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
        activity = (
            self._gpm.activity(gpu, errors, s, self._cycle_started) if gpu.gpm_supported else None
        )
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
            memory_reserved_bytes=None if memory is None else int(memory.reserved),
            processes=None if procs is None else len(procs),
            activity=activity,
        )

    # -- enumeration -------------------------------------------------------------------------

    def _enumerate(self, errors: CycleErrors) -> None:
        """Rebuild the GPU and slice list, keeping GPM baselines of slices that remain."""
        old = {gpu.uuid: gpu for gpu in self._gpus}
        count = self._call(self._nvml.nvmlDeviceGetCount)
        fresh: list[NvmlGpu] = []
        self._broken = {}
        for index in range(count):
            try:
                gpu = self._enumerator.gpu(index, old)
            except self._nvml.NVMLError as exc:
                if code_of(exc) in SESSION_GONE:
                    raise
                self._broken[index] = f"GPU {index}: {exc}"
                continue
            fresh.append(gpu)
        kept = {g.uuid for g in fresh}
        for gpu in self._gpus:
            if gpu.uuid not in kept:
                free_gpm(gpu)
        self._gpus = fresh
        self._enumerated_at = self._clock()

    def _look_for_new_instances(self, errors: CycleErrors) -> None:
        """Re-enumerate a MIG GPU at once when a GPU instance was created on it since.

        NVIDIA's DRA driver creates a GPU instance per claim (DynamicMIG); the handles of the
        others stay valid, so no stale handle says so. MIG devices are indexed densely in GI
        id order (``nvidia-smi -L``), so one call per MIG GPU per cycle tells: a device at
        index ``len(slices)``. A destroyed one is caught by its stale handle on reading; the
        full re-enumeration every ``enumerate_interval`` catches anything else.
        """
        for gpu in list(self._gpus):
            if not gpu.mig_enabled:
                continue
            try:
                self._call(
                    self._nvml.nvmlDeviceGetMigDeviceHandleByIndex, gpu.handle, len(gpu.slices)
                )
            except self._nvml.NVMLError as exc:
                if code_of(exc) in SESSION_GONE:
                    raise
                continue  # NOT_FOUND: nothing new (anything else shows on reading)
            log.info("GPU %d (%s): new MIG device; re-enumerating", gpu.index, gpu.uuid)
            try:
                fresh = self._enumerator.gpu(gpu.index, {gpu.uuid: gpu})
            except self._nvml.NVMLError as exc:
                if code_of(exc) in SESSION_GONE:
                    raise
                continue  # reading it says what is wrong
            self._gpus = [fresh if g is gpu else g for g in self._gpus]

    def _refresh_gpu(self, gpu: NvmlGpu, errors: CycleErrors) -> NvmlGpu | None:
        """Re-enumerate one GPU after a stale handle; replace it in the list."""
        try:
            fresh = self._enumerator.gpu(gpu.index, {gpu.uuid: gpu}, layout_changed=True)
        except self._nvml.NVMLError as exc:
            message = f"GPU {gpu.index}: {exc}"
            errors.note("nvml", message)
            self._broken[gpu.index] = message
            self._drop(gpu)
            return None
        self._gpus = [fresh if g is gpu else g for g in self._gpus]
        return fresh

    # -- helpers -----------------------------------------------------------------------------

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.calls += 1
        return fn(*args, **kwargs)

    def _value(
        self,
        errors: CycleErrors,
        collector: str,
        gpu: NvmlGpu,
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
            code = code_of(exc)
            if code == GPU_IS_LOST:
                raise GpuLost from exc
            if via_mig_handle and code in STALE_HANDLE:
                raise StaleLayout from exc
            if code in SESSION_GONE:
                raise
            if code not in ABSENT:
                errors.note(collector, f"GPU {gpu.index}: {exc}")
            return None

    def _drop(self, gpu: NvmlGpu) -> None:
        free_gpm(gpu)
        self._gpus = [g for g in self._gpus if g is not gpu]

    def _statuses(self, errors: CycleErrors, with_energy: bool) -> tuple[CollectorStatus, ...]:
        # The main collector carries the backend's name ("nvml", or "sim" on the simulator).
        collectors = [("nvml", self.name), ("gpm", "gpm")]
        return self._book.statuses(errors, collectors, energy="energy" if with_energy else None)
