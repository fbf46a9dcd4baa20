"""GPM calls of the simulated NVML (Hopper and newer), on GPUs, MIG devices and GPU instances.

Semantics copied, with evidence (recordings = ``tests/sim/recordings/``; §n =
``reference/nvml-dcgm.md``); metric arithmetic is in :mod:`migscope.sim._gpm`:

- ``nvmlGpmQueryDeviceSupport`` answers on any device or MIG handle (nvml.h: "supports the
  device handle and MIG device handle"): ``isSupportedDevice`` 1 on Hopper/Blackwell, 0 on
  Ampere. Every other GPM call on Ampere raises NOT_SUPPORTED (Ampere has no GPM, §2).
- ``nvmlGpmQueryIfStreamingEnabled``: 0 (measured; sampling works anyway).
- ``nvmlGpmSampleGet(handle, sample)``: a GPU-wide sample on a physical handle (on a MIG GPU:
  the instances' activity weighted by their compute slices), a per-MIG-device sample on a
  MIG handle. Values of a MIG device or GPU instance are relative to the instance: a 1g slice
  that is always busy reads 100 % (third-party usage suggests this; unverified, §6).
- ``nvmlGpmMigSampleGet(parent, gpuInstanceId, sample)``: INVALID_ARGUMENT when MIG is
  disabled, whatever the id (measured with ids 0 and 99); NOT_FOUND for an unknown GI id on
  a MIG GPU. A MIG handle in place of the parent is accepted and resolved to its parent
  (DCGM's recorder passes one; unverified).
- A sample pointer that was never allocated or was freed: INVALID_ARGUMENT (measured for a
  freed one). Freeing twice: INVALID_ARGUMENT here; the real library aborted the process
  ("double free or corruption"), and a NULL sample segfaulted it.
"""

from __future__ import annotations

from typing import Any

import pynvml

from migscope.sim._gpm import GpmSample, compute_metrics, tick_time
from migscope.sim._gpu import SimGpu
from migscope.sim._nvml_core import NvmlCore, nvml_api
from migscope.sim._nvml_errors import fail


class GpmApi(NvmlCore):
    """GPM support query, sample buffers, sampling and metrics."""

    @staticmethod
    def _require_gpm(gpu: SimGpu) -> None:
        if not gpu.model.has_gpm:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def _sample(self, pointer: Any) -> GpmSample:
        sample = self._samples.get(pointer)
        if sample is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return sample

    @nvml_api
    def nvmlGpmQueryDeviceSupport(self, device: Any) -> Any:
        """``c_nvmlGpmSupport_t`` with ``isSupportedDevice`` 1 on Hopper and newer."""
        gpu, _ = self._device(device, self._now())
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(gpu.model.has_gpm)
        return support

    @nvml_api
    def nvmlGpmQueryIfStreamingEnabled(self, device: Any) -> int:
        """0: streaming is off (as measured), which does not prevent sampling."""
        gpu, _ = self._device(device, self._now())
        self._require_gpm(gpu)
        return 0

    @nvml_api
    def nvmlGpmSampleAlloc(self) -> Any:
        """A new, unfilled ``c_nvmlGpmSample_t``."""
        return self._samples.alloc()

    @nvml_api
    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        """Release a sample (INVALID_ARGUMENT if unknown or already freed)."""
        if not self._samples.free(gpmSample):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    @nvml_api
    def nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:
        """Snapshot the GPU's (or MIG device's) activity counters into ``gpmSample``."""
        t = self._now()
        gpu, inst = self._device(device, t)
        self._require_gpm(gpu)
        sample = self._sample(gpmSample)
        tick = tick_time(t)
        if inst is None:
            sample.source, sample.counters = ("device", gpu), gpu.counters(tick)
        else:
            sample.source, sample.counters = ("mig", inst), inst.counters(tick)
        sample.time = tick
        return gpmSample

    @nvml_api
    def nvmlGpmMigSampleGet(self, device: Any, gpuInstanceId: int, gpmSample: Any) -> Any:
        """Snapshot GPU instance ``gpuInstanceId`` of the (parent) ``device``."""
        t = self._now()
        gpu, _ = self._device(device, t)
        self._require_gpm(gpu)
        if not gpu.mig_enabled:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        inst = next((i for i in gpu.instances_at(t) if i.gi_id == gpuInstanceId), None)
        if inst is None:
            fail(pynvml.NVML_ERROR_NOT_FOUND)
        sample = self._sample(gpmSample)
        tick = tick_time(t)
        sample.source, sample.counters, sample.time = ("gi", inst), inst.counters(tick), tick
        return gpmSample

    @nvml_api
    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        """Compute the requested metrics between ``sample1`` and ``sample2`` in place."""
        compute_metrics(metricsGet, self._samples)
        return metricsGet
