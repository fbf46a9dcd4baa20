"""Read migscope's own series into one :class:`SliceSeries` per slice.

migscope names a slice in ``migscope_mig_info`` and labels every
per-slice series with ``core._metrics.MIG_LABELS``, so a slice is node, GPU UUID, GPU-instance
id and ``mig_uuid`` (new for every instance MIG Manager creates), and its model, pods and
energy come from series dcgm-exporter does not have. Its activity is read from the
active-seconds counter where the slice has one, and from the ratio gauge where it has not
(:mod:`migscope.analyzer._intake.stats_local.counters` says why).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

from migscope.analyzer._intake.dialect.checks import SliceChecks
from migscope.analyzer._intake.dialect.grouping import (
    NodeMoves,
    first_seen,
    holders,
    latest,
    series_moves,
)
from migscope.analyzer._intake.dialect.identity import (
    SliceId,
    catalogue_model,
    gpu_uuid_of,
    holder_of,
    migscope_slice_info,
    node_of,
    parse_int,
)
from migscope.analyzer._intake.dialect.names import (
    GPU_INFO,
    MIG_ACTIVE_SECONDS,
    MIG_ACTIVITY,
    MIG_ENERGY,
    MIG_INFO,
    MIG_MEMORY_TOTAL,
    MIG_MEMORY_USED,
    MIG_POD_INFO,
)
from migscope.analyzer._intake.openmetrics import Series, SeriesSet
from migscope.analyzer._intake.stats_local import (
    SliceSeries,
    TimeSeries,
    counter_activity,
    prefer_counter,
)
from migscope.analyzer._intake.stats_local.quality import Kind
from migscope.analyzer._model import SliceKey
from migscope.core import GpuModel


def _migscope_key(
    labels: Mapping[str, str], default_node: str, moves: NodeMoves | None = None
) -> SliceId | None:
    gpu = parse_int(labels.get("gpu"))
    gi = parse_int(labels.get("gpu_instance_id"))
    uuid = labels.get("gpu_uuid", "")
    if gpu is None or gi is None or not uuid:
        return None
    node = node_of(labels, default=default_node)
    if moves is not None:
        node = moves.node(uuid, node)
    return SliceKey(node, gpu, uuid, gi), labels.get("mig_uuid", "")


def _by_key(
    items: Iterable[Series], default_node: str, moves: NodeMoves | None
) -> dict[SliceId, list[Series]]:
    grouped: dict[SliceId, list[Series]] = defaultdict(list)
    for s in items:
        key = _migscope_key(s.labels, default_node, moves)
        if key is not None:
            grouped[key].append(s)
    return grouped


def migscope_moves(series: SeriesSet, default_node: str) -> NodeMoves | None:
    """GPUs whose ``migscope_mig_info`` series carry several node names (:class:`NodeMoves`).

    The server reads the same series for it.
    """
    rows = []
    for s in series.get(MIG_INFO):
        key = _migscope_key(s.labels, default_node)
        if key is not None:
            ident = (key[0].gpu, key[0].gpu_instance_id, key[1])
            rows.append((key[0].node, key[0].gpu_uuid, ident, s))
    return series_moves(rows)


def migscope_slices(
    series: SeriesSet, default_node: str
) -> tuple[Iterator[SliceSeries], list[str]]:
    """The slices of migscope's series, oldest instance of a key first, and notes.

    The slices are built lazily; grouping and the data-quality checks
    (:class:`~migscope.analyzer._intake.dialect.checks.SliceChecks`) happen at once, and the notes
    are theirs: one per kind of out-of-range number found.

    A slice's activity is its active-seconds counter's
    (:func:`~migscope.analyzer._intake.stats_local.counter_activity`) where that has a value, else
    its ratio
    gauge's (:func:`~migscope.analyzer._intake.stats_local.prefer_counter`): the gauge aliases at
    long scrape
    intervals, the counter is exact at any. The data-quality checks are the gauge's (the
    counter's ratios are clamped to 0..1 silently, as the server's queries clamp them).

    Args:
        series: The series read (``migscope_mig_info`` and the per-slice families).
        default_node: Node name for series without a node label.
    """
    moves = migscope_moves(series, default_node)
    info = _by_key(series.get(MIG_INFO), default_node, moves)
    activity = _by_key(series.get(MIG_ACTIVITY), default_node, moves)
    counters = _by_key(series.get(MIG_ACTIVE_SECONDS), default_node, moves)
    used = _by_key(series.get(MIG_MEMORY_USED), default_node, moves)
    total = _by_key(series.get(MIG_MEMORY_TOTAL), default_node, moves)
    pods = _by_key(series.get(MIG_POD_INFO), default_node, moves)
    energy = _by_key(series.get(MIG_ENERGY), default_node, moves)
    models: dict[tuple[str, str], GpuModel | None] = {}
    for gpu in series.get(GPU_INFO):
        node = node_of(gpu.labels, default=default_node)
        if moves is not None:
            node = moves.node(gpu_uuid_of(gpu.labels), node)
        models[(node, gpu_uuid_of(gpu.labels))] = catalogue_model(
            gpu.labels.get("model"), gpu.labels.get("name")
        )
    order = sorted(info, key=lambda k: (k[0], first_seen(info[k]), k[1]))
    checks = SliceChecks(
        series.source,
        {
            Kind.ACTIVITY_DROPPED: MIG_ACTIVITY,
            Kind.ACTIVITY_CLAMPED: MIG_ACTIVITY,
            Kind.MEMORY_DROPPED: MIG_MEMORY_USED,
            Kind.MEMORY_ABOVE_TOTAL: MIG_MEMORY_USED,
            Kind.TOTAL_IGNORED: MIG_MEMORY_TOTAL,
            Kind.ENERGY_UNKNOWN: MIG_ENERGY,
        },
    )
    # The checks run now, over every slice, so that their notes come with the slices.
    totals: dict[SliceId, float | None] = {}
    present = []  # (slice, its newest info series, its model): what build() yields, in order
    for ident in order:
        current = latest(info[ident])
        if current is None:
            continue
        key = ident[0]
        model = models.get((key.node, key.gpu_uuid))
        present.append((ident, current, model))
        measured = TimeSeries.concat(s.samples for s in total.get(ident, ()))
        totals[ident] = checks.total(
            ident,
            measured.last_value() if measured is not None else None,
            model,
            current.labels.get("profile", ""),
        )
        activity[ident] = checks.activity(ident, activity.get(ident, ()))
        used[ident] = checks.memory(ident, used.get(ident, ()))
        checks.above_total(ident, used[ident], totals[ident])
        checks.energy(ident, energy.get(ident, ()))

    notes = checks.notes()
    if moves is not None:
        notes.insert(0, moves.note(series.source))

    def build() -> Iterator[SliceSeries]:
        for ident, current, model in present:
            yield SliceSeries(
                info=migscope_slice_info(ident, current.labels, model),
                activity=prefer_counter(
                    TimeSeries.concat(counter_activity(s.samples) for s in counters.get(ident, ())),
                    TimeSeries.concat(s.samples for s in activity.get(ident, ())),
                ),
                memory_used=TimeSeries.concat(s.samples for s in used.get(ident, ())),
                memory_total_bytes=totals[ident],
                holders=holders(
                    (owner, s.samples)
                    for s in pods.get(ident, ())
                    if (owner := holder_of(s.labels)) is not None
                ),
                energy=tuple(s.samples for s in energy.get(ident, ())),
            )

    return build(), notes
