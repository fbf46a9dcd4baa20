"""NVML semantics the simulator copies, one test each, with the source of each semantic.

Sources: ``nvml.h`` (13.5), ``reference/nvml-dcgm.md`` (§n), the H200 probe
(``tests/fixtures/h200/nvml_probe.json``) and the recordings in ``tests/sim/recordings/``.
"""

from __future__ import annotations

import ctypes

import pynvml
import pytest
from simhelpers import mig_devices, simulate, started

from migscope.sim import SimNvml

H200_MIXED = {
    "model": "H200",
    "mig": True,
    "instances": [
        {
            "profile": "3g.71gb",
            "start": 4,
            "workload": {"pattern": "constant", "level": 0.5, "memory": 0.25},
            "pod": {"namespace": "ml", "pod": "a"},
        },
        {"profile": "2g.35gb", "start": 0, "workload": {"pattern": "idle", "memory": "8GiB"}},
        {"profile": "1g.18gb", "start": 2},
    ],
}


def _mig_first(nvml: SimNvml) -> tuple[object, object]:
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    return gpu, mig_devices(nvml, gpu)[0]


# -- errors and library state -------------------------------------------------------------


def test_errors_are_pynvml_classes() -> None:
    """Errors are pynvml's own ``NVMLError_*`` subclasses, so ``except`` clauses match."""
    _, nvml = started({"model": "H200"})
    with pytest.raises(pynvml.NVMLError_InvalidArgument) as caught:
        nvml.nvmlDeviceGetHandleByIndex(9)
    assert type(caught.value) is pynvml.NVMLError_InvalidArgument
    assert caught.value.value == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert nvml.NVMLError_InvalidArgument is pynvml.NVMLError_InvalidArgument


def test_calls_before_init_are_uninitialized() -> None:
    """pynvml raises UNINITIALIZED for any call before ``nvmlInit`` (§1 probe, recordings)."""
    nvml = simulate({"model": "H200"}).node("node-a").nvml
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlShutdown()


def test_init_is_reference_counted_and_shutdown_invalidates_handles() -> None:
    """Two inits need two shutdowns; handles from before the last one are INVALID_ARGUMENT.

    Measured on the H200 (``h200_semantics_3.txt``: after_one_shutdown OK,
    after_two/shutdown3 UNINITIALIZED, old_handle_after_reinit INVALID_ARGUMENT).
    """
    _, nvml = started({"model": "H200"})
    old = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.nvmlInitWithFlags(0)
    nvml.nvmlShutdown()
    assert nvml.nvmlDeviceGetName(old) == "NVIDIA H200"
    nvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetName(old)
    nvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetName(old)
    assert nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0)) == "NVIDIA H200"


def test_unsimulated_functions_raise_function_not_found() -> None:
    """A pynvml function the simulator lacks fails like a driver without the symbol.

    pynvml raises ``NVMLError_FunctionNotFound`` when the library has no such entry point
    (§2 pitfalls: old drivers); constants and classes are delegated to pynvml.
    """
    _, nvml = started({"model": "H200"})
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetFanSpeed(h)
    assert nvml.NVML_DEVICE_MIG_ENABLE == pynvml.NVML_DEVICE_MIG_ENABLE
    assert nvml.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    assert nvml.c_nvmlGpmMetricsGet_t is pynvml.c_nvmlGpmMetricsGet_t
    with pytest.raises(AttributeError):
        _ = nvml.nvmlNoSuchThing


def test_handles_are_ctypes_pointers() -> None:
    """Handles are ``c_nvmlDevice_t``/``c_nvmlGpuInstance_t`` pointers, as pynvml returns,
    so they fit pynvml's structs (``c_nvmlGpuInstanceInfo_t.device``)."""
    _, nvml = started(H200_MIXED)
    gpu, mig = _mig_first(nvml)
    assert isinstance(gpu, pynvml.c_nvmlDevice_t)
    assert isinstance(mig, pynvml.c_nvmlDevice_t)
    gi = nvml.nvmlDeviceGetGpuInstanceById(gpu, 2)
    assert isinstance(gi, pynvml.c_nvmlGpuInstance_t)
    info = nvml.nvmlGpuInstanceGetInfo(gi)
    assert nvml.nvmlDeviceGetUUID(info.device) == nvml.nvmlDeviceGetUUID(gpu)


