"""The report contract, version 1: what the analyzer writes and every reader relies on.

``report.json`` and ``node-plan.json`` are the seam between migscope's halves: the analyzer
produces them (and validates each against these models before writing), the applier reads
its plan through them, and the HTML and Markdown reports render from them. They are also
the contract with other tools (a team's scripts, dashboards); docs/report-schema.md says the
same in prose and :func:`json_schema` gives it to consumers outside Python.

Versioning, as mig-parted's ``api/spec/v1``: fields may be added within a version (models
allow extra keys, so an older reader keeps working); renaming or removing a field, or
changing its meaning, is a new module ``v2`` with its own ``schema_version``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, field_serializer

from migscope.core._migparted import MigPartedConfig

SCHEMA_VERSION = 1
REPORT_FILE = "report.json"
NODE_PLAN_FILE = "node-plan.json"

_OPEN = ConfigDict(extra="allow", strict=True)

_Number = int | float
"""A JSON number as the analyzer computed it: an integer stays an integer (``0``, not ``0.0``)."""


class WindowV1(BaseModel):
    """The analysed window."""

    model_config = _OPEN
    start: str
    end: str
    start_unix: float
    end_unix: float
    hours: float
    step_seconds: float


class OwnerV1(BaseModel):
    """A pod (or a DRA ResourceClaim) that held a slice for part of the window.

    ``claim``: the ResourceClaim it was held through under DRA (absent for a device-plugin
    holder); ``pod`` is "" when the series named the claim but not its pod.
    """

    model_config = _OPEN
    namespace: str
    pod: str
    fraction: float | None
    claim: str | None = None


class ClaimResizeV1(BaseModel):
    """What an oversized slice held through a DRA ResourceClaim should ask for instead.

    ``selector`` is the CEL expression the claim's device request (``device_class``) should
    carry to get ``profile``; ``from_template`` says the claim's name has the shape of one
    generated from a ResourceClaimTemplate for ``pod`` (``pod_claim``: the pod's
    ``resourceClaims[]`` entry, when the name shows it); the template's name is not known.
    """

    model_config = _OPEN
    claim: str
    namespace: str
    pod: str | None
    from_template: bool
    pod_claim: str | None
    current_profile: str
    profile: str
    device_class: str
    selector: str


class HourlyV1(BaseModel):
    """A slice's use per period (an hour) of the window, oldest first; null where unknown."""

    model_config = _OPEN
    period_seconds: float
    activity: list[float | None]
    allocated: list[float | None]


class CandidateFitV1(BaseModel):
    """How the slice would fit one smaller profile: the numbers behind ``suggested_profile``.

    ``compute_fits`` and ``memory_fits`` are null when unknowable (no activity or memory seen).
    """

    model_config = _OPEN
    profile: str
    activity_p95_after: _Number | None
    memory_peak_after_ratio: _Number | None
    compute_fits: bool | None
    memory_fits: bool | None


class SliceEvidenceV1(BaseModel):
    """The numbers and thresholds a slice's verdict rests on (docs/classification.md).

    Shares are 0..1, memory in bytes; a number is null when unknown (never ``NaN`` or 0).
    ``thresholds``: the policy's thresholds that decided (``idle.activity_p95_below``, ...);
    ``confidence_factors``: what lowered ``confidence`` (``coverage``, ``history``, ...);
    ``candidates``: the smaller profiles weighed for an oversized or saturated slice.
    ``activity_hourly`` is where reports written before ``SliceV1.hourly`` kept the
    per-hour activity; the analyzer no longer writes it.
    """

    model_config = _OPEN
    samples: int
    expected_samples: int
    coverage: _Number | None
    allocated_fraction: _Number | None
    activity_known: bool
    activity_p50: _Number | None
    activity_p95: _Number | None
    activity_max: _Number | None
    memory_known: bool
    memory_p95_bytes: _Number | None
    memory_peak_bytes: _Number | None
    memory_total_bytes: _Number | None
    memory_p95_ratio: _Number | None
    memory_peak_ratio: _Number | None
    thresholds: dict[str, _Number | None]
    confidence_factors: dict[str, _Number | None]
    candidates: list[CandidateFitV1] | None = None
    activity_hourly: list[_Number | None] | None = None


