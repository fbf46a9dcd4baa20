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
``--dcgm-compat`` writes both, and migscope's is richer); otherwise one in which *any*
dcgm-exporter family carries ``GPU_I_ID`` is dcgm-exporter's: the clocks, temperatures and
power are copied onto every GPU instance, so they show the instances even where the
profiling fields or the framebuffer fields are missing (dcgm-exporter #507, #380).

What makes one slice (why: a re-partition by MIG Manager may destroy GPU instance N and
create another N, at another placement or with another profile, and the two must not be
merged into one slice with the statistics of both):

- migscope: node, GPU UUID, GPU-instance id *and* ``mig_uuid``, which every per-slice series
  carries (``core.metrics.MIG_LABELS``) and which is new for every new instance. Series
  without it fall back to node, GPU and GPU-instance id.
- dcgm-exporter: node, GPU UUID, ``GPU_I_ID`` *and* ``GPU_I_PROFILE``: there is no MIG UUID
  outside DRA mode (and DRA's ``dra_mig_device_uuid`` is a pod attribute, present only while
  a claim holds the device, so it cannot split a slice's history). An instance re-created
  with the same id *and* profile sits at the same placement and is one slice here.

Slices of the same key are yielded oldest first (by their first sample).

dcgm-exporter's families are matched case-insensitively (``dcgm_fi_prof_gr_engine_active``
after a lower-casing ``metric_relabel_configs``); a scrape renamed otherwise (a prefix) finds
nothing, and the error names the families that come closest, so that the mismatch shows.
Slices known only from a family that the analyzer does not read (the *presence* family:
the GPU instance exists, but neither activity nor framebuffer series do) are kept, with no
samples: they are classified ``unknown`` and pin their GPU, instead of leaving a hole in
the layout where an instance still is.
"""

from __future__ import annotations

import difflib
import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
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
from migscope.core.errors import UserError

__all__ = [
    "DCGM_METRICS",
    "DCGM_PRESENCE_PREFERENCE",
    "DEFAULT_NODE",
    "DIALECT_METRICS",
    "MIB",
    "MIGSCOPE_METRICS",
    "Dialect",
    "NoMigSeriesError",
    "SliceId",
    "SliceReader",
    "catalogue_model",
    "closest_names",
    "dcgm_family",
    "detect_dialect",
    "explain_no_mig",
    "gi_families",
    "indexes",
    "iter_slice_series",
    "keeps",
    "migscope_slice_info",
    "node_of",
    "pod_of",
    "presence_family",
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
"""Everything either dialect needs, by exact name (:func:`keeps` also takes other cases)."""

DCGM_PREFIX = "DCGM_"
"""dcgm-exporter's families: ``DCGM_FI_*`` fields and the exporter's own ``DCGM_EXP_*``."""

DCGM_PRESENCE_PREFERENCE = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
)
"""Families that list the GPU instances when activity and framebuffer do not, best first.

They are device-level values that dcgm-exporter copies onto every GPU instance and never
leaves blank, and they are in its default counters; any other family with ``GPU_I_ID``
serves when none of these is there (see :func:`presence_family`).
"""

_NODE_LABELS = ("node", "Hostname", "hostname", "instance")
_NAMESPACE_LABELS = ("exported_namespace", "namespace", "pod_namespace")
_POD_LABELS = ("exported_pod", "pod", "pod_name")

_Int64Array: TypeAlias = NDArray[np.int64]


class Dialect(str, Enum):
    """Which exporter wrote the series."""

    MIGSCOPE = "migscope"
    DCGM = "dcgm"


class NoMigSeriesError(UserError, ValueError):
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


def dcgm_family(name: str) -> str | None:
    """dcgm-exporter's own spelling of a sample name in any case, or None if it is not one.

    Why: a ``metric_relabel_configs`` that lower-cases names (some fleets do it for every
    exporter) turns ``DCGM_FI_DEV_FB_USED`` into ``dcgm_fi_dev_fb_used``; the analyzer reads
    both. Prefixed or otherwise renamed families are not guessed at.
    """
    upper = name.upper()
    return upper if upper.startswith(DCGM_PREFIX) else None


def keeps(name: str) -> bool:
    """Whether the analyzer needs the samples of ``name``: the ``keep`` of the file reader."""
    return name in MIGSCOPE_METRICS or name.upper() in DCGM_METRICS


def indexes(name: str) -> bool:
    """Whether the analyzer needs the label sets of ``name``: the ``index`` of the reader.

    Every dcgm-exporter family: which of them carry ``GPU_I_ID`` decides the dialect and
    lists the GPU instances (see :func:`presence_family`); error messages name them.
    """
    return dcgm_family(name) is not None


def presence_family(families: Iterable[str]) -> str | None:
    """The family, among dcgm-exporter's families that carry ``GPU_I_ID``, that lists slices.

    Activity and framebuffer families are read anyway, so it is one of the others: the first
    of :data:`DCGM_PRESENCE_PREFERENCE` that is there, else the first by name. One family,
    not all: dcgm-exporter labels every field of a GPU instance alike, so one lists them
    all, and on the Prometheus path each family read costs a scan of its series.

    Args:
        families: dcgm-exporter families (upper case) that carry ``GPU_I_ID``.
    """
    others = sorted(set(families) - DCGM_METRICS)
    for name in DCGM_PRESENCE_PREFERENCE:
        if name in others:
            return name
    return others[0] if others else None


def gi_families(series: SeriesSet) -> frozenset[str]:
    """The dcgm-exporter families (upper case) in which some series has a ``GPU_I_ID``.

    Looks at the kept series and at the label sets of the indexed ones, so that it sees the
    families whose samples were not kept (read with ``index=indexes``).
    """
    found: set[str] = set()
    for name, items in series.series.items():
        family = dcgm_family(name)
        if family is not None and any(s.labels.get("GPU_I_ID") for s in items):
            found.add(family)
    for name, sets in series.label_sets.items():
        family = dcgm_family(name)
        if family is not None and any(labels.get("GPU_I_ID") for labels in sets):
            found.add(family)
    return frozenset(found)


def closest_names(names: Iterable[str], *, limit: int = 5) -> list[str]:
    """The names that look most like what the analyzer reads: a renamed family shows here.

    Why: a scrape relabelled with a prefix (``gpu_DCGM_FI_DEV_FB_USED``) finds nothing, and
    "no MIG series" alone does not say why; naming what *was* found next to what was
    expected does. A name that contains an expected one (any case) comes first, then the
    nearest by :func:`difflib.get_close_matches`.
    """
    expected = sorted(DIALECT_METRICS)
    upper = {e.upper() for e in expected}
    candidates = sorted(set(names))
    containing = [n for n in candidates if any(e in n.upper() for e in upper)]
    near: list[str] = []
    for wanted in expected:
        for hit in difflib.get_close_matches(wanted, candidates, n=limit, cutoff=0.75):
            if hit not in near:
                near.append(hit)
    return list(dict.fromkeys([*containing, *near]))[:limit]


def _listing(names: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    more = f", and {len(names) - limit} more" if len(names) > limit else ""
    return f"{len(names)} famil{'y' if len(names) == 1 else 'ies'}: {shown}{more}"


def explain_no_mig(where: str, names: Collection[str], *, empty: str) -> str:
    """Why no MIG series was found in ``names`` (every sample name there), for one line.

    Shared by the file and the Prometheus paths, so both say the same thing.

    Args:
        where: The file or server.
        names: Every sample (metric) name found.
        empty: What to say when there is no name at all ("no samples").
    """
    first = (DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE)  # what the analyzer reads, first
    dcgm = sorted(
        {n for n in names if dcgm_family(n) is not None},
        key=lambda n: (first.index(n.upper()) if n.upper() in first else len(first), n),
    )
    if dcgm:
        return (
            f"{where}: dcgm-exporter series found ({_listing(dcgm)}), but none has a GPU_I_ID "
            "label: no GPU instance is reported (MIG disabled, or enabled with no GPU "
            "instance created)"
        )
    if any(name.startswith("migscope_") for name in names):
        return (
            f"{where}: migscope series found, but no {MIG_INFO}: "
            "MIG is disabled or the GPUs have no GPU instances"
        )
    found = f"{len(names)} other metric names" if names else empty
    close = closest_names(names)
    hint = (
        f"; closest to the expected names: {', '.join(close)} (renamed by relabelling? "
        "dcgm-exporter's names are read in any letter case, but not with a prefix)"
        if close
        else ""
    )
    return (
        f"{where}: no MIG series found ({found}{hint}; expected {MIG_INFO} from migscope "
        f"or {DCGM_ACTIVITY}/{DCGM_FB_USED} with GPU_I_ID from dcgm-exporter)"
    )


def detect_dialect(series: SeriesSet) -> Dialect:
    """Which exporter's series ``series`` holds.

    Raises:
        NoMigSeriesError: neither dialect's per-slice series is present; the message says
            what was found instead (e.g. dcgm-exporter families without ``GPU_I_ID``, named:
            MIG is off or no GPU instance exists; or the names closest to the expected ones).
    """
    if MIG_INFO in series.names:
        return Dialect.MIGSCOPE
    if gi_families(series):
        return Dialect.DCGM
    raise NoMigSeriesError(explain_no_mig(series.source, series.names, empty="no samples"))


class SliceReader(Iterator[SliceSeries]):
    """A file's slices, built one at a time, and what reading them had to leave out.

    Attributes:
        dialect: The dialect read.
        notes: One sentence per thing left out or guessed (series without a usable id,
            slices seen only through the presence family); put them in the report's notes.
    """

    def __init__(self, dialect: Dialect, items: Iterator[SliceSeries], notes: Sequence[str]):
        self.dialect = dialect
        self.notes: tuple[str, ...] = tuple(notes)
        self._items = items

    def __next__(self) -> SliceSeries:
        return next(self._items)

    def __iter__(self) -> SliceReader:
        return self


def iter_slice_series(
    series: SeriesSet,
    *,
    dialect: Dialect | None = None,
    default_node: str = DEFAULT_NODE,
) -> SliceReader:
    """Group a file's series into one :class:`SliceSeries` per slice, in key order.

    The dialect is detected and the series are grouped here, before the first slice is
    asked for, so that a file of the wrong kind fails at once with :class:`NoMigSeriesError`
    and the notes are known. Slices are then built one at a time: only the current slice's
    arrays are concatenated and converted.

    Args:
        series: What the exposition reader returned (read with ``keep=keeps`` and
            ``index=indexes``; ``keep=DIALECT_METRICS`` also works, without other letter
            cases and without the presence family).
        dialect: Force a dialect instead of detecting it.
        default_node: Node name for series without a node label.

    Raises:
        NoMigSeriesError: no per-slice series of the dialect.
    """
    chosen = detect_dialect(series) if dialect is None else dialect
    if chosen is Dialect.MIGSCOPE:
        items, notes = _migscope_slices(series, default_node)
    else:
        items, notes = _dcgm_slices(series, default_node)
    return SliceReader(chosen, items, notes)


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


SliceId: TypeAlias = tuple[SliceKey, str]
"""A slice as the readers group it: its key and what tells two instances of it apart.

The second part is the MIG UUID (migscope; "" when the series do not carry one) or the
profile (dcgm-exporter). :class:`SliceKey` itself stays what the report shows. The file
reader here and the Prometheus source group the same way.
"""


def migscope_slice_info(
    ident: SliceId, labels: Mapping[str, str], model: GpuModel | None
) -> SliceInfo:
    """What a ``migscope_mig_info`` label set says a slice is (both sources read it so)."""
    return SliceInfo(
        key=ident[0],
        model=model.key if model is not None else None,
        profile=labels.get("profile", ""),
        mig_uuid=ident[1] or labels.get("mig_uuid") or None,
        placement_start=_int(labels.get("placement_start")),
    )


def _first_seen(items: Iterable[Series]) -> float:
    """The first sample time of any of ``items``, ms (inf without samples): orders re-creations."""
    first = math.inf
    for s in items:
        if len(s.samples):
            first = min(first, float(s.samples.timestamps_ms[0]))
    return first


def _families(series: SeriesSet, family: str) -> list[Series]:
    """The kept series of a dcgm-exporter family, whatever the letter case of their names."""
    return [
        s for name, items in series.series.items() if dcgm_family(name) == family for s in items
    ]


# ---------------------------------------------------------------------------------------------
# migscope


def _migscope_key(labels: Mapping[str, str], default_node: str) -> SliceId | None:
    gpu = _int(labels.get("gpu"))
    gi = _int(labels.get("gpu_instance_id"))
    uuid = labels.get("gpu_uuid", "")
    if gpu is None or gi is None or not uuid:
        return None
    key = SliceKey(node_of(labels, default=default_node), gpu, uuid, gi)
    return key, labels.get("mig_uuid", "")


def _by_key(items: Iterable[Series], default_node: str) -> dict[SliceId, list[Series]]:
    grouped: dict[SliceId, list[Series]] = defaultdict(list)
    for s in items:
        key = _migscope_key(s.labels, default_node)
        if key is not None:
            grouped[key].append(s)
    return grouped


def _migscope_slices(
    series: SeriesSet, default_node: str
) -> tuple[Iterator[SliceSeries], list[str]]:
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
    order = sorted(info, key=lambda k: (k[0], _first_seen(info[k]), k[1]))

    def build() -> Iterator[SliceSeries]:
        for ident in order:
            current = _latest(info[ident])
            if current is None:
                continue
            key = ident[0]
            labels = current.labels
            model = models.get((key.node, key.gpu_uuid))
            profile = labels.get("profile", "")
            measured_total = TimeSeries.concat(s.samples for s in total.get(ident, ()))
            memory_total = measured_total.last_value() if measured_total is not None else None
            yield SliceSeries(
                info=migscope_slice_info(ident, labels, model),
                activity=TimeSeries.concat(s.samples for s in activity.get(ident, ())),
                memory_used=TimeSeries.concat(s.samples for s in used.get(ident, ())),
                memory_total_bytes=(
                    memory_total if memory_total is not None else profile_bytes(model, profile)
                ),
                holders=_holders(
                    (owner, s.samples)
                    for s in pods.get(ident, ())
                    if (owner := pod_of(s.labels)) is not None
                ),
                energy=tuple(s.samples for s in energy.get(ident, ())),
            )

    return build(), []


# ---------------------------------------------------------------------------------------------
# dcgm-exporter


def _dcgm_key(labels: Mapping[str, str], default_node: str) -> SliceId | None:
    """A dcgm-exporter series' slice, or None without a numeric ``gpu`` and ``GPU_I_ID``.

    The GPU UUID is ``UUID`` (``uuid`` with dcgm-exporter's ``-o``); a series whose UUID was
    dropped by relabelling keeps an empty one rather than being lost.
    """
    gpu = _int(labels.get("gpu"))
    gi = _int(labels.get("GPU_I_ID"))
    if gpu is None or gi is None:
        return None
    uuid = labels.get("UUID") or labels.get("uuid") or ""
    key = SliceKey(node_of(labels, default=default_node), gpu, uuid, gi)
    return key, labels.get("GPU_I_PROFILE", "")


def _dcgm_slices(series: SeriesSet, default_node: str) -> tuple[Iterator[SliceSeries], list[str]]:
    grouped: dict[str, dict[SliceId, list[Series]]] = {}
    unusable: dict[str, int] = defaultdict(int)
    for name in (DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE):
        by_key: dict[SliceId, list[Series]] = defaultdict(list)
        for s in _families(series, name):
            key = _dcgm_key(s.labels, default_node)
            if key is not None:
                by_key[key].append(s)
            elif s.labels.get("GPU_I_ID"):
                unusable[name] += 1
        grouped[name] = by_key
    measured = set(grouped[DCGM_ACTIVITY]) | set(grouped[DCGM_FB_USED]) | set(grouped[DCGM_FB_FREE])

    presence = presence_family(gi_families(series))
    listed: dict[SliceId, Mapping[str, str]] = {}
    if presence is not None:
        label_sets = [
            labels
            for name, sets in series.label_sets.items()
            if dcgm_family(name) == presence
            for labels in sets
        ] + [s.labels for s in _families(series, presence)]
        for labels in sorted(label_sets, key=lambda ls: sorted(ls.items())):
            key = _dcgm_key(labels, default_node)
            if key is None:
                if labels.get("GPU_I_ID"):
                    unusable[presence] += 1
            elif key not in measured:
                listed.setdefault(key, labels)

    def parts(key: SliceId) -> list[Series]:
        return [
            s
            for name in (DCGM_ACTIVITY, DCGM_FB_USED, DCGM_FB_FREE)
            for s in grouped[name].get(key, [])
        ]

    order = sorted(measured | set(listed), key=lambda k: (k[0], _first_seen(parts(k)), k[1]))
    notes: list[str] = []
    if unusable:
        counts = ", ".join(f"{n} in {name}" for name, n in sorted(unusable.items()))
        notes.append(
            f"{series.source}: dcgm-exporter series with a GPU_I_ID but no numeric gpu or "
            f"GPU_I_ID label were left out ({counts})"
        )
    if listed:
        notes.append(
            f"{series.source}: {len(listed)} GPU instance(s) appear only in {presence}, with "
            f"no {DCGM_ACTIVITY} or framebuffer series: reported unknown, their GPUs kept "
            "as they are"
        )
    if not order:
        raise NoMigSeriesError(
            f"{series.source}: dcgm-exporter series carry GPU_I_ID, but none has a numeric "
            "gpu and GPU_I_ID label to tell the slice"
        )

    def build() -> Iterator[SliceSeries]:
        for key in order:
            activity_parts = grouped[DCGM_ACTIVITY].get(key, [])
            used_parts = grouped[DCGM_FB_USED].get(key, [])
            free_parts = grouped[DCGM_FB_FREE].get(key, [])
            current = _latest(activity_parts + used_parts + free_parts)
            labels = current.labels if current is not None else listed.get(key)
            if labels is None:
                continue
            model = model_for_name(labels.get("modelName", ""))
            profile = key[1]
            used_mib = TimeSeries.concat(s.samples for s in used_parts)
            free_mib = TimeSeries.concat(s.samples for s in free_parts)
            yield SliceSeries(
                info=SliceInfo(
                    key=key[0],
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

    return build(), notes


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
