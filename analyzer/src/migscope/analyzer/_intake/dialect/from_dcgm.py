"""Read dcgm-exporter's series into one :class:`SliceSeries` per slice.

dcgm-exporter has no slice series of its own; a slice is node, GPU
UUID, ``GPU_I_ID`` and ``GPU_I_PROFILE`` on its per-GI families (there is no MIG UUID outside
DRA mode), each quantity comes under 4.8's name or 4.9's (framebuffer in MiB or in bytes,
:data:`~migscope.analyzer._intake.dialect.names.DCGM_FIELDS`), memory total is ``FB_USED + FB_FREE``
(else ``FB_CAPACITY_BYTES``), and slices that only a *presence* family lists are kept, with no
samples. Names are matched in any letter case.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from migscope.analyzer._intake.dialect.checks import SliceChecks
from migscope.analyzer._intake.dialect.detect import NoMigSeriesError, gi_families
from migscope.analyzer._intake.dialect.grouping import (
    NodeMoves,
    first_seen,
    holders,
    latest,
    node_moves,
)
from migscope.analyzer._intake.dialect.identity import SliceId, holder_of, node_of, parse_int
from migscope.analyzer._intake.dialect.names import (
    DCGM_ACTIVITY,
    DCGM_FB_CAPACITY,
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DCGM_QUANTITIES,
    dcgm_family,
    fields_of,
    presence_family,
    quantity_names,
    unit_scale,
)
from migscope.analyzer._intake.openmetrics import Series, SeriesSet
from migscope.analyzer._intake.stats_local import SliceSeries, TimeSeries
from migscope.analyzer._intake.stats_local.quality import Kind
from migscope.analyzer._model import SliceInfo, SliceKey
from migscope.core import model_for_name


def _families(series: SeriesSet, family: str) -> list[Series]:
    """The kept series of a dcgm-exporter family, whatever the letter case of their names."""
    return [
        s for name, items in series.series.items() if dcgm_family(name) == family for s in items
    ]


def _quantity(series: SeriesSet, quantity: str) -> list[Series]:
    """The kept series of every name ``quantity`` is written under, older generation first.

    The order matters where two generations hold the same slice at the same time: the
    concatenation keeps the later sample of a timestamp (:meth:`TimeSeries.of_ms`), so the
    newer field is read (see :data:`~migscope.analyzer._intake.dialect.names.DCGM_FIELDS`).
    """
    return [s for field in fields_of(quantity) for s in _families(series, field.name)]


def _base(s: Series) -> TimeSeries:
    """A series' samples in the analyzer's units (bytes, ratio): MiB fields times 2^20."""
    scale = unit_scale(s.name)
    if scale == 1.0:
        return s.samples
    return TimeSeries.of_ms(s.samples.timestamps_ms, s.samples.values * scale)


def _joined(parts: Sequence[Series]) -> TimeSeries | None:
    """One slice's series of one quantity, in the analyzer's units, as one series."""
    return TimeSeries.concat(_base(s) for s in parts)


def _dcgm_key(
    labels: Mapping[str, str], default_node: str, moves: NodeMoves | None = None
) -> SliceId | None:
    """A dcgm-exporter series' slice, or None without a numeric ``gpu`` and ``GPU_I_ID``.

    The GPU UUID is ``UUID`` (``uuid`` with dcgm-exporter's ``-o``); a series whose UUID was
    dropped by relabelling keeps an empty one rather than being lost.
    """
    gpu = parse_int(labels.get("gpu"))
    gi = parse_int(labels.get("GPU_I_ID"))
    if gpu is None or gi is None:
        return None
    uuid = labels.get("UUID") or labels.get("uuid") or ""
    node = node_of(labels, default=default_node)
    if moves is not None:
        node = moves.node(uuid, node)
    return SliceKey(node, gpu, uuid, gi), labels.get("GPU_I_PROFILE", "")


def dcgm_moves(series: SeriesSet, default_node: str) -> NodeMoves | None:
    """GPUs whose per-GI series carry several node names (:class:`NodeMoves`).

    Read from every quantity's series (newest sample) and the presence family's label sets
    (no time), the series the server reads for it.
    """
    presence = presence_family(gi_families(series))
    rows: list[tuple[str, str, object, float]] = []

    def add(labels: Mapping[str, str], t: float) -> None:
        key = _dcgm_key(labels, default_node)
        if key is not None:
            ident = (key[0].gpu, key[0].gpu_instance_id, key[1])
            rows.append((key[0].node, key[0].gpu_uuid, ident, t))

    for quantity in DCGM_QUANTITIES:
        for s in _quantity(series, quantity):
            add(s.labels, float(s.samples.timestamps_ms[-1]) if len(s.samples) else -math.inf)
    if presence is not None:
        for name, sets in series.label_sets.items():
            if dcgm_family(name) == presence:
                for labels in sets:
                    add(labels, -math.inf)
        for s in _families(series, presence):
            add(s.labels, float(s.samples.timestamps_ms[-1]) if len(s.samples) else -math.inf)
    return node_moves(rows)


def dcgm_slices(series: SeriesSet, default_node: str) -> tuple[Iterator[SliceSeries], list[str]]:
    """The slices of dcgm-exporter's series, oldest instance of a key first, and notes.

    The slices are built lazily; grouping, the checks that may fail and the data-quality
    checks (:class:`~migscope.analyzer._intake.dialect.checks.SliceChecks`) happen at once.

    Args:
        series: The series read (activity and framebuffer families kept, the others
            indexed, see :func:`~migscope.analyzer._intake.dialect.names.indexes`).
        default_node: Node name for series without a node label.

    Returns:
        The slices, and one note per thing left out (series without a usable id), guessed
        (slices seen only in the presence family) or held to its range (one per kind).

    Raises:
        NoMigSeriesError: series carry ``GPU_I_ID`` but none names a usable slice.
    """
    presence = presence_family(gi_families(series))
    moves = dcgm_moves(series, default_node)
    grouped: dict[str, dict[SliceId, list[Series]]] = {}
    unusable: dict[str, int] = defaultdict(int)
    for quantity in DCGM_QUANTITIES:
        by_key: dict[SliceId, list[Series]] = defaultdict(list)
        for s in _quantity(series, quantity):
            key = _dcgm_key(s.labels, default_node, moves)
            if key is not None:
                by_key[key].append(s)
            elif s.labels.get("GPU_I_ID"):
                unusable[dcgm_family(s.name) or s.name] += 1
        grouped[quantity] = by_key
    measured = {key for by_key in grouped.values() for key in by_key}

    listed: dict[SliceId, Mapping[str, str]] = {}
    if presence is not None:
        label_sets = [
            labels
            for name, sets in series.label_sets.items()
            if dcgm_family(name) == presence
            for labels in sets
        ] + [s.labels for s in _families(series, presence)]
        for labels in sorted(label_sets, key=lambda ls: sorted(ls.items())):
            key = _dcgm_key(labels, default_node, moves)
            if key is None:
                if labels.get("GPU_I_ID"):
                    unusable[presence] += 1
            elif key not in measured:
                listed.setdefault(key, labels)

    def parts(key: SliceId) -> list[Series]:
        return [s for by_key in grouped.values() for s in by_key.get(key, [])]

    order = sorted(measured | set(listed), key=lambda k: (k[0], first_seen(parts(k)), k[1]))
    notes: list[str] = [moves.note(series.source)] if moves is not None else []
    if unusable:
        counts = ", ".join(f"{n} in {name}" for name, n in sorted(unusable.items()))
        notes.append(
            f"{series.source}: dcgm-exporter series with a GPU_I_ID but no numeric gpu or "
            f"GPU_I_ID label were left out ({counts})"
        )
    activity_name = quantity_names(DCGM_ACTIVITY, series.names)
    if listed:
        notes.append(
            f"{series.source}: {len(listed)} GPU instance(s) appear only in {presence}, with "
            f"no {activity_name} or framebuffer series: reported unknown, their GPUs kept "
            "as they are"
        )
    if not order:
        raise NoMigSeriesError(
            f"{series.source}: dcgm-exporter series carry GPU_I_ID, but none has a numeric "
            "gpu and GPU_I_ID label to tell the slice"
        )

    used_name = quantity_names(DCGM_FB_USED, series.names)
    checks = SliceChecks(
        series.source,
        {
            Kind.ACTIVITY_DROPPED: activity_name,
            Kind.ACTIVITY_CLAMPED: activity_name,
            Kind.MEMORY_DROPPED: used_name,
            Kind.MEMORY_ABOVE_TOTAL: used_name,
            Kind.TOTAL_IGNORED: _total_name(series.names),
        },
    )
    # The checks run now, over every slice, so that their notes come with the slices.
    totals = _checked(grouped, order, listed, checks)
    notes.extend(checks.notes())

    def build() -> Iterator[SliceSeries]:
        for key in order:
            activity_parts = grouped[DCGM_ACTIVITY].get(key, [])
            used_parts = grouped[DCGM_FB_USED].get(key, [])
            current = _labels(grouped, key, listed)
            if current is None:
                continue
            model = model_for_name(current.get("modelName", ""))
            yield SliceSeries(
                info=SliceInfo(
                    key=key[0],
                    model=model.key if model is not None else None,
                    profile=key[1],
                    mig_uuid=current.get("dra_mig_device_uuid") or None,
                    placement_start=None,
                ),
                activity=_joined(activity_parts),
                memory_used=_joined(used_parts),
                memory_total_bytes=totals[key],
                holders=holders(
                    (owner, s.samples)
                    for s in activity_parts + used_parts
                    if (owner := holder_of(s.labels)) is not None
                ),
                energy=(),
            )

    return build(), notes


def _checked(
    grouped: Mapping[str, dict[SliceId, list[Series]]],
    order: Sequence[SliceId],
    listed: Mapping[SliceId, Mapping[str, str]],
    checks: SliceChecks,
) -> dict[SliceId, float | None]:
    """Clean each slice's activity and memory use in ``grouped``; return its memory total."""
    activity, used = grouped[DCGM_ACTIVITY], grouped[DCGM_FB_USED]
    totals: dict[SliceId, float | None] = {}
    for key in order:
        labels = _labels(grouped, key, listed)
        if labels is None:
            continue
        if key in activity:
            activity[key] = checks.activity(key, activity[key])
        if key in used:
            used[key] = checks.memory(key, used[key])
        model = model_for_name(labels.get("modelName", ""))
        used_bytes = _joined(used.get(key, []))
        measured = _dcgm_total(
            used_bytes,
            _joined(grouped[DCGM_FB_FREE].get(key, [])),
            _joined(grouped[DCGM_FB_CAPACITY].get(key, [])),
        )
        totals[key] = checks.total(key, measured, model, key[1])
        if used_bytes is not None:  # joined: a sample two generations hold counts once
            checks.above_total(key, [Series(DCGM_FB_USED, {}, used_bytes)], totals[key])
    return totals


def _total_name(names: Iterable[str]) -> str:
    """How a note names the memory total the series give (the fields present)."""
    both = f"{quantity_names(DCGM_FB_USED, names)} + {quantity_names(DCGM_FB_FREE, names)}"
    if dcgm_family(DCGM_FB_CAPACITY) in {dcgm_family(n) for n in names}:
        return f"{both} (else {DCGM_FB_CAPACITY})"
    return both


def _labels(
    grouped: Mapping[str, Mapping[SliceId, list[Series]]],
    key: SliceId,
    listed: Mapping[SliceId, Mapping[str, str]],
) -> Mapping[str, str] | None:
    """The slice's current labels: its newest measured series', else the presence family's."""
    current = latest(s for by_key in grouped.values() for s in by_key.get(key, []))
    return current.labels if current is not None else listed.get(key)


def _dcgm_total(
    used: TimeSeries | None, free: TimeSeries | None, capacity: TimeSeries | None
) -> float | None:
    """Slice memory, bytes: ``FB_USED + FB_FREE`` at the last time both were seen, or None.

    The last sum that is not NaN or negative, as the server's ``>= 0`` filter keeps it; with
    no such sum, the last such ``FB_CAPACITY_BYTES`` (dcgm-exporter 4.9+). Used plus free
    first, because that is what a 4.8 scrape gives, so that a slice's total does not change
    with the exporter's release. :meth:`SliceChecks.total` then decides whether it is a size.
    """
    if used is not None and free is not None:
        both, at_used, at_free = np.intersect1d(
            used.timestamps_ms, free.timestamps_ms, return_indices=True
        )
        sums = used.values[at_used] + free.values[at_free]
        with np.errstate(invalid="ignore"):
            valid = sums >= 0
        if both.size and bool(valid.any()):
            return float(sums[valid][-1])
    if capacity is not None:
        with np.errstate(invalid="ignore"):
            valid = capacity.values >= 0
        if bool(valid.any()):
            return float(capacity.values[valid][-1])
    return None
