"""The fast path: each slice's statistics from a few reads per series, exact where it matters.

:mod:`.statistics` (the exact path) is the definition on a server,
one aggregation per field over ``[W:step]`` subqueries; this computes the *same numbers* from
the per-series reads of :mod:`.per_series` wherever they provably are the same, and asks the
exact queries, restricted to the slices concerned (:meth:`Queries.restricted`), for the rest.
Each slice takes one of three routes (:func:`_route`):

* **reads**: at most one activity and one memory series, no NaN or out-of-range sample (the
  exact path drops or clamps those per interval), at most one sample per step interval (the
  raw count equals the intervals holding a sample). The raw samples are then the exact
  path's per-interval values: quantiles, maximum and each cell's mean are the exact path's,
  bit for bit (the same engine function over the same values).
* **merge**: the same, but a quantity has several series that never hold a sample in the
  same interval (a pod change under dcgm-exporter, whose pod labels the measurements; an
  exporter restarted under a new ``instance``). Counts and maxima still come from the reads;
  the quantiles come from the exact path's quantile queries restricted to these slices, and
  the mean of a cell where two activity series meet from its hourly mean at that cell (``@``).
* **exact**: everything else (NaN or out-of-range samples, a faster scrape than the step, two
  series of one quantity in one interval, an active-seconds counter the reads cannot settle,
  :func:`_clean`): the exact path, restricted to these slices.

A slice with an active-seconds counter (issue 24) takes the reads or merge route when its
counter is clean (:func:`_clean`: one series, a sample in every step interval, a pair within
the lookback at the first step, no negative or NaN sample): its activity's quantiles,
maximum and cell means are then the exact path's own subqueries over the counter's ratio,
evaluated per series at the same steps (:func:`.per_series.counter_ratio`), since the exact
path reads the counter at every step and the gauge at none. Other counter slices (a gap, a
counter starting or ending in the window, two counter series) take the exact route.

Counts of step intervals (samples, coverage, allocation, owners, each cell's allocation, the
newest interval) combine any number of series exactly, through :mod:`.cells`: the exact
path's ``count by (slice)`` per step becomes a union of each series' intervals, settled by
the cells' counts or, for the few cells where they cannot settle it, by their bit masks.
dcgm-exporter's memory total (``FB_USED + FB_FREE`` in the newest interval with both) is
read the same way from the used and free series with the newest sample when they end in the
same interval; otherwise that slice's total comes from the exact query, restricted to it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from migscope.analyzer._intake.dialect import (
    HOLDER_LABELS,
    MIG_ENERGY,
    MIG_POD_INFO,
    SliceId,
    dcgm_field,
    fields_of,
    holder_of,
)
from migscope.analyzer._intake.stats_local import COUNTER_LOOKBACK_SECONDS
from migscope.analyzer._intake.stats_local.quality import ACTIVITY_CEILING, Kind, cap, finite
from migscope.analyzer._intake.stats_promql.cells import Grid, Presence, Unsettled, newest, union
from migscope.analyzer._intake.stats_promql.inventory import (
    dcgm_totals,
    slice_inventory,
    slice_order,
)
from migscope.analyzer._intake.stats_promql.per_series import (
    ACTIVITY,
    CAPACITY,
    COUNTER,
    FREE,
    MEMORY,
    PART_LABEL,
    PODS,
    Read,
    Reads,
    cells,
    masks,
    weekly,
)
from migscope.analyzer._intake.stats_promql.quality import (
    ENERGY,
    bad_values,
    count_bad_samples,
    suspects,
)
from migscope.analyzer._intake.stats_promql.queries import Queries
from migscope.analyzer._intake.stats_promql.statistics import (
    activity_mean,
    allocation,
    identified_chunk_stats,
    quantile,
)
from migscope.analyzer._model import Holder, HourlyUse, SliceInfo, SliceStats

MAX_RESTRICTION_CHARS = 800
"""The longest selector (of the longest name) of one restricted exact run: its queries repeat
it a dozen times at most, and must stay under VictoriaMetrics' 16 KiB default."""


@dataclass(frozen=True)
class Counted:
    """A settled slice's step-interval counts (see :func:`_count`).

    Attributes:
        samples: Intervals of the statistics' range with an activity or memory sample.
        covered: Intervals of the window with one.
        held: Intervals in which a pod held the slice.
        seen: Intervals with either.
        owners: Per pod, the intervals it held the slice (the largest over label spellings).
        held_cells: Per cell, intervals held.
        newest: The newest interval with an activity or memory sample, or None.
    """

    samples: int
    covered: int
    held: int
    seen: int
    owners: dict[Holder, int]
    held_cells: list[int]
    newest: int | None


