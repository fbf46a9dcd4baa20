"""FAKE ``libdcgm.so.4`` and nv-hostengine beneath the fake DCGM bindings (tests only).

The real bindings are ctypes wrappers: ``dcgm_structs._dcgmInit()`` loads ``libdcgm.so.4``
and every ``dcgm_agent`` function calls a C entry point that returns a ``dcgmReturn_t``. This
module is that C side, simulated: :class:`FakeLibDcgm` has one method per entry point the
fake ``dcgm_agent`` uses, returning ``(dcgmReturn_t, result)``; the ``dcgm_agent`` layer turns
a non-zero code into ``dcgm_structs.DCGMError`` exactly as the real ``_dcgmCheckReturn`` does.

A test builds a node as a :class:`FakeHostengine` (GPUs, GPU instances, field values, faults)
and makes it reachable the way a real one is: :func:`serve` at ``host:port`` (a standalone
nv-hostengine, e.g. the GPU Operator's ``nvidia-dcgm`` Service) or :func:`embed` (what
``dcgmStartEmbedded`` finds on the local GPUs). :func:`reset` between tests.

Semantics and where they come from (NVIDIA/DCGM unless said otherwise):

* Return codes: ``testing/python3/dcgm_structs.py`` (``DCGM_ST_*``).
* Library loading: ``dcgm_structs._LoadDcgmLibrary`` raises ``DCGM_ST_LIBRARY_NOT_FOUND``
  when no ``libdcgm.so.4`` is found, whether or not the hostengine is remote; any call made
  before the library is loaded raises ``DCGM_ST_UNINITIALIZED`` (``_dcgmGetFunctionPointer``).
* Connecting to an address nobody listens on: ``DCGM_ST_CONNECTION_NOT_VALID``
  (``dcgmlib/src/DcgmClientHandler.cpp``: "failed to connect to hostengine"); calls on a
  connection whose hostengine went away return the same code. Default port 5555.
* Field groups: names are unique per hostengine (``DCGM_ST_DUPLICATE_KEY``), unknown field ids
  are ``DCGM_ST_BADPARAM``, and a connection's field groups, groups and watches are removed
  when it disconnects (``dcgmlib/src/DcgmFieldGroup.cpp``, ``OnConnectionRemove``).
* Entity ids: DCGM numbers GPU instances itself (``gpuId * maxGpcs + n``), so they are not
  NVML GI ids and are reused after a re-partition (``DcgmCacheManager.cpp``: ``entityId %
  maxGpcs`` indexes the GPU's instance list). The hierarchy (``dcgmGetGpuInstanceHierarchy``)
  lists each GI then its CIs; a GI entry has ``nvmlComputeInstanceId = -1`` (0xFFFFFFFF) and
  ``nvmlMigProfileId`` = the NVML GI profile id (19 for 1g), as in
  ``dcgmlib/src/tests/MigTestsHelper.cpp``; ``nvmlInstanceId`` is the NVML GI id (7..14).
* Field levels (``dcgmlib/src/dcgm_fields.cpp`` entityLevel, reference/nvml-dcgm.md §4): power
  (155, 157), energy (156) and temperature (150) are GPU-level: asked of a GPU-I entity, they
  are answered with the parent GPU's value — the repetition dcgm-exporter publishes per slice.
* ``DCGM_FI_DEV_NAME`` (50) of a GPU-I entity is its profile name and ``DCGM_FI_DEV_UUID``
  (54) of a GPU-I entity is ``nvmlDeviceGetUUID`` of its MIG device, i.e. ``MIG-<uuid>``
  (``DcgmCacheManager::BufferOrCacheLatestGpuValue``). ``uuid_field="gpu"`` models a DCGM
  build that answers with the parent's GPU UUID instead (unverified which releases do).
* Latest values (``dcgmEntitiesGetLatestValues``): one ``c_dcgmFieldValue_v2`` per entity and
  field with its own ``status``; without ``DCGM_FV_FLAG_LIVE_DATA`` a field must be watched
  (else ``DCGM_ST_NOT_WATCHED``) and updated once (else ``DCGM_ST_NO_DATA``); an unset value is
  the type's blank (``DCGM_FP64_BLANK``, ``DCGM_INT64_BLANK``, ``<<<NULL>>>``).

Assumed, not verified against a real hostengine (the tests depend on them being plausible,
not exact): a destroyed GPU instance answers ``DCGM_ST_INSTANCE_NOT_FOUND`` per value; a
re-partition drops the watches of that GPU's instances; a lost GPU answers
``DCGM_ST_GPU_IS_LOST`` per value; ``dcgmStartEmbedded`` without local GPUs fails with
``DCGM_ST_NVML_NOT_LOADED``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# dcgmReturn_t (dcgm_structs.h).
ST_OK = 0
ST_BADPARAM = -1
ST_GENERIC_ERROR = -3
ST_NOT_CONFIGURED = -5
ST_NOT_SUPPORTED = -6
ST_NVML_ERROR = -8
ST_UNINITIALIZED = -10
ST_NO_DATA = -14
ST_NOT_WATCHED = -16
ST_NO_PERMISSION = -17
ST_GPU_IS_LOST = -18
ST_CONNECTION_NOT_VALID = -21
ST_LIBRARY_NOT_FOUND = -25
ST_DUPLICATE_KEY = -26
ST_PROFILING_NOT_SUPPORTED = -36
ST_INSTANCE_NOT_FOUND = -45
ST_NVML_NOT_LOADED = -56

FE_GPU = 1
FE_GPU_I = 4
FE_GPU_CI = 5
HE_PORT_NUMBER = 5555
MAX_GPCS = 8
FV_FLAG_LIVE_DATA = 0x1
GROUP_EMPTY = 1
OPERATION_MODE_AUTO = 1
OPERATION_MODE_MANUAL = 2
NO_COMPUTE_INSTANCE = 0xFFFFFFFF

INT32_BLANK = 0x7FFFFFF0
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
FP64_BLANK = 140737488355328.0
FP64_NOT_SUPPORTED = FP64_BLANK + 2.0
INT64_NOT_SUPPORTED = INT64_BLANK + 2
STR_BLANK = "<<<NULL>>>"

# The fields this fake knows, with their DCGM_FT_* type (dcgm_fields.py / dcgm_fields.cpp).
FIELD_TYPES: dict[int, str] = {
    1: "s",  # DRIVER_VERSION
    50: "s",  # DEV_NAME
    52: "i",  # DEV_NVML_INDEX
    54: "s",  # DEV_UUID
    150: "i",  # GPU_TEMP
    155: "d",  # POWER_USAGE (W)
    156: "i",  # TOTAL_ENERGY_CONSUMPTION (mJ)
    157: "d",  # POWER_USAGE_INSTANT (W)
    203: "i",  # GPU_UTIL
    250: "i",  # FB_TOTAL (MiB)
    251: "i",  # FB_FREE (MiB)
    252: "i",  # FB_USED (MiB)
    253: "i",  # FB_RESERVED (MiB)
    **{fid: "d" for fid in range(1001, 1009)},  # PROF_* ratios
}
# entityLevel DCGM_FE_GPU: a GPU-I/CI request is answered with the parent GPU's value.
GPU_LEVEL_FIELDS = frozenset({1, 52, 150, 155, 156, 157, 203})


def blank(field_id: int) -> Any:
    """The blank value of a field's type (what DCGM stores when it has nothing)."""
    kind = FIELD_TYPES[field_id]
    return FP64_BLANK if kind == "d" else STR_BLANK if kind == "s" else INT64_BLANK


