"""Tell migscope's series from dcgm-exporter's, and turn either into per-slice records.

A team that only runs dcgm-exporter should get a report on day one, so the analyzer reads
both dialects and hands the rest of the pipeline the same :class:`SliceSeries` for each:

============== ========================================== ==========================================
               migscope                                   dcgm-exporter
============== ========================================== ==========================================
slice          ``migscope_mig_info`` (profile, MIG UUID,  ``GPU_I_ID`` and ``GPU_I_PROFILE`` labels
               placement)                                 on every per-GI series
GPU model      ``migscope_gpu_info{model}`` (catalogue)   ``modelName`` (NVML name → catalogue)
activity       ``migscope_mig_graphics_active_ratio``     ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
memory used    ``migscope_mig_memory_used_bytes``         ``DCGM_FI_DEV_FB_USED`` (MiB × 2^20)
memory total   ``migscope_mig_memory_total_bytes``        ``FB_USED + FB_FREE``, else catalogue
pod            ``migscope_mig_pod_info{namespace,pod}``   ``namespace``/``pod`` labels, when set
energy         ``migscope_mig_energy_estimated_joules``   none: DCGM repeats the *whole GPU's*
                                                          energy on every GI; it is not the slice's
============== ========================================== ==========================================

The node comes from the ``node`` label (what migscope's ServiceMonitor sets), else
``Hostname``/``hostname`` (dcgm-exporter's ``NODE_NAME``), else ``instance``. Pod labels are
read from ``exported_namespace``/``exported_pod`` first: when Prometheus scrapes without
``honor_labels`` the exporter's own ``pod`` label is renamed so, and ``pod`` is then the
exporter's pod (dcgm-exporter #85). Empty label values mean "no pod", as Prometheus drops them.

Detection: a file with any ``migscope_mig_info`` is migscope's (an exporter run with
``--dcgm-compat`` writes both, and migscope's is richer); otherwise one with a
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` or ``DCGM_FI_DEV_FB_USED`` series carrying ``GPU_I_ID``
is dcgm-exporter's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from migscope.analyzer.model import SliceInfo, SliceKey
from migscope.analyzer.openmetrics import Series, SeriesSet
from migscope.analyzer.stats import SliceSeries, TimeSeries
from migscope.core.catalogue import (
    GpuModel,
    UnknownGpuError,
    UnknownProfileError,
    find_model,
    model_for_name,
)

__all__ = [
    "DCGM_METRICS",
    "DEFAULT_NODE",
    "DIALECT_METRICS",
    "MIB",
    "MIGSCOPE_METRICS",
    "Dialect",
    "NoMigSeriesError",
    "catalogue_model",
    "detect_dialect",
    "iter_slice_series",
    "node_of",
    "pod_of",
    "profile_bytes",
]

MIB = 1 << 20
"""Bytes per MiB: dcgm-exporter reports framebuffer sizes in MiB."""

DEFAULT_NODE = "unknown"
"""Node name for series that carry no node label (a scrape saved straight from /metrics)."""

MIG_INFO = "migscope_mig_info"
GPU_INFO = "migscope_gpu_info"
MIG_ACTIVITY = "migscope_mig_graphics_active_ratio"
MIG_MEMORY_USED = "migscope_mig_memory_used_bytes"
MIG_MEMORY_TOTAL = "migscope_mig_memory_total_bytes"
MIG_POD_INFO = "migscope_mig_pod_info"
MIG_ENERGY = "migscope_mig_energy_estimated_joules_total"
DCGM_ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"

MIGSCOPE_METRICS = frozenset(
    {
        MIG_INFO,
        GPU_INFO,
        MIG_ACTIVITY,
        MIG_MEMORY_USED,
        MIG_MEMORY_TOTAL,
        MIG_POD_INFO,
        MIG_ENERGY,
    }
)
"""The migscope series the analyzer reads."""

DCGM_METRICS = frozenset({DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE})
"""The dcgm-exporter series the analyzer reads."""

DIALECT_METRICS = MIGSCOPE_METRICS | DCGM_METRICS
"""Everything either dialect needs: pass it as ``keep`` to the exposition reader."""

_NODE_LABELS = ("node", "Hostname", "hostname", "instance")
_NAMESPACE_LABELS = ("exported_namespace", "namespace", "pod_namespace")
_POD_LABELS = ("exported_pod", "pod", "pod_name")

_Key: TypeAlias = SliceKey
_Int64Array: TypeAlias = NDArray[np.int64]


class Dialect(str, Enum):
    """Which exporter wrote the series."""

    MIGSCOPE = "migscope"
    DCGM = "dcgm"


class NoMigSeriesError(ValueError):
    """The input holds no per-slice series of either dialect; the message says what it holds."""


def node_of(labels: Mapping[str, str], *, default: str = DEFAULT_NODE) -> str:
    """The node a series belongs to: ``node``, ``Hostname``/``hostname``, ``instance``."""
    for name in _NODE_LABELS:
        value = labels.get(name, "")
        if value:
            return value
    return default


def pod_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """``(namespace, pod)`` named by a series' labels, or None when no pod is named."""
    pod = next((labels[n] for n in _POD_LABELS if labels.get(n)), "")
    if not pod:
        return None
    namespace = next((labels[n] for n in _NAMESPACE_LABELS if labels.get(n)), "")
    return namespace, pod


