"""The classification policy: every threshold the classifier uses, in one documented file.

What counts as "idle" is a site decision (a 5 % p95 may be idle for a training cluster and
normal for an inference fleet), so the numbers live in a YAML file rather than in code. The
packaged ``policy-default.yaml`` holds the defaults with comments; ``docs/classification.md``
explains each key. A user's file may set only the keys it changes: each field defaults to the
packaged value (a test keeps the two equal). The idle thresholds, which the dashboards and the
alerts share, come from :mod:`migscope.core._thresholds`.

A policy is read strictly, because a typo in a threshold silently falls back to a default and
changes every verdict: unknown keys, duplicate keys, strings or booleans where numbers belong,
ratios outside 0..1 and contradictory thresholds (idle above saturated) are errors, reported
as one line naming the file, the line and the key (worded by the one formatter of pydantic
errors, :mod:`migscope.core._validation`).
"""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from migscope.core import (
    IDLE_ACTIVITY_BELOW,
    IDLE_MEMORY_BELOW,
    FileProblemError,
    Loc,
    Wording,
    YamlProblem,
    compose_with_lines,
    first_validation_problem,
)

DEFAULT_POLICY_FILE = "policy-default.yaml"

Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
Factor = Annotated[float, Field(gt=0.0, le=1.0)]

_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)

_POLICY_ERROR = "policy"
"""The ``PydanticCustomError`` type of the policy's own problems (contradictory thresholds)."""


class PolicyError(FileProblemError):
    """A policy file that cannot be used; the message is ``FILE:LINE: key: what``."""


class AllocatedPolicy(BaseModel):
    """When a slice counts as held by a pod."""

    model_config = _STRICT
    min_fraction: Ratio = 0.10
    """Least share of the observed window a pod must hold the slice; below: unallocated."""


class IdlePolicy(BaseModel):
    """When a held slice counts as unused. Both conditions must hold (where known)."""

    model_config = _STRICT
    activity_p95_below: Ratio = IDLE_ACTIVITY_BELOW
    """p95 graphics-engine activity below this ..."""
    memory_p95_below: Ratio = IDLE_MEMORY_BELOW
    """... and p95 memory use below this share of the slice's memory."""


class SaturatedPolicy(BaseModel):
    """When a slice is the bottleneck. Either condition is enough."""

    model_config = _STRICT
    activity_p95_above: Ratio = 0.90
    """p95 activity above this, or ..."""
    memory_peak_above: Ratio = 0.95
    """... peak memory above this share of the slice's memory."""


class OversizedPolicy(BaseModel):
    """The headroom a smaller profile must leave for the slice to move onto it."""

    model_config = _STRICT
    activity_p95_at_most: Ratio = 0.70
    """p95 activity scaled to the smaller profile's compute slices must stay at or below this."""
    memory_peak_at_most: Ratio = 0.80
    """Peak memory must stay at or below this share of the smaller profile's memory."""


class EvidencePolicy(BaseModel):
    """How much history a recommendation to change a GPU needs.

    Why: a plan rests on the statistics of the slices it destroys. A single scrape or a few
    minutes of history say who holds what, not whether a slice is idle; re-partitioning on
    them destroys slices the data cannot show are unused. Below this much observed history
    the report still classifies and explains, but nothing is recommended.
    """

    model_config = _STRICT
    min_history_hours: Annotated[float, Field(ge=0.0, le=24.0 * 366)] = 24.0
    """Least observed history (coverage x window) of every slice on a GPU before the plan may
    change that GPU, and of the fleet before any change is recommended; 0 turns it off."""


class ConfidencePolicy(BaseModel):
    """How much missing data lowers confidence."""

    model_config = _STRICT
    full_coverage: Annotated[float, Field(gt=0.0, le=1.0)] = 0.80
    """Coverage from which on coverage does not lower confidence (proportional below)."""
    activity_unknown_factor: Factor = 0.50
    """Multiplier when no activity series exists and memory alone decides."""
    memory_unknown_factor: Factor = 0.70
    """Multiplier when no memory series exists and activity alone decides."""
    unattributed_use_factor: Factor = 0.60
    """Multiplier when a slice is used although no pod held it (attribution may be broken)."""