@dataclass
class GI:
    """A GPU instance to create: its NVML GI id, profile id and slices, and MIG UUID."""

    profile: str
    gi_id: int
    profile_id: int
    slices: int
    mig_uuid: str
    ci_ids: tuple[int, ...] = (0,)


@dataclass
class FakeInstance:
    """One GPU instance as the hostengine tracks it."""

    gpu: FakeGpu
    entity_id: int
    spec: GI
    ci_entity_ids: tuple[int, ...]
    values: dict[int, Any] = field(default_factory=dict)
    faults: dict[int, int] = field(default_factory=dict)

    @property
    def gi_id(self) -> int:
        return self.spec.gi_id

    def set(self, **values: Any) -> FakeInstance:
        """Set field values by id: ``set(f1001=0.5, f252=1024)``."""
        for key, value in values.items():
            self.values[int(key.lstrip("f"))] = value
        return self

    def fail(self, field_id: int, status: int) -> None:
        """Make one field answer with a non-OK status (an NVML error behind it)."""
        self.faults[field_id] = status


@dataclass
class FakeGpu:
    """One GPU of a :class:`FakeHostengine`."""

    engine: FakeHostengine
    gpu_id: int
    nvml_index: int
    name: str
    uuid: str
    pci_bus_id: str
    pci_device_id: int
    mig_enabled: bool
    values: dict[int, Any] = field(default_factory=dict)
    faults: dict[int, int] = field(default_factory=dict)
    instances: list[FakeInstance] = field(default_factory=list)
    lost: bool = False

    def set(self, **values: Any) -> FakeGpu:
        """Set GPU field values by id: ``set(f155=300.0, f156=123_000)``."""
        for key, value in values.items():
            self.values[int(key.lstrip("f"))] = value
        return self

    def fail(self, field_id: int, status: int) -> None:
        self.faults[field_id] = status

    def instance(self, gi_id: int) -> FakeInstance:
        return next(i for i in self.instances if i.gi_id == gi_id)

    def partition(self, *specs: GI) -> list[FakeInstance]:
        """Replace the GPU's instances (MIG Manager re-partitioned it).

        DCGM numbers the new instances from ``gpuId * maxGpcs`` again, so entity ids are
        reused for different instances, and the old instances' watches are gone.
        """
        old = {(FE_GPU_I, i.entity_id) for i in self.instances}
        old |= {(FE_GPU_CI, c) for i in self.instances for c in i.ci_entity_ids}
        for key in [k for k in self.engine.watches if (k[0], k[1]) in old]:
            del self.engine.watches[key]
        self.mig_enabled = True
        self.instances = []
        ci_index = itertools.count()
        for n, spec in enumerate(specs):
            base = self.gpu_id * MAX_GPCS
            cis = tuple(base + next(ci_index) for _ in spec.ci_ids)
            self.instances.append(FakeInstance(self, base + n, spec, cis))
        return self.instances


