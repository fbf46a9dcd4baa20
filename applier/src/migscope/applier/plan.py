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

Both files carry a ``provenance`` object (where the data came from, whether it was
simulated, when the plan was made; :class:`Provenance`). It decides whether a plan may be
applied at all (:meth:`ApplyPlan.refusal`): layouts computed from a simulation describe no
real cluster, and a stale plan describes the cluster as it was, so neither is applied by
default. Plans written before provenance existed have none and are never applied either.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from migscope.core.disruption import GpuLayouts, gpu_recreated, violations
from migscope.core.errors import UserError
from migscope.core.migparted import ConfigError, MigPartedConfig, parse_config

__all__ = [
    "DEFAULT_MAX_PLAN_AGE_S",
    "ApplyPlan",
    "GpuChange",
    "NodeChange",
    "PlanError",
    "PlanRefused",
    "Provenance",
    "format_age",
    "load_plan",
    "plan_from_report",
]

DEFAULT_MAX_PLAN_AGE_S = 24 * 3600.0
"""``--max-plan-age``: a day-old plan still describes the cluster; an older one may not."""

FUTURE_SLACK_S = 300.0
"""How far in the future a plan's creation time may be (clock skew) before it is suspect."""


class PlanError(UserError, ValueError):
    """The plan file cannot be used (one line: file and what is wrong)."""


class PlanRefused(PlanError):
    """The plan is readable but must not be applied (simulated, too old, of unknown origin).

    Args:
        source: The plan's file (or "the analysis").
        why: :meth:`ApplyPlan.refusal`'s reason.
    """

    def __init__(self, source: str, why: str) -> None:
        super().__init__(f"refusing to apply {source}: {why}")
        self.why = why


@dataclass(frozen=True)
class Provenance:
    """Where a plan's data came from and when the plan was made (``provenance`` in the file).

    Attributes:
        kind: ``source.kind``: ``prometheus``, ``file``, ``simulation``, or what a newer
            analyzer writes.
        simulated: The data came from a simulation (``simulated``, or a ``simulation``
            source): the plan describes no real cluster.
        created_unix: When the plan was made (Unix seconds).
        created: The same as the file spells it (for messages).
        source: The whole ``source`` object (``url``, ``path`` or ``scenarios``).
    """

    kind: str
    simulated: bool
    created_unix: float
    created: str = ""
    source: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``prometheus http://...``, ``file x.json``, ``simulation h200-node``: for messages."""
        detail = self.source.get("url") or self.source.get("path")
        scenarios = self.source.get("scenarios")
        if detail is None and isinstance(scenarios, list):
            detail = ", ".join(str(x) for x in scenarios)
        return f"{self.kind} {detail}" if detail else self.kind

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, in the file's shape."""
        return {
            "source": dict(self.source),
            "simulated": self.simulated,
            "created": self.created,
            "created_unix": self.created_unix,
        }


def format_age(seconds: float) -> str:
    """``45 s``, ``90 min``, ``25.0 h``, ``3.5 days``: durations for messages."""
    s = abs(seconds)
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


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
        """Whether MIG Manager will touch this GPU (and so destroy all its instances).

        The report computed the same with the same code (:mod:`migscope.core.disruption`).
        """
        return gpu_recreated(
            GpuLayouts(self.index, self.current, self.proposed, self.current_mig, self.proposed_mig)
        )


