"""What the layout planner returns: a layout per GPU, the coverage it buys, and the configs.

The same :class:`Plan` comes out of the exact solver and of the baselines, so reports and
benchmarks compare like with like, and :func:`score` prices any plan with the same weights.

The mig-parted side follows how MIG Manager works: a node's ``nvidia.com/mig.config`` label
names one config of the mig-parted file, and mig-parted applies that config to every GPU of
the node it selects. So each distinct proposed layout gets one named config (``devices:
all``), and a node whose GPUs need different layouts gets its own config with one entry per
layout and explicit ``devices: [i, ...]`` lists. Identical node plans share a config.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from migscope.analyzer._plan.pool import Instance, Target, Weights
from migscope.core import (
    GpuModel,
    MigConfigEntry,
    MigPartedConfig,
    PlacedInstance,
    entry_for_layout,
)

_LABEL_MAX = 63
_PROFILE_TOKEN = re.compile(r"^(\d+)g\.(\d+)gb(.*)$")


@dataclass(frozen=True)
class GpuPlan:
    """The plan for one GPU.

    Attributes:
        node: Node name.
        index: GPU index on the node.
        current: What the GPU is set to now.
        proposed: What the plan sets it to.
        placements: Proposed instances with their starts (the current ones when unchanged).
        changed: ``proposed != current``; mig-parted leaves an unchanged GPU alone.
        kept: ``(profile, start)`` of the in-use instances, all present in ``placements``
            at the same start unless moving was allowed (then see ``moved``).
        destroyed: Instances that exist now and are not in the proposal at the same
            profile and start. Never an in-use one unless moving was allowed.
        moved: In-use instances the plan puts at another start (only with ``allow_move``).
        disruptive: Changed while holding an in-use instance. mig-parted clears a GPU
            before it builds the new layout, so even an instance the plan keeps in place is
            recreated: its pod must be drained first, or the change skipped.
        demanded: Instances counted towards demand, ``{profile: count}``.
        used: Holds a demanded or an in-use instance.
        stranded_compute_slices: Compute slices of a used GPU in no demanded instance.
        mig_config: The config name the node's ``nvidia.com/mig.config`` label gets.
    """

    node: str
    index: int
    current: Target
    proposed: Target
    placements: tuple[PlacedInstance, ...]
    changed: bool
    kept: tuple[tuple[str, int], ...]
    destroyed: tuple[Instance, ...]
    moved: tuple[tuple[str, int], ...]
    disruptive: bool
    demanded: Mapping[str, int]
    used: bool
    stranded_compute_slices: int
    mig_config: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of one GPU's plan (see ``docs/planner.md``)."""
        return {
            "node": self.node,
            "gpu": self.index,
            "current": self.current.as_dict(),
            "proposed": self.proposed.as_dict(),
            "placements": [{"profile": p.profile.name, "start": p.start} for p in self.placements],
            "changed": self.changed,
            "kept": [{"profile": n, "start": s} for n, s in self.kept],
            "destroyed": [{"profile": i.profile, "start": i.start} for i in self.destroyed],
            "moved": [{"profile": n, "start": s} for n, s in self.moved],
            "disruptive": self.disruptive,
            "demanded": dict(self.demanded),
            "used": self.used,
            "stranded_compute_slices": self.stranded_compute_slices,
            "mig_config": self.mig_config,
        }


@dataclass(frozen=True)
class NodePlan:
    """The plan for one node: the config its label names and whether that is a change.

    Attributes:
        node: Node name.
        mig_config: Config name for ``nvidia.com/mig.config``.
        changed: At least one GPU of the node changes; otherwise the label needs no update.
        disruptive: At least one changed GPU holds an in-use instance.
        gpus: GPU indices the plan covers on this node.
    """

    node: str
    mig_config: str
    changed: bool
    disruptive: bool
    gpus: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of one node's plan."""
        return {
            "node": self.node,
            "mig_config": self.mig_config,
            "changed": self.changed,
            "disruptive": self.disruptive,
            "gpus": list(self.gpus),
        }