def _pods(reads: Sequence[Read], migscope: bool) -> list[Read]:
    """The series that say a pod or a DRA claim held the slice.

    Pod info, or dcgm-exporter's pod and ``dra_claim_*`` labels.
    """
    holders = [r for r in reads if r.family == PODS] if migscope else _measured(reads)
    return [r for r in holders if holder_of(r.labels) is not None]


def _measured(reads: Sequence[Read]) -> list[Read]:
    return [r for r in reads if r.family in (ACTIVITY, MEMORY)]


def _spelling(read: Read) -> tuple[str, ...]:
    """The holder labels of a series, as the exact path groups owners by them."""
    return tuple(read.labels.get(label, "") for label in HOLDER_LABELS)


def _count(reads: Sequence[Read], grid: Grid, migscope: bool) -> Counted:
    """Every step-interval count of one slice.

    Raises:
        Unsettled: the cells whose masks are missing (all of them, gathered).
    """
    per, n = grid.per, grid.cells
    measured = [r.presence for r in _measured(reads)]
    pods = _pods(reads, migscope)
    held = [r.presence for r in pods]
    spellings: dict[tuple[str, ...], list[Presence]] = defaultdict(list)
    owner_of: dict[tuple[str, ...], Holder] = {}
    for read in pods:
        spelling = _spelling(read)
        spellings[spelling].append(read.presence)
        owner = holder_of(read.labels)
        assert owner is not None  # _pods kept only these
        owner_of[spelling] = owner
    missing: set[int] = set()

    def cells_of(members: Sequence[Presence]) -> list[int]:
        try:
            return [int(v) for v in union(members, per, n)]
        except Unsettled as exc:
            missing.update(exc.cells)
            return [0] * n

    covered = cells_of(measured)
    held_cells = cells_of(held)
    seen = cells_of(measured + held)
    owned = {spelling: sum(cells_of(members)) for spelling, members in spellings.items()}
    try:
        last = newest(measured, grid)
    except Unsettled as exc:
        missing.update(exc.cells)
        last = None
    if missing:
        raise Unsettled(missing)
    owners: dict[Holder, int] = {}
    for spelling, count in owned.items():
        owner = owner_of[spelling]
        owners[owner] = max(owners.get(owner, 0), count)
    extra = int(any(r.extra > 0 for r in _measured(reads)))
    return Counted(
        samples=sum(covered) + extra,
        covered=sum(covered),
        held=sum(held_cells),
        seen=sum(seen),
        owners=owners,
        held_cells=held_cells,
        newest=last,
    )


def _clean(read: Read, q: Queries, grid: Grid) -> bool:
    """Whether a counter's per-series reads are the exact path's activity statistics.

    The exact path's value at each step of its ``[W:step]`` subqueries is the counter's
    ``irate(c[5m])`` where ``count_over_time(c[step])`` (and on VictoriaMetrics
    ``count_over_time(c[5m]) > 1``) holds, filtered by ``>= 0 < Inf`` and clamped, else the
    gauge's (:meth:`.queries.Queries.per_interval`). The reads take ``clamp_max(irate)``
    alone (:func:`.per_series.counter_ratio`): the same values at every step when

    * every step interval of those steps holds a counter sample (every cell full, and the
      interval ending at the window's start on Prometheus 2): the ``and`` keeps every step;
    * the first step's ``irate`` range holds two samples (``pair``), and a step is at most
      half the lookback, so that each later step's range holds its own interval's sample
      and the one before: every step has a ratio, from the same two samples on both engines
      (VictoriaMetrics' ``irate`` reaches before its range only with one sample in it), and
      the gauge is read at none;
    * no sample those ranges read is negative or NaN (``cmin``, ``csum``): the filter drops
      nothing (a ratio is then finite and not negative, a reset's increase being the new
      value).
    """
    numbers = read.numbers
    if 2 * q.step_ms > round(COUNTER_LOOKBACK_SECONDS * 1000):
        return False
    if not bool(np.all(read.presence.counts >= grid.per)):
        return False
    if q.closed and read.extra < 1:
        return False
    if numbers.get("pair", 0.0) < 2 or not numbers.get("cmin", -1.0) >= 0:
        return False
    if not math.isfinite(numbers.get("csum", math.nan)):
        return False
    wanted = ("cp50", "cp95", "cmax")
    if not all(math.isfinite(numbers.get(name, math.nan)) for name in wanted):
        return False
    return read.hourly is not None and not bool(np.isnan(read.hourly).any())


