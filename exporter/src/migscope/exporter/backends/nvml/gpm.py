"""GPM activity of GPUs and MIG slices: one sample per window, metrics against the last one.

Why its own module: per-slice activity in MIG mode exists only through GPM (Hopper and
newer), from ``nvmlGpmMigSampleGet(parent, gi_id)``, and it is the expensive part of a cycle.
``nvmlGpmMetricsGet`` costs ≈1.2 ms of CPU per slice on a real H200
(tests/fixtures/h200/gpm_cost.json), so activity is computed once per window and republished
in between; each owner (GPU or slice) keeps two samples that swap roles each window, like
DCGM's rolling buffer, so a window costs one sample call per owner.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from migscope.exporter.backends.nvml.codes import (
    ABSENT,
    GPU_IS_LOST,
    STALE_HANDLE,
    GpuLost,
    StaleLayout,
    code_of,
)
from migscope.exporter.backends.status import CycleErrors
from migscope.exporter.model import Activity

if TYPE_CHECKING:
    from migscope.exporter.backends.nvml.inventory import NvmlGpu, NvmlSlice

__all__ = ["GPM_METRICS", "GpmPair", "GpmReader"]

GPM_METRICS = (
    ("graphics", "NVML_GPM_METRIC_GRAPHICS_UTIL"),
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)
"""(Activity field, pynvml constant) for the GPM metrics migscope publishes."""


class GpmPair:
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
        """The sample just taken becomes the window's first; the older one is reused."""
        self.previous, self.current = self.current, self.previous
        self.primed = True
        self.taken_at = now

    def free(self) -> None:
        """Free both samples; a failure (a lost GPU) is ignored."""
        for sample in (self.previous, self.current):
            # Freeing can fail on a lost GPU; there is nothing else to do about it.
            with contextlib.suppress(self._nvml.NVMLError):
                self._call(self._nvml.nvmlGpmSampleFree, sample)


class GpmReader:
    """Activity over GPM windows, for every GPU and slice of one backend.

    Args:
        nvml: The module-like NVML object.
        call: The backend's NVML call wrapper (it counts calls).
        interval: Seconds of one GPM window.
    """

    def __init__(self, nvml: Any, call: Callable[..., Any], interval: float) -> None:
        self._nvml = nvml
        self._call = call
        self._interval = interval
        self._request: tuple[Any, list[Any]] | None = None

    def activity(
        self, gpu: NvmlGpu, errors: CycleErrors, s: NvmlSlice | None, now: float
    ) -> Activity | None:
        """Activity over the last completed GPM window (None until the first one closes).

        Within a window the previous value is returned without touching NVML; at its end one
        new sample is taken and the metrics are computed against the window's first sample.

        Args:
            gpu: The GPU (or the parent of ``s``).
            errors: This cycle's error notes and timings (``gpm``).
            s: The slice, or None for the whole GPU.
            now: The cycle's start on the backend's clock.

        Raises:
            GpuLost: NVML says the GPU is lost.
            StaleLayout: the slice's GPU instance is gone (re-partitioned).
        """
        owner: NvmlGpu | NvmlSlice = gpu if s is None else s
        pair = owner.gpm
        if pair is not None and pair.primed and now - pair.taken_at < self._interval:
            return pair.activity  # inside the window: no NVML call, nothing to time
        nvml = self._nvml
        timer = time.perf_counter()
        try:
            if pair is None:
                pair = owner.gpm = GpmPair(nvml, self._call)
            try:
                if s is None:
                    self._call(nvml.nvmlGpmSampleGet, gpu.handle, pair.current)
                else:
                    self._call(nvml.nvmlGpmMigSampleGet, gpu.handle, s.gi_id, pair.current)
            except nvml.NVMLError as exc:
                code = code_of(exc)
                if code == GPU_IS_LOST:
                    raise GpuLost from exc
                if s is not None and code in STALE_HANDLE:
                    raise StaleLayout from exc
                if code not in ABSENT:
                    errors.note("gpm", f"GPU {gpu.index}: GPM sample: {exc}")
                pair.activity = None
                return None
            if pair.primed:
                pair.activity = self._metrics(pair, gpu, errors)
            pair.swap(now)
            return pair.activity
        finally:
            errors.add_time("gpm", time.perf_counter() - timer)

    def _request_struct(self) -> tuple[Any, list[Any]]:
        """One metrics request reused for every slice, and its first entries.

        The struct holds NVML_GPM_METRIC_MAX entries and ctypes builds a new Python object on
        every ``metrics[i]``; reading five values that way cost ≈11 µs per slice on a real H200
        (tests/fixtures/h200/gpm_cost.json). The entries are views into the struct's buffer,
        so they are looked up once.
        """
        if self._request is None:
            request = self._nvml.c_nvmlGpmMetricsGet_t()
            for i, (_attr, const) in enumerate(GPM_METRICS):
                request.metrics[i].metricId = getattr(self._nvml, const)
            self._request = (request, [request.metrics[i] for i in range(len(GPM_METRICS))])
        return self._request

    def _metrics(self, pair: GpmPair, gpu: NvmlGpu, errors: CycleErrors) -> Activity | None:
        nvml = self._nvml
        request, entries = self._request_struct()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(GPM_METRICS)
        request.sample1 = pair.previous
        request.sample2 = pair.current
        try:
            self._call(nvml.nvmlGpmMetricsGet, request)
        except nvml.NVMLError as exc:
            errors.note("gpm", f"GPU {gpu.index}: GPM metrics: {exc}")
            return None
        values: dict[str, float | None] = {}
        for entry, (attr, _const) in zip(entries, GPM_METRICS, strict=True):
            value = float(entry.value)
            ok = entry.nvmlReturn == 0 and value == value  # NaN when samples are too close
            values[attr] = min(max(value / 100.0, 0.0), 1.0) if ok else None
        return Activity(**values)
