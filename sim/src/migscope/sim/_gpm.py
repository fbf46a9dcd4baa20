"""GPM (GPU Performance Monitoring, Hopper+) samples and metrics, as NVML computes them.

A real GPM sample is a snapshot of hardware activity counters; ``nvmlGpmMetricsGet`` turns
two snapshots into percentages over the interval between them. The simulator does the same
with the workloads' exact activity integrals, which gives three faithful properties for free:
values are averages over the caller's interval (not instantaneous), a long interval smooths
bursts, and the counters refresh on NVML's 100 ms internal tick (nvml.h: samples should be
more than 100 ms apart "due to the internal sample refresh rate"), so two samples within one
tick hold the same snapshot.

Measured on a real H200 (MIG disabled; ``tests/sim/recordings/h200_semantics_1.txt`` and
``h200_nvml_probe.json``) and reproduced here:

- metric names (``gract``/``GRAPHICS_UTIL``/``%`` ...; DMMA has no names);
- an unknown metric id: per-metric ``nvmlReturn`` INVALID_ARGUMENT, null ``metricInfo``;
- samples allocated but never filled: call succeeds, per-metric UNINITIALIZED;
- the same sample as sample1 and sample2, or a freed sample: call-level INVALID_ARGUMENT;
- ``version`` other than 1: ARGUMENT_VERSION_MISMATCH;
- samples 0-50 ms apart: call succeeds, values 0.0, except DRAM_BW_UTIL which came back NaN
  at 20 ms; here: a zero interval (same 100 ms tick) gives 0.0 and NaN for DRAM;
- samples in reverse order: accepted (values symmetric here; on an idle GPU both were 0).

Modelled loosely: PCIe TX/RX (MiB/s) on whole-GPU samples, 2.0 + 1.0 × activity and
1.6 + 1.4 × activity (the H200 idled at 2.1/1.6 and moved about 3 MiB/s under its matmul);
NVLink total RX/TX 0.0 (one GPU, no peer traffic; the H200 said 0.0).

Chosen, not measured: on MIG-device and GPU-instance samples PCIe and NVLink answer
NOT_SUPPORTED (dcgm-exporter has no PCIe series on GPU instances); metrics the workloads do
not model at all (NVDEC, NVJPG, NVOFA, per-link NVLink, C2C) answer NOT_SUPPORTED; samples
of different devices or GPU instances, or of a GPU instance and a MIG device, are a
call-level INVALID_ARGUMENT.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

import pynvml

from migscope.sim._handles import address_of
from migscope.sim._nvml_errors import fail
from migscope.sim._workloads import COMPONENTS

TICK = 0.1
"""NVML's internal GPM refresh period, in seconds."""

_C = {name: i for i, name in enumerate(COMPONENTS)}


@dataclass(frozen=True)
class _Metric:
    component: int | None  # None: modelled as a constant 0 (no such work in the workloads)
    short: bytes | None
    long: bytes | None
    unit: bytes | None


# What the real H200 returned in metricInfo, and which workload ratio feeds each metric.
# HMMA (fp16/bf16 tensor) follows the tensor ratio because the default mix is a bf16 matmul.
_MODELLED: dict[int, _Metric] = {
    1: _Metric(_C["graphics"], b"gract", b"GRAPHICS_UTIL", b"%"),
    2: _Metric(_C["sm"], b"smutil", b"SM_UTIL", b"%"),
    3: _Metric(_C["occupancy"], b"smocc", b"SM_OCCUPANCY", b"%"),
    4: _Metric(_C["integer"], b"intutil", b"INTEGER_UTIL", b"%"),
    5: _Metric(_C["tensor"], b"mmaact", b"ANY_TENSOR_UTIL", b"%"),
    6: _Metric(None, b"dfmat", b"DFMA_TENSOR_UTIL", b"%"),
    7: _Metric(_C["tensor"], b"hmmat", b"HMMA_TENSOR_UTIL", b"%"),
    8: _Metric(None, None, None, b"%"),
    9: _Metric(None, b"immat", b"IMMA_TENSOR_UTIL", b"%"),
    10: _Metric(_C["dram"], b"dram", b"DRAM_BW_UTIL", b"%"),
    11: _Metric(_C["fp64"], b"fp64", b"FP64_UTIL", b"%"),
    12: _Metric(_C["fp32"], b"fp32", b"FP32_UTIL", b"%"),
    13: _Metric(_C["fp16"], b"fp16", b"FP16_UTIL", b"%"),
}
_DRAM = 10


@dataclass(frozen=True)
class _Rate:
    short: bytes
    long: bytes
    idle: float  # MiB/s with nothing running
    busy: float  # MiB/s added at full activity


# Board-level traffic, whole-GPU samples only.
_RATES: dict[int, _Rate] = {
    20: _Rate(b"pcitx", b"PCIE_TX_PER_SEC", 2.0, 1.0),
    21: _Rate(b"pcirx", b"PCIE_RX_PER_SEC", 1.6, 1.4),
    60: _Rate(b"nvlrx", b"NVLINK_TOTAL_RX_PER_SEC", 0.0, 0.0),
    61: _Rate(b"nvltx", b"NVLINK_TOTAL_TX_PER_SEC", 0.0, 0.0),
}
_KNOWN_IDS = frozenset(
    getattr(pynvml, name)
    for name in dir(pynvml)
    if name.startswith("NVML_GPM_METRIC_") and name != "NVML_GPM_METRIC_MAX"
)