def _counter(reads: Sequence[Read]) -> Read | None:
    """The slice's active-seconds counter series, when it has exactly one."""
    counters = [r for r in reads if r.family == COUNTER]
    return counters[0] if len(counters) == 1 else None


def _route(reads: Sequence[Read], q: Queries, grid: Grid) -> str:
    """How a slice's values are read: ``reads``, ``merge`` or ``exact`` (module docstring).

    ``exact`` when a sample of its activity or memory is NaN or out of range, a series
    has more than one sample in a step interval, or the slice has an active-seconds counter
    that is not clean (:func:`_clean`); ``merge`` when a quantity has several series (their
    quantiles must be taken over the merged intervals, by the server).
    """
    if any(r.family == COUNTER for r in reads):
        counter = _counter(reads)
        if counter is None or not _clean(counter, q, grid):
            return "exact"
    merge = False
    for family in (ACTIVITY, MEMORY):
        mine = [r for r in reads if r.family == family]
        for read in mine:
            low, high = read.numbers.get("min"), read.numbers.get("max")
            if bad_values(family, low, high) or math.isnan(read.numbers.get("sum", 0.0)):
                return "exact"
            if not read.regular:
                return "exact"
        merge |= len(mine) > 1
    return "merge" if merge else "reads"


def _disjoint(reads: Sequence[Read], grid: Grid) -> bool:
    """Whether no two series of one quantity hold a sample in the same step interval.

    Then the merged per-interval values are each series' own samples side by side: the
    maximum is the largest of the series' maxima and a cell with one series its mean.

    Raises:
        Unsettled: cells where two series meet need their masks.
    """
    missing: set[int] = set()
    apart = True
    for family in (ACTIVITY, MEMORY):
        members = [r.presence for r in reads if r.family == family]
        if len(members) < 2:
            continue
        try:
            merged = union(members, grid.per, grid.cells)
        except Unsettled as exc:
            missing |= exc.cells
            continue
        total = np.sum([m.counts for m in members], axis=0)
        apart &= bool(np.array_equal(total, merged))
    if missing:
        raise Unsettled(missing)
    return apart


def _dcgm_total(reads: Sequence[Read], grid: Grid) -> tuple[bool, float | None]:
    """dcgm-exporter's memory total from the reads: ``(settled, bytes or None)``.

    As :func:`.inventory.dcgm_totals` computes it: used plus free in the newest interval with
    both (used valid, the sum not negative), else the newest valid capacity. Settled when
    the used and the free series with the newest sample (each the only one of its quantity
    there, of one generation, with the same labels: one pod's) end in the same interval,
    or when there is neither and the newest capacity sample is valid; any doubt is for the
    exact query.

    Raises:
        Unsettled: the newest intervals need masks.
    """
    used = [r for r in reads if r.family == MEMORY]
    free = [r for r in reads if r.family == FREE]
    capacity = [r for r in reads if r.family == CAPACITY]
    if used and free:
        newest_used, newest_free = _newest_alone(used, grid), _newest_alone(free, grid)
        if newest_used is None or newest_free is None:
            return False, None
        (u, at_used), (f, at_free) = newest_used, newest_free
        same_generation = _generation(u.metric) == _generation(f.metric)
        if at_used != at_free or not same_generation or dict(u.labels) != dict(f.labels):
            return False, None
        last_used, last_free = u.numbers.get("last", math.nan), f.numbers.get("last", math.nan)
        total = last_used * u.scale + last_free * f.scale
        if not (0 <= last_used * u.scale < math.inf) or not total >= 0:
            return False, None
        return True, total
    if not capacity:
        return True, None
    newest_capacity = _newest_alone(capacity, grid)
    if newest_capacity is None:
        return False, None
    c, _ = newest_capacity
    last = c.numbers.get("last", math.nan) * c.scale
    return (True, last) if last >= 0 else (False, None)


