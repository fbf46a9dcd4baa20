"""The analysis pipeline: slices in, verdicts, a plan per pool and the savings out.

``analyze`` strings the decision modules together in the order the design gives:

1. window statistics per slice (:mod:`~migscope.analyzer.stats`), unless the source already
   computed them (the Prometheus source does, in PromQL);
2. a verdict per slice (:func:`~migscope.analyzer.classify.classify`);
3. pools: GPUs grouped by catalogue model (:func:`~migscope.analyzer.demand.pool_key`);
4. each GPU as it is *now*: its current instances at their placements, and which are in use;
5. demand per pool (:func:`~migscope.analyzer.demand.pool_demand`);
6. a plan per pool (:func:`~migscope.analyzer.plan.plan_layouts`, exact, time-limited);
7. savings: slices and whole GPUs freed, GPU-hours over the window, money when priced, and
   the idle GPU-hours per namespace (who holds what they do not use).

Which slices are *current*: a re-partition during the window ends some instances and starts
others, and both have history. Per GPU the slices seen last win, and an older slice whose
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from migscope.analyzer.classify import Classification, Status, classify
from migscope.analyzer.demand import (
    DEFAULT_HEADROOM,
    PoolDemand,
    PoolSelector,
    is_held,
    pool_demand,
    pool_key,
)
from migscope.analyzer.model import JsonValue, SliceStats
from migscope.analyzer.plan import (
    GpuState,
    Instance,
    LowerBound,
    Plan,
    Weights,
    lower_bound,
    plan_layouts,
)
from migscope.analyzer.policy import Policy, default_policy
from migscope.analyzer.safety import History, pin_reason
from migscope.analyzer.stats import DEFAULT_STEP_SECONDS, SliceSeries, slice_stats
from migscope.analyzer.whatif import Replay, replay
from migscope.core.catalogue import GpuModel, UnknownProfileError, find_model
from migscope.core.disruption import (
    GpuLayouts,
    SliceOnGpu,
    pods_losing_device,
    recreated_gpus,
    violations,
)
from migscope.core.migparted import MigPartedConfig, merge_configs
from migscope.core.named_layouts import generated_configs, layout_for_gpu

__all__ = [
    "SCHEMA_VERSION",
    "AnalysisResult",
    "Objective",
    "PoolResult",
    "SliceResult",
    "analyze",
    "iso_utc",
]

SCHEMA_VERSION = 1
"""Version of :meth:`AnalysisResult.to_json`'s schema (docs/report-schema.md)."""

NO_ATTRIBUTION = (
    "no slice has a pod attached: pod attribution is missing (the kubelet socket for "
    "migscope's exporter; dcgm-exporter on MIG often attaches none, dcgm-exporter#272), so an "
    "'unallocated' slice may be held by an idle pod; busy ones pin their GPUs, and the "
    "applier's live pod check stays the guard for the rest"
)
"""Said when no slice of the analysis names a pod."""

Progress = Callable[[str], None]
Objective = Literal["consolidate", "minimal-change"]
"""What the plan optimises after covering demand (see :func:`analyze`)."""


@dataclass(frozen=True)
class SliceResult:
    """One slice with its verdict and the part it plays in the plan.

    Attributes:
        stats: Window statistics.
        verdict: The classification.
        current: Exists at the end of the window (False: a re-partition removed it).
        held: A pod held it for at least the policy's allocated fraction.
        in_use: Pinned for the planner (held, busy and right-sized; see the module doc).
        demand_profile: The profile it adds to demand, or None.
        pin: Why it pins its GPU, which the plan must then leave exactly as it is (None: it
            does not; see :mod:`migscope.analyzer.safety`).
    """

    stats: SliceStats
    verdict: Classification
    current: bool
    held: bool
    in_use: bool
    demand_profile: str | None
    pin: str | None = None

    @property
    def status(self) -> Status:
        """Shortcut for ``verdict.status``."""
        return self.verdict.status

    def to_dict(self) -> dict[str, JsonValue]:
        """The slice as the report's ``slices[]`` entry."""
        info, owner = self.stats.info, self.stats.main_owner
        return {
            "node": info.key.node,
            "gpu": info.key.gpu,
            "gpu_uuid": info.key.gpu_uuid,
            "gpu_instance_id": info.key.gpu_instance_id,
            "model": info.model,
            "profile": info.profile,
            "placement_start": info.placement_start,
            "mig_uuid": info.mig_uuid,
            "status": self.verdict.status.value,
            "confidence": self.verdict.confidence,
            "reason": self.verdict.reason,
            "suggested_profile": self.verdict.suggested_profile,
            "evidence": dict(self.verdict.evidence),
            "namespace": owner.namespace if owner is not None else None,
            "pod": owner.pod if owner is not None else None,
            "owners": [o.to_dict() for o in self.stats.owners],
            "energy_joules": self.stats.to_dict()["energy_joules"],
            "hourly": self.stats.hourly.to_dict() if self.stats.hourly is not None else None,
            "current": self.current,
            "in_use": self.in_use,
            "demand_profile": self.demand_profile,
            "pin": self.pin,
        }

    def pods(self) -> tuple[str, ...]:
        """``namespace/pod`` of every pod seen holding the slice in the window."""
        return tuple(sorted({f"{o.namespace}/{o.pod}" for o in self.stats.owners}))