def tick_time(t: float) -> float:
    """The last 100 ms refresh at or before ``t``: what a sample taken at ``t`` holds."""
    return math.floor(t / TICK + 1e-9) * TICK


@dataclass
class GpmSample:
    """The content of one sample buffer.

    Attributes:
        source: What was sampled: ``("device", gpu)``, ``("mig", instance)`` or
            ``("gi", instance)``; None until the first ``SampleGet``.
        time: Simulated time of the refresh tick the snapshot comes from.
        counters: Activity integrals at that tick, in :data:`COMPONENTS` order.
    """

    source: tuple[str, object] | None = None
    time: float = 0.0
    counters: tuple[float, ...] = ()


class SampleStore:
    """Sample buffers handed out by ``nvmlGpmSampleAlloc``, keyed by address.

    Freed buffers are dropped, so (as with ``malloc``) a later allocation may reuse the
    address; a stale pointer then reads as unknown (INVALID_ARGUMENT, as measured).
    """

    def __init__(self) -> None:
        self._samples: dict[int, tuple[ctypes.Array[ctypes.c_char], GpmSample]] = {}

    def alloc(self) -> Any:
        """A new ``c_nvmlGpmSample_t`` pointing at a fresh, unfilled sample."""
        buffer = ctypes.create_string_buffer(16)
        address = ctypes.addressof(buffer)
        self._samples[address] = (buffer, GpmSample())
        return ctypes.cast(ctypes.c_void_p(address), pynvml.c_nvmlGpmSample_t)

    def get(self, pointer: Any) -> GpmSample | None:
        """The sample ``pointer`` refers to, or None if it is NULL, freed or foreign."""
        address = address_of(pointer)
        entry = None if address is None else self._samples.get(address)
        return None if entry is None else entry[1]

    def free(self, pointer: Any) -> bool:
        """Release a sample; False if it was not allocated (or already freed)."""
        address = address_of(pointer)
        return address is not None and self._samples.pop(address, None) is not None

    def __len__(self) -> int:
        return len(self._samples)


# pynvml's _PrintableStructure wraps every field access to convert str/bytes; the numeric
# and bytes fields written here need none of that, and this is the sampler's hot path.
_set = ctypes.Structure.__setattr__
_get = ctypes.Structure.__getattribute__


def _fill(entry: Any, ret: int, value: float, meta: _Metric | _Rate | None) -> None:
    _set(entry, "nvmlReturn", ret)
    _set(entry, "value", value)
    info = _get(entry, "metricInfo")
    info.shortName = meta.short if meta else None
    info.longName = meta.long if meta else None
    info.unit = (b"MiB/s" if isinstance(meta, _Rate) else meta.unit) if meta else None


def compute_metrics(metrics_get: Any, store: SampleStore) -> None:
    """Fill ``metrics_get`` (a ``c_nvmlGpmMetricsGet_t``) in place, as NVML does.

    Raises:
        pynvml.NVMLError: call-level errors (see the module docstring).
    """
    if metrics_get.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
        fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    count = metrics_get.numMetrics
    if count > pynvml.NVML_GPM_METRIC_MAX:
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    first, second = store.get(metrics_get.sample1), store.get(metrics_get.sample2)
    if first is None or second is None or first is second:
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    filled = first.source is not None and second.source is not None
    if filled and first.source != second.source:
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    early, late = sorted((first, second), key=lambda s: s.time)
    span = late.time - early.time
    entries = metrics_get.metrics
    for i in range(count):
        entry = entries[i]
        metric_id = int(_get(entry, "metricId"))
        meta = _MODELLED.get(metric_id)
        rate = _RATES.get(metric_id)
        if metric_id not in _KNOWN_IDS:
            _fill(entry, pynvml.NVML_ERROR_INVALID_ARGUMENT, 0.0, None)
        elif not filled:
            _fill(entry, pynvml.NVML_ERROR_UNINITIALIZED, 0.0, meta or rate)
        elif rate is not None:
            if early.source is None or early.source[0] != "device":
                _fill(entry, pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0, None)
            else:
                busy = (late.counters[0] - early.counters[0]) / span if span > 0 else 0.0
                _fill(entry, pynvml.NVML_SUCCESS, rate.idle + rate.busy * busy, rate)
        elif meta is None:
            _fill(entry, pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0, None)
        elif span <= 0:
            _fill(entry, pynvml.NVML_SUCCESS, math.nan if metric_id == _DRAM else 0.0, meta)
        elif meta.component is None:
            _fill(entry, pynvml.NVML_SUCCESS, 0.0, meta)
        else:
            c = meta.component
            percent = 100.0 * (late.counters[c] - early.counters[c]) / span
            _fill(entry, pynvml.NVML_SUCCESS, min(100.0, max(0.0, percent)), meta)
