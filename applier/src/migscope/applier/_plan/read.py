"""Reading a plan: ``report.json`` or ``node-plan.json`` into an :class:`ApplyPlan`.

The analyzer's ``report.json`` carries everything: ``mig_parted_config`` (the named configs)
and ``recommendations[]`` (each node whose layout changes, with every GPU's current and
proposed layout and the pods the analyzer saw on destroyed instances). ``node-plan.json``
plus the ``mig-parted-config.yaml`` beside it is accepted too (the analyzer writes both into
``--out``), but it lacks the per-GPU layouts and per-slice evidence, so its changes cannot
be re-checked against the safety contract and are never applied (:data:`NO_EVIDENCE`).

Both are read through the report contract (:mod:`~migscope.applier._plan.contract`, views of
:mod:`migscope.core._spec.v1`); what the types cannot say is checked here: the named config
exists, a node appears once, counts are not negative, the provenance states an origin and a
time; and every config the plan names and every layout is checked against the MIG catalogue
(:mod:`~migscope.applier._plan.validate`): a plan failing that is refused whole, before any
caller contacts the cluster. Every recommendation is re-checked against the safety contract
on the file's own data (:func:`migscope.core._disruption.violations`); a node that breaks it
is kept in the plan, marked ``unsafe``, and skipped by the applier with the reason.

Both files carry a ``provenance`` object (where the data came from, whether it was
simulated, when the plan was made). A provenance that is there but unreadable is an error
rather than "none": a plan that claims an origin it cannot state is not one to apply, nor to
describe as if it were fine.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from migscope.applier._plan.contract import (
    NodePlanView,
    ProvenanceView,
    RecommendationView,
    ReportView,
    validate_view,
)
from migscope.applier._plan.model import ApplyPlan, GpuChange, NodeChange, PlanError, Provenance
from migscope.applier._plan.validate import check_config_named, check_layouts, model_named
from migscope.core import (
    NODE_PLAN_FILE,
    REPORT_FILE,
    SCHEMA_VERSION,
    ConfigError,
    GpuLayoutV1,
    MigPartedConfig,
    parse_config,
    violations,
)

MIG_PARTED_FILE = "mig-parted-config.yaml"
"""The mig-parted config the analyzer writes beside ``node-plan.json``."""

NO_EVIDENCE = (
    f"{NODE_PLAN_FILE} carries no per-slice evidence to re-check the safety contract with: "
    f"apply {REPORT_FILE} instead"
)


def load_plan(path: str | os.PathLike[str]) -> ApplyPlan:
    """Read ``report.json`` or ``node-plan.json`` (with ``mig-parted-config.yaml`` beside it).

    Which of the two a file is, its keys say (``recommendations`` or ``nodes``), not its name.

    Args:
        path: The file.

    Returns:
        The plan, its ``source`` the path.

    Raises:
        PlanError: unreadable, not JSON, not a migscope plan, or inconsistent (one line;
            the underlying error is its cause).
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"{p}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise PlanError(f"{p}:{exc.lineno}: not JSON: {exc.msg}") from exc
    if not isinstance(data, Mapping):
        raise PlanError(f"{p}: not a JSON object")
    if data.get("schema_version") != SCHEMA_VERSION:
        # Before the shape: a file of another version is refused for that, whatever it holds.
        raise PlanError(
            f"{p}: schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        )
    if "recommendations" in data:
        return _from_report(data, str(p))
    if "nodes" in data:
        return _from_node_plan(data, p)
    raise PlanError(f"{p}: neither a report (recommendations) nor a node plan (nodes)")


def plan_from_report(data: Mapping[str, Any], source: str = "report") -> ApplyPlan:
    """The plan in a report: a parsed ``report.json``, or ``report_json(build_report(result))``.

    Args:
        data: The report.
        source: What to call it in messages and in the plan (a file name, "the analysis").

    Returns:
        The plan; a recommendation that breaks the safety contract is in it, ``unsafe``.

    Raises:
        PlanError: the report is malformed or inconsistent (one line).
    """
    return _from_report(data, source)


def _from_report(data: Mapping[str, Any], source: str) -> ApplyPlan:
    report: ReportView = validate_view(ReportView, data, source)
    provenance = _provenance(report.provenance, source)
    config = report.mig_parted_config  # validated with the report: a bad one is refused there
    if config is None:
        if report.recommendations:
            raise PlanError(f"{source}: recommendations without a 'mig_parted_config'")
        return ApplyPlan(source, (), _empty_config(), provenance)
    as_written: Sequence[Mapping[str, Any]] = data["recommendations"]
    uuids = _gpu_uuids(data)
    nodes = []
    for k, rec in enumerate(report.recommendations):
        where = f"{source}: recommendations[{k}]"
        nodes.append(_node_change(rec, as_written[k], where, config, uuids))
        _check_on_catalogue(rec, config, source, f"recommendations[{k}] ({_shown(rec.node)})")
    _no_duplicates(nodes, source)
    if provenance is not None:
        nodes = [replace(n, placed_at=provenance.created_unix) for n in nodes]
    pools, now = _pools(data)
    return ApplyPlan(source, tuple(nodes), config, provenance, pools=pools, profiles_now=now)


def _pools(data: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """``{node: pool}`` and ``{node: current profiles}`` from the report's ``slices``.

    Read leniently: a report without them (older, or hand-made) gives empty maps, and the
    stranding check they feed is then skipped rather than wrong.
    """
    pools: dict[str, str] = {}
    now: dict[str, set[str]] = {}
    slices = data.get("slices")
    if not isinstance(slices, list):
        return {}, {}
    for entry in slices:
        if not isinstance(entry, Mapping):
            continue
        node, pool, profile = entry.get("node"), entry.get("pool"), entry.get("profile")
        if not isinstance(node, str):
            continue
        if isinstance(pool, str):
            pools[node] = pool
        if entry.get("current") is True and isinstance(profile, str):
            now.setdefault(node, set()).add(profile)
    return pools, {k: frozenset(v) for k, v in now.items()}


def _gpu_uuids(data: Mapping[str, Any]) -> dict[tuple[str, int], str]:
    """``{(node, GPU index): GPU UUID}`` from the report's ``slices``, only where sure.

    Each slice names its GPU both ways (``gpu``, ``gpu_uuid``: the exporter's labels of one
    series). An index seen with two UUIDs (a GPU replaced within the window) or a UUID seen
    at two places is left out: a wrong pairing would tell a DRA holder's device to be on a
    GPU the change keeps while it is on one the change re-creates, so a pairing in doubt is
    no pairing (the holder then keeps the rule that does not need one). Read leniently, as
    :func:`_pools`: a report without them gives an empty map.
    """
    seen: dict[tuple[str, int], set[str]] = {}
    slices = data.get("slices")
    if not isinstance(slices, list):
        return {}
    for entry in slices:
        if not isinstance(entry, Mapping):
            continue
        node, gpu, uuid = entry.get("node"), entry.get("gpu"), entry.get("gpu_uuid")
        if isinstance(node, str) and type(gpu) is int and isinstance(uuid, str) and uuid:
            seen.setdefault((node, gpu), set()).add(uuid)
    places = Counter(u.lower() for uuids in seen.values() for u in {x.lower() for x in uuids})
    out: dict[tuple[str, int], str] = {}
    for where, uuids in seen.items():
        if len({u.lower() for u in uuids}) == 1:
            uuid = min(uuids)
            if places[uuid.lower()] == 1:
                out[where] = uuid
    return out


def _check_on_catalogue(
    rec: RecommendationView, config: MigPartedConfig, source: str, where: str
) -> None:
    """Refuse the plan unless the recommendation's config and layouts fit its GPU model."""
    model = model_named(rec.model, source, where)
    check_config_named(config, rec.mig_config, model, source, where)
    check_layouts(rec.current, model, source, f"{where}.current", placeable=False)
    check_layouts(rec.proposed, model, source, f"{where}.proposed", placeable=True)


def _shown(name: str) -> str:
    """A name from the file as a message shows it: as is, or quoted when it would break the line."""
    return name if name.isprintable() else repr(name)


def _node_change(
    rec: RecommendationView,
    as_written: Mapping[str, Any],
    where: str,
    config: MigPartedConfig,
    uuids: Mapping[tuple[str, int], str],
) -> NodeChange:
    """One recommendation as a change, re-checked against the safety contract as written.

    ``uuids`` (:func:`_gpu_uuids`) names each GPU's UUID where the report is sure of it.
    """
    if rec.mig_config not in config.mig_configs:
        raise PlanError(f"{where}: mig_config {rec.mig_config!r} is not in mig_parted_config")
    current = _by_gpu(rec.current, f"{where}.current")
    proposed = _by_gpu(rec.proposed, f"{where}.proposed")
    gpus = tuple(
        GpuChange(
            index=i,
            current=current.get(i, _ABSENT).layout,
            proposed=proposed.get(i, _ABSENT).layout,
            current_mig=current.get(i, _ABSENT).mig_enabled,
            proposed_mig=proposed.get(i, _ABSENT).mig_enabled,
            uuid=uuids.get((rec.node, i), ""),
        )
        for i in sorted(set(current) | set(proposed))
    )
    return NodeChange(
        node=rec.node,
        config=rec.mig_config,
        gpus=gpus,
        pods_to_move=tuple(rec.pods_to_move),
        disruptive=rec.disruptive,
        unsafe=tuple(violations(as_written)),
        placed=_placed(as_written),
    )


def _placed(as_written: Mapping[str, Any]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``(pod, GPUs)`` from the recommendation's per-GPU ``slices``.

    Empty when they are malformed: the safety re-check reports that, and the applier then
    uses its broad rule.
    """
    gpus: dict[str, set[int]] = {}
    slices = as_written.get("slices")
    if not isinstance(slices, list):
        return ()
    for entry in slices:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("gpu"), int):
            return ()
        pods = entry.get("pods") or []
        if not isinstance(pods, list) or not all(isinstance(x, str) for x in pods):
            return ()
        for pod in pods:
            gpus.setdefault(pod, set()).add(entry["gpu"])
    return tuple(sorted((pod, tuple(sorted(g))) for pod, g in gpus.items()))


_ABSENT = GpuLayoutV1(gpu=-1, mig_enabled=True, layout={})
"""A GPU one side of a recommendation does not list: MIG on, no instances."""


def _by_gpu(layouts: Sequence[GpuLayoutV1], where: str) -> dict[int, GpuLayoutV1]:
    """``{gpu: layout}``; the types are the spec's, a negative count is the applier's check."""
    for j, g in enumerate(layouts):
        if any(n < 0 for n in g.layout.values()):
            raise PlanError(f"{where}[{j}]: layout must map profile names to counts")
    return {g.gpu: g for g in layouts}


def _from_node_plan(data: Mapping[str, Any], path: Path) -> ApplyPlan:
    plan: NodePlanView = validate_view(NodePlanView, data, str(path))
    provenance = _provenance(plan.provenance, str(path))
    beside = path.with_name(MIG_PARTED_FILE)
    try:
        config = parse_config(beside.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(
            f"{path}: a node plan needs the mig-parted config beside it ({beside}: "
            f"{exc.strerror or exc})"
        ) from exc
    except ConfigError as exc:
        raise PlanError(f"{beside}: {exc}") from exc
    nodes = []
    for k, entry in enumerate(plan.nodes):
        if not entry.changed:
            continue
        if entry.mig_config is None or entry.mig_config not in config.mig_configs:
            raise PlanError(
                f"{path}: nodes[{k}]: mig_config {entry.mig_config!r} is not in {beside.name}"
            )
        # No model in a node plan: checked on every catalogued model the config can reach.
        check_config_named(
            config, entry.mig_config, None, str(path), f"nodes[{k}] ({_shown(entry.node)})"
        )
        nodes.append(
            NodeChange(
                node=entry.node,
                config=entry.mig_config,
                disruptive=entry.disruptive,
                unsafe=(NO_EVIDENCE,),
            )
        )
    _no_duplicates(nodes, str(path))
    return ApplyPlan(str(path), tuple(nodes), config, provenance)


def _provenance(view: ProvenanceView | None, source: str) -> Provenance | None:
    """The plan's :class:`Provenance`; None when the file has none. Unusable: :class:`PlanError`."""
    if view is None:
        return None
    where = f"{source}: provenance"
    kind = view.source.kind
    if not kind:
        raise PlanError(f"{where}.source: expected an object with a 'kind'")
    stamp = view.created_unix
    if stamp is not None:
        if not math.isfinite(stamp):
            raise PlanError(f"{where}.created_unix: expected Unix seconds, got {stamp!r}")
        created_unix = stamp
    elif view.created:
        created_unix = _rfc3339(view.created, f"{where}.created")
    else:
        raise PlanError(f"{where}: no 'created_unix' or 'created': the plan's age is unknown")
    return Provenance(
        kind=kind,
        # Either says so: a simulation source is simulated whatever the flag claims.
        simulated=view.simulated or kind == "simulation",
        created_unix=created_unix,
        created=view.created or "",
        source=view.source.model_dump(exclude_unset=True),
    )


def _rfc3339(text: str, where: str) -> float:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise PlanError(f"{where}: not an RFC 3339 time: {text!r}") from exc
    if when.tzinfo is None:
        raise PlanError(f"{where}: {text!r} has no time zone (write e.g. ...Z)")
    return when.timestamp()


def _empty_config() -> MigPartedConfig:
    # A plan without changes names no config; mig-parted files need one, so bypass the check.
    return MigPartedConfig.model_construct(version="v1", mig_configs={})


def _no_duplicates(nodes: Sequence[NodeChange], source: str) -> None:
    seen = Counter(n.node for n in nodes)
    twice = sorted(n for n, c in seen.items() if c > 1)
    if twice:
        raise PlanError(f"{source}: node {twice[0]} appears more than once")
