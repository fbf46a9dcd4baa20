"""Library, system and per-device calls of the simulated NVML (pynvml names and signatures).

Semantics copied from NVML, with their evidence (``recordings`` = ``tests/sim/recordings/``,
probe = ``fixtures/h200/nvml_probe.json``, §n = ``reference/nvml-dcgm.md``):

- Init is reference-counted: two ``nvmlInit`` need two ``nvmlShutdown``; one more raises
  UNINITIALIZED, and handles from before the last shutdown are INVALID_ARGUMENT afterwards
  (recordings, ``h200_semantics_3``).
- ``nvmlDeviceGetHandleByIndex`` past the count: INVALID_ARGUMENT; an unknown or malformed
  UUID: NOT_FOUND (recordings, ``h200_semantics_1``).
- Memory v1 ``used`` includes reserved; v2 (``version=nvmlMemory_v2``) reports ``reserved``
  apart and ``used`` without it (probe); any other version: FUNCTION_NOT_FOUND (recordings).
  On a MIG handle: the instance's memory; on the parent of a MIG GPU: the aggregate, for
  privileged callers only (§1).
- Utilisation rates: NOT_SUPPORTED on every handle of a MIG-enabled GPU (§1, §5).
- Power, energy, power limits, temperature: board-level; on a MIG handle we raise
  NOT_SUPPORTED. What real NVML returns there is *unverified* (§6); NOT_SUPPORTED is our
  chosen model because nvml.h does not list these calls as MIG-capable.
- Temperature sensors other than ``NVML_TEMPERATURE_GPU``: INVALID_ARGUMENT (recordings).
- ``nvmlDeviceGetAttributes`` on a physical GPU: NOT_SUPPORTED (recordings); on a MIG
  device: the instance's slices, SMs, engines and memory.
- Running processes: per MIG device with its GI/CI ids; on a GPU without MIG the ids are
  0xFFFFFFFF (probe, ``procs_load``); on the parent of a MIG GPU, all instances' processes
  for privileged callers (§1).
"""

from __future__ import annotations

from typing import Any

import pynvml

from migscope.sim._gpu import MemoryReading, SimGpu, SimInstance
from migscope.sim._nvml_core import NvmlCore, nvml_api
from migscope.sim._nvml_errors import fail

