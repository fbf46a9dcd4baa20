"""MIG calls of the simulated NVML: modes, MIG devices, GPU-instance profiles and instances.

Answers come from the MIG catalogue, so a simulated H200 reports exactly what the real one
did (``fixtures/h200/nvml_probe.json``, ``lgipp.txt``; the contract test compares every
field). Semantics copied, with evidence (recordings = ``tests/sim/recordings/``):

- Profile info is queried by ``NVML_GPU_INSTANCE_PROFILE_*`` *index* and answers with the
  profile *id*, and with the memory size the simulated driver reports
  (``GiProfile.memory_mib_on``: memory differs by driver branch). Indices the GPU lacks below
  the driver's profile count are NOT_SUPPORTED, indices at or past it INVALID_ARGUMENT (H200,
  driver 580: 17 indices, probe; the exporter's reader made the same 19 calls with the same
  answers on a real H200, docs/hardware/h200-freshness.json). The returned
  v2 struct has ``version`` 0: the real call zeroes it (recordings, ``h200_nvml_probe``).
  Unknown profile ids (``...ById``, remaining capacity, placements, instances):
  INVALID_ARGUMENT (recordings).
- With MIG disabled: mode ``[0, 0]``, max MIG devices 0, every MIG-device index NOT_FOUND,
  remaining capacity = the profile's instance count, placements answered, no GPU instances
  (count 0), ``GetGpuInstanceById`` NOT_FOUND (probe and recordings).
- ``GetGpuInstanceId``, ``GetComputeInstanceId`` and ``GetDeviceHandleFromMigDeviceHandle``
  on a physical handle: INVALID_ARGUMENT (recordings). ``IsMigDeviceHandle`` returns a
  ``c_uint`` (§1).
- MIG devices are indexed in ascending GI id (``nvidia-smi -L`` samples); an index with no
  device is NOT_FOUND.
- ``GetGpuInstancePossiblePlacements`` (the ``_v2`` C function): ``placementsRef=None``
  gives the count; otherwise *all* placements are written and ``count`` set, whatever
  ``count`` held on input (a real H200 wrote 7 with count 0 or 2, recordings
  ``h200_semantics_2``). Real NVML would overrun an array that is too short; the simulator
  raises INSUFFICIENT_SIZE instead. ``GetGpuInstances`` likewise (``None`` array:
  INVALID_ARGUMENT, measured).
- Each GPU instance has one compute instance (id 0) spanning it, as ``-cgi … -C`` creates.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml

from migscope.core import DriverVersion, DriverVersionError, GiProfile, is_valid
from migscope.sim._gpu import SimGpu, SimInstance
from migscope.sim._handles import HandleKind
from migscope.sim._nvml_core import NvmlCore, nvml_api
from migscope.sim._nvml_errors import fail

PROFILE_INDEX_LIMIT = 0x11
"""Profile indices driver 580 knows (0..16): 17+ were INVALID_ARGUMENT on the real H200."""

# Compute-instance profile for a CI spanning a GI of N compute slices (nvml.h constants).
_CI_PROFILE = {1: 0x0, 2: 0x1, 3: 0x2, 4: 0x3, 7: 0x4, 8: 0x5, 6: 0x6}


def profile_id(profile: GiProfile) -> int:
    """NVML profile id; catalogue profiles without a known id get ``100 + index``."""
    return profile.nvml_id if profile.nvml_id is not None else 100 + profile.nvml_index


def ci_profile_id(profile: GiProfile) -> int:
    """Compute-instance profile id of the full-size CI of a GI of ``profile``."""
    return _CI_PROFILE[profile.compute_slices]


def _target(ref: Any) -> Any:
    """The ctypes object behind ``byref(x)``, ``pointer(x)`` or ``x``."""
    if ref is None:
        return None
    inner = getattr(ref, "_obj", None)
    if inner is not None:
        return inner
    if isinstance(ref, ctypes._Pointer):
        return ref.contents
    return ref


def _fill_array(ref: Any, count_ref: Any, items: list[Any]) -> None:
    """Write ``items`` into the caller's array and their number into ``count_ref``."""
    count = _target(count_ref)
    if count is None:
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    array = _target(ref)
    count.value = len(items)
    if len(items) > len(array):
        fail(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
    for i, item in enumerate(items):
        array[i] = item


class MigApi(NvmlCore):
    """MIG mode, MIG devices, GPU-instance profiles and GPU/compute instances."""

    # -- modes and MIG devices ------------------------------------------------------------

    @nvml_api
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        """``[current, pending]`` (``NVML_DEVICE_MIG_ENABLE`` = 1)."""
        gpu = self._physical(device, self._now())
        return [int(gpu.mig_enabled), int(gpu.mig_pending)]

    @nvml_api
    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        """Compute slices (7, or 4) with MIG on; 0 with MIG off (measured)."""
        gpu = self._physical(device, self._now())
        return gpu.model.compute_slices if gpu.mig_enabled else 0

    @nvml_api
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        """The ``index``-th MIG device (ascending GI id); NOT_FOUND where there is none."""
        t = self._now()
        gpu = self._physical(device, t)
        instances = gpu.instances_at(t)
        if not isinstance(index, int) or not 0 <= index < len(instances):
            fail(pynvml.NVML_ERROR_NOT_FOUND)
        return self._mig_ptr(instances[index])

    @nvml_api
    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> Any:
        """``c_uint(1)`` for a MIG device handle, ``c_uint(0)`` otherwise (use ``.value``)."""
        _, inst = self._device(device, self._now())
        return ctypes.c_uint(int(inst is not None))

    @nvml_api
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        """The parent GPU's handle."""
        inst = self._mig(migDevice, self._now())
        return self._device_ptr(inst.gpu)

    @nvml_api
    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        """GI id of a MIG device (INVALID_ARGUMENT on a physical handle, measured)."""
        return self._mig(device, self._now()).gi_id

    @nvml_api
    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        """CI id of a MIG device: 0."""
        return self._mig(device, self._now()).ci_id

    # -- profiles -------------------------------------------------------------------------

    @staticmethod
    def _by_id(gpu: SimGpu, pid: int) -> GiProfile:
        found = next((p for p in gpu.model.profiles if profile_id(p) == pid), None)
        if found is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return found

    def _driver(self) -> DriverVersion | None:
        """The simulated driver's version, for per-driver catalogue facts (None if unparsable)."""
        try:
            return DriverVersion.parse(self.driver_version)
        except DriverVersionError:
            return None

    def _profile_info(self, profile: GiProfile, version: int) -> Any:
        info = (
            pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
            if version == 2
            else pynvml.c_nvmlGpuInstanceProfileInfo_t()
        )
        info.id = profile_id(profile)
        info.isP2pSupported = 0
        info.sliceCount = profile.compute_slices
        info.instanceCount = profile.max_instances
        info.multiprocessorCount = profile.sm_count
        info.copyEngineCount = profile.copy_engines
        info.decoderCount = profile.decoders
        info.encoderCount = profile.encoders
        info.jpegCount = profile.jpegs
        info.ofaCount = profile.ofas
        info.memorySizeMB = profile.memory_mib_on(self._driver())
        if version == 2:
            info.version = 0
            info.name = profile.nvml_name
        return info

    @nvml_api
    def nvmlDeviceGetGpuInstanceProfileInfo(
        self, device: Any, profile: int, version: int = 2
    ) -> Any:
        """Profile info for ``NVML_GPU_INSTANCE_PROFILE_*`` index ``profile``."""
        if version not in (1, 2):
            fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)  # pynvml's own answer
        gpu = self._physical(device, self._now())
        found = gpu.model.profile_by_nvml_index(profile)
        if found is None:
            in_range = 0 <= profile < PROFILE_INDEX_LIMIT
            fail(
                pynvml.NVML_ERROR_NOT_SUPPORTED if in_range else pynvml.NVML_ERROR_INVALID_ARGUMENT
            )
        return self._profile_info(found, version)

    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    @nvml_api
    def nvmlDeviceGetGpuInstanceProfileInfoById(self, device: Any, profileId: int) -> Any:
        """Profile info (v2) for profile id ``profileId``."""
        gpu = self._physical(device, self._now())
        return self._profile_info(self._by_id(gpu, profileId), 2)

    nvmlDeviceGetGpuInstanceProfileInfoByIdV = nvmlDeviceGetGpuInstanceProfileInfoById

    @nvml_api
    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, device: Any, profileId: int) -> int:
        """How many more instances of ``profileId`` fit beside the current ones."""
        t = self._now()
        gpu = self._physical(device, t)
        profile = self._by_id(gpu, profileId)
        if not gpu.mig_enabled:
            return profile.max_instances
        current = gpu.instances_at(t)
        names = [i.profile.name for i in current]
        keep = [(i.profile.name, i.start) for i in current]
        extra = 0
        while extra < profile.max_instances and is_valid(
            gpu.model, [*names, *[profile.name] * (extra + 1)], keep=keep
        ):
            extra += 1
        return extra

    @nvml_api
    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, device: Any, profileId: int, placementsRef: Any, countRef: Any
    ) -> int:
        """Every placement of ``profileId`` (``-lgipp``), in the caller's array."""
        gpu = self._physical(device, self._now())
        profile = self._by_id(gpu, profileId)
        self._require_privilege()
        if placementsRef is None:
            count = _target(countRef)
            if count is None:
                fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            count.value = len(profile.placements)
            return int(pynvml.NVML_SUCCESS)
        items = []
        for start, size in profile.placement_spans():
            placement = pynvml.c_nvmlGpuInstancePlacement_t()
            # In the driver's units (thirds of a memory slice on RTX PRO 6000), as NVML says.
            placement.start, placement.size = gpu.model.nvml_span(start, size)
            items.append(placement)
        _fill_array(placementsRef, countRef, items)
        return int(pynvml.NVML_SUCCESS)

    # -- GPU and compute instances --------------------------------------------------------

    @nvml_api
    def nvmlDeviceGetGpuInstances(
        self, device: Any, profileId: int, gpuInstancesRef: Any, countRef: Any
    ) -> int:
        """Handles of the current GPU instances of ``profileId``, in the caller's array."""
        t = self._now()
        gpu = self._physical(device, t)
        profile = self._by_id(gpu, profileId)
        self._require_privilege()
        if gpuInstancesRef is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        found = [i for i in gpu.instances_at(t) if i.profile == profile]
        _fill_array(gpuInstancesRef, countRef, [self._gi_ptr(i) for i in found])
        return int(pynvml.NVML_SUCCESS)

    @nvml_api
    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:
        """Handle of GPU instance ``gpuInstanceId``; NOT_FOUND if there is none."""
        t = self._now()
        gpu = self._physical(device, t)
        self._require_privilege()
        for inst in gpu.instances_at(t):
            if inst.gi_id == gpuInstanceId:
                return self._gi_ptr(inst)
        fail(pynvml.NVML_ERROR_NOT_FOUND)

    @nvml_api
    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        """``c_nvmlGpuInstanceInfo_t{device, id, profileId, placement{start, size}}``."""
        inst = self._instance_handle(gpuInstance, HandleKind.GPU_INSTANCE, self._now())
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.device = self._device_ptr(inst.gpu)
        info.id = inst.gi_id
        info.profileId = profile_id(inst.profile)
        start, size = inst.gpu.model.nvml_span(inst.start, inst.profile.memory_slices)
        info.placement.start, info.placement.size = start, size
        return info

    @nvml_api
    def nvmlGpuInstanceGetComputeInstances(
        self, gpuInstance: Any, profileId: int, computeInstancesRef: Any, countRef: Any
    ) -> int:
        """The GI's compute instances of CI profile ``profileId`` (the one full-size CI)."""
        inst = self._instance_handle(gpuInstance, HandleKind.GPU_INSTANCE, self._now())
        if not 0 <= profileId < pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if computeInstancesRef is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        found: list[SimInstance] = [inst] if profileId == ci_profile_id(inst.profile) else []
        _fill_array(computeInstancesRef, countRef, [self._ci_ptr(i) for i in found])
        return int(pynvml.NVML_SUCCESS)

    @nvml_api
    def nvmlComputeInstanceGetInfo(self, computeInstance: Any) -> Any:
        """``c_nvmlComputeInstanceInfo_t{device, gpuInstance, id, profileId, placement}``."""
        inst = self._instance_handle(computeInstance, HandleKind.COMPUTE_INSTANCE, self._now())
        info = pynvml.c_nvmlComputeInstanceInfo_t()
        info.device = self._device_ptr(inst.gpu)
        info.gpuInstance = self._gi_ptr(inst)
        info.id = inst.ci_id
        info.profileId = ci_profile_id(inst.profile)
        info.placement.start = 0
        info.placement.size = inst.profile.compute_slices
        return info

    nvmlComputeInstanceGetInfo_v2 = nvmlComputeInstanceGetInfo