class Policy(BaseModel):
    """All classification thresholds. ``Policy()`` is the packaged default policy."""

    model_config = _STRICT
    version: Literal[1] = 1
    allocated: AllocatedPolicy = AllocatedPolicy()
    idle: IdlePolicy = IdlePolicy()
    saturated: SaturatedPolicy = SaturatedPolicy()
    oversized: OversizedPolicy = OversizedPolicy()
    confidence: ConfidencePolicy = ConfidencePolicy()
    evidence: EvidencePolicy = EvidencePolicy()

    @field_validator("version", mode="before")
    @classmethod
    def _no_boolean_version(cls, value: object) -> object:
        """YAML's ``true`` equals 1 in Python; a version is a number, not a flag."""
        if isinstance(value, bool):
            raise PydanticCustomError("literal_error", "Input should be 1")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        """Reject thresholds that make statuses overlap or suggestions self-defeating."""
        checks = (
            (
                self.idle.activity_p95_below < self.saturated.activity_p95_above,
                "idle.activity_p95_below",
                "must be below saturated.activity_p95_above",
            ),
            (
                self.idle.memory_p95_below < self.saturated.memory_peak_above,
                "idle.memory_p95_below",
                "must be below saturated.memory_peak_above",
            ),
            (
                self.oversized.activity_p95_at_most <= self.saturated.activity_p95_above,
                "oversized.activity_p95_at_most",
                "must not exceed saturated.activity_p95_above (a suggested profile would be "
                "saturated)",
            ),
            (
                self.oversized.memory_peak_at_most <= self.saturated.memory_peak_above,
                "oversized.memory_peak_at_most",
                "must not exceed saturated.memory_peak_above (a suggested profile would be "
                "saturated)",
            ),
        )
        for ok, key, message in checks:
            if not ok:
                raise PydanticCustomError(
                    _POLICY_ERROR,
                    "{where}: {message}",
                    {"where": key, "message": message, "at": tuple(key.split("."))},
                )
        return self

    def thresholds(self) -> dict[str, float]:
        """Every threshold as ``{"section.key": value}``, the form evidence quotes them in."""
        out: dict[str, float] = {}
        for section, model in self:
            if isinstance(model, BaseModel):
                for name, value in model:
                    out[f"{section}.{name}"] = float(value)
        return out


@cache
def default_policy() -> Policy:
    """The packaged ``policy-default.yaml``, read once."""
    text = resources.files(__package__).joinpath(DEFAULT_POLICY_FILE).read_text("utf-8")
    return parse_policy(text, source=DEFAULT_POLICY_FILE)


def load_policy(path: str | os.PathLike[str] | None = None) -> Policy:
    """Read a policy file, or the packaged default when ``path`` is None.

    Raises:
        PolicyError: the file cannot be read or is not a valid policy.
    """
    if path is None:
        return default_policy()
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(exc.strerror or str(exc), source=source) from exc
    except UnicodeDecodeError as exc:
        raise PolicyError(f"not UTF-8 text ({exc.reason})", source=source) from exc
    return parse_policy(text, source=source)


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    """Read a policy from YAML text.

    Args:
        text: The YAML.
        source: File name for error messages.

    Raises:
        PolicyError: YAML syntax, a duplicate or unknown key, a wrong type or range, or
            inconsistent thresholds; the first problem, with its line.
    """
    try:
        data, lines = compose_with_lines(text)
    except YamlProblem as exc:
        raise PolicyError(exc.message, source=source, line=exc.line) from exc
    if data is None:
        return Policy()
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        line, message = first_validation_problem(
            exc, lines, custom_type=_POLICY_ERROR, allowed=_allowed, wording=_wording
        )
        raise PolicyError(message, source=source, line=line) from exc


_RANGE_ERRORS = ("greater_than_equal", "greater_than", "less_than_equal", "less_than")

_WORDING: Wording = {
    "literal_error": "must be 1 (the only policy version), got {value}",
}
"""Where a policy's wording differs from the shared one, whatever the key."""


def _wording(loc: Loc) -> Wording:
    """The policy's wording at ``loc``: a range is hours for the evidence, else a ratio."""
    name = loc[-1] if loc else ""
    if name == "min_history_hours":
        bounds = "must be hours between 0 and 8784 (a year), got {raw}"
    else:
        low = "above 0" if name in _POSITIVE else "at least 0"
        bounds = f"must be a ratio {low} and at most 1, got {{raw}}"
    return {**_WORDING, **dict.fromkeys(_RANGE_ERRORS, bounds)}


_POSITIVE = frozenset(
    {"full_coverage", "activity_unknown_factor", "memory_unknown_factor", "unattributed_use_factor"}
)


def _allowed(section: Loc) -> list[str]:
    """The keys the policy allows at ``section``."""
    model: type[BaseModel] = Policy
    for part in section:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)
