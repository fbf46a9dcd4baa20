"""The DCGM backend itself: a hostengine session, and one reading of every GPU per cycle.

Why this module: it holds the session's lifecycle (load the bindings, connect or embed,
watch, close) and the cycle (re-read the hierarchy when due, read GPUs and instances, leave
out a GPU whose layout moved under the read); what DCGM's numbers mean, how the hierarchy
maps onto NVML's names and what is watched live in the sibling modules.

Power (155) and energy (156) are board-level: asked of a GPU-I entity, DCGM answers with the
parent's value, which is how dcgm-exporter ends up publishing whole-GPU power per slice. They
are read from GPU entities only; per-slice shares are the sampler's estimate.

Costs: each cycle is two ``dcgmEntitiesGetLatestValues`` calls (GPUs, then instances) served
from the hostengine's cache.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from migscope.core import one_line
from migscope.exporter._backends.base import BackendError, BackendReading
from migscope.exporter._backends.dcgm.bindings import (
    LIBRARY_MISSING,
    Bindings,
    find_bindings,
    import_bindings,
)
from migscope.exporter._backends.dcgm.fields import (
    F_ENERGY,
    F_POWER,
    FE_GPU,
    FE_GPU_I,
    GPU_FIELDS,
    MODE_AUTO,
    SESSION_GONE,
    SLICE_FIELDS,
    ST_GPU_IS_LOST,
    ST_LIBRARY_NOT_FOUND,
    STALE,
    Values,
    error_code,
)
from migscope.exporter._backends.dcgm.hierarchy import DcgmGpu, DcgmInstance, read_hierarchy
from migscope.exporter._backends.dcgm.values import (
    activity,
    field_value,
    latest,
    memory,
    status_text,
)
from migscope.exporter._backends.dcgm.watches import Watches
from migscope.exporter._backends.status import CycleErrors, StatusBook
from migscope.exporter._snapshot import CollectorStatus, GpuReading, MigReading

# The package's name, as before it was split: log configuration refers to it.
log = logging.getLogger("migscope.exporter._backends.dcgm")

DEFAULT_PORT = 5555
"""nv-hostengine's default TCP port (``DCGM_HE_PORT_NUMBER``)."""


