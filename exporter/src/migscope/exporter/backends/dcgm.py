"""DCGM backend: per-GPU-instance activity, memory and board power from nv-hostengine.

Why a second backend: NVML has per-slice activity only through GPM, which Hopper and newer
have and Ampere has not. On an A100, only DCGM's profiling fields (1001 GR engine active,
1002 SM active, 1003 SM occupancy, 1004 tensor, 1005 DRAM) tell a busy slice from an idle one.
And on GPU Operator nodes with ``dcgm.enabled=true`` a standalone nv-hostengine already
samples the GPUs, so reading its cache costs the node nothing extra. docs/dcgm.md says when to
pick which backend.

DCGM facts this code rests on (reference/nvml-dcgm.md §4, NVIDIA/DCGM sources; docs/dcgm.md
lists what was verified where):

* The Python bindings are not on PyPI. They ship with DCGM (``datacenter-gpu-manager-4-core``)
  in ``/usr/share/datacenter-gpu-manager-4/bindings/python3`` (``/usr/local/dcgm/...`` for
  DCGM 3), import each other by top-level name, and are ctypes wrappers around a *local*
  ``libdcgm.so.4``, needed even to talk to a remote hostengine. They are untyped, so they are
  handled as ``Any`` here and imported from their directory without leaving that directory on
  ``sys.path`` or their modules in ``sys.modules`` (see :func:`_import_bindings`).
* Field constants were renamed in DCGM 4.6; the integer ids never change, so they are used.
* GPU-instance entities (``DCGM_FE_GPU_I``) are numbered by DCGM (``gpuId * maxGpcs + n``) —
  not NVML GI ids — and the numbers are reused after MIG Manager re-partitions a GPU. The
  mapping to NVML GI ids and profiles comes from ``dcgmGetGpuInstanceHierarchy``, refreshed
  every ``hierarchy_interval`` seconds and at once when an instance stops answering.
* Power (155) and energy (156) are board-level: asked of a GPU-I entity, DCGM answers with the
  parent's value, which is how dcgm-exporter ends up publishing whole-GPU power per slice.
  They are read from GPU entities only; per-slice shares are the sampler's estimate.
* A value DCGM does not have is a *blank* sentinel (``DCGM_FP64_BLANK`` = 2**47 and up,
  ``DCGM_INT64_BLANK``, int32 blanks stored in int64, ``<<<...>>>`` strings) or a per-value
  ``status``; both become ``None`` (absent), never 0.
* The MIG UUID that pods are attributed by: DCGM 4 answers ``DCGM_FI_DEV_UUID`` (54) of a GPU-I
  entity with NVML's UUID of the instance's MIG device (``MIG-<uuid>``). When a DCGM answers
  with something else, the slice is named in the pre-R470 form ``MIG-GPU-<uuid>/<gi>/<ci>``
  (what DCGM itself writes into CUDA_VISIBLE_DEVICES), which identifies it but will not match
  a kubelet's device IDs; docs/dcgm.md explains.

Costs: each cycle is two ``dcgmEntitiesGetLatestValues`` calls (GPUs, then instances) served
from the hostengine's cache; the hostengine samples at ``field_interval`` and reads the slow
energy counter (≈3 ms per GPU in NVML) only every ``energy_interval``.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from migscope.core.catalogue import (
    CatalogueError,
    GiProfile,
    GpuModel,
    find_model,
    normalise_profile_name,
)
from migscope.exporter.backends.base import BackendError, BackendReading, GpuIdentity
from migscope.exporter.backends.status import CycleErrors, StatusBook, one_line
from migscope.exporter.model import Activity, CollectorStatus, GpuReading, MigReading

__all__ = ["DEFAULT_BINDINGS", "DEFAULT_PORT", "DcgmBackend"]

log = logging.getLogger(__name__)

DEFAULT_BINDINGS = (
    Path("/usr/share/datacenter-gpu-manager-4/bindings/python3"),
    Path("/usr/local/dcgm/bindings/python3"),
)
"""Where DCGM 4 and DCGM 3 install their Python bindings, searched in this order."""

DEFAULT_PORT = 5555
"""nv-hostengine's default TCP port (``DCGM_HE_PORT_NUMBER``)."""

_BINDING_MODULES = ("dcgm_structs", "dcgm_fields", "dcgm_agent")

