"""Write slice history back out as exposition text, in either exporter's dialect.

Why the analyzer writes what it reads: ``--prometheus-embedded`` backfills a real Prometheus
with a simulated week (``promtool tsdb create-blocks-from openmetrics``), and a team can do the
same with its own Prometheus to try the dashboards and rules before a GPU is partitioned.
The output is exactly what the exporters publish, so it goes through the same dialect reader
and PromQL as production data:

- :attr:`~migscope.analyzer._intake.dialect.Dialect.MIGSCOPE`: ``migscope_mig_info``,
  ``migscope_mig_graphics_active_ratio``, ``migscope_mig_memory_{used,total}_bytes``,
  ``migscope_mig_pod_info``, ``migscope_mig_energy_estimated_joules_total`` and
  ``migscope_gpu_info``, with a ``node`` label as migscope's ServiceMonitor sets it;
- :attr:`~migscope.analyzer._intake.dialect.Dialect.DCGM`: dcgm-exporter's
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` and ``DCGM_FI_DEV_FB_{USED,FREE}`` (MiB) per GPU instance
  with ``GPU_I_ID``/``GPU_I_PROFILE``/``modelName``/``Hostname`` and the pod labels only
  while a pod holds the slice — dcgm-exporter's shape, down to the missing placement.

OpenMetrics wants each metric family's samples together, while slices arrive one at a time;
:func:`write_openmetrics` spools each family to its own temporary file and concatenates
them, so memory stays one slice deep whatever the window.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from numpy.typing import NDArray

from migscope.analyzer._intake.dialect import (
    MIB,
    Dialect,
)
from migscope.analyzer._intake.dialect import names as metric
from migscope.analyzer._intake.stats_local import SliceSeries, TimeSeries
from migscope.analyzer._model import Holder, holder_claim
from migscope.core import GPU_UUID, find_model

_Int64Array = NDArray[np.int64]

DRA_DRIVER = "gpu.nvidia.com"
"""The DRA driver named on a claim holder's series: NVIDIA's (dra-driver-nvidia-gpu)."""


@dataclass(frozen=True)
class HistoryWritten:
    """What :func:`write_openmetrics` wrote.

    Attributes:
        samples: Sample lines written.
        series: Distinct series written.
        first: Earliest sample, Unix seconds (NaN when nothing was written).
        last: Latest sample, Unix seconds (NaN when nothing was written).
    """

    samples: int
    series: int
    first: float
    last: float


@dataclass(frozen=True)
class _Series:
    name: str
    labels: Mapping[str, str]
    timestamps_ms: _Int64Array
    values: NDArray[np.float64]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(labels: Mapping[str, str]) -> str:
    kept = [(k, v) for k, v in labels.items() if v != ""]
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in kept) + "}" if kept else ""


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _stamp(ms: int) -> str:
    whole, rest = divmod(ms, 1000)
    return str(whole) if rest == 0 else f"{whole}.{rest:03d}"


def _times(series: SliceSeries) -> _Int64Array:
    """Every instant the slice was observed (activity or memory sampled)."""
    parts = [ts.timestamps_ms for ts in (series.activity, series.memory_used) if ts is not None]
    if not parts:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.concatenate(parts))


def _ones(stamps: _Int64Array) -> NDArray[np.float64]:
    return np.ones(stamps.size, dtype=np.float64)


def _model_name(model_key: str | None) -> str:
    """The NVML name dcgm-exporter puts in ``modelName`` (empty when uncatalogued)."""
    if model_key is None:
        return ""
    try:
        return find_model(model_key).names[0]
    except (ValueError, IndexError):
        return ""


def _migscope_series(series: SliceSeries) -> Iterator[_Series]:
    info = series.info
    key = info.key
    base = {
        "node": key.node,
        "gpu": str(key.gpu),
        "gpu_uuid": key.gpu_uuid,
        "gpu_instance_id": str(key.gpu_instance_id),
        "mig_uuid": info.mig_uuid or "",
    }
    seen = _times(series)
    placement = "" if info.placement_start is None else str(info.placement_start)
    yield _Series(
        metric.MIG_INFO,
        {**base, "profile": info.profile, "placement_start": placement},
        seen,
        _ones(seen),
    )
    if series.activity is not None:
        ts = series.activity
        yield _Series(metric.MIG_ACTIVITY, base, ts.timestamps_ms, ts.values)
    if series.memory_used is not None:
        ts = series.memory_used
        yield _Series(metric.MIG_MEMORY_USED, base, ts.timestamps_ms, ts.values)
    if series.memory_total_bytes is not None:
        total = np.full(seen.size, float(series.memory_total_bytes))
        yield _Series(metric.MIG_MEMORY_TOTAL, base, seen, total)
    resource = f"nvidia.com/mig-{info.profile}"
    for holder, held in sorted(series.holders.items()):
        namespace, pod, claim = holder[0], holder[1], holder_claim(holder)
        labels = {**base, "namespace": namespace, "pod": pod, "resource": resource}
        if claim:  # held through a DRA claim: the driver's name, as the exporter writes it
            labels |= {
                "resource": DRA_DRIVER,
                "claim": claim,
                "claim_namespace": namespace,
                "attribution": "dra-resourceslice",
            }
        yield _Series(metric.MIG_POD_INFO, labels, held, _ones(held))
    for counter in series.energy:
        yield _Series(
            metric.MIG_ENERGY,
            base,
            counter.timestamps_ms,
            counter.values,
        )


def _split_by_holder(
    ts: TimeSeries, holders: Mapping[Holder, _Int64Array]
) -> Iterator[tuple[dict[str, str], _Int64Array, NDArray[np.float64]]]:
    """A series cut into runs by the holder at each sample, with its dcgm-exporter labels.

    dcgm-exporter puts ``namespace``/``pod`` on a GI's samples only while a pod holds it, so
    one GI is several series over a week: one per holder and one without pod labels. A
    holder with a DRA claim gets the ``dra_*`` labels dcgm-exporter 4.6.0-4.8.3 writes
    (and no pod labels when the pod is unknown, as NVIDIA/dcgm-exporter#718 reports).
    """
    owner = np.full(ts.timestamps_ms.size, -1, dtype=np.int64)
    names = sorted(holders)
    for index, name in enumerate(names):
        owner[np.isin(ts.timestamps_ms, holders[name])] = index
    for index in np.unique(owner).tolist():
        mask = owner == index
        labels = {"namespace": "", "pod": ""}
        if index >= 0:
            holder = names[index]
            labels = {"namespace": holder[0] if holder[1] else "", "pod": holder[1]}
            if claim := holder_claim(holder):
                labels |= {
                    "dra_claim_name": claim,
                    "dra_claim_namespace": holder[0],
                    "dra_driver_name": DRA_DRIVER,
                }
        yield labels, ts.timestamps_ms[mask], ts.values[mask]


def _dcgm_series(series: SliceSeries) -> Iterator[_Series]:
    info = series.info
    key = info.key
    base = {
        "gpu": str(key.gpu),
        "UUID": key.gpu_uuid,
        "device": f"nvidia{key.gpu}",
        "modelName": _model_name(info.model),
        "Hostname": key.node,
        "GPU_I_PROFILE": info.profile,
        "GPU_I_ID": str(key.gpu_instance_id),
    }
    if series.activity is not None:
        for held, stamps, values in _split_by_holder(series.activity, series.holders):
            labels = {**base, **held}
            yield _Series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, stamps, values)
    if series.memory_used is not None:
        for held, stamps, values in _split_by_holder(series.memory_used, series.holders):
            labels = {**base, **held}
            used_mib = np.round(values / MIB)
            yield _Series("DCGM_FI_DEV_FB_USED", labels, stamps, used_mib)
            if series.memory_total_bytes is not None:
                free_mib = np.round(series.memory_total_bytes / MIB) - used_mib
                yield _Series("DCGM_FI_DEV_FB_FREE", labels, stamps, free_mib)


def iter_history(
    slices: Iterable[SliceSeries], dialect: Dialect = Dialect.MIGSCOPE
) -> Iterator[tuple[str, Mapping[str, str], _Int64Array, NDArray[np.float64]]]:
    """Every series the exporter of ``dialect`` would have published for these slices.

    Yields ``(metric name, labels, millisecond timestamps, values)``, one slice at a time;
    for migscope's dialect ``migscope_gpu_info`` comes last, once per GPU, over the span its
    slices were seen.
    """
    gpus: dict[tuple[str, int, str], tuple[str, _Int64Array]] = {}
    for series in slices:
        parts = _migscope_series(series) if dialect is Dialect.MIGSCOPE else _dcgm_series(series)
        for part in parts:
            yield part.name, part.labels, part.timestamps_ms, part.values
        if dialect is Dialect.MIGSCOPE and series.info.model is not None:
            key = series.info.key
            gpu = (key.node, key.gpu, key.gpu_uuid)
            _, before = gpus.get(gpu, (series.info.model, np.empty(0, dtype=np.int64)))
            gpus[gpu] = (series.info.model, np.union1d(before, _times(series)))
    for (node, index, uuid), (model, stamps) in sorted(gpus.items()):
        labels = {"node": node, "gpu": str(index), GPU_UUID: uuid, "model": model}
        yield metric.GPU_INFO, labels, stamps, _ones(stamps)


def write_openmetrics(
    slices: Iterable[SliceSeries], out: TextIO, *, dialect: Dialect = Dialect.MIGSCOPE
) -> HistoryWritten:
    """Write the slices' history as OpenMetrics text (timestamps in seconds, ``# EOF``).

    Families are written one after another (no ``# TYPE`` lines: every family is
    ``unknown``, which promtool and the analyzer's reader accept for any name).

    Args:
        slices: The slices, consumed once.
        out: A text stream.
        dialect: Whose metric names and labels to write.

    Returns:
        How much was written and the time span it covers.
    """
    samples = series_count = 0
    first, last = math.inf, -math.inf
    spools: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="migscope-history-") as tmp:
        try:
            for name, labels, stamps, values in iter_history(slices, dialect):
                if not stamps.size:
                    continue
                spool = spools.get(name)
                if spool is None:
                    spool = spools[name] = open(  # noqa: SIM115 - closed in finally
                        f"{tmp}/{len(spools)}.txt", "w+", encoding="utf-8"
                    )
                prefix = name + _label_text(labels)
                spool.writelines(
                    f"{prefix} {_number(v)} {_stamp(t)}\n"
                    for t, v in zip(stamps.tolist(), values.tolist(), strict=True)
                )
                samples += stamps.size
                series_count += 1
                first = min(first, int(stamps[0]) / 1000.0)
                last = max(last, int(stamps[-1]) / 1000.0)
            for spool in spools.values():
                spool.seek(0)
                shutil.copyfileobj(spool, out)
        finally:
            for spool in spools.values():
                spool.close()
    out.write("# EOF\n")
    if not samples:
        first = last = math.nan
    return HistoryWritten(samples, series_count, first, last)