def detect_dialect(series: SeriesSet) -> Dialect:
    """Which exporter's series ``series`` holds.

    Raises:
        NoMigSeriesError: neither dialect's per-slice series is present; the message says
            what was found instead (e.g. dcgm-exporter series without ``GPU_I_ID``: MIG is
            off or no GPU instance exists).
    """
    if MIG_INFO in series.names:
        return Dialect.MIGSCOPE
    dcgm = series.get(DCGM_ACTIVITY) + series.get(DCGM_FB_USED)
    if any(s.labels.get("GPU_I_ID", "") for s in dcgm):
        return Dialect.DCGM
    if dcgm or any(name.startswith("DCGM_FI_") for name in series.names):
        raise NoMigSeriesError(
            f"{series.source}: dcgm-exporter series found, but none has a GPU_I_ID label: "
            "MIG is disabled or the GPUs have no GPU instances"
        )
    if any(name.startswith("migscope_") for name in series.names):
        raise NoMigSeriesError(
            f"{series.source}: migscope series found, but no {MIG_INFO}: "
            "MIG is disabled or the GPUs have no GPU instances"
        )
    found = f"{len(series.names)} other metric names" if series.names else "no samples"
    raise NoMigSeriesError(
        f"{series.source}: no MIG series found ({found}; expected {MIG_INFO} from migscope "
        f"or {DCGM_ACTIVITY}/{DCGM_FB_USED} with GPU_I_ID from dcgm-exporter)"
    )


def iter_slice_series(
    series: SeriesSet,
    *,
    dialect: Dialect | None = None,
    default_node: str = DEFAULT_NODE,
) -> Iterator[SliceSeries]:
    """Group a file's series into one :class:`SliceSeries` per slice, in key order.

    The dialect is detected here, before the first slice is asked for, so that a file of the
    wrong kind fails at once with :class:`NoMigSeriesError`. Slices are then built one at a
    time: only the current slice's arrays are concatenated and converted.

    Args:
        series: What the exposition reader returned (read with ``keep=DIALECT_METRICS``).
        dialect: Force a dialect instead of detecting it.
        default_node: Node name for series without a node label.

    Raises:
        NoMigSeriesError: no per-slice series of the dialect.
    """
    chosen = detect_dialect(series) if dialect is None else dialect
    if chosen is Dialect.MIGSCOPE:
        return _migscope_slices(series, default_node)
    return _dcgm_slices(series, default_node)


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _latest(series: Iterable[Series]) -> Series | None:
    """The series whose last sample is the most recent (the current labels of a slice)."""
    best: Series | None = None
    best_t = -1
    for s in series:
        if len(s.samples) and int(s.samples.timestamps_ms[-1]) > best_t:
            best, best_t = s, int(s.samples.timestamps_ms[-1])
    return best


def catalogue_model(key: str | None, name: str | None) -> GpuModel | None:
    """The catalogue model for a migscope ``model`` key, else for an NVML name."""
    if key:
        try:
            return find_model(key)
        except UnknownGpuError:
            pass
    return model_for_name(name) if name else None


def profile_bytes(model: GpuModel | None, profile: str) -> float | None:
    """The catalogue's memory size of ``profile`` on ``model``, bytes, or None."""
    if model is None:
        return None
    try:
        return float(model.profile(profile).memory_mib * MIB)
    except UnknownProfileError:
        return None


def _holders(
    parts: Iterable[tuple[tuple[str, str], TimeSeries]],
) -> dict[tuple[str, str], _Int64Array]:
    """Timestamps at which each pod was seen holding the slice, merged over its series."""
    stamps: dict[tuple[str, str], list[_Int64Array]] = defaultdict(list)
    for owner, samples in parts:
        stamps[owner].append(samples.timestamps_ms)
    return {owner: np.unique(np.concatenate(arrays)) for owner, arrays in stamps.items()}


# ---------------------------------------------------------------------------------------------
# migscope


def _migscope_key(labels: Mapping[str, str], default_node: str) -> _Key | None:
    gpu = _int(labels.get("gpu"))
    gi = _int(labels.get("gpu_instance_id"))
    uuid = labels.get("gpu_uuid", "")
    if gpu is None or gi is None or not uuid:
        return None
    return SliceKey(node_of(labels, default=default_node), gpu, uuid, gi)


def _by_key(items: Iterable[Series], default_node: str) -> dict[_Key, list[Series]]:
    grouped: dict[_Key, list[Series]] = defaultdict(list)
    for s in items:
        key = _migscope_key(s.labels, default_node)
        if key is not None:
            grouped[key].append(s)
    return grouped


