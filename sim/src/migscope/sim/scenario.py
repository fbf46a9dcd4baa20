"""The scenario file: which nodes, GPUs, MIG layouts, workloads, pods and faults to simulate.

Validated strictly (pydantic v2, unknown keys refused) because a typo in a demo scenario
should fail loudly at load time, naming the field and line, not produce a quietly idle GPU.
Shape is checked here; meaning (catalogue models, placement-valid layouts, trace containers,
cross-references of faults) is checked while building the simulation
(:mod:`migscope.sim.build`), which raises the same one-line :class:`ScenarioError`.
The format is documented in ``docs/scenario.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pynvml
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from migscope.core.durations import parse_duration
from migscope.core.errors import UserError
from migscope.core.yaml_messages import YamlProblem, compose_node, construct_strict
from migscope.sim.errors import error_code
from migscope.sim.units import parse_bytes
from migscope.sim.workloads import ActivityMix, Size

__all__ = [
    "BurstySpec",
    "ConstantSpec",
    "FaultSpec",
    "GpuLostSpec",
    "GpuSpec",
    "IdleSpec",
    "InstanceSpec",
    "LayoutChangeSpec",
    "MixSpec",
    "NodeSpec",
    "NvmlErrorSpec",
    "PeriodicSpec",
    "PodSpec",
    "PowerSpec",
    "Scenario",
    "ScenarioError",
    "SlowCallSpec",
    "TraceSpec",
    "WorkloadSpec",
    "load_scenario",
    "parse_scenario",
    "read_scenario_yaml",
]


class ScenarioError(UserError, ValueError):
    """An invalid scenario, described in one line that names the field (and YAML line).

    Attributes:
        field: Dotted path of the offending field, e.g. ``nodes[0].gpus[1].instances``.
        reason: What is wrong with it.
        line: 1-based line in the YAML file, when known.
        source: File name, when loaded from a file.
    """

    def __init__(
        self, field: str, reason: str, *, line: int | None = None, source: str | None = None
    ) -> None:
        self.field, self.reason, self.line, self.source = field, reason, line, source
        where = f"{source}:{line}: " if source and line else (f"{source}: " if source else "")
        at = f"line {line}, " if line and not source else ""
        text = " ".join(reason.split())
        super().__init__(f"{where}scenario {at}{field or '(top)'}: {text}")


def _duration(value: Any) -> float:
    if not isinstance(value, (str, int, float)):
        raise ValueError(f"not a duration: {value!r}")
    return parse_duration(value)


def _bytes(value: Any) -> int:
    if not isinstance(value, (str, int)):
        raise ValueError(f"not a byte size: {value!r}")
    return parse_bytes(value)


def _amount(value: Any) -> Size:
    """A fraction in [0, 1] of the instance's memory, or a size with a unit."""
    if isinstance(value, bool):
        raise ValueError(f"not a memory amount: {value!r}")
    if isinstance(value, float) or (isinstance(value, int) and value in (0, 1)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"a memory fraction must be within 0..1, got {value}")
        return Size(fraction=float(value))
    if isinstance(value, (int, str)):
        return Size(nbytes=parse_bytes(value))
    raise ValueError(f"not a memory amount: {value!r} (use 0.5 or 12GiB)")


Duration = Annotated[float, PlainValidator(_duration)]
Bytes = Annotated[int, PlainValidator(_bytes)]
MemoryAmount = Annotated[Size, PlainValidator(_amount)]
Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MixSpec(_Strict):
    """Activity ratios as fractions of graphics activity (see :class:`ActivityMix`)."""

    sm: Ratio = ActivityMix.sm
    occupancy: Ratio = ActivityMix.occupancy
    tensor: Ratio = ActivityMix.tensor
    dram: Ratio = ActivityMix.dram
    fp16: Ratio = 0.0
    fp32: Ratio = 0.0
    fp64: Ratio = 0.0
    integer: Ratio = 0.0

    def to_mix(self) -> ActivityMix:
        """The workload-layer value."""
        return ActivityMix(**self.model_dump())


class _WorkloadBase(_Strict):
    memory: MemoryAmount | None = None
    memory_peak: MemoryAmount | None = None
    processes: int | None = Field(default=None, ge=0, le=64)
    mix: MixSpec = MixSpec()


class IdleSpec(_WorkloadBase):
    """No activity; memory 0 unless given (then one process holds it)."""

    pattern: Literal["idle"]


class ConstantSpec(_WorkloadBase):
    """Steady activity ``level``."""

    pattern: Literal["constant"]
    level: Ratio


class PeriodicSpec(_WorkloadBase):
    """Square wave: ``high`` for ``duty`` of each ``period``, else ``low``."""

    pattern: Literal["periodic"]
    period: Duration
    duty: Ratio
    high: Ratio = 1.0
    low: Ratio = 0.0
    phase: Duration = 0.0

    @field_validator("period")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("period must be > 0")
        return value