@dataclass
class _Group:
    owner: int
    name: str
    entities: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class _FieldGroup:
    owner: int
    name: str
    field_ids: tuple[int, ...]


@dataclass
class _Watch:
    watchers: set[int] = field(default_factory=set)
    updated: bool = False
    update_freq_us: int = 0


class FakeHostengine:
    """A simulated nv-hostengine: its GPUs, instances, groups, watches and faults.

    Args:
        driver_version: What the GPUs' identifiers report.
        uuid_field: What ``DCGM_FI_DEV_UUID`` answers for a GPU-I entity: ``"mig"`` (the MIG
            device's ``MIG-<uuid>``, as DCGM 4 does) or ``"gpu"`` (the parent's GPU UUID).
    """

    def __init__(self, driver_version: str = "580.65.06", *, uuid_field: str = "mig") -> None:
        self.driver_version = driver_version
        self.uuid_field = uuid_field
        self.gpus: list[FakeGpu] = []
        self.running = True
        self.connections: set[int] = set()
        self.groups: dict[int, _Group] = {}
        self.field_groups: dict[int, _FieldGroup] = {}
        self.watches: dict[tuple[int, int, int], _Watch] = {}
        self.requests: list[tuple[int, int, int]] = []
        """Every (entity group, entity id, field id) asked of dcgmEntitiesGetLatestValues."""
        self.calls: Counter[str] = Counter()
        self._faults: dict[str, list[int]] = {}
        self._group_faults: dict[int, int] = {}
        self._group_fault_status: dict[int, int] = {}
        self._ids = itertools.count(1)

    def add_gpu(
        self,
        name: str,
        uuid: str,
        *,
        pci_device_id: int,
        pci_bus_id: str | None = None,
        nvml_index: int | None = None,
        mig: bool = False,
    ) -> FakeGpu:
        gpu_id = len(self.gpus)
        gpu = FakeGpu(
            engine=self,
            gpu_id=gpu_id,
            nvml_index=gpu_id if nvml_index is None else nvml_index,
            name=name,
            uuid=uuid,
            pci_bus_id=pci_bus_id or f"00000000:{0x17 + gpu_id:02X}:00.0",
            pci_device_id=pci_device_id,
            mig_enabled=mig,
        )
        self.gpus.append(gpu)
        return gpu

    def fail_next(self, function: str, status: int, times: int = 1, *, after: int = 0) -> None:
        """Let ``after`` calls of a C entry point through, then fail ``times`` with ``status``."""
        self._faults.setdefault(function, []).extend([ST_OK] * after + [status] * times)

    def fail_values_for(self, entity_group: int, status: int, times: int = 1) -> None:
        """Fail the next ``times`` latest-value calls that ask about ``entity_group``."""
        self._group_faults[entity_group] = self._group_faults.get(entity_group, 0) + times
        self._group_fault_status[entity_group] = status

    def clear_faults(self) -> None:
        """Forget the call faults set with :meth:`fail_next` and :meth:`fail_values_for`."""
        self._faults.clear()
        self._group_faults.clear()

    def stop(self) -> None:
        """The hostengine goes away (pod restarted): every connection becomes invalid."""
        self.running = False
        for conn in list(self.connections):
            self._disconnect(conn)

    def tick(self) -> None:
        """One pass of the hostengine's update loop: every watched field has a sample."""
        for watch in self.watches.values():
            watch.updated = True

    # -- internals used by FakeLibDcgm ----------------------------------------------------

    def _fault(self, function: str) -> int:
        self.calls[function] += 1
        queue = self._faults.get(function)
        return queue.pop(0) if queue else ST_OK

    def _connect(self) -> int:
        conn = next(self._ids)
        self.connections.add(conn)
        return conn

    def _disconnect(self, conn: int) -> None:
        self.connections.discard(conn)
        for gid in [g for g, grp in self.groups.items() if grp.owner == conn]:
            del self.groups[gid]
        for fid in [f for f, grp in self.field_groups.items() if grp.owner == conn]:
            del self.field_groups[fid]
        for key in list(self.watches):
            self.watches[key].watchers.discard(conn)
            if not self.watches[key].watchers:
                del self.watches[key]

    def _gpu(self, gpu_id: int) -> FakeGpu | None:
        return self.gpus[gpu_id] if 0 <= gpu_id < len(self.gpus) else None

    def _instance(self, entity_id: int) -> FakeInstance | None:
        return next((i for g in self.gpus for i in g.instances if i.entity_id == entity_id), None)

    def _entity_exists(self, group: int, entity_id: int) -> bool:
        if group == FE_GPU:
            return self._gpu(entity_id) is not None
        if group == FE_GPU_I:
            return self._instance(entity_id) is not None
        return False

    def _watch_key(self, group: int, entity_id: int, field_id: int) -> tuple[int, int, int]:
        """GPU-level fields of an instance are watched (and read) on the parent GPU."""
        if group == FE_GPU_I and field_id in GPU_LEVEL_FIELDS:
            inst = self._instance(entity_id)
            if inst is not None:
                return (FE_GPU, inst.gpu.gpu_id, field_id)
        return (group, entity_id, field_id)

    def _latest(self, group: int, entity_id: int, field_id: int, live: bool) -> tuple[int, Any]:
        """(status, value) of one entity's field, as ``GetLatestValues`` fills it."""
        self.requests.append((group, entity_id, field_id))
        empty = blank(field_id)
        if group == FE_GPU:
            gpu = self._gpu(entity_id)
            if gpu is None:
                return ST_BADPARAM, empty
            owner_values, owner_faults, inst = gpu.values, gpu.faults, None
        elif group == FE_GPU_I:
            inst = self._instance(entity_id)
            if inst is None:
                return ST_INSTANCE_NOT_FOUND, empty
            gpu = inst.gpu
            owner_values, owner_faults = inst.values, inst.faults
            if field_id in GPU_LEVEL_FIELDS:
                owner_values, owner_faults = gpu.values, gpu.faults
        else:
            return ST_NOT_SUPPORTED, empty
        if gpu.lost:
            return ST_GPU_IS_LOST, empty
        if field_id in owner_faults:
            return owner_faults[field_id], empty
        if not live:
            watch = self.watches.get(self._watch_key(group, entity_id, field_id))
            if watch is None:
                return ST_NOT_WATCHED, empty
            if not watch.updated:
                return ST_NO_DATA, empty
        if field_id == 1:
            return ST_OK, self.driver_version
        if field_id == 50:
            return ST_OK, gpu.name if inst is None else inst.spec.profile
        if field_id == 52:
            return ST_OK, gpu.nvml_index
        if field_id == 54:
            if inst is None or self.uuid_field == "gpu":
                return ST_OK, gpu.uuid
            return ST_OK, inst.spec.mig_uuid
        return ST_OK, owner_values.get(field_id, empty)


