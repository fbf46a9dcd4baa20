"""The analysis pipeline: slices in, verdicts, a plan per pool and the savings out.

``analyze`` strings the decision modules together in the order the design gives:

1. the window statistics of each slice, as the source computed them (from raw series with
   :mod:`~migscope.analyzer._intake.stats_local`, or in PromQL on a server);
2. a verdict per slice (:func:`~migscope.analyzer._judge.classify.classify`);
3. pools: GPUs grouped by catalogue model (:func:`~migscope.analyzer._judge.demand.pool_key`);
4. each GPU as it is *now*: its current instances at their placements, and which are in use;
5. demand per pool (:func:`~migscope.analyzer._judge.demand.pool_demand`);
6. a plan per pool (:func:`~migscope.analyzer._plan.plan_layouts`, exact, time-limited);
7. savings: slices and whole GPUs freed, GPU-hours over the window, money when priced, and
   the idle GPU-hours per namespace (who holds what they do not use).

Which slices are *current*: a re-partition during the window ends some instances and starts
others, and both have history. Per GPU the slices seen last
(:attr:`~migscope.analyzer._model.SliceStats.last_seen`) win, and an older slice whose
placement overlaps one already taken is history only: it is reported, never planned.

What *in use* means for the planner (instances it must keep exactly where they are): held by
a pod, not idle, and already the right size. A held slice whose verdict says it should be
another size (oversized, saturated) is expected to move: demand counts it at its right
size, the plan may replace its instance, and the node's recommendation is then marked
disruptive because a pod must be moved (``keep_mis_sized=True`` pins those too, at their
current size).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from migscope.analyzer._intake.dialect import exporter_pod_name
from migscope.analyzer._intake.gpu_catalogue import GpuCatalogue
from migscope.analyzer._judge.classify import Classification, Status, classify
from migscope.analyzer._judge.demand import PoolDemand, is_held, pool_demand, pool_key
from migscope.analyzer._judge.policy import Policy
from migscope.analyzer._judge.safety import History, pin_reason
from migscope.analyzer._judge.workloads import advise
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import AnalyzeOptions, BadOptionError, Objective
from migscope.analyzer._plan import GpuState, Instance, Plan, Weights, lower_bound, plan_layouts
from migscope.analyzer._plan.whatif import Replay, replay
from migscope.analyzer._result import AnalysisResult, PoolResult, SliceResult
from migscope.analyzer._savings import savings
from migscope.core import (
    GpuModel,
    MigPartedConfig,
    UnknownProfileError,
    generated_configs,
    layout_for_gpu,
    merge_configs,
)

EXPORTER_POD_NOTE = (
    "node name(s) {nodes}: the name of a dcgm-exporter pod, not of a node (dcgm-exporter "
    "without NODE_NAME writes its pod's name in Hostname, and the scrape has no node or "
    "kubernetes_node label): these slices are reported but not planned; set NODE_NAME from "
    "spec.nodeName in the exporter's DaemonSet, or relabel the node into `node`"
)
"""Said when a node name is a dcgm-exporter pod's (:func:`~migscope.analyzer._intake.dialect.
exporter_pod_name`)."""

NO_ATTRIBUTION = (
    "no slice has a pod attached: pod attribution is missing (the kubelet socket for "
    "migscope's exporter; dcgm-exporter on MIG often attaches none, dcgm-exporter#272), so an "
    "'unallocated' slice may be held by an idle pod; busy ones pin their GPUs, and the "
    "applier's live pod check stays the guard for the rest"
)
"""Said when no slice of the analysis names a pod."""


def _infer_start(model: GpuModel, profile: str, gi_id: int) -> int | None:
    """A GI's placement start from its NVML id (GI ids number the slice tree, heap order).

    NVML numbers GPU instances by their node in the binary tree of memory slices: a GI of
    ``size`` slices at ``start`` has id ``M/size - 1 + start/size`` (checked against real
    A100 and H100 ``nvidia-smi`` output, see ``migscope.sim._ids``). dcgm-exporter reports the
    id but not the placement, so this recovers it.
    """
    try:
        gi = model.profile(profile)
    except UnknownProfileError:
        return None
    size = gi.memory_slices
    if size <= 0 or model.memory_slices % size:
        return None
    start = (gi_id - (model.memory_slices // size - 1)) * size
    return start if start in gi.placements else None


def _gpu_states(
    pool_slices: Sequence[tuple[SliceResult, float]],
    model: GpuModel,
    notes: list[str],
    *,
    freeze_all: bool,
    left_out: Mapping[str, str],
) -> tuple[list[GpuState], set[int], set[str]]:
    """Each GPU of a pool as it is now, the current slices' ids, and the nodes left out.

    A GPU is frozen (the plan must leave it exactly as it is) when a current slice on it
    pins it, or with ``freeze_all`` (too little history for any plan). A node with a slice
    whose profile or placement is unknown is not planned at all: its config would have to
    name every GPU's layout, and one of them cannot be known. Nor is a node in ``left_out``
    (a GPU's own profile table contradicts the one planned with; the notes say so).
    """
    by_gpu: dict[tuple[str, int], list[tuple[SliceResult, float]]] = defaultdict(list)
    for item in pool_slices:
        key = item[0].stats.info.key
        by_gpu[(key.node, key.gpu)].append(item)
    found: list[tuple[str, int, list[Instance], bool]] = []
    current: set[int] = set()
    unplanned: set[str] = set()
    for (node, index), items in sorted(by_gpu.items()):
        if node in left_out:
            unplanned.add(node)
            current.update(id(result) for result, _ in items)
            continue
        items.sort(key=lambda it: (-it[1], -it[0].stats.coverage, it[0].stats.info.key))
        occupied = 0
        instances: list[Instance] = []
        frozen = freeze_all
        for result, _ in items:
            info = result.stats.info
            try:
                gi = model.profile(info.profile)
            except UnknownProfileError:
                gi, start = None, None
            else:
                start = info.placement_start
                if start is None:
                    start = _infer_start(model, info.profile, info.key.gpu_instance_id)
            if gi is None or start is None or start not in gi.placements:
                what = (
                    f"profile {info.profile} not in the catalogue"
                    if gi is None
                    else f"GI {info.key.gpu_instance_id} ({info.profile}) has no known placement"
                )
                notes.append(f"{node}/{index}: {what}; node {node} is not planned")
                current.add(id(result))
                unplanned.add(node)
                continue
            mask = ((1 << gi.memory_slices) - 1) << start
            if occupied & mask:
                continue  # replaced by a newer instance during the window
            occupied |= mask
            current.add(id(result))
            instances.append(Instance(gi.name, start, result.in_use))
            frozen = frozen or result.pin is not None
        found.append((node, index, instances, frozen and bool(instances)))
    states = [
        GpuState(node, index, tuple(sorted(instances)), frozen=frozen)
        for node, index, instances, frozen in found
        if node not in unplanned
    ]
    return states, current, unplanned


def analyze(
    slices: Iterable[SliceStats],
    *,
    window: tuple[float, float],
    options: AnalyzeOptions | None = None,
    gpus: GpuCatalogue | None = None,
) -> AnalysisResult:
    """Analyse a window of slice history and plan every pool.

    Most callers want :func:`migscope.analyzer.run`, which gets the window and the
    slices from a :class:`~migscope.analyzer._intake.base.Source`; this is the pure part,
    for slices already at hand (tests, benchmarks).

    Args:
        slices: Each slice's statistics over ``window`` (a source's
            :meth:`~migscope.analyzer._intake.base.Source.slices`; raw series at hand go
            through :func:`~migscope.analyzer._intake.base.local_stats`). Consumed once, one
            slice at a time.
        window: ``(start, end)`` Unix seconds.
        options: How to judge and plan (:class:`AnalyzeOptions`; its defaults when None).
            ``objective`` ``"consolidate"`` covers demand, then strands as few slices and
            so frees as many GPUs as possible, then changes as few GPUs as possible;
            ``"minimal-change"`` covers demand with the fewest GPU changes (docs/planner.md).
            Each pending ``(profile, count)`` goes to the first pool (by key) whose model
            offers the profile; ``what_if`` layouts are replayed against the window's
            hourly demand (:mod:`~migscope.analyzer._plan.whatif`).
        gpus: The catalogue to plan with (:func:`~migscope.analyzer._intake.gpu_catalogue.
            choose_catalogue`: the GPUs' own profile tables where they reported one, each
            GPU's driver); the built-in catalogue when None.

    Returns:
        The :class:`AnalysisResult`.

    Raises:
        UnknownConfigError: a what-if name is not in the config.
        BadOptionError: a what-if names a node that is not in the data.
    """
    options = options or AnalyzeOptions()
    gpus = gpus or GpuCatalogue()
    model_of = gpus.model
    policy, step, selector = options.policy, options.step_s, options.selector
    keep_mis_sized, objective = options.keep_mis_sized, options.objective
    what_if, what_if_config = options.what_if, options.what_if_config
    price_per_gpu_hour = options.price_per_gpu_hour
    start, end = window
    say = options.say
    notes: list[str] = []

    staged: list[tuple[SliceStats, Classification, float]] = []
    for n, stats in enumerate(slices, 1):
        seen = stats.last_seen if stats.last_seen is not None else -math.inf
        verdict = classify(stats, model=model_of(stats.info.model), policy=policy)
        staged.append((stats, verdict, seen))
        if n % 10 == 0:
            say(f"classified {n} slices")
    say(f"classified {len(staged)} slices")

    window_hours = (end - start) / 3600.0
    history = History(
        max((st.observed_hours for st, _, _ in staged), default=0.0),
        policy.evidence.min_history_hours,
    )
    if staged and not history.enough:
        notes.append(history.sentence())
        if window_hours < history.needed + 1:
            notes.append(
                f"the window ({window_hours:g} h) leaves no room for "
                f"{history.needed:g} h of history: use a longer --window"
            )
    if staged and not any(st.owners for st, _, _ in staged):
        notes.append(NO_ATTRIBUTION)
    results: list[tuple[SliceResult, float]] = []
    for stats, verdict, seen in staged:
        held = is_held(stats, policy=policy)
        model = model_of(stats.info.model)
        right = _demand_profile(stats, verdict, model, policy)
        mis_sized = right is not None and right != stats.info.profile
        in_use = held and verdict.status is not Status.IDLE and right is not None
        if mis_sized and not keep_mis_sized:
            in_use = False
        if keep_mis_sized and in_use:
            right = stats.info.profile
        pin = pin_reason(stats, verdict, policy=policy)
        results.append((SliceResult(stats, verdict, True, held, in_use, right, pin), seen))

    _check_what_if_nodes(what_if, {r.stats.info.key.node for r, _ in results})
    left_out = dict(gpus.unplanned)
    pods = sorted({r.stats.info.key.node for r, _ in results} - set(left_out))
    pods = [node for node in pods if exporter_pod_name(node)]
    if pods:
        left_out.update(dict.fromkeys(pods, "a dcgm-exporter pod's name"))
        notes.append(EXPORTER_POD_NOTE.format(nodes=", ".join(pods)))
    pools: dict[str, list[tuple[SliceResult, float]]] = defaultdict(list)
    for result, seen in results:
        key = pool_key(result.stats.info, selector=selector)
        if key is None:
            notes.append(
                f"{result.stats.info.key.node}/{result.stats.info.key.gpu}: GPU model not in "
                "the catalogue; its slices are classified but not planned"
            )
            continue
        pools[key].append((result, seen))

    current_ids: set[int] = set()
    pool_results: list[PoolResult] = []
    waiting = list(options.pending)
    for key in sorted(pools):
        model_key = pools[key][0][0].stats.info.model
        model = model_of(model_key)
        if model is None:
            continue
        states, current, unplanned = _gpu_states(
            pools[key], model, notes, freeze_all=not history.enough, left_out=left_out
        )
        current_ids |= current
        mine = [(p, c) for p, c in waiting if _offers(model, p)]
        waiting = [(p, c) for p, c in waiting if not _offers(model, p)]
        if not states:
            continue  # every node of the pool is left out (notes say why)
        members = [
            (r.stats, r.verdict)
            for r, _ in pools[key]
            if id(r) in current and r.stats.info.key.node not in unplanned
        ]
        demand = pool_demand(
            members, pool=key, model=model, pending=mine, headroom=options.headroom, policy=policy
        )
        if keep_mis_sized:
            demand = _pinned_demand(demand, pools[key], current, model)
        notes.extend(demand.notes)
        say(f"planning pool {key}: {len(states)} GPUs, demand {demand.total}")
        plan = plan_layouts(
            model,
            states,
            demand.total,
            time_limit_s=options.time_limit_s,
            weights=_weights(objective, model, states),
            park_free=objective == "consolidate",
        )
        bound = lower_bound(model, demand.total)
        replays = _replays(
            pools[key], model, states, plan, what_if=what_if, what_if_config=what_if_config
        )
        pool_results.append(PoolResult(key, model, tuple(states), demand, plan, bound, replays))
    for profile, count in waiting:
        notes.append(f"pending {profile} x{count}: no pool offers this profile")

    final = tuple(
        sorted(
            (
                SliceResult(
                    r.stats,
                    r.verdict,
                    id(r) in current_ids or pool_key(r.stats.info, selector=selector) is None,
                    r.held,
                    r.in_use,
                    r.demand_profile,
                    r.pin,
                )
                for r, _ in results
            ),
            key=lambda s: (s.stats.info.key.node, s.stats.info.key.gpu, s.stats.info.key),
        )
    )
    mig_parted: MigPartedConfig | None = None
    node_configs: dict[str, str] = {}
    for pool in pool_results:
        mig_parted = (
            pool.plan.mig_parted
            if mig_parted is None
            else merge_configs(mig_parted, pool.plan.mig_parted)
        )
        for node, name in pool.plan.node_configs.items():
            if node in node_configs and node_configs[node] != name:
                notes.append(
                    f"{node}: GPUs of several pools; configs {name} and {node_configs[node]}"
                )
            node_configs.setdefault(node, name)
    headline = savings(final, pool_results, hours=(end - start) / 3600.0, price=price_per_gpu_hour)
    return AnalysisResult(
        window_start=start,
        window_end=end,
        step=step,
        slices=final,
        pools=tuple(pool_results),
        savings=headline,
        mig_parted=mig_parted,
        node_configs=node_configs,
        price_per_gpu_hour=price_per_gpu_hour,
        notes=tuple(
            dict.fromkeys([*gpus.notes, *notes, *gpus.name_notes(r.stats.info for r in final)])
        ),
        what_if=dict(what_if) if what_if else None,
        history=history,
        workloads=advise(final) if history.enough else None,
    )


_NODES_SHOWN = 5


def _check_what_if_nodes(what_if: Mapping[str, str] | None, nodes: set[str]) -> None:
    """Refuse a ``--what-if NODE=CONFIG`` for a node the data does not have (issue 22).

    Such a node would replay nothing, and the what-if would read like a loss.
    """
    unknown = sorted(n for n in (what_if or {}) if n != "*" and n not in nodes)
    if not unknown:
        return
    known = sorted(nodes)
    shown = ", ".join(known[:_NODES_SHOWN]) + (
        f" and {len(known) - _NODES_SHOWN} more" if len(known) > _NODES_SHOWN else ""
    )
    raise BadOptionError(
        f"--what-if names node(s) not in the data: {', '.join(unknown)} (nodes: {shown or 'none'})"
    )


def _replays(
    members: Sequence[tuple[SliceResult, float]],
    model: GpuModel,
    states: Sequence[GpuState],
    plan: Plan,
    *,
    what_if: Mapping[str, str] | None,
    what_if_config: MigPartedConfig | None,
) -> dict[str, Replay]:
    """The pool's hourly demand replayed against its current, proposed and what-if layouts.

    Every busy slice of the pool counts, history-only ones too (their demand was real while
    they existed), for the hours a pod held it: at the profile the pod asked for against the
    current layout, at its right size against the proposed and what-if ones (which assume
    mis-sized pods are moved). Empty when a slice has no per-hour data (the window is not
    whole hours on the hour grid).
    """
    hourly = [r.stats.hourly for r, _ in members]
    if not hourly or any(h is None for h in hourly):
        return {}
    hours = len(hourly[0].allocated) if hourly[0] is not None else 0
    right_sized: dict[str, list[float]] = {}
    requested: dict[str, list[float]] = {}
    for result, _ in members:
        use = result.stats.hourly
        if result.demand_profile is None or use is None or len(use.allocated) != hours:
            continue
        for demand, profile in (
            (right_sized, result.demand_profile),
            (requested, result.stats.info.profile),
        ):
            row = demand.setdefault(model.profile(profile).name, [0.0] * hours)
            for h, share in enumerate(use.allocated):
                row[h] += share
    current = Counter(i.profile for g in states for i in g.instances)
    proposed = Counter(p.profile.name for g in plan.gpus for p in g.placements)
    out = {
        # Today's layout against what the pods asked for; the others against right sizes.
        "current": replay(requested, current, hours=hours),
        "proposed": replay(right_sized, proposed, hours=hours),
    }
    if what_if:
        config = what_if_config or generated_configs([model])
        offered: Counter[str] = Counter()
        for gpu in states:
            name = what_if.get(gpu.node, what_if.get("*"))
            layout = layout_for_gpu(config, name, model, gpu.index) if name else None
            if layout is None:  # not selected: the GPU keeps what it has
                offered.update(i.profile for i in gpu.instances)
            else:
                offered.update(layout)
        out["what_if"] = replay(right_sized, offered, hours=hours)
    return out


def _weights(objective: Objective, model: GpuModel, states: Sequence[GpuState]) -> Weights:
    """The planner's weights for ``objective`` on this pool."""
    busy = sum(1 for g in states if any(i.in_use for i in g.instances))
    make = Weights.consolidating if objective == "consolidate" else Weights.lexicographic
    return make(gpus=len(states), busy_gpus=busy, compute_slices=model.compute_slices)


def _offers(model: GpuModel, profile: str) -> bool:
    try:
        model.profile(profile.removeprefix("nvidia.com/").removeprefix("mig-"))
    except UnknownProfileError:
        return False
    return True


def _demand_profile(
    stats: SliceStats, verdict: Classification, model: GpuModel | None, policy: Policy
) -> str | None:
    from migscope.analyzer._judge.demand import slice_contribution

    return slice_contribution(stats, verdict, model=model, policy=policy).profile


def _pinned_demand(
    demand: PoolDemand,
    members: Sequence[tuple[SliceResult, float]],
    current: set[int],
    model: GpuModel,
) -> PoolDemand:
    """With ``keep_mis_sized``: busy demand at current profiles (pinned slices stay as they are)."""
    busy: Counter[str] = Counter()
    for result, _ in members:
        if id(result) in current and result.demand_profile is not None:
            busy[model.profile(result.stats.info.profile).name] += 1
    return PoolDemand(
        demand.pool,
        model,
        dict(busy),
        demand.pending,
        demand.headroom,
        demand.contributions,
        demand.notes,
    )