_NO_ID = 0xFFFFFFFF
_ARCH = {"ampere": 7, "hopper": 9, "blackwell": 10}
_COMPUTE_CAPABILITY = {"ampere": (8, 0), "hopper": (9, 0), "blackwell": (10, 0)}
_SUBSYSTEM = {"H200-141GB": 0x18BF10DE}  # measured on the real H200 (recordings)
# CUDA version a driver branch ships with (nvmlSystemGetCudaDriverVersion), newest first.
_CUDA = ((580, 13000), (575, 12090), (570, 12080), (560, 12060), (550, 12040), (545, 12030),
         (535, 12020), (530, 12010), (525, 12000), (520, 11080), (515, 11070), (510, 11060),
         (470, 11040), (460, 11020), (450, 11000))  # fmt: skip


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class DeviceApi(NvmlCore):
    """Library, system and device queries."""

    # -- library and system ---------------------------------------------------------------

    @nvml_api
    def nvmlInit(self) -> None:
        """Initialise (reference-counted)."""
        self._refcount += 1

    @nvml_api
    def nvmlInitWithFlags(self, flags: int) -> None:
        """Initialise with flags (accepted and ignored; reference-counted)."""
        self._refcount += 1

    @nvml_api
    def nvmlShutdown(self) -> None:
        """Drop one reference; the last one invalidates every handle."""
        self._refcount -= 1
        if self._refcount == 0:
            self._handles.reset()

    @nvml_api
    def nvmlErrorString(self, result: int) -> str:
        """The text pynvml prints for ``result``."""
        return str(pynvml.NVMLError._errcode_to_string.get(result, "Unknown Error"))

    @nvml_api
    def nvmlSystemGetDriverVersion(self) -> str:
        """The driver version (``"580.159.04"``)."""
        return self.driver_version

    @nvml_api
    def nvmlSystemGetNVMLVersion(self) -> str:
        """``"<CUDA major>.<driver>"``, e.g. ``"13.580.159.04"`` as on the real H200."""
        return f"{self._cuda_version() // 1000}.{self.driver_version}"

    def _cuda_version(self) -> int:
        major = int(self.driver_version.split(".")[0])
        return next((cuda for branch, cuda in _CUDA if major >= branch), 10020)

    @nvml_api
    def nvmlSystemGetCudaDriverVersion(self) -> int:
        """CUDA version of the driver branch, e.g. 13000."""
        return self._cuda_version()

    nvmlSystemGetCudaDriverVersion_v2 = nvmlSystemGetCudaDriverVersion

    # -- enumeration and identity ---------------------------------------------------------

    @nvml_api
    def nvmlDeviceGetCount(self) -> int:
        """Number of physical GPUs (lost ones included)."""
        return len(self.gpus)

    @nvml_api
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """Handle of GPU ``index``."""
        if not isinstance(index, int) or not 0 <= index < len(self.gpus):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        self._check_alive(gpu, None, self._now())
        return self._device_ptr(gpu)

    @nvml_api
    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> Any:
        """Handle of a GPU (``GPU-…``) or of a current MIG device (``MIG-…``)."""
        wanted = _text(uuid)
        t = self._now()
        for gpu in self.gpus:
            if gpu.uuid == wanted:
                self._check_alive(gpu, None, t)
                return self._device_ptr(gpu)
            for inst in gpu.instances_at(t):
                if inst.uuid == wanted:
                    self._check_alive(gpu, None, t)
                    return self._mig_ptr(inst)
        fail(pynvml.NVML_ERROR_NOT_FOUND)

    @nvml_api
    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str | bytes) -> Any:
        """Handle of the GPU at ``pciBusId`` (``00000000:18:00.0`` or ``0000:18:00.0``)."""
        wanted = _text(pciBusId).lower()
        for gpu in self.gpus:
            if wanted in (gpu.pci_bus_id.lower(), gpu.pci_bus_id[4:].lower()):
                self._check_alive(gpu, None, self._now())
                return self._device_ptr(gpu)
        fail(pynvml.NVML_ERROR_NOT_FOUND)

    @nvml_api
    def nvmlDeviceGetName(self, handle: Any) -> str:
        """``"NVIDIA H200"``; a MIG device is ``"NVIDIA H200 MIG 3g.71gb"``."""
        gpu, inst = self._device(handle, self._now())
        return gpu.name if inst is None else f"{gpu.name} MIG {inst.profile.name}"

    @nvml_api
    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """``GPU-…`` or ``MIG-…``."""
        gpu, inst = self._device(handle, self._now())
        return gpu.uuid if inst is None else inst.uuid

    @nvml_api
    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        """NVML index; for a MIG device, its index within the parent.

        nvml.h: "MIG device indices are unique within a device".
        """
        t = self._now()
        gpu, inst = self._device(handle, t)
        return gpu.index if inst is None else gpu.instances_at(t).index(inst)

    @nvml_api
    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        """``/dev/nvidiaN`` minor number (the index unless a test set another)."""
        return self._board(handle).minor

    @nvml_api
    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        """``nvmlPciInfo_t`` with the packed device id (``0x233510DE``) and bus id."""
        gpu = self._board(handle)
        info = pynvml.nvmlPciInfo_t()
        domain, bus, rest = gpu.pci_bus_id.split(":")
        device = rest.split(".")[0]
        info.busId = gpu.pci_bus_id
        info.busIdLegacy = gpu.pci_bus_id[4:]
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(device, 16)
        info.pciDeviceId = gpu.pci_device_id
        info.pciSubSystemId = _SUBSYSTEM.get(gpu.model.key, gpu.pci_device_id)
        return info

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    @nvml_api
    def nvmlDeviceGetArchitecture(self, handle: Any) -> int:
        """``NVML_DEVICE_ARCH_*`` (Hopper = 9, measured)."""
        gpu, _ = self._device(handle, self._now())
        return _ARCH[gpu.model.architecture]

    @nvml_api
    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        """``(major, minor)``: (9, 0) on Hopper, measured."""
        gpu, _ = self._device(handle, self._now())
        if gpu.model.key.startswith("RTX-PRO"):
            return (12, 0)
        return _COMPUTE_CAPABILITY[gpu.model.architecture]

    @nvml_api
    def nvmlDeviceGetAttributes(self, handle: Any) -> Any:
        """MIG device attributes; NOT_SUPPORTED on a physical GPU (measured)."""
        _, inst = self._device(handle, self._now())
        if inst is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        p = inst.profile
        attrs = pynvml.c_nvmlDeviceAttributes()
        attrs.multiprocessorCount = p.sm_count
        attrs.sharedCopyEngineCount = p.copy_engines
        attrs.sharedDecoderCount = p.decoders
        attrs.sharedEncoderCount = p.encoders
        attrs.sharedJpegCount = p.jpegs
        attrs.sharedOfaCount = p.ofas
        attrs.gpuInstanceSliceCount = p.compute_slices
        attrs.computeInstanceSliceCount = p.compute_slices
        attrs.memorySizeMB = p.memory_mib
        return attrs

    nvmlDeviceGetAttributes_v2 = nvmlDeviceGetAttributes

    # -- memory ---------------------------------------------------------------------------

    @nvml_api
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        """v1 (``used`` includes reserved) or v2 (``version=nvmlMemory_v2``)."""
        t = self._now()
        gpu, inst = self._device(handle, t)
        if version and version != pynvml.nvmlMemory_v2:
            fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        reading: MemoryReading
        if inst is not None:
            reading = inst.memory(t)
        else:
            if gpu.mig_enabled:
                self._require_privilege()
            reading = gpu.memory(t)
        if not version:
            v1 = pynvml.c_nvmlMemory_t()
            v1.total = reading.total
            v1.used = reading.used + reading.reserved
            v1.free = reading.free
            return v1
        v2 = pynvml.c_nvmlMemory_v2_t()
        v2.version = pynvml.nvmlMemory_v2
        v2.total, v2.reserved = reading.total, reading.reserved
        v2.used, v2.free = reading.used, reading.free
        return v2

    # -- board-level readings -------------------------------------------------------------

    def _board(self, handle: Any) -> SimGpu:
        """The GPU of a physical handle; NOT_SUPPORTED for a MIG handle (board-level call)."""
        gpu, inst = self._device(handle, self._now())
        if inst is not None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    @nvml_api
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        """Board power in mW (1 s average); NOT_SUPPORTED on a MIG handle (our model)."""
        return self._board(handle).power_mw(self._now())

    @nvml_api
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        """Energy since driver load in mJ, monotonic; NOT_SUPPORTED on a MIG handle."""
        return self._board(handle).energy_mj(self._now())

    @nvml_api
    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        """Power limit in mW (the model's max watts)."""
        return int(self._board(handle).power.max_watts * 1000)

    nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetPowerManagementLimit

    @nvml_api
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        """GPU temperature in °C for ``NVML_TEMPERATURE_GPU``; other sensors are invalid."""
        gpu = self._board(handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temperature_c(self._now())

    @nvml_api
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        """``c_nvmlUtilization_t`` over the last second; NOT_SUPPORTED with MIG on."""
        t = self._now()
        gpu, _ = self._device(handle, t)
        if gpu.mig_enabled:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        util = pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = gpu.utilization(t)
        return util

    # -- processes ------------------------------------------------------------------------

    @staticmethod
    def _process(pid: int, used: int, gi: int, ci: int) -> Any:
        info = pynvml.c_nvmlProcessInfo_v2_t()
        info.pid, info.usedGpuMemory = pid, used
        info.gpuInstanceId, info.computeInstanceId = gi, ci
        return pynvml.nvmlStructToFriendlyObject(info)

    def _instance_processes(self, inst: SimInstance, t: float) -> list[Any]:
        if not inst.pids:
            return []
        used = inst.memory(t).used
        share = used // len(inst.pids)
        return [self._process(pid, share, inst.gi_id, inst.ci_id) for pid in inst.pids]

    @nvml_api
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        """Running compute processes as pynvml's friendly objects.

        Each has ``pid``, ``usedGpuMemory``, ``gpuInstanceId`` and ``computeInstanceId``
        (0xFFFFFFFF for both ids on a GPU without MIG).
        """
        t = self._now()
        gpu, inst = self._device(handle, t)
        if inst is not None:
            return self._instance_processes(inst, t)
        if gpu.mig_enabled:
            self._require_privilege()
            return [p for i in gpu.instances_at(t) for p in self._instance_processes(i, t)]
        pids = gpu.whole_pids()
        if not pids:
            return []
        share = gpu.memory(t).used // len(pids)
        return [self._process(pid, share, _NO_ID, _NO_ID) for pid in pids]

    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses
    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses

    @nvml_api
    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        """Always empty: simulated workloads are compute only."""
        self._device(handle, self._now())
        return []

    nvmlDeviceGetGraphicsRunningProcesses_v3 = nvmlDeviceGetGraphicsRunningProcesses