def _newest_alone(reads: Sequence[Read], grid: Grid) -> tuple[Read, int] | None:
    """The series with the newest sample and that interval, or None when two share it.

    Raises:
        Unsettled: some series' newest interval needs masks.
    """
    found: list[tuple[int, Read]] = []
    missing: set[int] = set()
    for read in reads:
        try:
            at = newest([read.presence], grid)
        except Unsettled as exc:
            missing |= exc.cells
            continue
        if at is not None:
            found.append((at, read))
    if missing:
        raise Unsettled(missing)
    if not found:
        return None
    found.sort(key=lambda item: item[0])
    if len(found) > 1 and found[-1][0] == found[-2][0]:
        return None
    return found[-1][1], found[-1][0]


def _generation(metric: str) -> int:
    """Which dcgm-exporter generation writes ``metric`` (its index among its quantity's names)."""
    field = dcgm_field(metric)
    return -1 if field is None else fields_of(field.quantity).index(field)


def _needs(reads: Sequence[Read], grid: Grid, migscope: bool) -> frozenset[int]:
    """The cells whose masks the slice's counts (dcgm-exporter total, disjointness) need."""
    cells_needed: set[int] = set()
    checks: list[Callable[[], object]] = [
        lambda: _count(reads, grid, migscope),
        lambda: _disjoint(reads, grid),
    ]
    if not migscope:
        checks.append(lambda: _dcgm_total(reads, grid))
    for check in checks:
        try:
            check()
        except Unsettled as exc:
            cells_needed |= exc.cells
    return frozenset(cells_needed)


def fast_chunk_stats(q: Queries, nodes: Sequence[str], grid: Grid) -> list[SliceStats]:
    """The statistics of every slice on ``nodes``, in report order, from per-series reads.

    About eight requests per chunk whatever its size (two reads, suspects, energy, the
    inventory), one more when some cells need masks, and the exact path's queries over the
    slices the reads cannot settle, restricted to them.
    """
    migscope = q.migscope
    reads = Reads(
        q,
        grid,
        {
            ACTIVITY: q.activity,
            MEMORY: q.memory,
            PODS: [MIG_POD_INFO] if migscope else [],
            FREE: q.free,
            CAPACITY: q.capacity,
            COUNTER: q.activity_counters,
        },
    )
    weekly(reads, nodes)
    cells(reads, nodes)
    by_slice = reads.by_slice()
    found = suspects(q, nodes, [MIG_ENERGY], measured=False) if migscope else {}
    routes = {key: _route(mine, q, grid) for key, mine in by_slice.items()}
    readable = sorted(key for key, route in routes.items() if route != "exact")

    # Cells whose masks some union or newest interval needs, then the masks, then the counts.
    needed: dict[int, set[SliceId]] = defaultdict(set)
    for key in readable:
        for h in _needs(by_slice[key], grid, migscope):
            needed[h].add(key)
    if needed:
        masks(reads, needed, nodes)
    counted: dict[SliceId, Counted] = {}
    totals: dict[SliceId, float] = {}
    unsettled_totals: list[SliceId] = []
    for key in readable:
        mine = by_slice[key]
        try:
            if routes[key] == "merge" and not _disjoint(mine, grid):
                continue  # two series of one quantity in one interval: the exact path merges
            counted[key] = _count(mine, grid, migscope)
            if not migscope:
                ok, total = _dcgm_total(mine, grid)
                if not ok:
                    unsettled_totals.append(key)
                elif total is not None:
                    totals[key] = total
        except Unsettled:  # masks arrived incomplete (data moved under us): ask exactly
            counted.pop(key, None)
    if not migscope:
        unsettled_totals += [k for k in by_slice if k not in counted]
        for group in _node_groups(q, unsettled_totals):
            totals.update(dcgm_totals(q.restricted(group), nodes))
    infos = slice_inventory(q, nodes, totals=None if migscope else totals)
    if not infos:
        return []
    keys = [ident[0] for ident in infos]
    twins = [ident for ident in infos if keys.count(ident[0]) > 1]
    order = slice_order(q.restricted(twins) if twins else q, infos, nodes)

    exact_keys = [key for key in infos if key in by_slice and key not in counted]
    exact: dict[SliceId, SliceStats] = {}
    for group in _node_groups(q, exact_keys):
        narrowed = q.restricted(group)
        exact.update(identified_chunk_stats(narrowed, nodes, set(group), infos=infos))
    merged = [k for k in infos if k in counted and routes[k] == "merge"]
    server = _merged_values(q, nodes, grid, {k: by_slice[k] for k in merged})

    energy: dict[SliceId, float] = (
        q.values(f"sum {q.by} ({q.over(q.increase(), MIG_ENERGY, nodes, q.window)})")
        if migscope
        else {}
    )
    bad_energy = found.get(ENERGY, set())
    for key in bad_energy:
        if key in infos and key not in exact:
            q.ledger.quality.add(Kind.ENERGY_UNKNOWN, key)
    above = {
        key: total
        for key, (_, total) in infos.items()
        if key not in exact and total is not None and _peak(by_slice.get(key, [])) > total
    }
    for group in _node_groups(q, list(above)):
        wanted = {key: above[key] for key in group}
        count_bad_samples(q.restricted(group), nodes, {}, wanted, set(group))

    out: list[SliceStats] = []
    for key in order:
        if key in exact:
            out.append(exact[key])
            continue
        info, total = infos[key]
        mine = by_slice.get(key, [])
        counts = counted.get(key) or _nothing(grid)
        values = server.get(key, Merged())
        out.append(_assemble(q, grid, info, total, mine, counts, values, energy, bad_energy, key))
        q.ledger.fast_slices += 1
        q.ledger.merged_slices += key in server
        q.ledger.counter_slices += _counter(mine) is not None
    return out