def test_foreign_or_null_handles_are_invalid() -> None:
    """A handle NVML never handed out is INVALID_ARGUMENT (nvml.h: "device is invalid")."""
    _, nvml = started({"model": "H200"})
    _, other = started({"model": "H200"})
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetName(other.nvmlDeviceGetHandleByIndex(0))
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetName(pynvml.c_nvmlDevice_t())
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetName("GPU-0")


# -- MIG enumeration ----------------------------------------------------------------------


def test_mig_enumeration_and_empty_slots_not_found() -> None:
    """Loop 0..max-1 and skip NOT_FOUND slots (§1: measured NOT_FOUND on an empty slot)."""
    _, nvml = started(H200_MIXED)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMigMode(gpu) == [pynvml.NVML_DEVICE_MIG_ENABLE] * 2
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
    found = mig_devices(nvml, gpu)
    assert [nvml.nvmlDeviceGetGpuInstanceId(h) for h in found] == [2, 3, 9]
    for empty in range(3, 7):
        with pytest.raises(pynvml.NVMLError_NotFound):
            nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, empty)


def test_mig_handle_identity_calls() -> None:
    """IsMigDeviceHandle returns a ``c_uint`` (§1); parent, GI/CI ids, name, UUID, index."""
    _, nvml = started(H200_MIXED)
    gpu, mig = _mig_first(nvml)
    flag = nvml.nvmlDeviceIsMigDeviceHandle(mig)
    assert isinstance(flag, ctypes.c_uint)
    assert flag.value == 1
    assert nvml.nvmlDeviceIsMigDeviceHandle(gpu).value == 0
    parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
    assert nvml.nvmlDeviceGetUUID(parent) == nvml.nvmlDeviceGetUUID(gpu)
    assert nvml.nvmlDeviceGetComputeInstanceId(mig) == 0
    assert nvml.nvmlDeviceGetName(mig) == "NVIDIA H200 MIG 3g.71gb"
    assert nvml.nvmlDeviceGetUUID(mig).startswith("MIG-")
    assert nvml.nvmlDeviceGetIndex(mig) == 0
    by_uuid = nvml.nvmlDeviceGetHandleByUUID(nvml.nvmlDeviceGetUUID(mig))
    assert nvml.nvmlDeviceGetGpuInstanceId(by_uuid) == 2


def test_mig_only_calls_on_a_physical_handle_are_invalid() -> None:
    """GI id, CI id and parent-of on a GPU handle: INVALID_ARGUMENT (``h200_semantics_1``)."""
    _, nvml = started(H200_MIXED)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    for call in (
        nvml.nvmlDeviceGetGpuInstanceId,
        nvml.nvmlDeviceGetComputeInstanceId,
        nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
    ):
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            call(gpu)


def test_attributes_describe_the_mig_device() -> None:
    """``nvmlDeviceGetAttributes`` on a MIG handle gives the instance's slices, SMs and memory
    (what mig-parted reads to name a profile); NOT_SUPPORTED on a GPU (recordings)."""
    _, nvml = started(H200_MIXED)
    gpu, mig = _mig_first(nvml)
    attrs = nvml.nvmlDeviceGetAttributes(mig)
    assert (attrs.gpuInstanceSliceCount, attrs.multiprocessorCount, attrs.memorySizeMB) == (
        3,
        60,
        71424,
    )
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetAttributes(gpu)