@dataclass(frozen=True)
class SolveInfo:
    """How a plan was found, and how good it is proven to be.

    Attributes:
        method: ``"milp"``, ``"greedy-first-fit"`` or ``"static"``.
        status: ``"optimal"`` (proven), ``"time_limit"`` (best found when time ran out),
            ``"heuristic"`` (a baseline: layouts not optimised), or ``"fallback"`` (the
            solver found nothing in time; every GPU keeps its layout).
        objective: Solver objective of the chosen plan (None for heuristics).
        best_bound: Best proven lower bound on the objective (None for heuristics).
        gap: Proven relative gap ``(objective - bound) / |objective|`` (0 when optimal).
        wall_s: Wall-clock seconds of the whole call, preparation included.
        solver_s: Seconds inside HiGHS.
        classes: GPU classes (same current layout, same kept instances) the model uses.
        variables: MILP columns.
        constraints: MILP rows.
    """

    method: str
    status: str
    objective: float | None = None
    best_bound: float | None = None
    gap: float | None = None
    wall_s: float = 0.0
    solver_s: float = 0.0
    classes: int = 0
    variables: int = 0
    constraints: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of the solve information."""
        return {
            "method": self.method,
            "status": self.status,
            "objective": self.objective,
            "best_bound": self.best_bound,
            "gap": self.gap,
            "wall_s": round(self.wall_s, 4),
            "solver_s": round(self.solver_s, 4),
            "classes": self.classes,
            "variables": self.variables,
            "constraints": self.constraints,
        }


@dataclass(frozen=True)
class Plan:
    """A layout for every GPU of a pool, what it covers, and how to apply it.

    Attributes:
        model: The pool's GPU model.
        demand: Instances wanted per profile (canonical names).
        covered: Instances of the plan counted towards demand, per demanded profile.
        unmet: ``demand - covered`` per demanded profile (zeros included).
        gpus: One :class:`GpuPlan` per GPU, sorted by node and index.
        nodes: One :class:`NodePlan` per node, sorted by node.
        mig_parted: The mig-parted config holding every config the nodes name.
        weights: The weights the plan was scored (and, for the MILP, optimised) with.
        objective: :func:`score` of this plan under ``weights``.
        solve: How it was found.
    """

    model: GpuModel
    demand: Mapping[str, int]
    covered: Mapping[str, int]
    unmet: Mapping[str, int]
    gpus: tuple[GpuPlan, ...]
    nodes: tuple[NodePlan, ...]
    mig_parted: MigPartedConfig
    weights: Weights
    objective: float
    solve: SolveInfo
    notes: tuple[str, ...] = field(default=())

    @property
    def gpus_changed(self) -> int:
        """GPUs whose layout changes."""
        return sum(g.changed for g in self.gpus)

    @property
    def gpus_disruptive(self) -> int:
        """Changed GPUs holding an in-use instance (need a drain first)."""
        return sum(g.disruptive for g in self.gpus)

    @property
    def gpus_used(self) -> int:
        """GPUs holding a demanded or in-use instance."""
        return sum(g.used for g in self.gpus)

    @property
    def gpus_free(self) -> int:
        """GPUs holding nothing anyone needs: whole GPUs the plan frees."""
        return len(self.gpus) - self.gpus_used

    @property
    def gpus_parked(self) -> int:
        """Free GPUs set to an empty layout or MIG disabled."""
        return sum(not g.used and g.proposed.empty for g in self.gpus)

    @property
    def stranded_compute_slices(self) -> int:
        """Compute slices of used GPUs that are in no demanded instance."""
        return sum(g.stranded_compute_slices for g in self.gpus)

    @property
    def nodes_changed(self) -> int:
        """Nodes whose config label must change."""
        return sum(n.changed for n in self.nodes)

    @property
    def unmet_total(self) -> int:
        """Instances of demand left uncovered, all profiles together."""
        return sum(self.unmet.values())

    @property
    def node_configs(self) -> dict[str, str]:
        """``{node: config name}``, the values for ``nvidia.com/mig.config``."""
        return {n.node: n.mig_config for n in self.nodes}

    def summary(self) -> dict[str, Any]:
        """The headline numbers, for tables and logs."""
        return {
            "gpus": len(self.gpus),
            "gpus_used": self.gpus_used,
            "gpus_free": self.gpus_free,
            "gpus_parked": self.gpus_parked,
            "gpus_changed": self.gpus_changed,
            "gpus_disruptive": self.gpus_disruptive,
            "nodes_changed": self.nodes_changed,
            "stranded_compute_slices": self.stranded_compute_slices,
            "unmet": dict(self.unmet),
            "unmet_total": self.unmet_total,
            "objective": self.objective,
        }

    def as_dict(self) -> dict[str, Any]:
        """The whole plan as JSON-ready data (schema in ``docs/planner.md``)."""
        return {
            "model": self.model.key,
            "demand": dict(self.demand),
            "covered": dict(self.covered),
            "unmet": dict(self.unmet),
            "summary": self.summary(),
            "weights": self.weights.as_dict(),
            "solve": self.solve.as_dict(),
            "gpus": [g.as_dict() for g in self.gpus],
            "nodes": [n.as_dict() for n in self.nodes],
            "mig_parted_config": self.mig_parted.model_dump(by_alias=True, exclude_none=True),
            "notes": list(self.notes),
        }


def score(
    *,
    weights: Weights,
    unmet_compute: int,
    changed: int,
    busy_changed: int,
    stranded: int,
    used: int,
) -> float:
    """The objective value of a plan with these totals (lower is better)."""
    return (
        weights.unmet * unmet_compute
        + weights.change * changed
        + weights.busy_change * busy_changed
        + weights.stranded * stranded
        + weights.used * used
    )


def _profile_token(name: str) -> str:
    """``3g.71gb`` → ``3g71``, ``1g.18gb+me`` → ``1g18me``, ``1g.24gb-me`` → ``1g24nome``."""
    match = _PROFILE_TOKEN.match(name.lower())
    if match is None:
        return re.sub(r"[^a-z0-9]", "", name.lower())
    g, mem, attr = match.groups()
    attr = attr.replace("-me", "nome")
    return f"{g}g{mem}{re.sub(r'[^a-z0-9]', '', attr)}"


def config_name(model: GpuModel, target: Target) -> str:
    """The mig-parted config name for giving every GPU of a node ``target``.

    Names are valid Kubernetes label values (they are the value of ``nvidia.com/mig.config``)
    and say what they hold: ``migscope-h200-141gb-3g71-2g35x2``. The model key is part of the
    name because two models can share profile names with different device filters (H100 SXM
    and PCIe), and configs of several pools live in one ConfigMap.
    """
    prefix = f"migscope-{model.key.lower()}"
    if not target.mig_enabled:
        return f"{prefix}-disabled"
    if target.empty:
        return f"{prefix}-empty"
    parts = [_profile_token(n) + (f"x{c}" if c > 1 else "") for n, c in target.layout.counts]
    name = f"{prefix}-{'-'.join(parts)}"
    if len(name) <= _LABEL_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{prefix}-layout-{digest}"


def _entry(model: GpuModel, target: Target, devices: Sequence[int] | None) -> MigConfigEntry:
    chosen: Literal["all"] | tuple[int, ...] = "all" if devices is None else tuple(devices)
    if not target.mig_enabled:
        return MigConfigEntry(
            devices=chosen, device_filter=tuple(model.device_filter()), mig_enabled=False
        )
    return entry_for_layout(target.layout, device_filter=model, devices=chosen)


def _target_order(target: Target) -> tuple[bool, str]:
    return (not target.mig_enabled, config_name_key(target))


def config_name_key(target: Target) -> str:
    """A stable sort key for targets (the layout's printed form)."""
    return "disabled" if not target.mig_enabled else str(target.layout)


def build_mig_parted(
    model: GpuModel, gpus: Sequence[tuple[str, int, Target]]
) -> tuple[MigPartedConfig, dict[str, str]]:
    """The mig-parted config and ``{node: config name}`` for per-GPU targets.

    Args:
        model: The pool's model (its PCI IDs become each entry's ``device-filter``, so a
            config never touches another model's GPUs on a mixed node).
        gpus: ``(node, index, target)`` of every GPU in the plan.

    Returns:
        The config (one entry per distinct target, then one per distinct mixed node plan)
        and the config name of each node.
    """
    by_node: dict[str, list[tuple[int, Target]]] = {}
    for node, index, target in gpus:
        by_node.setdefault(node, []).append((index, target))
    layouts: dict[str, tuple[MigConfigEntry, ...]] = {}
    for target in sorted({t for _, _, t in gpus}, key=_target_order):
        layouts[config_name(model, target)] = (_entry(model, target, None),)
    mixed: dict[str, tuple[MigConfigEntry, ...]] = {}
    node_config: dict[str, str] = {}
    for node in sorted(by_node):
        members = sorted(by_node[node], key=lambda item: item[0])
        targets = sorted({t for _, t in members}, key=_target_order)
        if len(targets) == 1:
            node_config[node] = config_name(model, targets[0])
            continue
        entries = tuple(
            _entry(model, target, [i for i, t in members if t == target]) for target in targets
        )
        text = repr([(config_name(model, t), [i for i, u in members if u == t]) for t in targets])
        name = f"migscope-{model.key.lower()}-node-{hashlib.sha256(text.encode()).hexdigest()[:10]}"
        mixed[name] = entries
        node_config[node] = name
    configs = dict(layouts)
    configs.update(sorted(mixed.items()))
    return MigPartedConfig.of(configs), node_config