class SliceV1(BaseModel):
    """One slice: identity, verdict, evidence and owner.

    ``owners`` (every pod that held it, longest first) and ``hourly`` (per-hour use, when
    the window is whole hours on the hour grid) are optional: older reports lack them, as
    they lack ``pool`` (the node pool that planned it, null when none did) and
    ``wasted_gpu_hours`` (its share of ``savings.wasted_gpu_hours``), which the report
    writer adds. ``claim`` is the DRA ResourceClaim of the main holder (null under the device
    plugin) and ``claim_resize`` the claim change an oversized DRA slice calls for.
    ``mig_uuid`` and ``energy_joules`` (the slice's estimated energy over the window) are null
    where unknown.

    Fields are declared in the order the analyzer writes them, so that the model dumps to
    ``report.json`` as written (:func:`report_json`); so are every other model's.
    """

    model_config = _OPEN
    node: str
    gpu: int
    gpu_uuid: str
    gpu_instance_id: int
    model: str | None
    profile: str
    placement_start: int | None
    mig_uuid: str | None = None
    status: Literal["idle", "unallocated", "oversized", "saturated", "healthy", "unknown"]
    confidence: float
    reason: str
    suggested_profile: str | None
    evidence: SliceEvidenceV1
    namespace: str | None
    pod: str | None
    claim: str | None = None
    claim_resize: ClaimResizeV1 | None = None
    owners: list[OwnerV1] | None = None
    energy_joules: float | None = None
    hourly: HourlyV1 | None = None
    current: bool
    in_use: bool
    demand_profile: str | None
    pin: str | None
    pool: str | None = None
    wasted_gpu_hours: float | None = None


class GpuLayoutV1(BaseModel):
    """One GPU's layout in a recommendation."""

    model_config = _OPEN
    gpu: int
    mig_enabled: bool
    layout: dict[str, int]


class MigStateV1(BaseModel):
    """A GPU's MIG mode and layout, as the planner's per-GPU entry gives them."""

    model_config = _OPEN
    mig_enabled: bool
    layout: dict[str, int]


class PlacementV1(BaseModel):
    """One proposed GPU instance at its first memory slice."""

    model_config = _OPEN
    profile: str
    start: int


class PlannedGpuV1(BaseModel):
    """One GPU of a recommended node as the planner left it: layouts and placements.

    The planner writes more (``kept``, ``destroyed``, ``moved``, ``demanded``, ...;
    docs/planner.md), kept as extra keys.
    """

    model_config = _OPEN
    node: str | None = None
    gpu: int
    current: MigStateV1
    proposed: MigStateV1
    placements: list[PlacementV1]
    changed: bool


class SliceOnGpuV1(BaseModel):
    """A current slice of a recommended node, as the safety contract checks it."""

    model_config = _OPEN
    gpu: int
    profile: str
    status: str
    pods: list[str]
    pin: str | None


class RecommendationV1(BaseModel):
    """One node whose layout the plan changes (``gpus``: the planner's view, optional)."""

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
    gpus: list[PlannedGpuV1] | None = None


class WorkloadV1(BaseModel):
    """The controller that creates a pod, and how it was found.

    ``source``: ``cluster``, ``kube-state-metrics``, or ``guessed`` from the pod's name.
    """

    model_config = _OPEN
    namespace: str
    kind: str
    name: str
    source: Literal["cluster", "kube-state-metrics", "guessed"]


class RequestChangeV1(BaseModel):
    """One workload's MIG request change (docs/report-schema.md, ``request_changes``).

    ``patch`` is a Kubernetes strategic-merge patch of the workload (its pod template's
    container resources), handed as is to ``kubectl patch`` and written to
    ``request-changes.yaml``: Kubernetes' format, which migscope writes and never reads
    back, so it is typed as the JSON object it is rather than modelled here.
    """

    model_config = _OPEN
    workload: WorkloadV1
    model: str
    pods: list[str]
    current_profile: str
    profile: str
    needs: dict[str, str]
    mechanism: Literal["device-plugin", "dra"]
    resource_from: str | None
    resource_to: str | None
    selector: str | None
    containers: list[str]
    claims: list[str]
    patch: dict[str, JsonValue] | None
    command: str


class IdleHolderV1(BaseModel):
    """A workload whose pods hold idle slices: scale it down or drop its request first."""

    model_config = _OPEN
    workload: WorkloadV1
    pods: list[str]
    profiles: list[str]
    evicted_by_plan: bool


class RequestChangesV1(BaseModel):
    """What to change in the workloads before the plan is applied (``request-changes.yaml``)."""

    model_config = _OPEN
    file: str
    workloads: list[RequestChangeV1]
    idle_holders: list[IdleHolderV1]
    skipped: list[str]


class NamespaceWasteV1(BaseModel):
    """Idle and oversized GPU-hours of one namespace (``wasted_cost`` with a price)."""

    model_config = _OPEN
    namespace: str
    slices: int
    idle_gpu_hours: float
    unallocated_gpu_hours: float = 0.0
    oversized_gpu_hours: float
    wasted_gpu_hours: float
    wasted_cost: float | None = None