@dataclass(frozen=True)
class PoolResult:
    """One pool's demand, plan and bound.

    Attributes:
        pool: Pool key (the GPU model key, optionally refined).
        model: The pool's GPU model.
        gpus: The pool's GPUs as they are now.
        demand: What the pool must offer.
        plan: The planner's answer.
        bound: Bin-packing lower bound on GPUs for the demand.
        replays: The window's hourly demand replayed against layouts: ``current``,
            ``proposed`` and, when asked, ``what_if`` (empty without per-hour data).
    """

    pool: str
    model: GpuModel
    gpus: tuple[GpuState, ...]
    demand: PoolDemand
    plan: Plan
    bound: LowerBound
    replays: Mapping[str, Replay] = field(default_factory=dict)


@dataclass(frozen=True)
class AnalysisResult:
    """Everything one analysis found; :meth:`to_json` is the documented report schema.

    Attributes:
        window_start: Window start, Unix seconds.
        window_end: Window end, Unix seconds.
        step: Sample interval the statistics assumed, seconds.
        slices: Every slice with its verdict, sorted by node, GPU and GI id.
        pools: One result per pool, sorted by pool key.
        savings: Headline numbers (see :func:`_savings`).
        mig_parted: Every pool's configs merged into one mig-parted file (None when no
            pool was planned).
        node_configs: ``{node: config}``, the values for ``nvidia.com/mig.config``.
        price_per_gpu_hour: The price used for money figures, if any.
        notes: Things the reader should know (uncatalogued models, unplaceable slices).
        what_if: ``{node or "*": config}`` replayed as the what-if layout, if asked.
        history: How much history the analysis rests on, against the policy's minimum.
        provenance: Where the data came from and when the report was made (the CLI sets
            it; the applier refuses simulated and stale plans on it).
    """

    window_start: float
    window_end: float
    step: float
    slices: tuple[SliceResult, ...]
    pools: tuple[PoolResult, ...]
    savings: Mapping[str, Any]
    mig_parted: MigPartedConfig | None
    node_configs: Mapping[str, str]
    price_per_gpu_hour: float | None = None
    notes: tuple[str, ...] = field(default=())
    what_if: Mapping[str, str] | None = None
    history: History | None = None
    provenance: Mapping[str, Any] | None = None

    @property
    def window_hours(self) -> float:
        """Window length in hours."""
        return (self.window_end - self.window_start) / 3600.0

    def count(self, status: Status) -> int:
        """Current slices with ``status``."""
        return sum(1 for s in self.slices if s.current and s.status is status)

    def recommendations(self) -> list[dict[str, Any]]:
        """One entry per node whose layout the plan changes (see docs/report-schema.md).

        What a change destroys is computed by :mod:`migscope.core.disruption`, the code the
        applier uses too: every GPU whose layout differs is re-created whole, so every pod
        seen on any slice of such a GPU is listed in ``pods_to_move`` and the change is
        disruptive. Each entry is checked against the safety contract before it is returned;
        a violation is a bug in the planner, so it raises rather than reaching a cluster.
        """
        on_node: dict[str, list[SliceResult]] = defaultdict(list)
        for s in self.slices:
            if s.current:
                on_node[s.stats.info.key.node].append(s)
        out: list[dict[str, Any]] = []
        for pool in self.pools:
            by_node: dict[str, list[Any]] = defaultdict(list)
            for gpu in pool.plan.gpus:
                by_node[gpu.node].append(gpu)
            for node_plan in pool.plan.nodes:
                gpus = sorted(by_node[node_plan.node], key=lambda g: g.index)
                if not node_plan.changed:
                    continue
                layouts = [
                    GpuLayouts(
                        g.index,
                        g.current.layout.as_dict(),
                        g.proposed.layout.as_dict(),
                        g.current.mig_enabled,
                        g.proposed.mig_enabled,
                    )
                    for g in gpus
                ]
                slices = [_on_gpu(s, pool.model) for s in on_node[node_plan.node]]
                recreated = recreated_gpus(layouts)
                pods = pods_losing_device(recreated, slices)
                rec: dict[str, Any] = {
                    "node": node_plan.node,
                    "pool": pool.pool,
                    "model": pool.model.key,
                    "current": [{"gpu": g.index, **g.current.as_dict()} for g in gpus],
                    "proposed": [{"gpu": g.index, **g.proposed.as_dict()} for g in gpus],
                    "mig_config": node_plan.mig_config,
                    "disruptive": node_plan.disruptive or bool(pods),
                    "pods_to_move": list(pods),
                    "gpus_recreated": list(recreated),
                    "slices": [x.as_dict() for x in sorted(slices, key=_slice_order)],
                    "gpus": [g.as_dict() for g in gpus],
                }
                broken = violations(rec)
                if broken:
                    raise AssertionError(f"planner broke the safety contract: {broken[0]}")
                out.append(rec)
        return out

    def node_plan(self) -> dict[str, Any]:
        """The node → config plan: every planned node, its config, and whether it changes.

        ``disruptive`` is the recommendation's (every pod on a re-created GPU counts), and
        the provenance travels with it so that the applier can refuse simulated data.
        """
        recs = {r["node"]: r for r in self.recommendations()}
        nodes = []
        for n in (n for p in self.pools for n in p.plan.nodes):
            entry = n.as_dict()
            if n.node in recs:
                entry["disruptive"] = recs[n.node]["disruptive"]
                entry["pods_to_move"] = recs[n.node]["pods_to_move"]
            nodes.append(entry)
        return {
            "schema_version": SCHEMA_VERSION,
            "nodes": sorted(nodes, key=lambda n: n["node"]),
            "provenance": dict(self.provenance) if self.provenance is not None else None,
        }

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data, ``schema_version`` 1 (docs/report-schema.md)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "window": {
                "start": iso_utc(self.window_start),
                "end": iso_utc(self.window_end),
                "start_unix": self.window_start,
                "end_unix": self.window_end,
                "hours": round(self.window_hours, 4),
                "step_seconds": self.step,
            },
            "summary": {
                "slices": sum(1 for s in self.slices if s.current),
                "history_only_slices": sum(1 for s in self.slices if not s.current),
                "by_status": {
                    status.value: self.count(status) for status in Status if self.count(status)
                },
            },
            "slices": [s.to_dict() for s in self.slices],
            "pools": [
                {
                    "pool": p.pool,
                    "model": p.model.key,
                    "gpus": len(p.gpus),
                    "demand": p.demand.as_dict(),
                    "plan": p.plan.summary(),
                    "solve": p.plan.solve.as_dict(),
                    "lower_bound": p.bound.as_dict(),
                    "replay": {name: r.as_dict() for name, r in p.replays.items()},
                }
                for p in self.pools
            ],
            "recommendations": self.recommendations(),
            "mig_parted_config": (
                self.mig_parted.model_dump(by_alias=True, exclude_none=True)
                if self.mig_parted is not None
                else None
            ),
            "node_configs": dict(sorted(self.node_configs.items())),
            "savings": dict(self.savings),
            "what_if": self.what_if_summary(),
            "evidence": self.history.as_dict() if self.history is not None else None,
            "provenance": dict(self.provenance) if self.provenance is not None else None,
            "notes": list(self.notes),
        }

    def what_if_summary(self) -> dict[str, Any] | None:
        """The what-if layout's replay over all pools, or None when none was asked for."""
        if self.what_if is None:
            return None
        runs = [p.replays["what_if"] for p in self.pools if "what_if" in p.replays]
        proposed = [p.replays["proposed"] for p in self.pools if "proposed" in p.replays]

        def totals(replays: Sequence[Replay]) -> dict[str, float]:
            demand = sum(r.demand_instance_hours for r in replays)
            unmet = sum(r.unmet_instance_hours for r in replays)
            served = 1.0 - unmet / demand if demand > 0 else 1.0
            return {
                "unmet_instance_hours": round(unmet, 3),
                "demand_instance_hours": round(demand, 3),
                "served_share": round(served, 4),
            }

        return {
            "configs": dict(sorted(self.what_if.items())),
            "pools_replayed": len(runs),
            **totals(runs),
            "proposed": totals(proposed),
        }


