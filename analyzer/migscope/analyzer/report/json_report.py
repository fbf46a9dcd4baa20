"""The JSON report and the schema it promises (``schema_version`` 1, docs/report-schema.md).

The JSON report is the analyzer's contract with other tools (dashboards, the applier, a
team's own scripts), so its shape is written down twice: in prose in docs/report-schema.md
and here as a pydantic model, which the tests validate every report against and which
:func:`json_schema` turns into a JSON Schema document for consumers. Fields may be added
within a version; renaming or removing one bumps ``schema_version``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from migscope.analyzer.pipeline import AnalysisResult

__all__ = ["ReportV1", "json_schema", "render_json", "validate_report"]

_OPEN = ConfigDict(extra="allow", strict=True)


class WindowV1(BaseModel):
    """The analysed window."""

    model_config = _OPEN
    start: str
    end: str
    start_unix: float
    end_unix: float
    hours: float
    step_seconds: float


class SliceV1(BaseModel):
    """One slice: identity, verdict, evidence and owner."""

    model_config = _OPEN
    node: str
    gpu: int
    gpu_uuid: str
    gpu_instance_id: int
    model: str | None
    profile: str
    placement_start: int | None
    status: Literal["idle", "unallocated", "oversized", "saturated", "healthy", "unknown"]
    confidence: float
    reason: str
    suggested_profile: str | None
    evidence: dict[str, Any]
    namespace: str | None
    pod: str | None
    current: bool
    in_use: bool
    demand_profile: str | None
    pin: str | None


class GpuLayoutV1(BaseModel):
    """One GPU's layout in a recommendation."""

    model_config = _OPEN
    gpu: int
    mig_enabled: bool
    layout: dict[str, int]


class SliceOnGpuV1(BaseModel):
    """A current slice of a recommended node, as the safety contract checks it."""

    model_config = _OPEN
    gpu: int
    profile: str
    status: str
    pods: list[str]
    pin: str | None


class RecommendationV1(BaseModel):
    """One node whose layout the plan changes."""

    model_config = _OPEN
    node: str
    pool: str
    model: str
    current: list[GpuLayoutV1]
    proposed: list[GpuLayoutV1]
    mig_config: str
    disruptive: bool
    pods_to_move: list[str]
    gpus_recreated: list[int]
    slices: list[SliceOnGpuV1]


class NamespaceWasteV1(BaseModel):
    """Idle and oversized GPU-hours of one namespace."""

    model_config = _OPEN
    namespace: str
    slices: int
    idle_gpu_hours: float
    oversized_gpu_hours: float
    wasted_gpu_hours: float


class SavingsV1(BaseModel):
    """Headline savings."""

    model_config = ConfigDict(extra="allow", strict=False)
    idle_slices: int
    unallocated_slices: int
    oversized_slices: int
    compute_slices_reclaimable: int
    gpus_planned: int
    gpus_used_after: int
    gpus_freed: int
    gpus_changed: int
    unmet_demand: int
    window_hours: float
    gpu_hours_freed: float
    wasted_gpu_hours: float
    by_namespace: list[NamespaceWasteV1]
    price_per_gpu_hour: float | None


class EvidenceV1(BaseModel):
    """How much history the analysis had, against the policy's minimum for a plan."""

    model_config = _OPEN
    history_hours: float
    min_history_hours: float
    enough_for_a_plan: bool


class ProvenanceV1(BaseModel):
    """Where the data came from and when the report was made."""

    model_config = _OPEN
    source: dict[str, Any]
    simulated: bool
    created: str
    created_unix: float


class ReportV1(BaseModel):
    """The whole report, ``schema_version`` 1."""

    model_config = _OPEN
    schema_version: Literal[1]
    window: WindowV1
    summary: dict[str, Any]
    slices: list[SliceV1]
    pools: list[dict[str, Any]]
    recommendations: list[RecommendationV1]
    mig_parted_config: dict[str, Any] | None
    node_configs: dict[str, str]
    savings: SavingsV1
    evidence: EvidenceV1 | None
    provenance: ProvenanceV1 | None
    notes: list[str]


def validate_report(data: Any) -> ReportV1:
    """Check parsed JSON against schema 1.

    Raises:
        pydantic.ValidationError: a field is missing or of the wrong type.
    """
    return ReportV1.model_validate(data)


def json_schema() -> dict[str, Any]:
    """Schema 1 as a JSON Schema document (for consumers outside Python)."""
    return ReportV1.model_json_schema()


def render_json(result: AnalysisResult) -> str:
    """The report as indented JSON text (no NaN: the model turns unknowns into null)."""
    return json.dumps(result.to_json(), indent=2, allow_nan=False) + "\n"