# Field ids (stable; the names changed in DCGM 4.6).
_F_NAME = 50
_F_NVML_INDEX = 52
_F_UUID = 54
_F_POWER = 155
_F_ENERGY = 156
_F_FB_TOTAL = 250
_F_FB_FREE = 251
_F_FB_USED = 252
_ACTIVITY_FIELDS = (
    ("graphics", 1001),
    ("sm_active", 1002),
    ("sm_occupancy", 1003),
    ("tensor", 1004),
    ("dram", 1005),
)
_SLICE_FIELDS = (_F_FB_TOTAL, _F_FB_FREE, _F_FB_USED, *(f for _, f in _ACTIVITY_FIELDS))
# Power only on GPU entities: on a GPU-I entity DCGM would repeat the board's value.
_GPU_FIELDS = (_F_POWER, *_SLICE_FIELDS)
_FIELD_NAMES = {
    _F_POWER: "power",
    _F_ENERGY: "energy",
    _F_FB_TOTAL: "FB total",
    _F_FB_FREE: "FB free",
    _F_FB_USED: "FB used",
    1001: "GR engine active",
    1002: "SM active",
    1003: "SM occupancy",
    1004: "tensor active",
    1005: "DRAM active",
}

# Entity groups, flags and modes (dcgm_fields.py / dcgm_structs.py).
_FE_GPU = 1
_FE_GPU_I = 4
_FE_GPU_CI = 5
_LIVE_DATA = 0x1
_GROUP_EMPTY = 1
_MODE_AUTO = 1
_NO_COMPUTE_INSTANCE = 0xFFFFFFFF

# dcgmReturn_t codes (dcgm_structs.h), stable across versions.
_ST_NOT_SUPPORTED = -6
_ST_UNINITIALIZED = -10
_ST_NO_DATA = -14
_ST_NOT_WATCHED = -16
_ST_GPU_IS_LOST = -18
_ST_CONNECTION_NOT_VALID = -21
_ST_LIBRARY_NOT_FOUND = -25
_ST_FIELD_UNSUPPORTED_BY_API = -32
_ST_PROFILING_NOT_SUPPORTED = -36
_ST_INSTANCE_NOT_FOUND = -45
_ST_COMPUTE_INSTANCE_NOT_FOUND = -46
_ABSENT = frozenset(
    {_ST_NOT_SUPPORTED, _ST_NO_DATA, _ST_FIELD_UNSUPPORTED_BY_API, _ST_PROFILING_NOT_SUPPORTED}
)
"""Statuses that mean "no such value here", not "something is wrong"."""
_STALE = frozenset({_ST_INSTANCE_NOT_FOUND, _ST_COMPUTE_INSTANCE_NOT_FOUND, _ST_NOT_WATCHED})
"""Statuses of a GPU-I entity that mean our hierarchy is out of date (re-partitioned)."""
_SESSION_GONE = frozenset({_ST_UNINITIALIZED, _ST_CONNECTION_NOT_VALID, _ST_LIBRARY_NOT_FOUND})

# Blank sentinels (dcgm_structs.h, dcgmvalue.py): a blank is this value or above; int32 blanks
# (0x7ffffff0 + 0..15) may arrive widened into an int64 field.
_INT32_BLANK = 0x7FFFFFF0
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0
_MIB = 1024 * 1024

_NAMES = itertools.count(1)
"""Field group names must be unique per hostengine, across backends of one process too."""

_LIBRARY_MISSING = (
    "libdcgm.so.4 not found: DCGM's Python bindings need the local DCGM library even to "
    "talk to a remote nv-hostengine; install datacenter-gpu-manager-4-core (or mount "
    "libdcgm.so.4 into the container and add its directory to LD_LIBRARY_PATH)"
)


@dataclass(frozen=True)
class _Bindings:
    """The three binding modules, imported from one directory."""

    directory: Path
    structs: ModuleType
    fields: ModuleType
    agent: ModuleType


def _find_bindings(explicit: Path | None) -> Path:
    """The directory holding ``dcgm_agent.py``: the one given, else the default locations."""
    candidates = (explicit,) if explicit is not None else DEFAULT_BINDINGS
    for candidate in candidates:
        if (candidate / "dcgm_agent.py").is_file():
            return candidate
    searched = ", ".join(str(c) for c in candidates)
    raise BackendError(
        f"DCGM Python bindings (dcgm_agent.py) not found in {searched}: install DCGM 4 "
        "(package datacenter-gpu-manager-4-core; DCGM is not on PyPI) or point "
        "--dcgm-bindings at the directory that holds dcgm_agent.py"
    )