def iso_utc(seconds: float) -> str:
    """Unix seconds as the report writes times: ISO 8601 in UTC with a ``Z``."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _on_gpu(result: SliceResult, model: GpuModel) -> SliceOnGpu:
    """A current slice as the safety contract sees it (profile in the catalogue's name)."""
    info = result.stats.info
    try:
        profile = model.profile(info.profile).name
    except UnknownProfileError:
        profile = info.profile
    return SliceOnGpu(info.key.gpu, profile, result.status.value, result.pods(), result.pin)


def _slice_order(s: SliceOnGpu) -> tuple[int, str, str]:
    return (s.gpu, s.profile, s.status)


def _model(key: str | None) -> GpuModel | None:
    if key is None:
        return None
    try:
        return find_model(key)
    except ValueError:
        return None


def _last_seen(series: SliceSeries) -> float:
    """Time of the slice's last activity or memory sample, Unix seconds (-inf if none)."""
    last = -math.inf
    for ts in (series.activity, series.memory_used):
        if ts is not None and len(ts):
            last = max(last, float(ts.timestamps_ms[-1]) / 1000.0)
    return last


def _infer_start(model: GpuModel, profile: str, gi_id: int) -> int | None:
    """A GI's placement start from its NVML id (GI ids number the slice tree, heap order).

    NVML numbers GPU instances by their node in the binary tree of memory slices: a GI of
    ``size`` slices at ``start`` has id ``M/size - 1 + start/size`` (checked against real
    A100 and H100 ``nvidia-smi`` output, see ``migscope.sim.ids``). dcgm-exporter reports the
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
) -> tuple[list[GpuState], set[int], set[str]]:
    """Each GPU of a pool as it is now, the current slices' ids, and the nodes left out.

    A GPU is frozen (the plan must leave it exactly as it is) when a current slice on it
    pins it, or with ``freeze_all`` (too little history for any plan). A node with a slice
    whose profile or placement is unknown is not planned at all: its config would have to
    name every GPU's layout, and one of them cannot be known.
    """
    by_gpu: dict[tuple[str, int], list[tuple[SliceResult, float]]] = defaultdict(list)
    for item in pool_slices:
        key = item[0].stats.info.key
        by_gpu[(key.node, key.gpu)].append(item)
    found: list[tuple[str, int, list[Instance], bool]] = []
    current: set[int] = set()
    unplanned: set[str] = set()
    for (node, index), items in sorted(by_gpu.items()):
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
    slices: Iterable[SliceSeries | SliceStats],
    *,
    window: tuple[float, float],
    policy: Policy | None = None,
    step: float = DEFAULT_STEP_SECONDS,
    pending: Sequence[tuple[str, int]] = (),
    headroom: float = DEFAULT_HEADROOM,
    price_per_gpu_hour: float | None = None,
    time_limit_s: float = 5.0,
    selector: PoolSelector | None = None,
    keep_mis_sized: bool = False,
    objective: Objective = "consolidate",
    progress: Progress | None = None,
    what_if: Mapping[str, str] | None = None,
    what_if_config: MigPartedConfig | None = None,
) -> AnalysisResult:
    """Analyse a window of slice history and plan every pool.

    Args:
        slices: Raw per-slice series (file, simulator) or statistics computed elsewhere
            (the Prometheus source). Consumed once, one slice at a time.
        window: ``(start, end)`` Unix seconds.
        policy: Classification thresholds; the packaged default when None.
        step: Sample interval for coverage, seconds.
        pending: ``(profile, count)`` of pods waiting for ``nvidia.com/mig-*``; each goes to
            the first pool (by key) whose model offers the profile.
        headroom: Extra share of each demanded profile, rounded to the nearest instance.
        price_per_gpu_hour: Adds money figures to the savings when given.
        time_limit_s: Solver time limit per pool.
        selector: Hook splitting pools further (see :func:`~migscope.analyzer.demand.pool_key`).
        keep_mis_sized: Pin oversized/saturated held slices at their current size instead of
            letting the plan re-size them.
        objective: ``"consolidate"`` (default: cover demand, then strand as few slices
            and so free as many GPUs as possible, then change as few GPUs as possible) or
            ``"minimal-change"`` (cover demand with the fewest GPU changes; frees GPUs only
            where that costs no extra change). See docs/planner.md, Weights.
        progress: Called with a short message at each stage (the CLI shows it on a TTY).
        what_if: ``{node: config name}`` (``"*"`` for every other node) to replay against
            the window's hourly demand besides the current and proposed layouts (see
            :mod:`~migscope.analyzer.whatif`); GPUs no entry selects keep their layout.
        what_if_config: The mig-parted config the names come from; MIG Manager's generated
            configs (``all-balanced``, ``all-<profile>``, ...) when None.

    Returns:
        The :class:`AnalysisResult`.

    Raises:
        ValueError: a bad window, step, headroom or price.
        UnknownConfigError: a what-if name is not in the config.
    """
    start, end = window
    if price_per_gpu_hour is not None and not (
        math.isfinite(price_per_gpu_hour) and price_per_gpu_hour >= 0
    ):
        raise ValueError(f"price per GPU-hour must be a number >= 0, got {price_per_gpu_hour}")
    policy = policy or default_policy()
    say = progress or (lambda _msg: None)
    notes: list[str] = []

    staged: list[tuple[SliceStats, Classification, float]] = []
    for n, item in enumerate(slices, 1):
        if isinstance(item, SliceSeries):
            stats = slice_stats(item, start=start, end=end, step=step)
            seen = _last_seen(item)
        else:
            stats = item
            seen = item.last_seen if item.last_seen is not None else -math.inf
        verdict = classify(stats, model=_model(stats.info.model), policy=policy)
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
        model = _model(stats.info.model)
        right = _demand_profile(stats, verdict, model, policy)
        mis_sized = right is not None and right != stats.info.profile
        in_use = held and verdict.status is not Status.IDLE and right is not None
        if mis_sized and not keep_mis_sized:
            in_use = False
        if keep_mis_sized and in_use:
            right = stats.info.profile
        pin = pin_reason(stats, verdict, policy=policy)
        results.append((SliceResult(stats, verdict, True, held, in_use, right, pin), seen))

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
    waiting = list(pending)
    for key in sorted(pools):
        model_key = pools[key][0][0].stats.info.model
        model = _model(model_key)
        if model is None:
            continue
        states, current, unplanned = _gpu_states(
            pools[key], model, notes, freeze_all=not history.enough
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
            members, pool=key, model=model, pending=mine, headroom=headroom, policy=policy
        )
        if keep_mis_sized:
            demand = _pinned_demand(demand, pools[key], current, model)
        notes.extend(demand.notes)
        say(f"planning pool {key}: {len(states)} GPUs, demand {demand.total}")
        plan = plan_layouts(
            model,
            states,
            demand.total,
            time_limit_s=time_limit_s,
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
    savings = _savings(final, pool_results, hours=(end - start) / 3600.0, price=price_per_gpu_hour)
    return AnalysisResult(
        window_start=start,
        window_end=end,
        step=step,
        slices=final,
        pools=tuple(pool_results),
        savings=savings,
        mig_parted=mig_parted,
        node_configs=node_configs,
        price_per_gpu_hour=price_per_gpu_hour,
        notes=tuple(dict.fromkeys(notes)),
        what_if=dict(what_if) if what_if else None,
        history=history,
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
    from migscope.analyzer.demand import slice_contribution

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


def _slice_gpu_share(result: SliceResult) -> float:
    """The slice's share of a whole GPU, by compute slices (0 when uncatalogued)."""
    model = _model(result.stats.info.model)
    if model is None:
        return 0.0
    try:
        return model.profile(result.stats.info.profile).compute_slices / model.compute_slices
    except UnknownProfileError:
        return 0.0


