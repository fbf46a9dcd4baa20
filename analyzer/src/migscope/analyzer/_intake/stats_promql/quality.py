"""The data-quality rules on the server's side: which slices hold bad numbers, and how many.

The statistics' queries already apply the rules of
:mod:`migscope.analyzer._intake.stats_local.quality` (``>= 0 < Inf`` drops what is not a usable
value,
``clamp_max`` holds activity at 1, memory statistics are capped after), so that the numbers
equal the file path's; what they cannot say is *that* something was dropped or clamped. This
module finds it out at a small cost: one query per chunk over raw ranges (``min_over_time``
and ``max_over_time``, exact over every sample), and only when it finds something, one more
that counts the step intervals concerned, for the report's notes (one per kind, summed over
the chunks in :attr:`RemoteSliceStats.quality`). The first also decides the energy rule: a
counter with a negative or infinite sample in the window has no increase.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Mapping, Sequence

from migscope.analyzer._intake.dialect import SliceId, unit_scale
from migscope.analyzer._intake.stats_local.quality import ACTIVITY_CEILING, Kind
from migscope.analyzer._intake.stats_promql.queries import Queries

QUALITY_LABEL = "migscope_quality"
"""The label that tells the parts of a quality query apart (``label_replace``)."""

ACTIVITY, MEMORY, ENERGY = "activity", "memory", "energy"


def _tagged(expr: str, tag: str) -> str:
    return f'label_replace({expr}, "{QUALITY_LABEL}", "{tag}", "", "")'


def suspects(
    q: Queries, nodes: Sequence[str], energy: Sequence[str], *, measured: bool = True
) -> dict[str, set[SliceId]]:
    """Per family (``activity``, ``memory``, ``energy``), the slices with a bad sample.

    Bad: below zero or infinite, and for activity above 1. Exact over every raw sample in
    the window (the ranges the statistics and ``increase()`` read), one query.

    Args:
        q: The run's queries.
        nodes: The chunk.
        energy: The energy counters' names (none for dcgm-exporter).
        measured: Check activity and memory too (the fast path reads their extremes per
            series itself, :func:`bad_values`).
    """
    parts: list[str] = []

    def check(tag: str, metrics: Sequence[str], high: str) -> None:
        # One aggregation per spelling: ``or`` inside one would drop a spelling's series.
        for m in metrics:
            low = q.over("min_over_time", m, nodes, q.window)
            top = q.over("max_over_time", m, nodes, q.window)
            parts.append(_tagged(f"(min {q.by} ({low}) < 0)", tag))
            parts.append(_tagged(f"(max {q.by} ({top}) {high})", tag))

    if measured:
        check(ACTIVITY, q.activity, f"> {ACTIVITY_CEILING:g}")
        check(MEMORY, q.memory, "== Inf")
    check(ENERGY, energy, "== Inf")
    found: dict[str, set[SliceId]] = {}
    if not parts:
        return found
    for sample in q.ask(" or ".join(parts)):
        key = q.key(sample.labels)
        if key is not None:
            found.setdefault(sample.labels.get(QUALITY_LABEL, ""), set()).add(key)
    return found


def bad_values(family: str, low: float | None, high: float | None) -> bool:
    """Whether a series' extremes break :func:`suspects`'s rule for ``family``.

    ``low`` and ``high`` are its ``min_over_time`` and ``max_over_time`` (None: no sample).
    """
    if low is not None and low < 0:
        return True
    if high is None:
        return False
    return high > ACTIVITY_CEILING if family == ACTIVITY else high == math.inf


def count_bad_samples(
    q: Queries,
    nodes: Sequence[str],
    found: Mapping[str, set[SliceId]],
    above: Mapping[SliceId, float],
    wanted: Container[SliceId] | None = None,
) -> None:
    """Count, per slice and kind, the step intervals whose last sample broke a rule.

    One query, only when :func:`suspects` found something or a slice's memory peak is above
    its total; the counts go to ``q.ledger.quality``. Energy is counted in slices only (a
    counter's bad samples make its whole window's increase unknown).

    Args:
        q: The run's queries.
        nodes: The chunk.
        found: What :func:`suspects` returned.
        above: Slices whose memory peak exceeds their total, with the total (bytes); each
            memory series is compared in its own unit (:func:`unit_scale`).
        wanted: Count only these slices (a restricted ``q`` may read a few more).
    """
    for bad in found.get(ENERGY, ()):
        if wanted is None or bad in wanted:
            q.ledger.quality.add(Kind.ENERGY_UNKNOWN, bad)
    parts: list[str] = []

    def counted(tag: str, metrics: Sequence[str], condition: str | Callable[[str], str]) -> None:
        inner = " or ".join(
            f"({q.over('last_over_time', m, nodes, q.interval)} {c})"
            for m in metrics
            for c in (condition(m) if callable(condition) else condition).split(" | ")
        )
        per_interval = f"(max {q.by} ({inner}))"
        parts.append(_tagged(f"count_over_time({per_interval}[{q.value_range}:{q.step}])", tag))

    if found.get(ACTIVITY):
        counted(Kind.ACTIVITY_DROPPED.value, q.activity, "< 0 | == Inf")
        counted(Kind.ACTIVITY_CLAMPED.value, q.activity, f"> {ACTIVITY_CEILING:g} < Inf")
    if found.get(MEMORY):
        counted(Kind.MEMORY_DROPPED.value, q.memory, "< 0 | == Inf")
    # Memory above each distinct total (a few profile sizes), one part per total.
    totals = sorted(set(above.values()))
    for i, total in enumerate(totals):

        def beyond(metric: str, total: float = total) -> str:
            return f">= 0 < Inf > {total / unit_scale(metric)!r}"

        counted(f"{Kind.MEMORY_ABOVE_TOTAL.value}:{i}", q.memory, beyond)
    if not parts:
        return
    for sample in q.ask(" or ".join(parts)):
        key = q.key(sample.labels)
        tag = sample.labels.get(QUALITY_LABEL, "")
        if key is None or not sample.value or (wanted is not None and key not in wanted):
            continue
        kind, _, index = tag.partition(":")
        if index and above.get(key) != totals[int(index)]:
            continue  # counted against another slice's total
        q.ledger.quality.add(Kind(kind), key, int(sample.value))