class BurstySpec(_WorkloadBase):
    """Poisson bursts: ``rate`` per hour, each ``burst`` long at ``level``, else ``low``."""

    pattern: Literal["bursty"]
    rate: float = Field(gt=0.0, le=3600.0)
    burst: Duration
    level: Ratio = 1.0
    low: Ratio = 0.0

    @field_validator("burst")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("burst must be > 0")
        return value


class TraceSpec(_WorkloadBase):
    """Replay of a GenTD26 duty-cycle trace (and its memory trace)."""

    pattern: Literal["trace"]
    container: str | int = 0
    duty_file: str | None = None
    memory_file: str | None = None
    memory_reference: Bytes = 80 * 2**30
    offset: Duration = 0.0


WorkloadSpec = Annotated[
    IdleSpec | ConstantSpec | PeriodicSpec | BurstySpec | TraceSpec,
    Field(discriminator="pattern"),
]


class PodSpec(_Strict):
    """The Kubernetes container holding a device."""

    namespace: str = Field(min_length=1, max_length=63)
    pod: str = Field(min_length=1, max_length=253)
    container: str = Field(default="main", min_length=1, max_length=63)


class InstanceSpec(_Strict):
    """One MIG instance: profile, optional start placement, workload, optional pod."""

    profile: str
    start: int | None = Field(default=None, ge=0, le=7)
    workload: WorkloadSpec = IdleSpec(pattern="idle")
    pod: PodSpec | None = None


class PowerSpec(_Strict):
    """Override of the GPU's power model."""

    idle_watts: float = Field(gt=0)
    max_watts: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> PowerSpec:
        if self.max_watts < self.idle_watts:
            raise ValueError("max_watts must be >= idle_watts")
        return self


class GpuSpec(_Strict):
    """One GPU: model, identity, MIG mode and either instances or a whole-GPU workload."""

    model: str | int
    uuid: str | None = Field(default=None, pattern=r"^GPU-[0-9a-fA-F-]{36}$")
    pci_bus_id: str | None = Field(
        default=None, pattern=r"^[0-9a-fA-F]{8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
    )
    mig: bool = False
    mig_pending: bool | None = None
    instances: list[InstanceSpec] = []
    workload: WorkloadSpec | None = None
    pod: PodSpec | None = None
    power: PowerSpec | None = None


