"""What the applier is asked to do: node → named config, with the layouts before and after.

The analyzer's ``report.json`` carries everything: ``mig_parted_config`` (the named configs)
and ``recommendations[]`` (each node whose layout changes, with every GPU's current and
proposed layout and the pods the analyzer saw on destroyed instances). ``node-plan.json``
plus the ``mig-parted-config.yaml`` beside it is accepted too (the analyzer writes both into
``--out``), but it lacks the per-GPU layouts of unchanged nodes, which need nothing anyway.

Why the per-GPU layouts matter: MIG Manager (mig-parted) re-creates *every* GPU instance of
a GPU whose layout changes, placements chosen by NVML; an instance the plan "keeps" on a
changed GPU is destroyed and created again all the same. So the pods at risk are all pods
holding devices on changed GPUs, and the applier needs to know which GPUs change.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from migscope.core.migparted import ConfigError, MigPartedConfig, parse_config

__all__ = ["ApplyPlan", "GpuChange", "NodeChange", "PlanError", "load_plan", "plan_from_report"]


class PlanError(ValueError):
    """The plan file cannot be used (one line: file and what is wrong)."""


@dataclass(frozen=True)
class GpuChange:
    """One GPU's layout now and after the change.

    Attributes:
        index: GPU index on the node.
        current: ``{profile: count}`` now (empty with MIG disabled or no instances).
        proposed: ``{profile: count}`` after.
        current_mig: MIG enabled now.
        proposed_mig: MIG enabled after.
    """

    index: int
    current: Mapping[str, int]
    proposed: Mapping[str, int]
    current_mig: bool = True
    proposed_mig: bool = True

    @property
    def changed(self) -> bool:
        """Whether MIG Manager will touch this GPU (and so destroy all its instances)."""
        return (self.current_mig, dict(self.current)) != (self.proposed_mig, dict(self.proposed))


@dataclass(frozen=True)
class NodeChange:
    """One node's change.

    Attributes:
        node: Node name.
        config: The config name for ``nvidia.com/mig.config``.
        gpus: Per-GPU layouts (empty when the plan did not say).
        pods_to_move: ``namespace/pod`` the analyzer saw on destroyed instances.
        disruptive: The analyzer expects a pod to be moved.
    """

    node: str
    config: str
    gpus: tuple[GpuChange, ...] = ()
    pods_to_move: tuple[str, ...] = ()
    disruptive: bool = False

    @property
    def changed_gpus(self) -> tuple[GpuChange, ...]:
        """The GPUs whose layout changes."""
        return tuple(g for g in self.gpus if g.changed)

    def expected_resources(self) -> dict[str, int]:
        """``nvidia.com/mig-<profile>`` counts the node should advertise afterwards."""
        total: Counter[str] = Counter()
        for gpu in self.gpus:
            if gpu.proposed_mig:
                total.update({f"nvidia.com/mig-{p}": n for p, n in gpu.proposed.items()})
        return dict(+total)

    def destroyed_profiles(self) -> set[str]:
        """Profiles with an instance on a GPU that changes (all of them are re-created)."""
        return {p for g in self.changed_gpus for p, n in g.current.items() if n}


@dataclass(frozen=True)
class ApplyPlan:
    """The changes to apply and the mig-parted configs they name.

    Attributes:
        source: Where it was read from.
        nodes: Changed nodes, in the plan's order.
        configs: The named configs (only those the changes name are written).
    """

    source: str
    nodes: tuple[NodeChange, ...]
    configs: MigPartedConfig

    def config_entries(self, name: str) -> MigPartedConfig:
        """A config holding only the named config ``name`` (what one node's change adds)."""
        return MigPartedConfig.of({name: self.configs.mig_configs[name]})


def _layout(value: Any, where: str) -> tuple[bool, dict[str, int]]:
    if not isinstance(value, Mapping):
        raise PlanError(f"{where}: expected {{mig_enabled, layout}}, got {type(value).__name__}")
    layout = value.get("layout") or {}
    if not isinstance(layout, Mapping) or not all(
        isinstance(k, str) and isinstance(n, int) and n >= 0 for k, n in layout.items()
    ):
        raise PlanError(f"{where}: layout must map profile names to counts")
    return bool(value.get("mig_enabled", True)), {k: int(n) for k, n in layout.items()}


def plan_from_report(data: Mapping[str, Any], source: str = "report") -> ApplyPlan:
    """The plan in a report (``AnalysisResult.to_json()`` or a parsed ``report.json``).

    Raises:
        PlanError: the report is inconsistent (one line).
    """
    return _from_report(data, source)


def _from_report(data: Mapping[str, Any], source: str) -> ApplyPlan:
    raw_config = data.get("mig_parted_config")
    recs = data.get("recommendations")
    if not isinstance(recs, list):
        raise PlanError(f"{source}: no 'recommendations' list: not a migscope report")
    if raw_config is None:
        if recs:
            raise PlanError(f"{source}: recommendations without a 'mig_parted_config'")
        return ApplyPlan(source, (), _empty_config())
    try:
        config = MigPartedConfig.model_validate(raw_config)
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise PlanError(f"{source}: mig_parted_config is invalid: {first}") from None
    nodes = []
    for k, rec in enumerate(recs):
        where = f"{source}: recommendations[{k}]"
        if not isinstance(rec, Mapping) or not isinstance(rec.get("node"), str):
            raise PlanError(f"{where}: no node name")
        name = rec.get("mig_config")
        if not isinstance(name, str) or name not in config.mig_configs:
            raise PlanError(f"{where}: mig_config {name!r} is not in mig_parted_config")
        current = {g["gpu"]: _layout(g, f"{where}.current") for g in rec.get("current") or []}
        proposed = {g["gpu"]: _layout(g, f"{where}.proposed") for g in rec.get("proposed") or []}
        gpus = tuple(
            GpuChange(
                index=int(i),
                current=current.get(i, (True, {}))[1],
                proposed=proposed.get(i, (True, {}))[1],
                current_mig=current.get(i, (True, {}))[0],
                proposed_mig=proposed.get(i, (True, {}))[0],
            )
            for i in sorted(set(current) | set(proposed))
        )
        nodes.append(
            NodeChange(
                node=rec["node"],
                config=name,
                gpus=gpus,
                pods_to_move=tuple(str(p) for p in rec.get("pods_to_move") or []),
                disruptive=bool(rec.get("disruptive")),
            )
        )
    _no_duplicates(nodes, source)
    return ApplyPlan(source, tuple(nodes), config)


def _empty_config() -> MigPartedConfig:
    # A plan without changes names no config; mig-parted files need one, so bypass the check.
    return MigPartedConfig.model_construct(version="v1", mig_configs={})


def _from_node_plan(data: Mapping[str, Any], path: Path) -> ApplyPlan:
    beside = path.with_name("mig-parted-config.yaml")
    try:
        config = parse_config(beside.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(
            f"{path}: a node plan needs the mig-parted config beside it ({beside}: "
            f"{exc.strerror or exc})"
        ) from None
    except ConfigError as exc:
        raise PlanError(f"{beside}: {exc}") from None
    nodes = []
    for k, entry in enumerate(data.get("nodes") or []):
        where = f"{path}: nodes[{k}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("node"), str):
            raise PlanError(f"{where}: no node name")
        if not entry.get("changed"):
            continue
        name = entry.get("mig_config")
        if name not in config.mig_configs:
            raise PlanError(f"{where}: mig_config {name!r} is not in {beside.name}")
        nodes.append(
            NodeChange(
                node=entry["node"], config=str(name), disruptive=bool(entry.get("disruptive"))
            )
        )
    _no_duplicates(nodes, str(path))
    return ApplyPlan(str(path), tuple(nodes), config)


def _no_duplicates(nodes: list[NodeChange], source: str) -> None:
    seen = Counter(n.node for n in nodes)
    twice = sorted(n for n, c in seen.items() if c > 1)
    if twice:
        raise PlanError(f"{source}: node {twice[0]} appears more than once")


def load_plan(path: str | os.PathLike[str]) -> ApplyPlan:
    """Read ``report.json`` or ``node-plan.json`` (with ``mig-parted-config.yaml`` beside it).

    Raises:
        PlanError: unreadable, not JSON, not a migscope plan, or inconsistent (one line).
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"{p}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"{p}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(data, Mapping):
        raise PlanError(f"{p}: not a JSON object")
    if data.get("schema_version") != 1:
        raise PlanError(f"{p}: schema_version {data.get('schema_version')!r}, expected 1")
    if "recommendations" in data:
        return _from_report(data, str(p))
    if "nodes" in data:
        return _from_node_plan(data, p)
    raise PlanError(f"{p}: neither a report (recommendations) nor a node plan (nodes)")
