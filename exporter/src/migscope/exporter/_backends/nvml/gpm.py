"""GPM activity of GPUs and MIG slices over a window that slides every refresh.

Per-slice activity in MIG mode exists only through GPM (Hopper and
newer), from ``nvmlGpmMigSampleGet(parent, gi_id)``, and it is the expensive part of a cycle.
GPM gives no instantaneous value: ``nvmlGpmMetricsGet`` averages the activity between two
samples. So each owner (a GPU, or a slice) keeps a short ring of the samples it took, one per
refresh, and each refresh takes one new sample and computes the metrics between it and the
newest kept sample at least ``window`` old (DCGM's rolling buffer does the same,
reference/nvml-dcgm.md §2). Samples older than that baseline are recycled. NVML computes the
metrics over the whole window from its own counters, so the value is exact whatever the GPU's
clocks did meanwhile (averaging per-cycle values instead would weight them by wall time, not
by the cycles NVML counts), at ≈20 KiB of memory per kept sample.

What that buys, for a window W refreshed every cycle of interval I: the published value is at
most one cycle old and averages the last W seconds, so a load that starts shows half its
level W/2 to W/2 + I after it starts and is gone (< 10 %) 0.9 W to 0.9 W + I after it stops
(as a share of time: GPM's counters trail by 0.1–0.2 s and lean towards busy time once the
GPU drops to its idle clock, docs/exporter.md#freshness; at most W + I in any case).
A fixed window (the same W, refreshed once per W) showed it W/2 to 3W/2 and 0.9 W to 1.9 W
late, depending on where the change fell in the window (measured on the H200 with W = 10 s:
5.5–5.7 s and 9.5–9.7 s sliding, 6.7–13.5 s and 11.7–18.5 s fixed;
docs/hardware/h200-freshness.json). The NVML cost of a refresh is one sample (≈40–50 µs on a
real H200) and one ``nvmlGpmMetricsGet`` (≈0.9–1.2 ms of CPU, the same over 1 s as over 10 s),
whatever W: W sets the noise (a longer window smooths bursts and covers more of the time
between two scrapes), the refresh sets the cost and the freshness. ``refresh = window``
reproduces fixed windows exactly. Until an owner has W seconds of samples (just after start,
or a new slice) the window is as long as its history.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from migscope.exporter._backends.nvml.codes import (
    ABSENT,
    GPU_IS_LOST,
    STALE_HANDLE,
    GpuLost,
    StaleLayout,
    code_of,
)
from migscope.exporter._backends.status import CycleErrors
from migscope.exporter._snapshot import Activity

GPM_METRICS = (
    ("graphics", "NVML_GPM_METRIC_GRAPHICS_UTIL"),
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)
"""(Activity field, pynvml constant) for the GPM metrics migscope publishes."""

MIN_SPAN = 0.1
"""Shortest span metrics are computed over: NVML refreshes GPM counters every 100 ms (nvml.h),
and DRAM_BW_UTIL came back NaN from samples 20 ms apart on the H200."""

SLACK = 0.05
"""Seconds a sample may fall short of the window (or a refresh of its period) and still count:
half a GPM tick, more than the sampler thread's scheduling jitter, so a sample taken
9.998 s ago serves a 10 s window instead of the one taken 11 s ago."""

MAX_KEPT = 12
"""Samples kept per owner at most. NVML allocates ≈20 KiB per GPM sample (measured on the H200:
docs/hardware/h200-freshness.json), so a ring costs at most ≈250 KiB per slice, ≈14 MiB for
8 GPUs × 7 slices. The default 10 s window at 1 s keeps 11; a longer window keeps one sample
per ``window / (MAX_KEPT - 1)`` seconds only, so its baseline may be that much older."""


class GpmRing:
    """The GPM samples one GPU or slice keeps, oldest first, and its last activity.

    Sample buffers are allocated as the ring fills and reused from then on: a recycled
    sample (older than the window's baseline, or one not kept) becomes the next one taken.
    A window of W refreshed every I seconds holds about W / I + 1 buffers.
    """

    def __init__(self, nvml: Any, call: Callable[..., Any]) -> None:
        self._nvml = nvml
        self._call = call
        self.kept: deque[tuple[float, Any]] = deque()
        """``(taken at, sample)`` pairs, oldest first."""
        self._spare: list[Any] = []
        self.activity: Activity | None = None
        self.refreshed_at: float | None = None

    @property
    def allocated(self) -> int:
        """Sample buffers this ring holds (kept and spare)."""
        return len(self.kept) + len(self._spare)

    def buffer(self) -> Any:
        """A sample buffer to take the next sample into."""
        return self._spare.pop() if self._spare else self._call(self._nvml.nvmlGpmSampleAlloc)

    def recycle(self, sample: Any) -> None:
        """Hand a buffer back for the next sample."""
        self._spare.append(sample)

    def baseline(self, now: float, window: float) -> tuple[float, Any] | None:
        """The sample the window starts from: the newest kept one at least ``window`` old.

        While the ring is younger than the window, its oldest sample (if at least
        :data:`MIN_SPAN` old): a shorter window rather than none.
        """
        chosen: tuple[float, Any] | None = None
        for entry in self.kept:
            if now - entry[0] < window - SLACK:
                break
            chosen = entry
        if chosen is None and self.kept and now - self.kept[0][0] >= MIN_SPAN - 1e-9:
            chosen = self.kept[0]
        return chosen

    def trim(self, now: float, window: float) -> None:
        """Recycle the samples no window ending now or later can start from.

        Those are the ones older than the newest sample at least ``window`` old. Done before
        a refresh takes its sample, so a ring refreshed once per window needs two buffers.
        """
        while len(self.kept) > 1 and now - self.kept[1][0] >= window - SLACK:
            self.recycle(self.kept.popleft()[1])

    def keep(self, now: float, sample: Any, window: float) -> None:
        """Keep ``sample`` (taken at ``now``) unless it is too close to the last one kept."""
        gap = window / (MAX_KEPT - 1)
        if self.kept and now - self.kept[-1][0] < gap - SLACK:
            self.recycle(sample)  # adds nothing a window needs; saves a buffer
            return
        self.kept.append((now, sample))
        while len(self.kept) > MAX_KEPT:
            self.recycle(self.kept.popleft()[1])

    def free(self) -> None:
        """Free every sample; a failure (a lost GPU) is ignored."""
        samples = [sample for _taken, sample in self.kept] + self._spare
        self.kept.clear()
        self._spare = []
        for sample in samples:
            # Freeing can fail on a lost GPU; there is nothing else to do about it.
            with contextlib.suppress(self._nvml.NVMLError):
                self._call(self._nvml.nvmlGpmSampleFree, sample)


class GpmGpu(Protocol):
    """What the reader needs of a GPU: its handle and index, and a place for its ring.

    The inventory's ``NvmlGpu`` is one; the reader only keeps its samples there.
    """

    gpm: GpmRing | None

    @property
    def handle(self) -> Any:
        """The NVML device handle."""

    @property
    def index(self) -> int:
        """The GPU's NVML index, as error notes name it."""


class GpmSlice(Protocol):
    """What the reader needs of a MIG slice: its GPU instance id and a place for its ring."""

    gpm: GpmRing | None

    @property
    def gi_id(self) -> int:
        """The GPU instance id ``nvmlGpmMigSampleGet`` takes."""


class GpmReader:
    """Activity over sliding GPM windows, for every GPU and slice of one backend.

    Args:
        nvml: The module-like NVML object.
        call: The backend's NVML call wrapper (it counts calls).
        window: Seconds the published activity averages.
        refresh: Seconds between two computations of an owner's activity; 0 refreshes it
            every cycle. In between, the last value is republished without an NVML call.
            A refresh longer than the window is the window's length: each value then still
            averages ``window`` (computed once per window, as fixed windows are), not a
            longer span nobody asked for (a 1 s window under the 2 s default refresh).
    """

    def __init__(
        self, nvml: Any, call: Callable[..., Any], window: float, refresh: float = 0.0
    ) -> None:
        self._nvml = nvml
        self._call = call
        self._window = window
        self._refresh = min(refresh, window)
        self._request: tuple[Any, list[Any]] | None = None

    def activity(
        self, gpu: GpmGpu, errors: CycleErrors, s: GpmSlice | None, now: float
    ) -> Activity | None:
        """Activity over the window that ends now (None until an owner has two samples).

        Args:
            gpu: The GPU (or the parent of ``s``).
            errors: This cycle's error notes and timings (``gpm``).
            s: The slice, or None for the whole GPU.
            now: The cycle's start on the backend's clock.

        Raises:
            GpuLost: NVML says the GPU is lost.
            StaleLayout: the slice's GPU instance is gone (re-partitioned).
        """
        owner: GpmGpu | GpmSlice = gpu if s is None else s
        ring = owner.gpm
        if (
            ring is not None
            and ring.refreshed_at is not None
            and now - ring.refreshed_at < self._refresh - SLACK
        ):
            return ring.activity  # between refreshes: no NVML call, nothing to time
        nvml = self._nvml
        timer = time.perf_counter()
        try:
            if ring is None:
                ring = owner.gpm = GpmRing(nvml, self._call)
            ring.trim(now, self._window)
            sample = ring.buffer()
            try:
                if s is None:
                    self._call(nvml.nvmlGpmSampleGet, gpu.handle, sample)
                else:
                    self._call(nvml.nvmlGpmMigSampleGet, gpu.handle, s.gi_id, sample)
            except nvml.NVMLError as exc:
                ring.recycle(sample)
                code = code_of(exc)
                if code == GPU_IS_LOST:
                    raise GpuLost from exc
                if s is not None and code in STALE_HANDLE:
                    raise StaleLayout from exc
                if code not in ABSENT:
                    errors.note("gpm", f"GPU {gpu.index}: GPM sample: {exc}")
                ring.activity = None
                return None
            base = ring.baseline(now, self._window)
            ring.activity = (
                None if base is None else self._metrics(base[1], sample, now - base[0], gpu, errors)
            )
            ring.keep(now, sample, self._window)
            ring.refreshed_at = now
            return ring.activity
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

    def _metrics(
        self, first: Any, second: Any, span: float, gpu: GpmGpu, errors: CycleErrors
    ) -> Activity | None:
        nvml = self._nvml
        request, entries = self._request_struct()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(GPM_METRICS)
        request.sample1 = first
        request.sample2 = second
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
        return Activity(**values, window_seconds=round(span, 6))