class FakeLibDcgm:
    """The C entry points of ``libdcgm.so.4``: each returns ``(dcgmReturn_t, result)``."""

    def __init__(self) -> None:
        self.initialized = False
        self._handles: dict[int, tuple[FakeHostengine, int]] = {}
        self._next_handle = itertools.count(0x1000)

    # -- session ---------------------------------------------------------------------------

    def dcgmInit(self) -> tuple[int, None]:
        self.initialized = True
        return ST_OK, None

    def dcgmShutdown(self) -> tuple[int, None]:
        for engine, conn in self._handles.values():
            engine._disconnect(conn)
        self._handles.clear()
        self.initialized = False
        return ST_OK, None

    def dcgmStartEmbedded(self, op_mode: int) -> tuple[int, int | None]:
        if not self.initialized:
            return ST_UNINITIALIZED, None
        if op_mode not in (OPERATION_MODE_AUTO, OPERATION_MODE_MANUAL):
            return ST_BADPARAM, None
        if _EMBEDDED is None:
            return ST_NVML_NOT_LOADED, None
        return ST_OK, self._new_handle(_EMBEDDED)

    def dcgmStopEmbedded(self, handle: int) -> tuple[int, None]:
        return self._close(handle)

    def dcgmConnect_v2(self, address: str, params: Any) -> tuple[int, int | None]:
        if not self.initialized:
            return ST_UNINITIALIZED, None
        if getattr(params, "addressIsUnixSocket", 0):
            return ST_CONNECTION_NOT_VALID, None
        engine = _REMOTE.get(_normalise(address))
        if engine is None or not engine.running:
            return ST_CONNECTION_NOT_VALID, None
        return ST_OK, self._new_handle(engine)

    def dcgmDisconnect(self, handle: int) -> tuple[int, None]:
        return self._close(handle)

    # -- discovery -------------------------------------------------------------------------

    def dcgmGetAllSupportedDevices(self, handle: int) -> tuple[int, list[int]]:
        engine, _conn, ret = self._engine(handle, "dcgmGetAllSupportedDevices")
        if ret != ST_OK:
            return ret, []
        return ST_OK, [g.gpu_id for g in engine.gpus]

    def dcgmGetDeviceAttributes(self, handle: int, gpu_id: int) -> tuple[int, dict[str, Any]]:
        engine, _conn, ret = self._engine(handle, "dcgmGetDeviceAttributes")
        if ret != ST_OK:
            return ret, {}
        gpu = engine._gpu(gpu_id)
        if gpu is None:
            return ST_BADPARAM, {}
        return ST_OK, {
            "deviceName": gpu.name,
            "pciBusId": gpu.pci_bus_id,
            "pciDeviceId": gpu.pci_device_id,
            "uuid": gpu.uuid,
            "driverVersion": engine.driver_version,
            "migModeEnabled": int(gpu.mig_enabled),
        }

    def dcgmGetGpuInstanceHierarchy(self, handle: int) -> tuple[int, list[dict[str, Any]]]:
        engine, _conn, ret = self._engine(handle, "dcgmGetGpuInstanceHierarchy")
        if ret != ST_OK:
            return ret, []
        entries: list[dict[str, Any]] = []
        for gpu in engine.gpus:
            for inst in gpu.instances:
                spec = inst.spec
                info = {"gpuUuid": gpu.uuid, "nvmlGpuIndex": gpu.nvml_index}
                entries.append(
                    {
                        "entity": (FE_GPU_I, inst.entity_id),
                        "parent": (FE_GPU, gpu.gpu_id),
                        "info": {
                            **info,
                            "nvmlInstanceId": spec.gi_id,
                            "nvmlComputeInstanceId": NO_COMPUTE_INSTANCE,
                            "nvmlMigProfileId": spec.profile_id,
                            "nvmlProfileSlices": spec.slices,
                        },
                    }
                )
                for ci, ci_eid in zip(spec.ci_ids, inst.ci_entity_ids, strict=True):
                    entries.append(
                        {
                            "entity": (FE_GPU_CI, ci_eid),
                            "parent": (FE_GPU_I, inst.entity_id),
                            "info": {
                                **info,
                                "nvmlInstanceId": spec.gi_id,
                                "nvmlComputeInstanceId": ci,
                                "nvmlMigProfileId": 0,
                                "nvmlProfileSlices": spec.slices,
                            },
                        }
                    )
        return ST_OK, entries

    # -- groups and watches ----------------------------------------------------------------

    def dcgmGroupCreate(self, handle: int, group_type: int, name: str) -> tuple[int, int | None]:
        engine, conn, ret = self._engine(handle, "dcgmGroupCreate")
        if ret != ST_OK:
            return ret, None
        gid = next(engine._ids)
        group = _Group(conn, name)
        if group_type != GROUP_EMPTY:
            group.entities = [(FE_GPU, g.gpu_id) for g in engine.gpus]
        engine.groups[gid] = group
        return ST_OK, gid

    def dcgmGroupAddEntity(
        self, handle: int, group_id: int, entity_group: int, entity_id: int
    ) -> tuple[int, None]:
        engine, _conn, ret = self._engine(handle, "dcgmGroupAddEntity")
        if ret != ST_OK:
            return ret, None
        group = engine.groups.get(group_id)
        if group is None:
            return ST_NOT_CONFIGURED, None
        if not engine._entity_exists(entity_group, entity_id):
            return ST_BADPARAM, None
        group.entities.append((entity_group, entity_id))
        return ST_OK, None

    def dcgmGroupDestroy(self, handle: int, group_id: int) -> tuple[int, None]:
        engine, _conn, ret = self._engine(handle, "dcgmGroupDestroy")
        if ret != ST_OK:
            return ret, None
        if engine.groups.pop(group_id, None) is None:
            return ST_NOT_CONFIGURED, None
        return ST_OK, None

    def dcgmFieldGroupCreate(
        self, handle: int, field_ids: list[int], name: str
    ) -> tuple[int, int | None]:
        engine, conn, ret = self._engine(handle, "dcgmFieldGroupCreate")
        if ret != ST_OK:
            return ret, None
        if any(f not in FIELD_TYPES for f in field_ids):
            return ST_BADPARAM, None
        if any(fg.name == name for fg in engine.field_groups.values()):
            return ST_DUPLICATE_KEY, None
        fgid = next(engine._ids)
        engine.field_groups[fgid] = _FieldGroup(conn, name, tuple(field_ids))
        return ST_OK, fgid

    def dcgmFieldGroupDestroy(self, handle: int, field_group_id: int) -> tuple[int, None]:
        engine, _conn, ret = self._engine(handle, "dcgmFieldGroupDestroy")
        if ret != ST_OK:
            return ret, None
        if engine.field_groups.pop(field_group_id, None) is None:
            return ST_NO_DATA, None
        return ST_OK, None

    def dcgmWatchFields(
        self,
        handle: int,
        group_id: int,
        field_group_id: int,
        update_freq_us: int,
        max_keep_age: float,
        max_keep_samples: int,
    ) -> tuple[int, None]:
        engine, conn, ret = self._engine(handle, "dcgmWatchFields")
        if ret != ST_OK:
            return ret, None
        group = engine.groups.get(group_id)
        fgroup = engine.field_groups.get(field_group_id)
        if group is None or fgroup is None:
            return ST_NOT_CONFIGURED, None
        if update_freq_us <= 0 or max_keep_age < 0 or max_keep_samples < 0:
            return ST_BADPARAM, None
        for entity_group, entity_id in group.entities:
            for fid in fgroup.field_ids:
                key = engine._watch_key(entity_group, entity_id, fid)
                watch = engine.watches.setdefault(key, _Watch())
                watch.watchers.add(conn)
                watch.update_freq_us = update_freq_us
        return ST_OK, None

    def dcgmUnwatchFields(
        self, handle: int, group_id: int, field_group_id: int
    ) -> tuple[int, None]:
        engine, conn, ret = self._engine(handle, "dcgmUnwatchFields")
        if ret != ST_OK:
            return ret, None
        group = engine.groups.get(group_id)
        fgroup = engine.field_groups.get(field_group_id)
        if group is None or fgroup is None:
            return ST_NOT_CONFIGURED, None
        for entity_group, entity_id in group.entities:
            for fid in fgroup.field_ids:
                key = engine._watch_key(entity_group, entity_id, fid)
                watch = engine.watches.get(key)
                if watch is not None:
                    watch.watchers.discard(conn)
                    if not watch.watchers:
                        del engine.watches[key]
        return ST_OK, None

    def dcgmUpdateAllFields(self, handle: int, wait_for_update: int) -> tuple[int, None]:
        engine, _conn, ret = self._engine(handle, "dcgmUpdateAllFields")
        if ret != ST_OK:
            return ret, None
        engine.tick()
        return ST_OK, None

    # -- values ----------------------------------------------------------------------------

    def dcgmEntitiesGetLatestValues(
        self, handle: int, entities: list[tuple[int, int]], field_ids: list[int], flags: int
    ) -> tuple[int, list[dict[str, Any]]]:
        engine, _conn, ret = self._engine(handle, "dcgmEntitiesGetLatestValues")
        if ret != ST_OK:
            return ret, []
        if any(f not in FIELD_TYPES for f in field_ids):
            return ST_BADPARAM, []
        for group in {g for g, _ in entities}:
            if engine._group_faults.get(group, 0) > 0:
                engine._group_faults[group] -= 1
                return engine._group_fault_status[group], []
        live = bool(flags & FV_FLAG_LIVE_DATA)
        out = []
        for entity_group, entity_id in entities:
            for fid in field_ids:
                status, value = engine._latest(entity_group, entity_id, fid, live)
                out.append(
                    {
                        "entityGroupId": entity_group,
                        "entityId": entity_id,
                        "fieldId": fid,
                        "fieldType": FIELD_TYPES[fid],
                        "status": status,
                        "value": value,
                    }
                )
        return ST_OK, out

    # -- internals -------------------------------------------------------------------------

    def _new_handle(self, engine: FakeHostengine) -> int:
        handle = next(self._next_handle)
        self._handles[handle] = (engine, engine._connect())
        return handle

    def _close(self, handle: int) -> tuple[int, None]:
        found = self._handles.pop(handle, None)
        if found is None:
            return ST_BADPARAM, None
        engine, conn = found
        engine._disconnect(conn)
        return ST_OK, None

    def _engine(self, handle: int, function: str) -> tuple[FakeHostengine, int, int]:
        found = self._handles.get(handle)
        if found is None:
            return _NOWHERE, 0, ST_CONNECTION_NOT_VALID
        engine, conn = found
        if not engine.running or conn not in engine.connections:
            return engine, conn, ST_CONNECTION_NOT_VALID
        return engine, conn, engine._fault(function)