def _inside(module: ModuleType, directory: Path) -> bool:
    path = getattr(module, "__file__", None)
    if not path:
        return False
    return Path(os.path.realpath(path)).parent == Path(os.path.realpath(directory))


def _import_bindings(directory: Path) -> _Bindings:
    """Import the binding modules from ``directory`` and leave no trace behind.

    The bindings import each other by top-level name (``import dcgm_structs``), so their
    directory must be on ``sys.path`` while they load. Afterwards ``sys.path`` is restored and
    the modules are taken out of ``sys.modules`` again (the backend keeps its own references,
    and the modules keep theirs to each other): two backends, or two tests, never share module
    state such as the bindings' loaded-library global, and modules of the same name that were
    imported before are put back.
    """
    shadowed = {
        name: module
        for name, module in list(sys.modules.items())
        if "." not in name and (directory / f"{name}.py").is_file()
    }
    before = set(sys.modules)
    saved_path = list(sys.path)
    for name in shadowed:
        del sys.modules[name]
    sys.path.insert(0, str(directory))
    importlib.invalidate_caches()
    try:
        structs, fields, agent = (importlib.import_module(n) for n in _BINDING_MODULES)
    except Exception as exc:
        raise BackendError(
            f"DCGM Python bindings in {directory} failed to import: "
            f"{type(exc).__name__}: {one_line(exc)}"
        ) from exc
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            if "." not in name and _inside(sys.modules[name], directory):
                del sys.modules[name]
        sys.modules.update(shadowed)
    return _Bindings(directory, structs, fields, agent)


@dataclass(frozen=True)
class _Instance:
    """One GPU instance as the hierarchy describes it, resolved against the catalogue."""

    entity_id: int
    gi_id: int
    profile_id: int | None
    mig_uuid: str
    profile: str
    compute_slices: int
    memory_slices: int
    sm_count: int
    placement_size: int | None


@dataclass
class _Gpu(GpuIdentity):
    gpu_id: int
    instances: list[_Instance] = field(default_factory=list)
    energy_joules: float | None = None


_Values = dict[tuple[int, int], dict[int, tuple[int, Any]]]
"""(entity group, entity id) -> field id -> (status, decoded value or None)."""