class SavingsV1(BaseModel):
    """Headline savings (the GPU-hour split, ``nodes_changed`` and costs are optional)."""

    model_config = ConfigDict(extra="allow", strict=False)
    idle_slices: int
    unallocated_slices: int
    oversized_slices: int
    compute_slices_reclaimable: int
    gpus_planned: int
    gpus_in_use_before: int | None = None
    gpus_pinned_before: int | None = None
    gpus_used_after: int
    gpus_freed: int
    gpus_changed: int
    nodes_changed: int | None = None
    unmet_demand: int
    stranded_compute_slices: int | None = None
    window_hours: float
    gpu_hours_freed: float
    idle_gpu_hours: float | None = None
    unallocated_gpu_hours: float | None = None
    oversized_gpu_hours: float | None = None
    wasted_gpu_hours: float
    by_namespace: list[NamespaceWasteV1]
    price_per_gpu_hour: float | None
    wasted_cost: float | None = None
    freed_cost: float | None = None


class EvidenceV1(BaseModel):
    """How much history the analysis had, against the policy's minimum for a plan."""

    model_config = _OPEN
    history_hours: float
    min_history_hours: float
    enough_for_a_plan: bool


class SourceV1(BaseModel):
    """Where the data came from: ``kind`` and, by kind, ``url``, ``path`` or ``scenarios``.

    ``prometheus``: ``url`` (credentials removed); ``file``: ``path``; ``simulation``:
    ``scenarios``. A newer analyzer may write another kind, or more keys (kept as extra keys).
    """

    model_config = _OPEN
    kind: str
    url: str | None = None
    path: str | None = None
    scenarios: list[str] | None = None


class ProvenanceV1(BaseModel):
    """Where the data came from and when the report was made.

    ``catalogue``: per GPU model, which profile table the plan rests on (older reports lack
    it).
    """

    model_config = _OPEN
    source: SourceV1
    simulated: bool
    created: str
    created_unix: float
    catalogue: dict[str, str] | None = None


class TrendPointV1(BaseModel):
    """One earlier run's headline numbers, read from its ``report.json`` for the waste trend."""

    model_config = ConfigDict(extra="allow", strict=False)
    run: str
    created: str | None
    window_start: str
    window_end: str
    window_end_unix: float
    window_hours: float
    slices: int | None
    idle_slices: int
    unallocated_slices: int
    oversized_slices: int
    wasted_gpu_hours: float
    idle_gpu_hours: float | None = None
    unallocated_gpu_hours: float | None = None
    oversized_gpu_hours: float | None = None
    gpus_freed: int
    gpu_hours_freed: float
    price_per_gpu_hour: float | None = None
    wasted_cost: float | None = None
    simulated: bool | None = None
    by_namespace: dict[str, float] = {}


class GrafanaV1(BaseModel):
    """Where the report links to migscope's Grafana dashboards: the base URL and their uids."""

    model_config = _OPEN
    url: str
    dashboards: dict[str, str]


class SummaryV1(BaseModel):
    """How many slices the report covers, and how many of the current ones have each status.

    ``history_only_slices``: slices seen in the window but gone at its end (a re-partition
    removed them); older reports lack it.
    """

    model_config = _OPEN
    slices: int
    history_only_slices: int | None = None
    by_status: dict[str, int]


class PoolDemandV1(BaseModel):
    """What a pool must offer, profile → instances: the parts and the ``total`` planned for."""

    model_config = _OPEN
    pool: str
    model: str
    busy: dict[str, int]
    pending: dict[str, int]
    headroom: dict[str, int]
    total: dict[str, int]
    notes: list[str]


class PoolPlanV1(BaseModel):
    """The planner's summary of a pool's plan (``objective`` and more kept as extra keys)."""

    model_config = _OPEN
    gpus: int
    gpus_used: int
    gpus_free: int
    gpus_parked: int
    gpus_changed: int
    gpus_disruptive: int
    nodes_changed: int
    stranded_compute_slices: int
    unmet: dict[str, int]
    unmet_total: int


class SolveV1(BaseModel):
    """How a pool's plan was found: the method, the solver's status and its proven gap.

    ``status``: ``optimal``, ``time_limit``, ``heuristic`` or ``fallback`` (docs/planner.md);
    ``objective`` and ``best_bound`` are null for a heuristic. Timings and sizes follow as
    extra keys (``wall_s``, ``solver_s``, ``classes``, ...).
    """

    model_config = _OPEN
    method: str
    status: str
    objective: _Number | None
    best_bound: _Number | None
    gap: _Number | None


class LowerBoundV1(BaseModel):
    """The bin-packing lower bound on a pool's GPUs (``gpus``; the parts as extra keys too)."""

    model_config = _OPEN
    compute: int
    memory: int
    configuration_lp: _Number | None
    gpus: int


class ReplayProfileV1(BaseModel):
    """One profile of a replay: supply, demand, and the hours the layout was short of it."""

    model_config = _OPEN
    profile: str
    supply: int
    demand_peak: _Number
    demand_instance_hours: _Number
    unmet_peak: _Number
    unmet_instance_hours: _Number
    hours_short: int