class DcgmBackend:
    """Read GPUs and MIG slices from DCGM (embedded or a standalone nv-hostengine).

    Args:
        host: nv-hostengine ``host[:port]`` (default port 5555), e.g. the GPU Operator's
            ``nvidia-dcgm:5555``; None starts an embedded hostengine in this process (needs
            GPU access, and CAP_SYS_ADMIN for the profiling fields).
        bindings: Directory of DCGM's Python bindings; None searches
            :data:`~migscope.exporter._backends.dcgm.DEFAULT_BINDINGS`.
        name: Backend name for build info.
        field_interval: Seconds between the hostengine's samples of the watched fields; the
            sampler's interval is the natural value.
        clock: Monotonic clock in seconds (injectable for tests).
        energy_interval: Seconds between the hostengine's reads of the energy counter.
        hierarchy_interval: Seconds between re-reads of the GPU-instance hierarchy (new
            instances appear within this time; destroyed ones as soon as they stop answering).
    """

    def __init__(
        self,
        *,
        host: str | None = None,
        bindings: Path | None = None,
        name: str = "dcgm",
        field_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        energy_interval: float = 30.0,
        hierarchy_interval: float = 10.0,
    ) -> None:
        self.name = name
        self._host = host
        self._bindings_dir = None if bindings is None else Path(bindings)
        self._hierarchy_interval = hierarchy_interval
        self._clock = clock
        self._b: Bindings | None = None
        self._handle: Any = None
        self._watches = Watches(field_interval=field_interval, energy_interval=energy_interval)
        self._watched_layout: tuple[Any, ...] | None = None
        self._gpus: list[DcgmGpu] = []
        self._enumerated_at: float | None = None
        self._driver = ""
        self._book = StatusBook(log)

    @property
    def address(self) -> str | None:
        """The hostengine address connected to (``host:port``), None when embedded."""
        if self._host is None:
            return None
        host = self._host.strip().removeprefix("tcp://")
        return host if ":" in host else f"{host}:{DEFAULT_PORT}"

    # -- session ---------------------------------------------------------------------------

    def open(self) -> None:
        """Load the bindings and library, connect, enumerate and watch the fields.

        Raises:
            BackendError: bindings or ``libdcgm.so.4`` missing, hostengine unreachable, or
                DCGM refused the setup; the message is one line saying what to fix.
        """
        if self._handle is not None:
            return
        if self._b is None:
            self._b = import_bindings(find_bindings(self._bindings_dir))
        s, agent = self._b.structs, self._b.agent
        try:
            s._dcgmInit()
        except s.DCGMError as exc:
            if error_code(exc) == ST_LIBRARY_NOT_FOUND:
                raise BackendError(LIBRARY_MISSING) from exc
            raise BackendError(f"DCGM library failed to load: {one_line(exc)}") from exc
        except OSError as exc:  # pragma: no cover - ctypes found a broken library file
            raise BackendError(f"{LIBRARY_MISSING} ({one_line(exc)})") from exc
        try:
            agent.dcgmInit()
            self._handle = self._connect()
        except s.DCGMError as exc:
            with contextlib.suppress(Exception):
                agent.dcgmShutdown()  # balance dcgmInit; the next open starts from scratch
            raise BackendError(self._connect_error(exc)) from exc
        try:
            self._watches.create_field_groups(self._b, self._handle)
            self._enumerate(CycleErrors())
        except s.DCGMError as exc:
            self.close()
            raise BackendError(f"DCGM setup failed: {one_line(exc)}") from exc

    def close(self) -> None:
        """Unwatch, delete our groups, disconnect; safe to call twice."""
        handle, self._handle = self._handle, None
        b = self._b
        if handle is not None and b is not None:
            agent = b.agent
            # Best effort: on a dead connection these fail, and there is nothing left to free.
            self._watches.destroy(b, handle)
            with contextlib.suppress(Exception):
                if self._host is None:
                    agent.dcgmStopEmbedded(handle)
                else:
                    agent.dcgmDisconnect(handle)
            with contextlib.suppress(Exception):
                agent.dcgmShutdown()
        self._watches.forget()
        self._watched_layout = None
        self._gpus = []
        self._enumerated_at = None

    def _connect(self) -> Any:
        s, agent = self._bindings().structs, self._bindings().agent
        if self._host is None:
            return agent.dcgmStartEmbedded(MODE_AUTO)
        params = s.c_dcgmConnectV2Params_v2()
        params.version = s.c_dcgmConnectV2Params_version
        params.persistAfterDisconnect = 0  # the hostengine drops our watches when we go
        params.timeoutMs = 0  # DCGM's default, 5 s
        params.addressIsUnixSocket = 0
        return agent.dcgmConnect_v2(self.address, params)

    def _connect_error(self, exc: BaseException) -> str:
        if error_code(exc) == ST_LIBRARY_NOT_FOUND:
            return LIBRARY_MISSING
        if self._host is None:
            return (
                f"cannot start an embedded DCGM hostengine: {one_line(exc)}; it needs the "
                "GPUs in this container (NVIDIA runtime) and CAP_SYS_ADMIN for profiling "
                "fields, or connect to a running nv-hostengine with --dcgm-host"
            )
        return (
            f"cannot connect to nv-hostengine at {self.address}: {one_line(exc)}; start "
            "nv-hostengine (nvidia-dcgm.service, listening beyond 127.0.0.1 if remote), or "
            "enable the GPU Operator's standalone DCGM (dcgm.enabled=true, Service "
            "nvidia-dcgm:5555), or drop --dcgm-host to embed a hostengine"
        )

    # -- one cycle -------------------------------------------------------------------------

    def read(self, *, with_energy: bool) -> BackendReading:
        """Read every GPU and slice from the hostengine's cache."""
        if self._handle is None:
            self.open()
        s = self._bindings().structs
        errors = CycleErrors()
        started = self._clock()
        timer = time.perf_counter()  # durations in real seconds, whatever the clock
        try:
            if (
                self._enumerated_at is None
                or started - self._enumerated_at >= self._hierarchy_interval
            ):
                self._enumerate(errors)
            gpu_values, slice_values, unsettled = self._read_values(errors)
            if with_energy:
                self._read_energy(errors)
        except s.DCGMError as exc:
            self.close()
            if error_code(exc) in SESSION_GONE:
                raise BackendError(f"DCGM session lost: {one_line(exc)}") from exc
            raise BackendError(f"DCGM read failed: {one_line(exc)}") from exc
        readings = []
        for gpu in self._gpus:
            if gpu.gpu_id in unsettled:
                continue  # left out this cycle rather than half-reported
            reading = self._gpu_reading(gpu, gpu_values, slice_values, errors)
            if reading is not None:
                readings.append(reading)
        spent = time.perf_counter() - timer
        errors.seconds["dcgm"] = spent - errors.seconds.get("energy", 0.0)
        return BackendReading(tuple(readings), self._driver, self._statuses(errors, with_energy))

    def _read_values(self, errors: CycleErrors) -> tuple[Values, Values, set[int]]:
        """Latest values of GPUs and of instances, re-enumerating once if the layout moved.

        Returns:
            GPU values, instance values, and the DCGM ids of GPUs whose instances still did
            not answer consistently after a re-enumeration (to be left out of this cycle).
        """
        b = self._bindings()
        for attempt in (1, 2):
            gpus = [(FE_GPU, g.gpu_id) for g in self._gpus]
            gpu_values = latest(b, self._handle, gpus, GPU_FIELDS, 0)
            slices = [(FE_GPU_I, i.entity_id) for g in self._gpus for i in g.instances]
            failure = None
            slice_values: Values = {}
            try:
                slice_values = latest(b, self._handle, slices, SLICE_FIELDS, 0) if slices else {}
            except b.structs.DCGMError as exc:
                if error_code(exc) in SESSION_GONE:
                    raise
                failure = f"GPU instances: {exc}"
            unsettled = {
                g.gpu_id
                for g in self._gpus
                for i in g.instances
                if failure is not None
                or any(
                    status in STALE
                    for status, _ in slice_values.get((FE_GPU_I, i.entity_id), {}).values()
                )
            }
            if not unsettled:
                return gpu_values, slice_values, unsettled
            if attempt == 1:
                log.info("DCGM: GPU instances changed; re-reading the MIG hierarchy")
                self._enumerate(errors)
                continue
            indexes = ", ".join(str(g.index) for g in self._gpus if g.gpu_id in unsettled)
            errors.note("dcgm", failure or f"GPU {indexes}: MIG layout kept changing during read")
            return gpu_values, slice_values, unsettled
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_energy(self, errors: CycleErrors) -> None:
        """The energy counter of every GPU (board-level), into ``energy_joules``."""
        b = self._bindings()
        started = time.perf_counter()
        try:
            gpus = [(FE_GPU, g.gpu_id) for g in self._gpus]
            values = latest(b, self._handle, gpus, (F_ENERGY,), 0)
        except b.structs.DCGMError as exc:
            if error_code(exc) in SESSION_GONE:
                raise
            errors.note("energy", f"energy: {exc}")
            return
        finally:
            errors.seconds["energy"] = time.perf_counter() - started
        for gpu in self._gpus:
            own = values.get((FE_GPU, gpu.gpu_id), {})
            energy_mj = field_value(b, errors, "energy", f"GPU {gpu.index}", own, F_ENERGY)
            if energy_mj is not None:
                gpu.energy_joules = energy_mj / 1000.0

    def _gpu_reading(
        self, gpu: DcgmGpu, gpu_values: Values, slice_values: Values, errors: CycleErrors
    ) -> GpuReading | None:
        b = self._bindings()
        own = gpu_values.get((FE_GPU, gpu.gpu_id), {})
        where = f"GPU {gpu.index}"
        if any(status == ST_GPU_IS_LOST for status, _ in own.values()):
            errors.note("dcgm", f"{where}: {status_text(b, ST_GPU_IS_LOST)}")
            return None
        power = field_value(b, errors, "dcgm", where, own, F_POWER)
        used, total, reserved = memory(b, errors, where, own)
        instances = tuple(
            self._slice_reading(gpu, inst, slice_values.get((FE_GPU_I, inst.entity_id), {}), errors)
            for inst in gpu.instances
        )
        return gpu.reading(
            power_watts=None if power is None else float(power),
            energy_joules=gpu.energy_joules,
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_reserved_bytes=reserved,
            # A MIG GPU's activity is its slices'; the whole-GPU figure only without MIG.
            activity=None if gpu.mig_enabled else activity(b, errors, where, own),
            instances=instances,
        )

    def _slice_reading(
        self,
        gpu: DcgmGpu,
        inst: DcgmInstance,
        values: dict[int, tuple[int, Any]],
        errors: CycleErrors,
    ) -> MigReading:
        b = self._bindings()
        where = f"GPU {gpu.index} GI {inst.gi_id}"
        used, total, reserved = memory(b, errors, where, values)
        return MigReading(
            gpu_instance_id=inst.gi_id,
            mig_uuid=inst.mig_uuid,
            profile=inst.profile,
            profile_id=inst.profile_id,
            placement_start=None,  # DCGM's hierarchy has no placement
            placement_size=inst.placement_size,
            compute_slices=inst.compute_slices,
            memory_slices=inst.memory_slices,
            sm_count=inst.sm_count,
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_reserved_bytes=reserved,
            processes=None,
            activity=activity(b, errors, where, values),
        )

    # -- enumeration -----------------------------------------------------------------------

    def _enumerate(self, errors: CycleErrors) -> None:
        """Re-read GPUs and the GPU-instance hierarchy; re-watch if the entities changed."""
        b = self._bindings()
        gpus, self._driver = read_hierarchy(b, self._handle, errors, self._gpus, self._driver)
        self._gpus = gpus
        layout = tuple(
            (g.gpu_id, tuple((i.entity_id, i.gi_id, i.profile_id) for i in g.instances))
            for g in gpus
        )
        if layout != self._watched_layout:
            if self._watched_layout is not None:
                log.info("DCGM: MIG layout changed; watching the new GPU instances")
            self._watches.watch(b, self._handle, gpus)
            self._watched_layout = layout
        self._enumerated_at = self._clock()

    # -- helpers ---------------------------------------------------------------------------

    def _bindings(self) -> Bindings:
        if self._b is None:  # pragma: no cover - open() loads them before anything else
            raise BackendError("DCGM bindings not loaded")
        return self._b

    def _statuses(self, errors: CycleErrors, with_energy: bool) -> tuple[CollectorStatus, ...]:
        collectors = [("dcgm", self.name)]
        return self._book.statuses(errors, collectors, energy="energy" if with_energy else None)
