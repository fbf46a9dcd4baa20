"""The report contract (:mod:`migscope.core._spec.v1`) as the applier reads it, and its errors.

``report.json`` and ``node-plan.json`` are validated against the spec's own models and types
before anything is built from them. The applier reads only part of each file, though, and
must keep applying files the analyzer wrote before a field existed, or that a person trimmed
by hand. So each model here is a *view* of a spec model:

- **Types are the spec's.** Every field has the annotation the spec gives it (the spec's
  ``GpuLayoutV1`` is used as is), with the spec's strictness and extra keys allowed; a view
  may only add ``| None`` where the applier has a rule for the value being absent.
  ``tests/applier/test_plan_contract.py`` holds each view to that.
- **Presence is the applier's.** A field it does not read is not required (a report without
  ``savings`` still names its changes); a field it reads keeps the meaning its absence always
  had (no ``disruptive``: not disruptive; no ``current``: no per-GPU layouts, which the safety
  re-check then reports). Besides the lists themselves, only ``node`` and ``mig_config`` of a
  recommendation, ``node`` of a node plan's entry and ``source`` of a provenance are required.

A :class:`pydantic.ValidationError` becomes one line, :func:`plan_problem`: the file, the
first bad field as ``recommendations[0].node``, what is wrong with it, and how many more
problems there are: ``report.json: recommendations[0].node: must be a string, got the number
3``. It reads as every migscope file error does
(:func:`migscope.core._validation.describe_error`), except where the applier has long had its
own words (the schema version, a report without recommendations, layouts, provenance).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from migscope.applier._plan.model import PlanError
from migscope.core import (
    BUILTIN_WORDING,
    GpuLayoutV1,
    Loc,
    MigPartedConfig,
    NodePlanEntryV1,
    NodePlanV1,
    ProvenanceV1,
    RecommendationV1,
    ReportV1,
    SourceV1,
    describe_error,
    describe_location,
    first_problem,
)


class ProvenanceView(BaseModel):
    """:class:`~migscope.core._spec.v1.ProvenanceV1` as the applier reads it.

    ``simulated`` absent is false; ``created`` or ``created_unix`` alone is enough (the
    applier derives the other), and which of them is missing is the applier's own check.
    """

    model_config = ProvenanceV1.model_config
    source: SourceV1
    simulated: bool = False
    created: str | None = None
    created_unix: float | None = None


class RecommendationView(BaseModel):
    """:class:`~migscope.core._spec.v1.RecommendationV1`: what a node change needs.

    ``model`` (the catalogue key of the node's GPUs) is what its config and layouts are
    checked on; without it they are checked on every catalogued model they can reach.
    ``slices`` and ``gpus_recreated`` are not read here: the safety re-check
    (:func:`migscope.core._disruption.violations`) reads them from the file as written and
    reports a malformed or missing entry as a violation of that node, not of the plan.
    """

    model_config = RecommendationV1.model_config
    node: str
    model: str | None = None
    mig_config: str
    current: list[GpuLayoutV1] = []
    proposed: list[GpuLayoutV1] = []
    disruptive: bool = False
    pods_to_move: list[str] = []


class ReportView(BaseModel):
    """:class:`~migscope.core._spec.v1.ReportV1`: the plan in a report and where it came from."""

    model_config = ReportV1.model_config
    schema_version: Literal[1] = 1
    recommendations: list[RecommendationView]
    mig_parted_config: MigPartedConfig | None = None
    provenance: ProvenanceView | None = None


class NodePlanEntryView(BaseModel):
    """:class:`~migscope.core._spec.v1.NodePlanEntryV1`: one not marked ``changed`` is skipped."""

    model_config = NodePlanEntryV1.model_config
    node: str
    mig_config: str | None = None
    changed: bool = False
    disruptive: bool = False


class NodePlanView(BaseModel):
    """:class:`~migscope.core._spec.v1.NodePlanV1`: the nodes and where the plan came from."""

    model_config = NodePlanV1.model_config
    schema_version: Literal[1] = 1
    nodes: list[NodePlanEntryView]
    provenance: ProvenanceView | None = None


VIEWS: dict[type[BaseModel], type[BaseModel]] = {
    ProvenanceView: ProvenanceV1,
    RecommendationView: RecommendationV1,
    ReportView: ReportV1,
    NodePlanEntryView: NodePlanEntryV1,
    NodePlanView: NodePlanV1,
}
"""Each view and the spec model it reads (the spec's types, field for field)."""


def validate_view(view: type[BaseModel], data: Any, source: str) -> Any:
    """``data`` validated as ``view``; a problem is one :class:`PlanError` naming ``source``.

    Args:
        view: One of :data:`VIEWS`.
        data: The parsed file.
        source: The file's name, first in the message.

    Returns:
        The validated view.

    Raises:
        PlanError: a field the applier reads is missing or of the wrong type (the
            :class:`~pydantic.ValidationError` is its cause).
    """
    try:
        return view.model_validate(data)
    except ValidationError as exc:
        raise plan_problem(exc, source) from exc


def plan_problem(exc: ValidationError, source: str) -> PlanError:
    """The first of ``exc``'s problems as one line, ``SOURCE: where: what is wrong``.

    Args:
        exc: A view's validation error.
        source: The file's name.

    Returns:
        The error to raise (chain ``exc`` to it).
    """
    _, message = first_problem((None, _describe(err)) for err in exc.errors())
    return PlanError(f"{source}: {message}")


def _describe(err: ErrorDetails) -> str:
    """One error in the applier's words where it has its own, else as every file error reads."""
    loc: Loc = tuple(part for part in err["loc"] if part != "[key]")
    value = None if err["type"] == "missing" else err.get("input")
    own = _own_wording(loc, value)
    if own is not None:
        return own
    if loc[:1] == ("mig_parted_config",) and err["type"] not in BUILTIN_WORDING:
        # mig-parted's schema words its own problems (a bare ``devices: 7``, a PCI ID
        # read as a number): its message, at its place in the report.
        return f"{describe_location(loc)}: {err['msg']}"
    return describe_error(err, {})[1]


def _own_wording(loc: Loc, value: Any) -> str | None:
    """The applier's long-standing messages, by place; None where it has none."""
    match loc:
        case ("schema_version",):
            return f"schema_version {value!r}, expected 1"
        case ("recommendations",):
            return "no 'recommendations' list: not a migscope report"
        case ("recommendations", int(), "current" | "proposed", int(), "layout", *_):
            return f"{describe_location(loc[:4])}: layout must map profile names to counts"
        case ("provenance",):
            return f"provenance: expected an object, got {_kind(value)}"
        case ("provenance", "source") | ("provenance", "source", "kind"):
            return "provenance.source: expected an object with a 'kind'"
        case ("provenance", "simulated"):
            return f"provenance.simulated: expected true or false, got {value!r}"
        case ("provenance", "created"):
            return f"provenance.created: expected an RFC 3339 time, got {value!r}"
        case ("provenance", "created_unix"):
            return f"provenance.created_unix: expected Unix seconds, got {value!r}"
    return None


def _kind(value: Any) -> str:
    return type(value).__name__