def test_gpu_and_compute_instances() -> None:
    """GPU instances by profile id, by GI id, their info, and the one CI each holds."""
    _, nvml = started(H200_MIXED)
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    info_1g = nvml.nvmlDeviceGetGpuInstanceProfileInfo(
        gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE
    )
    array = (pynvml.c_nvmlGpuInstance_t * info_1g.instanceCount)()
    count = ctypes.c_uint(info_1g.instanceCount)
    nvml.nvmlDeviceGetGpuInstances(gpu, info_1g.id, array, ctypes.byref(count))
    assert count.value == 1
    gi_info = nvml.nvmlGpuInstanceGetInfo(array[0])
    assert (gi_info.id, gi_info.profileId, gi_info.placement.start, gi_info.placement.size) == (
        9,
        19,
        2,
        1,
    )
    cis = (pynvml.c_nvmlComputeInstance_t * 1)()
    ci_count = ctypes.c_uint(1)
    profile = pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE
    nvml.nvmlGpuInstanceGetComputeInstances(array[0], profile, cis, ctypes.byref(ci_count))
    assert ci_count.value == 1
    ci = nvml.nvmlComputeInstanceGetInfo(cis[0])
    assert (ci.id, ci.profileId, ci.placement.size) == (0, profile, 1)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetGpuInstanceById(gpu, 1)


def test_array_count_semantics() -> None:
    """Placements: ``None`` array asks the count; a too-short array is refused.

    A real H200 wrote all placements whatever ``count`` held on input
    (``h200_semantics_2.txt``); an array shorter than that would be overrun in C, so the
    simulator raises INSUFFICIENT_SIZE and reports the count needed.
    """
    _, nvml = started({"model": "H200"})
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    count = ctypes.c_uint(0)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(gpu, 19, None, ctypes.byref(count))
    assert count.value == 7
    short = (pynvml.c_nvmlGpuInstancePlacement_t * 3)()
    count = ctypes.c_uint(3)
    with pytest.raises(pynvml.NVMLError_InsufficientSize):
        nvml.nvmlDeviceGetGpuInstancePossiblePlacements(gpu, 19, short, ctypes.byref(count))
    assert count.value == 7
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetGpuInstances(gpu, 19, None, ctypes.byref(count))


def test_remaining_capacity_follows_the_layout() -> None:
    """Remaining capacity counts what still fits beside the current instances."""
    _, nvml = started(H200_MIXED)  # 3g@4, 2g@0, 1g@2: slot 3 free
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19) == 1  # a 1g at slot 3
    assert nvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 14) == 0  # 2g needs 0/2/4
    assert nvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 9) == 0


def test_unprivileged_callers() -> None:
    """nvml.h marks GI enumeration and placements "Requires privileged user", and the
    parent's aggregate memory in MIG mode is for privileged callers only (§1)."""
    _, nvml = started(H200_MIXED, privileged=False)
    gpu, mig = _mig_first(nvml)
    for call in (
        lambda: nvml.nvmlDeviceGetGpuInstanceById(gpu, 2),
        lambda: nvml.nvmlDeviceGetMemoryInfo(gpu),
        lambda: nvml.nvmlDeviceGetGpuInstancePossiblePlacements(
            gpu, 19, None, ctypes.byref(ctypes.c_uint())
        ),
    ):
        with pytest.raises(pynvml.NVMLError_NoPermission):
            call()
    assert nvml.nvmlDeviceGetMemoryInfo(mig).total == 71424 << 20


# -- per-MIG data -------------------------------------------------------------------------