@dataclass
class Merged:
    """What the server computes for a slice whose quantity has several series.

    Attributes:
        numbers: The quantiles over the merged intervals (``act_p50``, ``act_p95``,
            ``mem_p95``) of the quantities that have several series.
        hourly: Per cell where two activity series meet, the mean over the merged intervals.
    """

    numbers: dict[str, float] = field(default_factory=dict)
    hourly: dict[int, float] = field(default_factory=dict)


def _merged_values(
    q: Queries, nodes: Sequence[str], grid: Grid, slices: Mapping[SliceId, Sequence[Read]]
) -> dict[SliceId, Merged]:
    """The exact path's quantiles (and cell means) for slices whose series must be merged.

    The exact queries (:func:`.statistics.quantile`, :func:`.statistics.activity_mean`),
    restricted to these slices: a quantile is one query per quantity with several series
    (not the fifteen of the exact path), a cell mean one ``@`` term per cell where two
    activity series meet.
    """
    out: dict[SliceId, Merged] = defaultdict(Merged)
    several = {
        family: [k for k, mine in slices.items() if sum(r.family == family for r in mine) > 1]
        for family in (ACTIVITY, MEMORY)
    }
    # A clean counter's slice reads its activity from the counter, whatever its gauges.
    several[ACTIVITY] = [k for k in several[ACTIVITY] if _counter(slices[k]) is None]
    asked = [
        ("act_p50", 0.5, ACTIVITY, q.activity, ACTIVITY_CEILING),
        ("act_p95", 0.95, ACTIVITY, q.activity, ACTIVITY_CEILING),
        ("mem_p95", 0.95, MEMORY, q.memory, None),
    ]
    for name, level, family, metrics, ceiling in asked:
        for group in _node_groups(q, several[family]):
            narrowed = q.restricted(group)
            for key, value in narrowed.values(
                quantile(narrowed, level, metrics, nodes, ceiling)
            ).items():
                if key in slices:
                    out[key].numbers[name] = value
    if not q.buckets:
        return dict(out)
    meeting: dict[int, list[SliceId]] = defaultdict(list)
    for key in several[ACTIVITY]:
        counts = np.stack([r.presence.counts for r in slices[key] if r.family == ACTIVITY])
        for h in np.flatnonzero((counts > 0).sum(axis=0) > 1).tolist():
            meeting[h].append(key)
    parts: list[str] = []
    for h, keys in sorted(meeting.items()):
        for group in _node_groups(q, keys):
            narrowed = q.restricted(group)
            expr = activity_mean(narrowed, q.activity, nodes, at=grid.cell_end(h))
            parts.append(f'label_replace({expr}, "{PART_LABEL}", "{h}", "", "")')
    for sample in q.ask_parts(parts):
        ident = q.key(sample.labels)
        cell = sample.labels.get(PART_LABEL, "")
        if ident is None or ident not in slices or not cell.isdigit():
            continue
        if not math.isnan(sample.value):
            out[ident].hourly[int(cell)] = sample.value
    return dict(out)