class ReplayV1(BaseModel):
    """The window's hourly demand replayed against one layout of a pool."""

    model_config = _OPEN
    hours: int
    served_share: _Number
    unmet_instance_hours: _Number
    demand_instance_hours: _Number
    profiles: list[ReplayProfileV1]


class PoolV1(BaseModel):
    """One node pool: its demand, its plan, the solver's proof, the bound, and the replays.

    ``replay``: ``current``, ``proposed`` and, with ``--what-if``, ``what_if`` (empty without
    per-hour data; older reports lack it).
    """

    model_config = _OPEN
    pool: str
    model: str
    gpus: int
    demand: PoolDemandV1
    plan: PoolPlanV1
    solve: SolveV1
    lower_bound: LowerBoundV1
    replay: dict[str, ReplayV1] = {}


class WhatIfTotalsV1(BaseModel):
    """A layout's replay summed over the pools replayed."""

    model_config = _OPEN
    unmet_instance_hours: _Number | None = None
    demand_instance_hours: _Number | None = None
    served_share: _Number | None = None


class WhatIfV1(BaseModel):
    """The what-if layout replayed over all pools (``proposed``: the same for the plan)."""

    model_config = _OPEN
    configs: dict[str, str]
    pools_replayed: int | None = None
    unmet_instance_hours: _Number | None = None
    demand_instance_hours: _Number | None = None
    served_share: _Number | None = None
    proposed: WhatIfTotalsV1 | None = None


class ReportV1(BaseModel):
    """The whole report, ``schema_version`` 1 (``what_if`` only when a what-if was asked).

    ``trend`` (earlier runs, oldest first) and ``grafana`` are added by the report writer
    when it was given earlier reports or a Grafana URL; older reports lack them.
    ``mig_parted_config`` is mig-parted's own file format, validated as
    :class:`~migscope.core._migparted.config.MigPartedConfig` (a bad config is refused when
    the report is read) and written back with mig-parted's keys (:meth:`_mig_parted_json`).
    """

    model_config = _OPEN
    schema_version: Literal[1]
    window: WindowV1
    summary: SummaryV1
    slices: list[SliceV1]
    pools: list[PoolV1]
    recommendations: list[RecommendationV1]
    request_changes: RequestChangesV1 | None = None
    mig_parted_config: MigPartedConfig | None
    node_configs: dict[str, str]
    savings: SavingsV1
    what_if: WhatIfV1 | None = None
    evidence: EvidenceV1 | None
    provenance: ProvenanceV1 | None
    notes: list[str]
    trend: list[TrendPointV1] | None = None
    grafana: GrafanaV1 | None = None

    @field_serializer("mig_parted_config")
    def _mig_parted_json(self, config: MigPartedConfig | None) -> dict[str, Any] | None:
        """The config as its file has it: hyphenated keys, absent keys left out, lists.

        What the analyzer writes (``MigPartedConfig.model_dump(by_alias=True,
        exclude_none=True)``), whether the model was validated from that data or built in
        Python (where an absent ``device-filter`` is an explicit None).
        """
        if config is None:
            return None
        return config.model_dump(mode="json", by_alias=True, exclude_none=True)


class NodePlanEntryV1(BaseModel):
    """One node of ``node-plan.json``: the config its label should name, and whether it moves."""

    model_config = _OPEN
    node: str
    mig_config: str | None
    changed: bool
    disruptive: bool
    gpus: list[int]
    pods_to_move: list[str] | None = None


class NodePlanV1(BaseModel):
    """``node-plan.json``, ``schema_version`` 1: every planned node and where its data came from."""

    model_config = _OPEN
    schema_version: Literal[1]
    nodes: list[NodePlanEntryV1]
    provenance: ProvenanceV1 | None


def validate_report(data: Any) -> ReportV1:
    """Check parsed JSON against schema 1.

    Raises:
        pydantic.ValidationError: a field is missing or of the wrong type.
    """
    return ReportV1.model_validate(data)


def report_json(report: ReportV1) -> dict[str, Any]:
    """The report as the JSON data it was validated from: the inverse of :func:`validate_report`.

    Keys come in the order the analyzer writes them (every model declares its fields in that
    order; extra keys follow in theirs), a field the data did not have stays out, and numbers
    keep their type, so ``json.dumps`` of it is ``report.json`` byte for byte.
    """
    return report.model_dump(exclude_unset=True)


def validate_node_plan(data: Any) -> NodePlanV1:
    """Check a parsed ``node-plan.json`` against schema 1.

    Raises:
        pydantic.ValidationError: a field is missing or of the wrong type.
    """
    return NodePlanV1.model_validate(data)


def json_schema() -> dict[str, Any]:
    """Schema 1 of ``report.json`` as a JSON Schema document (for consumers outside Python)."""
    return ReportV1.model_json_schema()
