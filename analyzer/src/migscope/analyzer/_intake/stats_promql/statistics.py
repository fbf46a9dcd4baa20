"""Every statistic of a chunk's slices: one PromQL aggregation per field, evaluated by the server.

This is where :class:`~migscope.analyzer._model.SliceStats` is put
together from the answers, field by field, with the definitions of ``stats_local`` (see the
package docstring for how each query matches them).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence

from migscope.analyzer._intake.dialect import (
    HOLDER_LABELS,
    MIG_ENERGY,
    MIG_POD_INFO,
    SliceId,
    holder_of,
)
from migscope.analyzer._intake.stats_local.quality import ACTIVITY_CEILING, cap, finite
from migscope.analyzer._intake.stats_promql.inventory import (
    Inventory,
    slice_inventory,
    slice_order,
)
from migscope.analyzer._intake.stats_promql.quality import ENERGY, count_bad_samples, suspects
from migscope.analyzer._intake.stats_promql.queries import Queries, Values
from migscope.analyzer._model import Holder, HourlyUse, Owner, SliceStats


def quantile(
    q: Queries, level: float, metrics: Sequence[str], nodes: Sequence[str], c: float | None = None
) -> str:
    """A quantile of each slice's per-interval values over the window (one PromQL expression).

    ``quantile_over_time(level, (max by (slice) (last_over_time(x[step]) >= 0))[W:step])``:
    the slice's series merged per step interval, NaN and out-of-range values dropped,
    ``c`` (activity's 1) clamping what is above it.
    """
    inner = q.per_interval(
        "last_over_time", metrics, nodes, ceiling=c, counters=q.counters_for(metrics)
    )
    return f"quantile_over_time({level}, {inner}[{q.value_range}:{q.step}])"


def activity_mean(
    q: Queries, activity: Sequence[str], nodes: Sequence[str], at: float | None = None
) -> str:
    """Each slice's mean per-interval activity over one bucket ending at the evaluation time.

    ``at``: the bucket ending then instead (the ``@`` modifier).
    """
    inner = q.per_interval(
        "last_over_time",
        activity,
        nodes,
        ceiling=ACTIVITY_CEILING,
        counters=q.counters_for(activity),
    )
    when = "" if at is None else f" @ {at:.3f}"
    return f"avg_over_time({inner}[{q.bucket_range}:{q.step}]{when})"


def chunk_stats(
    q: Queries,
    nodes: Sequence[str],
    wanted: Collection[SliceId] | None = None,
    infos: Inventory | None = None,
) -> Iterator[SliceStats]:
    """The statistics of every slice on ``nodes``: :func:`identified_chunk_stats` without ids."""
    for _, stats in identified_chunk_stats(q, nodes, wanted, infos):
        yield stats


def identified_chunk_stats(
    q: Queries,
    nodes: Sequence[str],
    wanted: Collection[SliceId] | None = None,
    infos: Inventory | None = None,
) -> Iterator[tuple[SliceId, SliceStats]]:
    """The statistics of every slice on ``nodes``, in report order (see :func:`slice_order`).

    A fixed number of queries per chunk (about fifteen instant queries, and two range
    queries for the hourly buckets), whatever the number of slices in it; nothing beyond
    the inventory is asked when the chunk has no slice. One of them looks for numbers out
    of range (:func:`.quality.suspects`), and one more counts them when it finds some.

    With ``wanted`` (and ``q`` restricted to those slices, :meth:`Queries.restricted`: the
    fast path's slices its reads could not settle) only those are yielded and counted;
    ``infos`` is then the chunk's inventory, already read.
    """
    migscope = q.migscope
    activity, memory = q.activity, q.memory  # in bytes and ratio (Queries.in_base_units)
    holders = [MIG_POD_INFO] if migscope else activity + memory
    if infos is None:
        infos = slice_inventory(q, nodes)
    if wanted is not None:
        infos = {key: value for key, value in infos.items() if key in wanted}
    if not infos:
        return
    order = slice_order(q, infos, nodes)

    def maximum(metrics: Sequence[str], c: float | None = None) -> Values:
        inner = q.per_interval(
            "max_over_time", metrics, nodes, ceiling=c, counters=q.counters_for(metrics)
        )
        return q.values(f"max_over_time({inner}[{q.value_range}:{q.step}])")

    top = ACTIVITY_CEILING
    act_p50, act_p95, act_max = (
        q.values(quantile(q, 0.5, activity, nodes, c=top)),
        q.values(quantile(q, 0.95, activity, nodes, c=top)),
        maximum(activity, c=top),
    )
    mem_p95, mem_peak = q.values(quantile(q, 0.95, memory, nodes)), maximum(memory)
    samples = q.values(
        f"count_over_time({q.per_interval('last_over_time', activity + memory, nodes)}"
        f"[{q.value_range}:{q.step}])"
    )
    observed = q.observed(activity + memory, nodes)
    held = q.holding(holders, nodes)
    covered = q.values(q.intervals(observed, q.by))
    seen = q.values(q.intervals(f"{observed} or {held}", q.by))
    held_any = q.values(q.intervals(held, q.by))
    held_by = owners(q, held)
    energy = (
        q.values(f"sum {q.by} ({q.over(q.increase(), MIG_ENERGY, nodes, q.window)})")
        if migscope
        else {}
    )
    found = suspects(q, nodes, [MIG_ENERGY] if migscope else [])
    above = {
        key: total
        for key, (_, total) in infos.items()
        if total is not None and mem_peak.get(key, 0.0) > total
    }
    if found or above:
        count_bad_samples(q, nodes, found, above, wanted)
    expected = max(1, q.window_ms // q.step_ms)
    buckets = hourly(q, activity, held, nodes)
    newest = last_seen(q, activity + memory, nodes)
    bad_energy = found.get(ENERGY, set())
    q.ledger.exact_slices += len(order)
    for key in order:
        info, total = infos[key]
        pods = held_by.get(key, {})
        allocated, slice_owners = allocation(
            held_any.get(key, 0.0), pods, seen.get(key, 0.0), covered.get(key, 0.0)
        )
        yield (
            key,
            SliceStats(
                info=info,
                window_start=q.run.window_start,
                window_end=q.run.window_end,
                samples=int(samples.get(key, 0)),
                expected_samples=expected,
                coverage=covered.get(key, 0.0) / expected,
                activity_p50=act_p50.get(key),
                activity_p95=act_p95.get(key),
                activity_max=act_max.get(key),
                memory_peak_bytes=cap(mem_peak.get(key), total),
                memory_p95_bytes=cap(mem_p95.get(key), total),
                memory_total_bytes=total,
                allocated_fraction=allocated,
                owners=slice_owners,
                energy_joules=None if key in bad_energy else finite(energy.get(key)),
                hourly=buckets.get(key, q.unused()) if q.buckets else None,
                last_seen=newest.get(key),
            ),
        )


def allocation(
    held: float, pods: Mapping[Holder, float], seen: float, covered: float
) -> tuple[float, tuple[Owner, ...]]:
    """A slice's allocated fraction and owners from its step-interval counts.

    Both statistics paths count the same intervals (held by any holder, by each holder (a
    pod, a DRA claim, or both, :data:`~migscope.analyzer._model.Holder`), with
    any series, with a measurement); this turns the counts into the two fields, so that the
    paths cannot drift apart. Each count bounds the one it is part of: an empty answer to
    one query (a server that lost a part of the data, a proxy's fault) must not discard what
    the others know, such as the pods holding the slice.

    Returns:
        ``(allocated_fraction, owners)``, owners by share then name.
    """
    held_k = max(held, max(pods.values(), default=0.0))
    seen_k = max(seen, covered, held_k)
    if not seen_k:
        return 0.0, ()
    owners = sorted(
        (Owner.of(holder, n / seen_k) for holder, n in pods.items()),
        key=lambda o: (-o.fraction, o.namespace, o.pod),
    )
    return held_k / seen_k, tuple(owners)


def last_seen(q: Queries, metrics: Sequence[str], nodes: Sequence[str]) -> Values:
    """Per slice, the end of the step interval holding its newest sample in the window.

    Why: after a re-partition in the window the instances seen last are the current ones,
    and coverage cannot tell (an old instance seen for four days outweighs its successor
    seen for three). One subquery, as cheap as a statistic (see :meth:`Queries.seen_at`).
    """
    return q.values(q.seen_at("max", metrics, nodes))


def hourly(
    q: Queries, activity: Sequence[str], held: str, nodes: Sequence[str]
) -> dict[SliceId, HourlyUse]:
    """Per-bucket activity and allocation: two range queries at ``period`` resolution.

    Evaluated at the end of each bucket: ``avg_over_time`` of the per-interval activity
    and ``count_over_time`` of the held intervals over a ``[period:step]`` subquery
    (``period - 1ms`` on Prometheus 2, whose ranges are closed). Empty without buckets.
    """
    if not q.buckets:
        return {}
    n, period_ms, step = q.buckets, q.period_ms, q.step
    per = period_ms // q.step_ms
    end = q.run.window_end
    first = end - (n - 1) * period_ms / 1000.0

    def ask(expr: str) -> dict[SliceId, dict[int, float]]:
        result = q.client.query_range(expr, start=first, end=end, step=period_ms / 1000.0)
        q.ledger.account(result)
        out: dict[SliceId, dict[int, float]] = {}
        for series in result:
            key = q.key(series.labels)
            if key is None:
                continue
            points = out.setdefault(key, {})
            for t, v in series.points():
                bucket = n - 1 - round((end - t) * 1000) // period_ms
                if 0 <= bucket < n and not math.isnan(v):
                    points[bucket] = v
        return out

    act = ask(activity_mean(q, activity, nodes))
    alloc = ask(f"count_over_time((count {q.by} ({held}))[{q.bucket_range}:{step}])")
    return {
        key: HourlyUse(
            period_seconds=period_ms / 1000.0,
            activity=tuple(act.get(key, {}).get(b) for b in range(n)),
            allocated=tuple(alloc.get(key, {}).get(b, 0.0) / per for b in range(n)),
        )
        for key in act.keys() | alloc.keys()
    }


def owners(q: Queries, held: str) -> dict[SliceId, dict[Holder, float]]:
    """Step intervals held per slice and holder (labels as :func:`dialect.holder_of` reads them)."""
    by = "by (" + ", ".join((*q.key_labels, *HOLDER_LABELS)) + ")"
    out: dict[SliceId, dict[Holder, float]] = {}
    for sample in q.ask(q.intervals(held, by)):
        key = q.key(sample.labels)
        owner = holder_of(sample.labels)
        if key is None or owner is None:
            continue
        # One pod seen under two label spellings: the larger count, not a double count.
        per_key = out.setdefault(key, {})
        per_key[owner] = max(per_key.get(owner, 0.0), sample.value)
    return out