def _migscope_slices(series: SeriesSet, default_node: str) -> Iterator[SliceSeries]:
    info = _by_key(series.get(MIG_INFO), default_node)
    activity = _by_key(series.get(MIG_ACTIVITY), default_node)
    used = _by_key(series.get(MIG_MEMORY_USED), default_node)
    total = _by_key(series.get(MIG_MEMORY_TOTAL), default_node)
    pods = _by_key(series.get(MIG_POD_INFO), default_node)
    energy = _by_key(series.get(MIG_ENERGY), default_node)
    models: dict[tuple[str, str], GpuModel | None] = {}
    for gpu in series.get(GPU_INFO):
        node = node_of(gpu.labels, default=default_node)
        models[(node, gpu.labels.get("uuid", ""))] = catalogue_model(
            gpu.labels.get("model"), gpu.labels.get("name")
        )

    for key in sorted(info):
        current = _latest(info[key])
        if current is None:
            continue
        labels = current.labels
        model = models.get((key.node, key.gpu_uuid))
        profile = labels.get("profile", "")
        measured_total = TimeSeries.concat(s.samples for s in total.get(key, ()))
        memory_total = measured_total.last_value() if measured_total is not None else None
        yield SliceSeries(
            info=SliceInfo(
                key=key,
                model=model.key if model is not None else None,
                profile=profile,
                mig_uuid=labels.get("mig_uuid") or None,
                placement_start=_int(labels.get("placement_start")),
            ),
            activity=TimeSeries.concat(s.samples for s in activity.get(key, ())),
            memory_used=TimeSeries.concat(s.samples for s in used.get(key, ())),
            memory_total_bytes=(
                memory_total if memory_total is not None else profile_bytes(model, profile)
            ),
            holders=_holders(
                (owner, s.samples)
                for s in pods.get(key, ())
                if (owner := pod_of(s.labels)) is not None
            ),
            energy=tuple(s.samples for s in energy.get(key, ())),
        )


# ---------------------------------------------------------------------------------------------
# dcgm-exporter


def _dcgm_key(labels: Mapping[str, str], default_node: str) -> _Key | None:
    gpu = _int(labels.get("gpu"))
    gi = _int(labels.get("GPU_I_ID"))
    uuid = labels.get("UUID") or labels.get("uuid") or ""
    if gpu is None or gi is None or not uuid:
        return None
    return SliceKey(node_of(labels, default=default_node), gpu, uuid, gi)


def _dcgm_slices(series: SeriesSet, default_node: str) -> Iterator[SliceSeries]:
    grouped: dict[str, dict[_Key, list[Series]]] = {}
    for name in (DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE):
        by_key: dict[_Key, list[Series]] = defaultdict(list)
        for s in series.get(name):
            key = _dcgm_key(s.labels, default_node)
            if key is not None:
                by_key[key].append(s)
        grouped[name] = by_key
    keys = set(grouped[DCGM_ACTIVITY]) | set(grouped[DCGM_FB_USED])

    for key in sorted(keys):
        activity_parts = grouped[DCGM_ACTIVITY].get(key, [])
        used_parts = grouped[DCGM_FB_USED].get(key, [])
        current = _latest(activity_parts + used_parts)
        if current is None:
            continue
        labels = current.labels
        model = model_for_name(labels.get("modelName", ""))
        profile = labels.get("GPU_I_PROFILE", "")
        used_mib = TimeSeries.concat(s.samples for s in used_parts)
        free_mib = TimeSeries.concat(s.samples for s in grouped[DCGM_FB_FREE].get(key, []))
        yield SliceSeries(
            info=SliceInfo(
                key=key,
                model=model.key if model is not None else None,
                profile=profile,
                mig_uuid=labels.get("dra_mig_device_uuid") or None,
                placement_start=None,
            ),
            activity=TimeSeries.concat(s.samples for s in activity_parts),
            memory_used=(
                TimeSeries.of_ms(used_mib.timestamps_ms, used_mib.values * MIB)
                if used_mib is not None
                else None
            ),
            memory_total_bytes=_dcgm_total(used_mib, free_mib, model, profile),
            holders=_holders(
                (owner, s.samples)
                for s in activity_parts + used_parts
                if (owner := pod_of(s.labels)) is not None
            ),
            energy=(),
        )


def _dcgm_total(
    used: TimeSeries | None, free: TimeSeries | None, model: GpuModel | None, profile: str
) -> float | None:
    """Slice memory: ``FB_USED + FB_FREE`` at the last time both were seen, else catalogue."""
    if used is not None and free is not None:
        both, at_used, at_free = np.intersect1d(
            used.timestamps_ms, free.timestamps_ms, return_indices=True
        )
        sums = used.values[at_used] + free.values[at_free]
        valid = ~np.isnan(sums)
        if both.size and bool(valid.any()):
            return float(sums[valid][-1]) * MIB
    return profile_bytes(model, profile)
