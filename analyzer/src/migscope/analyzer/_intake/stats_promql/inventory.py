"""Which slices a chunk of nodes holds, what each is, and in which order they are reported.

The statistics are read per slice *key*, but which slices exist,
their profile and model and memory size, come from different series in each dialect
(``migscope_mig_info`` and ``migscope_gpu_info``; dcgm-exporter's labels on its activity,
framebuffer or presence series), and this is where the two are told apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from migscope.analyzer._intake.dialect import (
    DEFAULT_NODE,
    GPU_INFO,
    MIG_INFO,
    MIG_MEMORY_TOTAL,
    SliceId,
    catalogue_model,
    dcgm_field,
    fields_of,
    gpu_uuid_of,
    migscope_slice_info,
    profile_bytes,
)
from migscope.analyzer._intake.prometheus import Sample
from migscope.analyzer._intake.stats_local.quality import Kind, usable_total
from migscope.analyzer._intake.stats_promql.queries import NON_EMPTY, VALID, Queries, Values
from migscope.analyzer._model import SliceInfo
from migscope.core import GpuModel, model_for_name

Inventory = dict[SliceId, tuple[SliceInfo, float | None]]
"""Per slice: what it is, and its memory total in bytes (None when unknown)."""


def slice_inventory(
    q: Queries, nodes: Sequence[str], *, totals: Mapping[SliceId, float] | None = None
) -> Inventory:
    """The slices of ``nodes`` in the window, by the run's dialect.

    Args:
        q: The chunk's queries.
        nodes: The chunk.
        totals: dcgm-exporter's measured memory totals, when the caller has them (the fast
            path reads them per series, :mod:`.fast`); queried with :func:`dcgm_totals`
            otherwise. Unused for migscope's series.
    """
    return migscope_inventory(q, nodes) if q.migscope else dcgm_inventory(q, nodes, totals)


def migscope_inventory(q: Queries, nodes: Sequence[str]) -> Inventory:
    """migscope: the slices that have ``migscope_mig_info`` in the window, with sizes."""
    models: dict[tuple[str, str], GpuModel | None] = {}
    for sample in q.ask(q.over("last_over_time", GPU_INFO, nodes, q.window)):
        labels = sample.labels
        node = labels.get(q.run.node_label, "") if q.run.node_label else ""
        if q.run.moves is not None:
            node = q.run.moves.node(gpu_uuid_of(labels), node)
        models[(node or DEFAULT_NODE, gpu_uuid_of(labels))] = catalogue_model(
            labels.get("model"), labels.get("name")
        )
    totals = q.values(f"max {q.by} ({q.over('last_over_time', MIG_MEMORY_TOTAL, nodes, q.window)})")
    out: Inventory = {}
    infos = q.ask(q.over("last_over_time", MIG_INFO, nodes, q.window))
    for sample in sorted(infos, key=lambda s: sorted(s.labels.items())):
        ident = q.key(sample.labels)
        if ident is None:
            continue
        key = ident[0]
        model = models.get((key.node, key.gpu_uuid))
        info = migscope_slice_info(ident, sample.labels, model)
        out[ident] = (info, _total(q, ident, totals.get(ident), model, info.profile))
    return out


def _total(
    q: Queries, ident: SliceId, measured: float | None, model: GpuModel | None, profile: str
) -> float | None:
    """The measured total if it is a size (counted when it is not), else the catalogue's.

    The same rule as the file readers'
    (:class:`~migscope.analyzer._intake.dialect.checks.SliceChecks`).
    """
    if measured is None:
        return profile_bytes(model, profile)
    gpu = float(model.memory_total_bytes) if model is not None else None
    if usable_total(measured, gpu_bytes=gpu):
        return measured
    q.ledger.quality.add(Kind.TOTAL_IGNORED, ident)
    return profile_bytes(model, profile)


def dcgm_inventory(
    q: Queries, nodes: Sequence[str], totals: Mapping[SliceId, float] | None = None
) -> Inventory:
    """dcgm-exporter: the slices with activity, framebuffer or presence series in the window.

    Memory total: see :func:`dcgm_totals` (or ``totals``, when given), else the catalogue's
    profile size. Slices seen only in the presence family have no samples: they come out
    ``unknown``.
    """
    if totals is None:
        totals = dcgm_totals(q, nodes)
    labels_by = dict.fromkeys((*q.key_labels, "modelName"))
    by = "by (" + ", ".join(labels_by) + ")"
    measured = q.last([*q.activity, *q.memory, *q.free, *q.capacity], nodes)
    found = sorted(q.ask(f"count {by} ({measured})"), key=lambda s: sorted(s.labels.items()))
    listed: list[Sample] = []
    if q.presence:
        present = q.last(q.presence, nodes, GPU_I_ID=NON_EMPTY)
        listed = sorted(q.ask(f"count {by} ({present})"), key=lambda s: sorted(s.labels.items()))
    out: Inventory = {}
    only_listed = 0
    for presence_only, sample in [*((False, s) for s in found), *((True, s) for s in listed)]:
        ident = q.key(sample.labels)
        if ident is None or ident in out:
            continue
        only_listed += presence_only
        model = model_for_name(sample.labels.get("modelName", ""))
        profile = ident[1]
        out[ident] = (
            SliceInfo(
                key=ident[0],
                model=model.key if model is not None else None,
                profile=profile,
            ),
            _total(q, ident, totals.get(ident), model, profile),
        )
    if q.only is None:  # a restricted re-read: the chunk's own counted them
        q.ledger.presence_only += only_listed
    return out


def dcgm_totals(q: Queries, nodes: Sequence[str]) -> Values:
    """dcgm-exporter's measured memory total per slice, in bytes.

    ``FB_USED + FB_FREE`` in the last step interval that has both (each quantity's spellings
    and generations merged first, ``max without ()``, so that two names of one quantity do
    not make the addition many-to-many), else ``FB_CAPACITY_BYTES`` in the last interval that
    has it (dcgm-exporter 4.9+): the order the file reader takes them in.
    """

    def per_interval(metrics: Sequence[str], valid: str = "") -> str:
        parts = " or ".join(
            f"({q.in_base_units(q.over('last_over_time', m, nodes, q.interval), m)}"
            f"{' ' + valid if valid else ''})"
            for m in metrics
        )
        return f"max without () ({parts})"

    # The last step interval in which both were seen, as the embedded source takes the
    # last time both were sampled: a slice whose pod (and so series) changed keeps the
    # newest total, not the largest of its series'.
    # FB_USED that the rules drop (negative, infinite) makes no total, as in the file reader.
    # One sum per generation of names, newer first (see Queries.per_interval): a 4.9
    # series does not match a 4.8 one label for label, so ``or`` prefers per slice.
    sums = [
        f"(max {q.by} ({per_interval(used, VALID)} + {per_interval(free)}) >= 0)"
        for used, free in _pairs(q.generations(q.memory), q.generations(q.free))
    ]
    both = sums[0] if len(sums) == 1 else f"({' or '.join(sums)})"
    total = f"last_over_time({both}[{q.value_range}:{q.step}])"
    if q.capacity:
        capacity = f"(max {q.by} ({per_interval(q.capacity, '>= 0')}))"
        total = f"{total} or last_over_time({capacity}[{q.value_range}:{q.step}])"
    return q.values(total)


def _pairs(
    used: Sequence[Sequence[str]], free: Sequence[Sequence[str]]
) -> list[tuple[Sequence[str], Sequence[str]]]:
    """Each generation's used and free names, paired by generation (newer first).

    A generation that has one but not the other on the server gives no sum; with no pair at
    all (neither on the server), the first of each, which match nothing.
    """

    def generation(names: Sequence[str]) -> int:
        field = dcgm_field(names[0])
        return fields_of(field.quantity).index(field) if field is not None else -1

    frees = {generation(names): names for names in free}
    pairs = [(names, frees[generation(names)]) for names in used if generation(names) in frees]
    return pairs or [(used[0], free[0])]


def slice_order(q: Queries, infos: Mapping[SliceId, object], nodes: Sequence[str]) -> list[SliceId]:
    """The slices sorted by key, re-created instances of one key oldest first.

    Why: the embedded sources yield them so (by first sample). Only when a key has
    several instances in the chunk does it cost a query: the first step each was seen at
    (:meth:`Queries.seen_at`).
    """
    keys = [ident[0] for ident in infos]
    if len(set(keys)) == len(keys):
        return sorted(infos)
    metrics = [MIG_INFO] if q.migscope else q.activity + q.memory + q.free + q.capacity
    first = q.values(q.seen_at("min", metrics, nodes))
    return sorted(infos, key=lambda k: (k[0], first.get(k, math.inf), k[1]))