class DcgmBackend:
    """Read GPUs and MIG slices from DCGM (embedded or a standalone nv-hostengine).

    Args:
        host: nv-hostengine ``host[:port]`` (default port 5555), e.g. the GPU Operator's
            ``nvidia-dcgm:5555``; None starts an embedded hostengine in this process (needs
            GPU access, and CAP_SYS_ADMIN for the profiling fields).
        bindings: Directory of DCGM's Python bindings; None searches :data:`DEFAULT_BINDINGS`.
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
        self._field_interval = field_interval
        self._energy_interval = energy_interval
        self._hierarchy_interval = hierarchy_interval
        self._clock = clock
        self._b: _Bindings | None = None
        self._handle: Any = None
        self._group: Any = None
        self._field_groups: list[tuple[Any, float]] = []
        self._watched_layout: tuple[Any, ...] | None = None
        self._gpus: list[_Gpu] = []
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
            self._b = _import_bindings(_find_bindings(self._bindings_dir))
        s, agent = self._b.structs, self._b.agent
        try:
            s._dcgmInit()
        except s.DCGMError as exc:
            if self._code(exc) == _ST_LIBRARY_NOT_FOUND:
                raise BackendError(_LIBRARY_MISSING) from exc
            raise BackendError(f"DCGM library failed to load: {one_line(exc)}") from exc
        except OSError as exc:  # pragma: no cover - ctypes found a broken library file
            raise BackendError(f"{_LIBRARY_MISSING} ({one_line(exc)})") from exc
        try:
            agent.dcgmInit()
            self._handle = self._connect()
        except s.DCGMError as exc:
            with contextlib.suppress(Exception):
                agent.dcgmShutdown()  # balance dcgmInit; the next open starts from scratch
            raise BackendError(self._connect_error(exc)) from exc
        try:
            self._create_field_groups()
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
            with contextlib.suppress(Exception):
                self._drop_group(handle)
            for fg, _interval in self._field_groups:
                with contextlib.suppress(Exception):
                    agent.dcgmFieldGroupDestroy(handle, fg)
            with contextlib.suppress(Exception):
                if self._host is None:
                    agent.dcgmStopEmbedded(handle)
                else:
                    agent.dcgmDisconnect(handle)
            with contextlib.suppress(Exception):
                agent.dcgmShutdown()
        self._group = None
        self._field_groups = []
        self._watched_layout = None
        self._gpus = []
        self._enumerated_at = None

    def _connect(self) -> Any:
        s, agent = self._bindings().structs, self._bindings().agent
        if self._host is None:
            return agent.dcgmStartEmbedded(_MODE_AUTO)
        params = s.c_dcgmConnectV2Params_v2()
        params.version = s.c_dcgmConnectV2Params_version
        params.persistAfterDisconnect = 0  # the hostengine drops our watches when we go
        params.timeoutMs = 0  # DCGM's default, 5 s
        params.addressIsUnixSocket = 0
        return agent.dcgmConnect_v2(self.address, params)

    def _connect_error(self, exc: BaseException) -> str:
        if self._code(exc) == _ST_LIBRARY_NOT_FOUND:
            return _LIBRARY_MISSING
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
            if self._code(exc) in _SESSION_GONE:
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

    def _read_values(self, errors: CycleErrors) -> tuple[_Values, _Values, set[int]]:
        """Latest values of GPUs and of instances, re-enumerating once if the layout moved.

        Returns:
            GPU values, instance values, and the DCGM ids of GPUs whose instances still did
            not answer consistently after a re-enumeration (to be left out of this cycle).
        """
        s = self._bindings().structs
        for attempt in (1, 2):
            gpu_values = self._latest([(_FE_GPU, g.gpu_id) for g in self._gpus], _GPU_FIELDS, 0)
            slices = [(_FE_GPU_I, i.entity_id) for g in self._gpus for i in g.instances]
            failure = None
            slice_values: _Values = {}
            try:
                slice_values = self._latest(slices, _SLICE_FIELDS, 0) if slices else {}
            except s.DCGMError as exc:
                if self._code(exc) in _SESSION_GONE:
                    raise
                failure = f"GPU instances: {exc}"
            unsettled = {
                g.gpu_id
                for g in self._gpus
                for i in g.instances
                if failure is not None
                or any(
                    status in _STALE
                    for status, _ in slice_values.get((_FE_GPU_I, i.entity_id), {}).values()
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
        s = self._bindings().structs
        started = time.perf_counter()
        try:
            values = self._latest([(_FE_GPU, g.gpu_id) for g in self._gpus], (_F_ENERGY,), 0)
        except s.DCGMError as exc:
            if self._code(exc) in _SESSION_GONE:
                raise
            errors.note("energy", f"energy: {exc}")
            return
        finally:
            errors.seconds["energy"] = time.perf_counter() - started
        for gpu in self._gpus:
            own = values.get((_FE_GPU, gpu.gpu_id), {})
            energy_mj = self._value(errors, "energy", f"GPU {gpu.index}", own, _F_ENERGY)
            if energy_mj is not None:
                gpu.energy_joules = energy_mj / 1000.0

    def _gpu_reading(
        self, gpu: _Gpu, gpu_values: _Values, slice_values: _Values, errors: CycleErrors
    ) -> GpuReading | None:
        own = gpu_values.get((_FE_GPU, gpu.gpu_id), {})
        where = f"GPU {gpu.index}"
        if any(status == _ST_GPU_IS_LOST for status, _ in own.values()):
            errors.note("dcgm", f"{where}: {self._status_text(_ST_GPU_IS_LOST)}")
            return None
        power = self._value(errors, "dcgm", where, own, _F_POWER)
        used, total = self._memory(errors, where, own)
        instances = tuple(
            self._slice_reading(
                gpu, inst, slice_values.get((_FE_GPU_I, inst.entity_id), {}), errors
            )
            for inst in gpu.instances
        )
        return gpu.reading(
            power_watts=None if power is None else float(power),
            energy_joules=gpu.energy_joules,
            memory_used_bytes=used,
            memory_total_bytes=total,
            # A MIG GPU's activity is its slices'; the whole-GPU figure only without MIG.
            activity=None if gpu.mig_enabled else self._activity(errors, where, own),
            instances=instances,
        )

    def _slice_reading(
        self, gpu: _Gpu, inst: _Instance, values: dict[int, tuple[int, Any]], errors: CycleErrors
    ) -> MigReading:
        where = f"GPU {gpu.index} GI {inst.gi_id}"
        used, total = self._memory(errors, where, values)
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
            processes=None,
            activity=self._activity(errors, where, values),
        )

    def _memory(
        self, errors: CycleErrors, where: str, values: dict[int, tuple[int, Any]]
    ) -> tuple[int | None, int | None]:
        used = self._value(errors, "dcgm", where, values, _F_FB_USED)
        free = self._value(errors, "dcgm", where, values, _F_FB_FREE)
        total = self._value(errors, "dcgm", where, values, _F_FB_TOTAL)
        if total is None and used is not None and free is not None:
            total = used + free
        return (
            None if used is None else int(used) * _MIB,
            None if total is None else int(total) * _MIB,
        )

    def _activity(
        self, errors: CycleErrors, where: str, values: dict[int, tuple[int, Any]]
    ) -> Activity | None:
        ratios: dict[str, float | None] = {}
        for attr, fid in _ACTIVITY_FIELDS:
            value = self._value(errors, "dcgm", where, values, fid)
            ratios[attr] = None if value is None else min(max(float(value), 0.0), 1.0)
        if all(v is None for v in ratios.values()):
            return None
        return Activity(**ratios)

    def _value(
        self,
        errors: CycleErrors,
        collector: str,
        where: str,
        values: dict[int, tuple[int, Any]],
        field_id: int,
    ) -> Any:
        """One decoded value, or None; a real error is noted against ``collector``."""
        found = values.get(field_id)
        if found is None:
            return None
        status, value = found
        if status == 0:
            return value
        if status not in _ABSENT:
            name = _FIELD_NAMES.get(field_id, "field")
            errors.note(collector, f"{where}: {name} ({field_id}): {self._status_text(status)}")
        return None

    # -- enumeration -----------------------------------------------------------------------

    def _enumerate(self, errors: CycleErrors) -> None:
        """Re-read GPUs and the GPU-instance hierarchy; re-watch if the entities changed."""
        agent = self._bindings().agent
        handle = self._handle
        gpu_ids = [int(g) for g in agent.dcgmGetAllSupportedDevices(handle)]
        hierarchy = agent.dcgmGetGpuInstanceHierarchy(handle)
        entries = [hierarchy.entityList[i] for i in range(int(hierarchy.count))]
        gis: dict[int, list[Any]] = {}
        cis: dict[int, list[int]] = {}
        for entry in entries:
            group = int(entry.entity.entityGroupId)
            if group == _FE_GPU_I and int(entry.parent.entityGroupId) == _FE_GPU:
                gis.setdefault(int(entry.parent.entityId), []).append(entry)
            elif group == _FE_GPU_CI and int(entry.parent.entityGroupId) == _FE_GPU_I:
                ci = int(entry.info.nvmlComputeInstanceId)
                cis.setdefault(int(entry.parent.entityId), []).append(ci)
        identity = self._identity(errors, gpu_ids, [e for v in gis.values() for e in v])
        previous = {g.uuid: g for g in self._gpus}
        gpus = []
        for gpu_id in gpu_ids:
            gpu = self._describe_gpu(gpu_id, gis.get(gpu_id, []), cis, identity)
            old = previous.get(gpu.uuid)
            if old is not None:
                gpu.energy_joules = old.energy_joules
            gpus.append(gpu)
        self._gpus = gpus
        layout = tuple(
            (g.gpu_id, tuple((i.entity_id, i.gi_id, i.profile_id) for i in g.instances))
            for g in gpus
        )
        if layout != self._watched_layout:
            if self._watched_layout is not None:
                log.info("DCGM: MIG layout changed; watching the new GPU instances")
            self._watch(gpus)
            self._watched_layout = layout
        self._enumerated_at = self._clock()

    def _identity(
        self, errors: CycleErrors, gpu_ids: Sequence[int], gi_entries: list[Any]
    ) -> _Values:
        """Static identity fields read live: NVML index of GPUs, profile name and UUID of GIs."""
        s = self._bindings().structs
        values: _Values = {}
        queries = [
            ([(_FE_GPU, g) for g in gpu_ids], (_F_NVML_INDEX,)),
            ([(_FE_GPU_I, int(e.entity.entityId)) for e in gi_entries], (_F_NAME, _F_UUID)),
        ]
        for entities, fields in queries:
            if not entities:
                continue
            try:
                values.update(self._latest(entities, fields, flags=_LIVE_DATA))
            except s.DCGMError as exc:
                if self._code(exc) in _SESSION_GONE:
                    raise
                errors.note("dcgm", f"identity fields: {exc}")
        return values

    def _describe_gpu(
        self, gpu_id: int, gi_entries: list[Any], cis: dict[int, list[int]], identity: _Values
    ) -> _Gpu:
        agent = self._bindings().agent
        attrs = agent.dcgmGetDeviceAttributes(self._handle, gpu_id)
        ids = attrs.identifiers
        name = _text(ids.deviceName)
        self._driver = _text(ids.driverVersion) or self._driver
        device_id = int(ids.pciDeviceId)
        try:
            model: GpuModel | None = find_model(name, pci_device_id=device_id)
        except CatalogueError:
            model = None
        index_value = identity.get((_FE_GPU, gpu_id), {}).get(_F_NVML_INDEX, (1, None))
        if index_value[0] == 0 and index_value[1] is not None:
            index = int(index_value[1])
        elif gi_entries:
            index = int(gi_entries[0].info.nvmlGpuIndex)
        else:
            index = gpu_id
        uuid = _text(ids.uuid)
        gpu = _Gpu(
            gpu_id=gpu_id,
            index=index,
            uuid=uuid,
            name=name,
            pci_bus_id=_text(ids.pciBusId),
            pci_device_id=f"0x{device_id:08X}",
            model=model,
            # ``settings`` came with c_dcgmDeviceAttributes_v3 (DCGM 3); GIs imply MIG anyway.
            mig_enabled=bool(int(getattr(getattr(attrs, "settings", None), "migModeEnabled", 0)))
            or bool(gi_entries),
        )
        for entry in gi_entries:
            eid = int(entry.entity.entityId)
            own = identity.get((_FE_GPU_I, eid), {})
            gpu.instances.append(self._describe_instance(gpu, entry, cis.get(eid, []), own))
        gpu.instances.sort(key=lambda i: i.gi_id)
        return gpu

    def _describe_instance(
        self, gpu: _Gpu, entry: Any, ci_ids: list[int], own: dict[int, tuple[int, Any]]
    ) -> _Instance:
        info = entry.info
        gi_id = int(info.nvmlInstanceId)
        profile_id = int(info.nvmlMigProfileId)
        slices = int(info.nvmlProfileSlices)
        status, name = own.get(_F_NAME, (1, None))
        dcgm_name = normalise_profile_name(name) if status == 0 and name else None
        profile: GiProfile | None = None
        if gpu.model is not None:
            profile = gpu.model.profile_by_nvml_id(profile_id)
            if profile is None and dcgm_name and gpu.model.has_profile(dcgm_name):
                profile = gpu.model.profile(dcgm_name)
        status, uuid = own.get(_F_UUID, (1, None))
        if status == 0 and isinstance(uuid, str) and uuid.startswith("MIG-"):
            mig_uuid = uuid
        else:
            # Not a MIG device UUID (an older DCGM, or a GI without compute instances): the
            # pre-R470 name of the slice, which DCGM itself uses for CUDA_VISIBLE_DEVICES.
            ci = f"/{min(ci_ids)}" if ci_ids else ""
            mig_uuid = f"MIG-{gpu.uuid}/{gi_id}{ci}"
        if profile is not None:
            return _Instance(
                entity_id=int(entry.entity.entityId),
                gi_id=gi_id,
                profile_id=profile_id,
                mig_uuid=mig_uuid,
                profile=profile.name,
                compute_slices=profile.compute_slices,
                memory_slices=profile.memory_slices,
                sm_count=profile.sm_count,
                placement_size=profile.memory_slices,
            )
        return _Instance(
            entity_id=int(entry.entity.entityId),
            gi_id=gi_id,
            profile_id=profile_id,
            mig_uuid=mig_uuid,
            profile=dcgm_name or f"profile-{profile_id}",
            compute_slices=slices,
            memory_slices=0,
            sm_count=0,
            placement_size=None,
        )

    # -- watches ---------------------------------------------------------------------------

    def _create_field_groups(self) -> None:
        """Two field groups: the per-cycle fields, and the slow energy counter."""
        agent = self._bindings().agent
        tag = f"migscope-{os.getpid()}-{next(_NAMES)}"
        main = agent.dcgmFieldGroupCreate(self._handle, list(_GPU_FIELDS), f"{tag}-fields")
        self._field_groups = [(main, self._field_interval)]
        energy = agent.dcgmFieldGroupCreate(self._handle, [_F_ENERGY], f"{tag}-energy")
        self._field_groups.append((energy, max(self._energy_interval, self._field_interval)))

    def _watch(self, gpus: list[_Gpu]) -> None:
        """(Re)create our entity group of GPUs and GPU instances and watch both field groups."""
        s, agent = self._bindings().structs, self._bindings().agent
        handle = self._handle
        self._drop_group(handle)
        group = agent.dcgmGroupCreate(handle, _GROUP_EMPTY, f"migscope-{os.getpid()}-entities")
        self._group = group
        for gpu in gpus:
            agent.dcgmGroupAddEntity(handle, group, _FE_GPU, gpu.gpu_id)
            for inst in gpu.instances:
                agent.dcgmGroupAddEntity(handle, group, _FE_GPU_I, inst.entity_id)
        if not gpus:
            return
        for fg, interval in self._field_groups:
            keep = max(60.0, 5 * interval)
            agent.dcgmWatchFields(handle, group, fg, int(interval * 1_000_000), keep, 0)
        # One update pass now, so the first read has values rather than NO_DATA.
        with contextlib.suppress(s.DCGMError):
            agent.dcgmUpdateAllFields(handle, 1)

    def _drop_group(self, handle: Any) -> None:
        group, self._group = self._group, None
        if group is None:
            return
        agent = self._bindings().agent
        for fg, _interval in self._field_groups:
            with contextlib.suppress(Exception):
                agent.dcgmUnwatchFields(handle, group, fg)
        with contextlib.suppress(Exception):
            agent.dcgmGroupDestroy(handle, group)

    # -- helpers ---------------------------------------------------------------------------

    def _bindings(self) -> _Bindings:
        if self._b is None:  # pragma: no cover - open() loads them before anything else
            raise BackendError("DCGM bindings not loaded")
        return self._b

    def _latest(
        self, entities: Sequence[tuple[int, int]], fields: Sequence[int], flags: int
    ) -> _Values:
        """``dcgmEntitiesGetLatestValues``, decoded: blanks become None."""
        b = self._bindings()
        pairs = []
        for group, entity in entities:
            pair = b.structs.c_dcgmGroupEntityPair_t()
            pair.entityGroupId = group
            pair.entityId = entity
            pairs.append(pair)
        raw = b.agent.dcgmEntitiesGetLatestValues(self._handle, pairs, list(fields), flags)
        out: _Values = {}
        for fv in raw:
            key = (int(fv.entityGroupId), int(fv.entityId))
            out.setdefault(key, {})[int(fv.fieldId)] = (int(fv.status), _decode(fv))
        return out

    def _code(self, exc: BaseException) -> int | None:
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None

    def _status_text(self, status: int) -> str:
        try:
            return one_line(self._bindings().structs.DCGMError(status))
        except Exception:
            return f"DCGM status {status}"

    def _statuses(self, errors: CycleErrors, with_energy: bool) -> tuple[CollectorStatus, ...]:
        collectors = [("dcgm", self.name)]
        return self._book.statuses(errors, collectors, energy="energy" if with_energy else None)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _decode(fv: Any) -> Any:
    """A field value's payload by its type, or None for DCGM's blank sentinels."""
    kind = chr(int(fv.fieldType)) if fv.fieldType else ""
    if kind == "d":
        dbl = float(fv.value.dbl)
        return None if math.isnan(dbl) or dbl >= _FP64_BLANK else dbl
    if kind == "i":
        i64 = int(fv.value.i64)
        if i64 >= _INT64_BLANK or _INT32_BLANK <= i64 < _INT32_BLANK + 16:
            return None
        return i64
    if kind == "s":
        text = _text(fv.value.str)
        return None if text.startswith("<<<") and ">>>" in text else text
    return None