def _normalise(address: str) -> str:
    address = address.removeprefix("tcp://")
    return address if ":" in address else f"{address}:{HE_PORT_NUMBER}"


# -- the simulated machine: what is installed and what listens where -------------------------

_NOWHERE = FakeHostengine()
_REMOTE: dict[str, FakeHostengine] = {}
_EMBEDDED: FakeHostengine | None = None
_LIBRARY: FakeLibDcgm | None = FakeLibDcgm()
library_loads: list[str | None] = []
"""The ``libDcgmPath`` of every successful load of the simulated library."""


def serve(address: str, engine: FakeHostengine) -> FakeHostengine:
    """Make ``engine`` a standalone nv-hostengine listening at ``host[:port]``."""
    _REMOTE[_normalise(address)] = engine
    return engine


def embed(engine: FakeHostengine) -> FakeHostengine:
    """Make ``engine`` what an embedded hostengine finds on this machine's GPUs."""
    global _EMBEDDED
    _EMBEDDED = engine
    return engine


def uninstall_library() -> None:
    """No ``libdcgm.so.4`` on this machine (bindings copied without the DCGM package)."""
    global _LIBRARY
    _LIBRARY = None


def library() -> FakeLibDcgm:
    """The simulated library as installed (a test asserts on its state)."""
    assert _LIBRARY is not None, "uninstalled"
    return _LIBRARY


def load_library(lib_dcgm_path: str | None) -> FakeLibDcgm | None:
    """What ``dcgm_structs._LoadDcgmLibrary`` finds: the library, or None."""
    if _LIBRARY is not None:
        library_loads.append(lib_dcgm_path)
    return _LIBRARY


def reset() -> None:
    """Back to a machine with the library installed and no hostengine anywhere."""
    global _EMBEDDED, _LIBRARY
    _REMOTE.clear()
    _EMBEDDED = None
    _LIBRARY = FakeLibDcgm()
    library_loads.clear()