def _node_groups(q: Queries, keys: Sequence[SliceId]) -> list[list[SliceId]]:
    """``keys`` in groups of whole nodes whose restricted selectors stay short.

    Why: the exact queries repeat a chunk's selector for every name and part, and
    VictoriaMetrics refuses queries over 16 KiB by default; one node's restriction (its
    GPUs and GPU-instance ids) is a few hundred characters, so groups hold a few nodes.
    """
    by_node: dict[str, list[SliceId]] = defaultdict(list)
    for key in keys:
        by_node[key[0].node].append(key)
    longest = max([*q.activity, *q.activity_counters, *q.memory, *q.free, *q.capacity], key=len)
    groups: list[list[SliceId]] = []
    for node in sorted(by_node):
        trial = [*groups[-1], *by_node[node]] if groups else []
        text = q.restricted(trial).over("f", longest, [], "1m") if trial else ""
        if trial and len(text) <= MAX_RESTRICTION_CHARS:
            groups[-1] = trial
        else:
            groups.append(list(by_node[node]))
    return groups


def _peak(reads: Sequence[Read]) -> float:
    values = [
        r.numbers["max"] * r.scale for r in reads if r.family == MEMORY and "max" in r.numbers
    ]
    return max(values, default=0.0)


def _nothing(grid: Grid) -> Counted:
    return Counted(0, 0, 0, 0, {}, [0] * grid.cells, None)


def _assemble(
    q: Queries,
    grid: Grid,
    info: SliceInfo,
    total: float | None,
    reads: Sequence[Read],
    counts: Counted,
    merged: Merged,
    energy: Mapping[SliceId, float],
    bad_energy: set[SliceId],
    key: SliceId,
) -> SliceStats:
    """One settled slice's :class:`SliceStats`, as :func:`.statistics.chunk_stats` builds it."""
    activities = [r for r in reads if r.family == ACTIVITY]
    memories = [r for r in reads if r.family == MEMORY]
    counter = _counter(reads)  # clean, or the slice would have taken the exact route

    def number(family: Sequence[Read], name: str, server: str = "") -> float | None:
        """One series' number, the largest of several series' maxima, or the server's."""
        if len(family) > 1 and name != "max":
            return merged.numbers.get(server)
        values = [r.numbers[name] * r.scale for r in family if name in r.numbers]
        value = max(values, default=math.nan)
        return None if math.isnan(value) else value

    expected = max(1, q.window_ms // q.step_ms)
    allocated, owners = allocation(counts.held, counts.owners, counts.seen, counts.covered)
    act_p50 = number(activities, "p50", "act_p50")
    act_p95 = number(activities, "p95", "act_p95")
    act_max = number(activities, "max")
    if counter is not None:
        act_p50, act_p95 = counter.numbers["cp50"], counter.numbers["cp95"]
        act_max = counter.numbers["cmax"]
    hourly = None
    if q.buckets:
        per = grid.per
        if counter is not None and counter.hourly is not None:
            means = counter.hourly
            activity = tuple(None if math.isnan(v) else float(v) for v in means)
        else:
            activity = tuple(_cell_mean(activities, merged, h) for h in range(grid.cells))
        hourly = HourlyUse(
            period_seconds=grid.period_ms / 1000.0,
            activity=activity,
            allocated=tuple(counts.held_cells[h] / per for h in range(grid.cells)),
        )
    return SliceStats(
        info=info,
        window_start=q.run.window_start,
        window_end=q.run.window_end,
        samples=counts.samples,
        expected_samples=expected,
        coverage=counts.covered / expected,
        activity_p50=act_p50,
        activity_p95=act_p95,
        activity_max=act_max,
        memory_peak_bytes=cap(number(memories, "max"), total),
        memory_p95_bytes=cap(number(memories, "p95", "mem_p95"), total),
        memory_total_bytes=total,
        allocated_fraction=allocated,
        owners=owners,
        energy_joules=None if key in bad_energy else finite(energy.get(key)),
        hourly=hourly,
        last_seen=None if counts.newest is None else grid.interval_end(counts.newest),
    )


def _cell_mean(activities: Sequence[Read], merged: Merged, h: int) -> float | None:
    """A cell's mean activity: its one series' raw mean, or the server's over merged ones."""
    present = [r for r in activities if r.presence.counts[h]]
    if len(present) > 1:
        return merged.hourly.get(h)
    means = present[0].hourly if present else None
    if means is None or math.isnan(means[h]):
        return None
    return float(means[h])