class NodeSpec(_Strict):
    """One Kubernetes node and its GPUs."""

    name: str = Field(min_length=1, max_length=253)
    driver: str | None = Field(default=None, pattern=r"^\d+\.\d+(\.\d+)?$")
    privileged: bool = True
    gpus: list[GpuSpec] = []

    @field_validator("name")
    @classmethod
    def _dns(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a valid node name (lowercase DNS-1123)")
        return value


def _nvml_function(name: str) -> str:
    if not (name.startswith("nvml") and callable(getattr(pynvml, name, None))):
        raise ValueError(f"{name!r} is not a pynvml function")
    return name


def _nvml_error(value: str | int) -> str | int:
    error_code(value)
    return value


class GpuLostSpec(_Strict):
    """The GPU falls off the bus at ``at``."""

    kind: Literal["gpu_lost"]
    node: str
    gpu: int = Field(ge=0)
    at: Duration = 0.0


class LayoutChangeSpec(_Strict):
    """The GPU is re-partitioned into ``instances`` at ``at``."""

    kind: Literal["layout_change"]
    node: str
    gpu: int = Field(ge=0)
    at: Duration
    instances: list[InstanceSpec]
    stale_error: str | int = "INVALID_ARGUMENT"

    @field_validator("stale_error")
    @classmethod
    def _error(cls, value: str | int) -> str | int:
        return _nvml_error(value)


class SlowCallSpec(_Strict):
    """Named functions take ``delay_ms`` more (real) milliseconds."""

    kind: Literal["slow_call"]
    functions: list[str] = Field(min_length=1)
    delay_ms: float = Field(ge=0, le=60_000)
    node: str | None = None
    gpu: int | None = Field(default=None, ge=0)

    @field_validator("functions")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return [_nvml_function(n) for n in value]


class NvmlErrorSpec(_Strict):
    """A named function returns ``error`` (with a probability, a count, a time window)."""

    kind: Literal["nvml_error"]
    function: str
    error: str | int
    node: str | None = None
    gpu: int | None = Field(default=None, ge=0)
    probability: Ratio = 1.0
    count: int | None = Field(default=None, ge=1)
    start: Duration = 0.0
    until: Duration | None = None

    @field_validator("function")
    @classmethod
    def _function(cls, value: str) -> str:
        return _nvml_function(value)

    @field_validator("error")
    @classmethod
    def _error(cls, value: str | int) -> str | int:
        return _nvml_error(value)


FaultSpec = Annotated[
    GpuLostSpec | LayoutChangeSpec | SlowCallSpec | NvmlErrorSpec,
    Field(discriminator="kind"),
]


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a start time: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        raise ValueError(f"not a start time: {value!r}")
    if moment.tzinfo is None:
        raise ValueError("start needs a time zone, e.g. 2026-01-05T00:00:00Z")
    return moment.timestamp()


class Scenario(_Strict):
    """A whole simulation: nodes, GPUs, workloads, faults, seed and start time."""

    version: Literal[1] = 1
    description: str | None = None
    seed: int = 0
    start: Annotated[float | None, PlainValidator(_epoch)] = None
    driver: str = Field(default="580.159.04", pattern=r"^\d+\.\d+(\.\d+)?$")
    nodes: list[NodeSpec] = Field(min_length=1)
    faults: list[FaultSpec] = []


# -- loading and error reporting ----------------------------------------------------------

_TAGS = {"idle", "constant", "periodic", "bursty", "trace"} | {
    "gpu_lost",
    "layout_change",
    "slow_call",
    "nvml_error",
}


def format_path(loc: Sequence[str | int]) -> str:
    """``("nodes", 0, "gpus")`` → ``nodes[0].gpus``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _clean_loc(loc: Sequence[str | int]) -> list[str | int]:
    """Drop pydantic's union-tag entries (``workload.constant.level`` → ``workload.level``)."""
    out: list[str | int] = []
    for i, part in enumerate(loc):
        before = loc[i - 1] if i else None
        tagged = before in ("workload", "faults") or isinstance(before, int)
        if isinstance(part, str) and part in _TAGS and tagged and i > 0:
            continue
        out.append(part)
    return out


def line_of(root: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """The 1-based YAML line of the node at ``loc`` (or of its deepest existing parent)."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if getattr(key, "value", None) == part:
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def parse_scenario(
    data: Mapping[str, Any], *, source: str | None = None, tree: yaml.Node | None = None
) -> Scenario:
    """Validate ``data`` (a parsed scenario) into a :class:`Scenario`.

    Raises:
        ScenarioError: the first problem, in one line, with field path (and line).
    """
    if not isinstance(data, Mapping):
        raise ScenarioError("", "a scenario is a mapping with a 'nodes' list", source=source)
    try:
        return Scenario.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = _clean_loc(list(first["loc"]))
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; see docs/scenario.md)"
        elif first["type"] == "union_tag_invalid":
            ctx = first.get("ctx", {})
            tag, expected = ctx.get("tag"), ctx.get("expected_tags", "")
            message = f"unknown {ctx.get('discriminator', 'kind')} {tag!r} (expected {expected})"
            loc.append(str(ctx.get("discriminator", "kind")).strip("'"))
        elif first["type"] == "union_tag_not_found":
            field = str(first.get("ctx", {}).get("discriminator", "kind")).strip("'")
            message = "field required"
            loc.append(field)
        more = exc.error_count() - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise ScenarioError(
            format_path(loc), message, line=line_of(tree, loc), source=source
        ) from None


def load_scenario(source: str | Path | Mapping[str, Any]) -> tuple[Scenario, yaml.Node | None]:
    """Read and validate a scenario from a YAML file or an already-parsed mapping.

    Returns:
        The scenario and the YAML node tree (for line numbers in later errors; None for a
        mapping).

    Raises:
        ScenarioError: unreadable file, YAML syntax, or an invalid scenario.
    """
    if isinstance(source, Mapping):
        return parse_scenario(source), None
    path = Path(source)
    data, tree = read_scenario_yaml(path)
    return parse_scenario(data or {}, source=str(path), tree=tree), tree


def read_scenario_yaml(path: str | Path) -> tuple[Any, yaml.Node | None]:
    """A scenario file's data (as ``yaml.safe_load`` reads it) and its YAML node tree.

    Read through the one strict loader (:func:`migscope.core.yaml_messages.compose_node`):
    its size, depth and alias limits apply, and duplicate keys are refused.

    Raises:
        ScenarioError: unreadable file, YAML syntax, a YAML limit passed or a duplicate key.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError("", f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    try:
        tree = compose_node(text)
        # Building flattens merge keys in place: build from a second tree, keep the first
        # as written for line numbers.
        built = compose_node(text)
        data = None if built is None else construct_strict(built, text)
    except YamlProblem as exc:
        raise ScenarioError(
            "", f"invalid YAML: {exc.problem}", line=exc.line, source=str(path)
        ) from None
    return data, tree