@dataclass(frozen=True)
class NodeChange:
    """One node's change.

    Attributes:
        node: Node name.
        config: The config name for ``nvidia.com/mig.config``.
        gpus: Per-GPU layouts (empty when the plan did not say).
        pods_to_move: ``namespace/pod`` the analyzer saw on the GPUs the change re-creates.
        disruptive: The analyzer expects a pod to be moved.
        unsafe: Where the recommendation breaks the safety contract, as
            :func:`migscope.core.disruption.violations` re-checks it on the plan's own data
            (empty: safe). ``--apply`` skips a node with any.
    """

    node: str
    config: str
    gpus: tuple[GpuChange, ...] = ()
    pods_to_move: tuple[str, ...] = ()
    disruptive: bool = False
    unsafe: tuple[str, ...] = ()

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
        provenance: Where its data came from and when it was made; None for a file written
            before migscope recorded that (such a plan is never applied).
    """

    source: str
    nodes: tuple[NodeChange, ...]
    configs: MigPartedConfig
    provenance: Provenance | None = None

    def config_entries(self, name: str) -> MigPartedConfig:
        """A config holding only the named config ``name`` (what one node's change adds)."""
        return MigPartedConfig.of({name: self.configs.mig_configs[name]})

    def refusal(self, *, now: float, allow_simulated: bool, max_age_s: float | None) -> str:
        """Why ``--apply`` must not apply this plan ("" when it may), in one line.

        The rules, in order: a plan without provenance is of unknown origin and age; a plan
        from simulated data describes no real cluster (``allow_simulated``: test clusters
        only); a plan older than ``max_age_s`` (None: no limit) describes the cluster as it
        was, and a plan made more than :data:`FUTURE_SLACK_S` in the future means a clock is
        wrong, so its age is unknown. Each reason ends with what to do about it.
        """
        p = self.provenance
        if p is None:
            return (
                "it has no provenance (written by an older migscope, or not by migscope "
                "analyze): re-run `migscope analyze` for a plan that can be applied"
            )
        if p.simulated and not allow_simulated:
            return (
                f"it comes from simulated data ({p.describe()}), not from a cluster; "
                "--allow-simulated applies it anyway, for test clusters only"
            )
        age = now - p.created_unix
        created = p.created or datetime.fromtimestamp(p.created_unix, tz=timezone.utc).isoformat()
        if age < -FUTURE_SLACK_S:
            return (
                f"it was created {format_age(age)} in the future ({created}): check the clocks "
                "of this machine and of the one that ran `migscope analyze`"
            )
        if max_age_s is not None and age > max_age_s:
            return (
                f"it is {format_age(age)} old (created {created}), over --max-plan-age "
                f"{format_age(max_age_s)}: re-run `migscope analyze`, or raise --max-plan-age"
            )
        return ""


def _layout(value: Any, where: str) -> tuple[bool, dict[str, int]]:
    if not isinstance(value, Mapping):
        raise PlanError(f"{where}: expected {{mig_enabled, layout}}, got {type(value).__name__}")
    layout = value.get("layout") or {}
    if not isinstance(layout, Mapping) or not all(
        isinstance(k, str) and isinstance(n, int) and n >= 0 for k, n in layout.items()
    ):
        raise PlanError(f"{where}: layout must map profile names to counts")
    return bool(value.get("mig_enabled", True)), {k: int(n) for k, n in layout.items()}


def _provenance(data: Mapping[str, Any], source: str) -> Provenance | None:
    """The file's ``provenance``; None when it has none. Malformed: :class:`PlanError`.

    A provenance that is there but unreadable is an error rather than "none": a plan that
    claims an origin it cannot state is not one to apply, nor to describe as if it were fine.
    """
    raw = data.get("provenance")
    if raw is None:
        return None
    where = f"{source}: provenance"
    if not isinstance(raw, Mapping):
        raise PlanError(f"{where}: expected an object, got {type(raw).__name__}")
    src = raw.get("source")
    if not isinstance(src, Mapping) or not isinstance(src.get("kind"), str) or not src["kind"]:
        raise PlanError(f"{where}.source: expected an object with a 'kind'")
    kind = str(src["kind"])
    simulated = raw.get("simulated", False)
    if not isinstance(simulated, bool):
        raise PlanError(f"{where}.simulated: expected true or false, got {simulated!r}")
    created = raw.get("created")
    if created is not None and not isinstance(created, str):
        raise PlanError(f"{where}.created: expected an RFC 3339 time, got {created!r}")
    stamp = raw.get("created_unix")
    if stamp is not None:
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
            raise PlanError(f"{where}.created_unix: expected Unix seconds, got {stamp!r}")
        if not math.isfinite(stamp):
            raise PlanError(f"{where}.created_unix: expected Unix seconds, got {stamp!r}")
        created_unix = float(stamp)
    elif created:
        created_unix = _rfc3339(created, f"{where}.created")
    else:
        raise PlanError(f"{where}: no 'created_unix' or 'created': the plan's age is unknown")
    return Provenance(
        kind=kind,
        # Either says so: a simulation source is simulated whatever the flag claims.
        simulated=simulated or kind == "simulation",
        created_unix=created_unix,
        created=created or "",
        source=dict(src),
    )


def _rfc3339(text: str, where: str) -> float:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise PlanError(f"{where}: not an RFC 3339 time: {text!r}") from None
    if when.tzinfo is None:
        raise PlanError(f"{where}: {text!r} has no time zone (write e.g. ...Z)")
    return when.timestamp()


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
    provenance = _provenance(data, source)
    if raw_config is None:
        if recs:
            raise PlanError(f"{source}: recommendations without a 'mig_parted_config'")
        return ApplyPlan(source, (), _empty_config(), provenance)
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
                unsafe=tuple(violations(rec)),
            )
        )
    _no_duplicates(nodes, source)
    return ApplyPlan(source, tuple(nodes), config, provenance)


NO_EVIDENCE = (
    "node-plan.json carries no per-slice evidence to re-check the safety contract with: "
    "apply report.json instead"
)


def _empty_config() -> MigPartedConfig:
    # A plan without changes names no config; mig-parted files need one, so bypass the check.
    return MigPartedConfig.model_construct(version="v1", mig_configs={})


def _from_node_plan(data: Mapping[str, Any], path: Path) -> ApplyPlan:
    provenance = _provenance(data, str(path))
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
                node=entry["node"],
                config=str(name),
                disruptive=bool(entry.get("disruptive")),
                unsafe=(NO_EVIDENCE,),
            )
        )
    _no_duplicates(nodes, str(path))
    return ApplyPlan(str(path), tuple(nodes), config, provenance)


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