def test_memory_v1_v2_on_mig_and_parent() -> None:
    """v1 ``used`` includes reserved, v2 separates it (probe); per MIG handle the instance's
    memory; on the parent in MIG mode the aggregate (§1)."""
    _, nvml = started(H200_MIXED)
    gpu, mig = _mig_first(nvml)
    capacity = (71424 << 20) - (1 << 20)
    v1 = nvml.nvmlDeviceGetMemoryInfo(mig)
    v2 = nvml.nvmlDeviceGetMemoryInfo(mig, version=nvml.nvmlMemory_v2)
    assert isinstance(v1, pynvml.c_nvmlMemory_t)
    assert isinstance(v2, pynvml.c_nvmlMemory_v2_t)
    assert v2.used == round(0.25 * capacity)
    assert v1.used == v2.used + v2.reserved
    assert v1.total == v2.total == 71424 << 20
    assert v1.free == v2.free == v2.total - v2.reserved - v2.used
    parent = nvml.nvmlDeviceGetMemoryInfo(gpu, version=nvml.nvmlMemory_v2)
    used = sum(
        nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2).used
        for h in mig_devices(nvml, gpu)
    )
    assert parent.used == used
    assert parent.total == 150754820096
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):  # measured for a wrong version
        nvml.nvmlDeviceGetMemoryInfo(gpu, version=0x01000028)


def test_utilization_not_supported_with_mig() -> None:
    """``nvmlDeviceGetUtilizationRates`` is NOT_SUPPORTED on every handle of a MIG-enabled
    GPU (§1, §5) and works without MIG."""
    _, nvml = started(
        H200_MIXED, {"model": "H200", "workload": {"pattern": "constant", "level": 0.4}}
    )
    gpu, mig = _mig_first(nvml)
    for handle in (gpu, mig):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            nvml.nvmlDeviceGetUtilizationRates(handle)
    whole = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.clock.advance(5)
    assert nvml.nvmlDeviceGetUtilizationRates(whole).gpu == 40


def test_board_readings_are_parent_only() -> None:
    """Power, energy, limits and temperature are board-level (§3). On a MIG handle the real
    answer is unverified (§6); the simulator's chosen model is NOT_SUPPORTED."""
    _, nvml = started(H200_MIXED)
    gpu, mig = _mig_first(nvml)
    assert nvml.nvmlDeviceGetPowerUsage(gpu) > 0
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(gpu) > 0
    assert 20 < nvml.nvmlDeviceGetTemperature(gpu, pynvml.NVML_TEMPERATURE_GPU) < 90
    for call in (
        nvml.nvmlDeviceGetPowerUsage,
        nvml.nvmlDeviceGetTotalEnergyConsumption,
        nvml.nvmlDeviceGetPowerManagementLimit,
        lambda h: nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
    ):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call(mig)


def test_processes_per_mig_device_and_without_mig() -> None:
    """Processes per MIG handle carry GI/CI ids; without MIG both are 0xFFFFFFFF (probe
    ``procs_load``); on a MIG parent, every instance's processes (privileged, §1)."""
    _, nvml = started(
        H200_MIXED, {"model": "H200", "workload": {"pattern": "constant", "level": 1}}
    )
    gpu, mig = _mig_first(nvml)
    (proc,) = nvml.nvmlDeviceGetComputeRunningProcesses(mig)
    assert (proc.gpuInstanceId, proc.computeInstanceId) == (2, 0)
    assert proc.usedGpuMemory == nvml.nvmlDeviceGetMemoryInfo(mig, nvml.nvmlMemory_v2).used
    assert proc.pid > 0
    empty = mig_devices(nvml, gpu)[2]  # the 1g with no workload
    assert nvml.nvmlDeviceGetComputeRunningProcesses(empty) == []
    all_procs = nvml.nvmlDeviceGetComputeRunningProcesses(gpu)
    assert sorted(p.gpuInstanceId for p in all_procs) == [2, 3]
    (whole,) = nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(1))
    assert (whole.gpuInstanceId, whole.computeInstanceId) == (0xFFFFFFFF, 0xFFFFFFFF)


def test_mig_disabled_gpu_answers_profiles_but_has_no_instances() -> None:
    """With MIG off, NVML still answers profile queries (§1 "answers even with MIG
    disabled"), reports max 0 MIG devices and no GPU instances (probe, recordings)."""
    _, nvml = started({"model": "A100-40GB"})
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(gpu) == 0
    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert (info.id, info.name, info.multiprocessorCount) == (19, "MIG 1g.5gb", 14)
    assert mig_devices(nvml, gpu) == []
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