def _excess_share(result: SliceResult) -> float:
    """For an oversized slice: the GPU share its suggested profile would give back."""
    model = _model(result.stats.info.model)
    suggested = result.verdict.suggested_profile
    if model is None or suggested is None:
        return 0.0
    try:
        now = model.profile(result.stats.info.profile).compute_slices
        then = model.profile(suggested).compute_slices
    except UnknownProfileError:
        return 0.0
    return max(0, now - then) / model.compute_slices


def _savings(
    slices: Sequence[SliceResult],
    pools: Sequence[PoolResult],
    *,
    hours: float,
    price: float | None,
) -> dict[str, Any]:
    """Headline savings: what the plan frees and what the window wasted, by namespace.

    GPU-hours of a slice are its compute-slice share of a GPU times the hours it was
    observed in the window (coverage × window), so a slice that existed half the week
    counts half.
    """
    current = [s for s in slices if s.current]
    by_ns: dict[str, dict[str, float]] = defaultdict(
        lambda: {"idle_gpu_hours": 0.0, "oversized_gpu_hours": 0.0, "slices": 0.0}
    )
    idle_hours = unalloc_hours = oversized_hours = 0.0
    for s in current:
        observed = hours * min(1.0, s.stats.coverage)
        owner = s.stats.main_owner
        namespace = owner.namespace if owner is not None else "(unallocated)"
        if s.status is Status.IDLE:
            gh = _slice_gpu_share(s) * observed
            idle_hours += gh
            by_ns[namespace]["idle_gpu_hours"] += gh
            by_ns[namespace]["slices"] += 1
        elif s.status is Status.UNALLOCATED:
            gh = _slice_gpu_share(s) * observed
            unalloc_hours += gh
            by_ns["(unallocated)"]["idle_gpu_hours"] += gh
            by_ns["(unallocated)"]["slices"] += 1
        elif s.status is Status.OVERSIZED and s.held:
            gh = _excess_share(s) * observed
            oversized_hours += gh
            by_ns[namespace]["oversized_gpu_hours"] += gh
            by_ns[namespace]["slices"] += 1
    compute_reclaimable = sum(
        round(_slice_gpu_share(s) * (_model(s.stats.info.model) or _NO_MODEL).compute_slices)
        for s in current
        if s.status in (Status.IDLE, Status.UNALLOCATED)
    ) + sum(
        round(_excess_share(s) * (_model(s.stats.info.model) or _NO_MODEL).compute_slices)
        for s in current
        if s.status is Status.OVERSIZED and s.held
    )
    gpus = sum(len(p.plan.gpus) for p in pools)
    busy_before = sum(1 for p in pools for g in p.gpus if any(i.in_use for i in g.instances))
    held_before = {
        (s.stats.info.key.node, s.stats.info.key.gpu)
        for s in current
        if s.held and s.status is not Status.IDLE
    }
    used_after = sum(p.plan.gpus_used for p in pools)
    free_before = gpus - len({k for k in held_before if _in_pools(k, pools)})
    freed = max(0, (gpus - used_after) - free_before)
    wasted = idle_hours + unalloc_hours + oversized_hours
    out: dict[str, Any] = {
        "idle_slices": sum(1 for s in current if s.status is Status.IDLE),
        "unallocated_slices": sum(1 for s in current if s.status is Status.UNALLOCATED),
        "oversized_slices": sum(1 for s in current if s.status is Status.OVERSIZED),
        "compute_slices_reclaimable": compute_reclaimable,
        "gpus_planned": gpus,
        "gpus_in_use_before": gpus - free_before,
        "gpus_pinned_before": busy_before,
        "gpus_used_after": used_after,
        "gpus_freed": freed,
        "gpus_changed": sum(p.plan.gpus_changed for p in pools),
        "nodes_changed": sum(p.plan.nodes_changed for p in pools),
        "unmet_demand": sum(p.plan.unmet_total for p in pools),
        "stranded_compute_slices": sum(p.plan.stranded_compute_slices for p in pools),
        "window_hours": round(hours, 4),
        "gpu_hours_freed": round(freed * hours, 4),
        "idle_gpu_hours": round(idle_hours, 4),
        "unallocated_gpu_hours": round(unalloc_hours, 4),
        "oversized_gpu_hours": round(oversized_hours, 4),
        "wasted_gpu_hours": round(wasted, 4),
        "by_namespace": [
            {
                "namespace": ns,
                "slices": int(v["slices"]),
                "idle_gpu_hours": round(v["idle_gpu_hours"], 4),
                "oversized_gpu_hours": round(v["oversized_gpu_hours"], 4),
                "wasted_gpu_hours": round(v["idle_gpu_hours"] + v["oversized_gpu_hours"], 4),
            }
            for ns, v in sorted(
                by_ns.items(),
                key=lambda kv: -(kv[1]["idle_gpu_hours"] + kv[1]["oversized_gpu_hours"]),
            )
        ],
        "price_per_gpu_hour": price,
    }
    if price is not None:
        out["wasted_cost"] = round(wasted * price, 2)
        out["freed_cost"] = round(freed * hours * price, 2)
        for row in out["by_namespace"]:
            row["wasted_cost"] = round(row["wasted_gpu_hours"] * price, 2)
    return out


class _NoModel:
    compute_slices = 0


_NO_MODEL: Any = _NoModel()


def _in_pools(key: tuple[str, int], pools: Sequence[PoolResult]) -> bool:
    return any((g.node, g.index) == key for p in pools for g in p.gpus)
