"""mig-parted configs: read them strictly, write them back, and check them against the catalogue.

MIG Manager applies whatever entry of its mig-parted config a node's ``nvidia.com/mig.config``
label names, and it only finds out that an entry is wrong on the node, mid-change, with the
operands already paused. So migscope reads configs more strictly than a YAML loader would:
every schema problem (unknown key, ``devices: 7``, a missing ``mig-enabled``, a duplicate
key that YAML silently drops) is reported with its line number, and every ``mig-devices``
layout is checked for placement validity on each catalogued GPU model it can reach.

The schema follows mig-parted's ``api/spec/v1`` (see ``reference/mig-manager.md`` §1). The
YAML is composed into a node tree first (``compose_node``, with its size, depth and alias
limits) rather than loaded, because the node tree keeps line marks, shows duplicate keys, and
lets config names and profile names stay the text the user wrote even where YAML 1.1 would
read ``on`` as a boolean.

This module is pure: it takes and returns text and data, never files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError
from yaml.constructor import SafeConstructor

from migscope.core.catalogue import (
    CatalogueError,
    GpuModel,
    all_models,
    is_profile_name,
    normalise_profile_name,
    parse_pci_device_id,
)
from migscope.core.errors import UserError
from migscope.core.layout import Layout, is_valid
from migscope.core.yaml_messages import (
    Loc,
    YamlProblem,
    compose_node,
    describe_location,
    describe_value,
    line_for,
    yaml_problem,
    yaml_quote,
)

__all__ = [
    "ConfigCheck",
    "ConfigConflictError",
    "ConfigError",
    "ConfigReport",
    "Devices",
    "MigConfigEntry",
    "MigPartedConfig",
    "check_config",
    "emit_config",
    "entry_applies_to",
    "entry_for_layout",
    "merge_configs",
    "parse_config",
]

Devices: TypeAlias = Literal["all"] | tuple[int, ...]
"""mig-parted's ``devices``: ``"all"`` or GPU indices (never a bare integer, mig-parted #44)."""

TOP_KEYS = ("version", "mig-configs")
ENTRY_KEYS = ("devices", "device-filter", "mig-enabled", "mig-devices")
_PCI_FILTER = re.compile(r"^0x[0-9A-Fa-f]{8}(?::0x[0-9A-Fa-f]{8})?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class ConfigError(UserError, ValueError):
    """A mig-parted config that cannot be read: YAML syntax or schema.

    Attributes:
        line: 1-based line of the first problem, or None when it has no place in the text.
        message: What is wrong, without the line.
        problems: Every ``(line, message)`` found, first one first; schema validation finds
            them all at once, and a caller may want to show more than the first.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        problems: Sequence[tuple[int | None, str]] = (),
    ) -> None:
        self.line = line
        self.message = message
        self.problems = tuple(problems) or ((line, message),)
        super().__init__(self.__str__())

    def __str__(self) -> str:
        more = len(self.problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}{tail}"


class ConfigConflictError(UserError, ValueError):
    """Merging would silently overwrite a named config with different content."""


def _problem(message: str, *, key: str | None = None) -> PydanticCustomError:
    """A schema error with our own wording; ``key`` points the line lookup at a sibling key.

    The message travels in the context rather than the template, so braces in it (``{}``)
    are not taken for placeholders.
    """
    context: dict[str, str] = {"message": message}
    if key is not None:
        context["key"] = key
    return PydanticCustomError("migparted", "{message}", context)


def _check_profile_name(name: str) -> str:
    """Reject keys of ``mig-devices`` that mig-parted could not parse as profiles."""
    if name != normalise_profile_name(name) or not is_profile_name(name):
        raise _problem(
            f"{name!r} is not a MIG profile name (expected e.g. 1g.10gb, 1c.3g.20gb, 1g.10gb+me)"
        )
    return name


ProfileName = Annotated[StrictStr, AfterValidator(_check_profile_name)]
Count = Annotated[StrictInt, Field(ge=0)]
ConfigName = Annotated[StrictStr, Field(min_length=1)]


def _non_empty(message: str) -> Callable[[object], object]:
    """A before-validator rejecting an empty list or mapping.

    A ``min_length`` constraint would do, but pydantic checks it after dropping the items
    that failed, so one bad entry would also report "no entries" for its config.
    """

    def check(value: object) -> object:
        if isinstance(value, (list, tuple, dict)) and not value:
            raise _problem(message)
        return value

    return check


class MigConfigEntry(BaseModel):
    """One entry of a named config: which GPUs it selects and what MIG layout they get.

    Python code builds entries with the underscored names (``mig_enabled=True``); YAML uses
    mig-parted's hyphenated keys, and only those (see :func:`parse_config`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True)

    devices: Devices
    device_filter: tuple[str, ...] | None = Field(
        default=None, validation_alias="device-filter", serialization_alias="device-filter"
    )
    mig_enabled: bool = Field(
        validation_alias="mig-enabled", serialization_alias="mig-enabled", strict=True
    )
    mig_devices: dict[ProfileName, Count] | None = Field(
        default=None, validation_alias="mig-devices", serialization_alias="mig-devices"
    )

    @field_validator("devices", mode="before")
    @classmethod
    def _check_devices(cls, value: object) -> object:
        """``"all"`` or a list of distinct GPU indices; a bare int is mig-parted #44."""
        if isinstance(value, str):
            if value != "all":
                raise _problem(f'must be "all" or a list of GPU indices, got {value!r}')
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            raise _problem(
                f"a bare number ({value}) is not allowed; write devices: [{value}] "
                "(a list of GPU indices, mig-parted #44)"
            )
        if not isinstance(value, (list, tuple)):
            raise _problem(f'must be "all" or a list of GPU indices, got {describe_value(value)}')
        if not value:
            raise _problem('[] selects no GPU; use "all" or list GPU indices')
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise _problem(f"GPU index {item!r} must be an integer >= 0")
        repeated = sorted({i for i in value if list(value).count(i) > 1})
        if repeated:
            raise _problem(f"GPU index {repeated[0]} is listed more than once")
        return tuple(value)

    @field_validator("device_filter", mode="before")
    @classmethod
    def _check_device_filter(cls, value: object) -> object:
        """One PCI ID string or a list of them, as ``0xDDDDVVVV[:0xSSSSvvvv]``."""
        if value is None:
            return None
        items = [value] if isinstance(value, (str, int)) else value
        if not isinstance(items, (list, tuple)):
            raise _problem(
                f"must be a PCI ID string or a list of them, got {describe_value(value)}"
            )
        if not items:
            raise _problem("[] matches no GPU; drop the key to match every GPU")
        for item in items:
            _check_pci_filter(item)
        return tuple(items)

    @model_validator(mode="after")
    def _check_mig_devices(self) -> MigConfigEntry:
        """The cross-field rules of mig-parted's spec (``mig-devices`` vs ``mig-enabled``)."""
        if self.mig_enabled and self.mig_devices is None:
            raise _problem(
                "mig-devices is required when mig-enabled is true "
                "(write mig-devices: {} to enable MIG without creating instances)",
                key="mig-enabled",
            )
        if not self.mig_enabled and self.mig_devices:
            raise _problem(
                "mig-devices must be absent or empty when mig-enabled is false",
                key="mig-devices",
            )
        if self.mig_devices and not any(self.mig_devices.values()):
            raise _problem(
                "every count in mig-devices is 0; at least one must be > 0 "
                "(or write mig-devices: {})",
                key="mig-devices",
            )
        return self


def _check_pci_filter(item: object) -> None:
    """Raise unless ``item`` is a quoted mig-parted PCI ID such as ``"0x233510DE"``."""
    if isinstance(item, int) and not isinstance(item, bool):
        raise _problem(
            f'PCI IDs must be quoted strings like "0x233510DE"; got the number {item} '
            f"(YAML reads an unquoted 0x{item:08X} as an integer)"
        )
    if not isinstance(item, str) or not _PCI_FILTER.match(item):
        raise _problem(
            f'{item!r} is not a PCI ID (expected 0xDDDDVVVV such as "0x233510DE", '
            'optionally with a subsystem ":0xSSSSvvvv")'
        )


Entries = Annotated[
    tuple[MigConfigEntry, ...], BeforeValidator(_non_empty("needs at least one entry"))
]


class MigPartedConfig(BaseModel):
    """A whole mig-parted config file: ``version: v1`` and the named configs, in file order."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True)

    version: Literal["v1"]
    mig_configs: Annotated[
        dict[ConfigName, Entries], BeforeValidator(_non_empty("has no configs"))
    ] = Field(validation_alias="mig-configs", serialization_alias="mig-configs")

    @field_validator("version", mode="before")
    @classmethod
    def _check_version(cls, value: object) -> object:
        """Only ``v1`` exists; say so rather than listing literal alternatives."""
        if value != "v1" or not isinstance(value, str):
            raise _problem(f'must be "v1" (the only version mig-parted reads), got {value!r}')
        return value

    @classmethod
    def of(cls, configs: Mapping[str, Sequence[MigConfigEntry]]) -> MigPartedConfig:
        """Build a ``version: v1`` config from ``{name: entries}``."""
        return cls(version="v1", mig_configs={name: tuple(e) for name, e in configs.items()})


# --------------------------------------------------------------------------------------------
# Parsing: YAML node tree -> plain data with a line index -> pydantic model


def parse_config(text: str) -> MigPartedConfig:
    """Read a mig-parted config strictly.

    Args:
        text: The YAML text of the config file.

    Returns:
        The validated config. Config names and profile names are the text as written.

    Raises:
        ConfigError: YAML syntax, a duplicate key, a config name YAML 1.1 would not read as
            a string, or any schema violation; ``line`` names where.
    """
    try:
        root = compose_node(text)
    except YamlProblem as exc:
        raise ConfigError(exc.message, line=exc.line) from None
    if root is None:
        raise ConfigError("empty document (expected version: v1 and mig-configs)", line=1)
    builder = _Builder()
    try:
        data = builder.build(root, ())
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text) from None
    try:
        return MigPartedConfig.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        # A missing key is often the echo of a misspelt one: report the misspelling first.
        ranked = sorted(
            ((err["type"] == "missing", *_describe(err, builder.lines)) for err in exc.errors()),
            key=lambda p: (p[0], p[1] is None, p[1] or 0),
        )
        problems = [(line, message) for _, line, message in ranked]
        line, message = problems[0]
        raise ConfigError(message, line=line, problems=problems) from None


def _yaml_error(exc: yaml.YAMLError, text: str) -> ConfigError:
    """One-line message and line number for PyYAML's multi-line error text."""
    problem = yaml_problem(exc, text)
    return ConfigError(problem.message, line=problem.line)


class _Builder:
    """Turn a composed YAML node tree into plain data, recording where each path starts."""

    def __init__(self) -> None:
        self.lines: dict[Loc, int] = {}
        self._constructor = SafeConstructor()
        self._active: set[int] = set()

    def build(self, node: yaml.Node, path: Loc) -> Any:
        """Build the value of ``node``, which lives at ``path``."""
        self.lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in self._active:
            raise ConfigError("recursive YAML alias", line=node.start_mark.line + 1)
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            return self._constructor.construct_object(node, deep=True)
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Loc) -> dict[str, Any]:
        result: dict[str, Any] = {}
        seen: dict[str, int] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            key = self._key(key_node, path)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"duplicate key {key!r} in {describe_location(path)}"
                    f" (first at line {seen[key]})",
                    line=line,
                )
            seen[key] = line
            child = (*path, key)
            self.lines[child] = line
            result[key] = self.build(value_node, child)
        for merge in merges:
            self._merge(merge, path, result)
        return result

    def _merge(self, node: yaml.Node, path: Loc, into: dict[str, Any]) -> None:
        """YAML merge keys (``<<: *base``): explicit keys win, earlier sources win."""
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                raise ConfigError(
                    "a merge key (<<) must refer to a mapping", line=source.start_mark.line + 1
                )
            for key_node, value_node in source.value:
                key = self._key(key_node, path)
                if key not in into:
                    child = (*path, key)
                    self.lines.setdefault(child, key_node.start_mark.line + 1)
                    into[key] = self.build(value_node, child)

    def _key(self, node: yaml.Node, path: Loc) -> str:
        """A mapping key as the text written; config names must also read as that text."""
        line = node.start_mark.line + 1
        if not isinstance(node, yaml.ScalarNode):
            raise ConfigError(f"keys in {describe_location(path)} must be plain strings", line=line)
        if path == ("mig-configs",) and node.tag != _STR_TAG:
            reading = self._constructor.construct_object(node)
            if not isinstance(reading, (int, float)) or str(reading) != node.value:
                kind = "null" if reading is None else describe_value(reading)
                raise ConfigError(
                    f"config name {node.value!r} is read as {kind} by YAML 1.1 parsers such as "
                    f'mig-parted\'s; quote it: "{node.value}"',
                    line=line,
                )
        return str(node.value)


def _describe(err: ErrorDetails, lines: Mapping[Loc, int]) -> tuple[int | None, str]:
    """Turn one pydantic error into ``(line, one-line message)`` in mig-parted's terms."""
    loc: Loc = tuple(part for part in err["loc"] if part != "[key]")
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = TOP_KEYS if len(loc) == 1 else ENTRY_KEYS
        where = describe_location(loc[:-1])
        message = f"unknown key {loc[-1]!r} in {where} (allowed: {', '.join(allowed)})"
    elif kind == "missing":
        message = f"missing required key {loc[-1]!r} in {describe_location(loc[:-1])}"
    elif kind == "migparted":
        message = f"{describe_location(loc)}: {ctx['message']}"
        if "key" in ctx:
            loc = (*loc, str(ctx["key"]))
    else:
        message = f"{describe_location(loc)}: {_detail(kind, err.get('input'), loc)}"
    return line_for(loc, lines), message


def _detail(kind: str, value: object, loc: Loc) -> str:
    """Wording for pydantic's built-in error types."""
    details = {
        "bool_type": f"must be true or false, got {describe_value(value)}",
        "int_type": f"must be an integer, got {describe_value(value)}",
        "greater_than_equal": f"must be >= 0, got {value!r}",
        "string_type": f"must be a string, got {describe_value(value)}",
        "string_too_short": "must not be empty",
        "dict_type": f"must be a mapping, got {describe_value(value)}",
        "tuple_type": f"must be a list, got {describe_value(value)}",
        "model_type": f"must be a mapping, got {describe_value(value)}",
        "model_attributes_type": f"must be a mapping, got {describe_value(value)}",
    }
    return details.get(kind, f"invalid value {describe_value(value)} ({kind})")


# --------------------------------------------------------------------------------------------
# Emitting


def emit_config(config: MigPartedConfig, *, header: str | None = None) -> str:
    """Write ``config`` as YAML that mig-parted reads and :func:`parse_config` reads back equal.

    The layout copies mig-parted's own default config (hyphenated keys, quoted profile names
    and PCI IDs, flow lists), so a diff against a hand-written file stays readable.

    Args:
        config: The config to write.
        header: Optional text written above it as ``# `` comment lines (provenance).
    """
    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    lines += ["version: v1", "mig-configs:"]
    for i, (name, entries) in enumerate(config.mig_configs.items()):
        if i:
            lines.append("")
        lines.append(f"  {_key_text(name)}:")
        for entry in entries:
            lines.extend(_entry_lines(entry))
    return "\n".join(lines) + "\n"


def _entry_lines(entry: MigConfigEntry) -> list[str]:
    fields: list[str] = []
    if entry.device_filter is not None:
        fields.append(f"device-filter: [{', '.join(yaml_quote(f) for f in entry.device_filter)}]")
    devices = "all" if entry.devices == "all" else f"[{', '.join(map(str, entry.devices))}]"
    fields.append(f"devices: {devices}")
    fields.append(f"mig-enabled: {'true' if entry.mig_enabled else 'false'}")
    if entry.mig_devices is not None and not entry.mig_devices:
        fields.append("mig-devices: {}")
    elif entry.mig_devices:
        fields.append("mig-devices:")
        fields.extend(f"  {yaml_quote(name)}: {n}" for name, n in entry.mig_devices.items())
    return [("    - " if i == 0 else "      ") + text for i, text in enumerate(fields)]


# Words Go's yaml.v2 (mig-parted) reads as booleans or null, a superset of PyYAML's.
_YAML11_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
_PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._/-]*$")


def _key_text(name: str) -> str:
    """A config name, plain where every YAML 1.1 reader takes it as that string."""
    if _PLAIN_NAME.fullmatch(name) is None or name.lower() in _YAML11_WORDS:
        return yaml_quote(name)
    try:
        node = compose_node(name)
    except YamlProblem:  # pragma: no cover - a plain name is a scalar
        return yaml_quote(name)
    return name if node is not None and node.tag == _STR_TAG else yaml_quote(name)


# --------------------------------------------------------------------------------------------
# Building and merging


def entry_for_layout(
    layout: Layout,
    *,
    device_filter: GpuModel | str | Iterable[str] | None = None,
    devices: Literal["all"] | Sequence[int] = "all",
) -> MigConfigEntry:
    """The mig-parted entry that gives the selected GPUs ``layout``.

    An empty layout yields ``mig-enabled: true`` with ``mig-devices: {}`` (MIG on, nothing
    created), which is what a drained GPU waiting for a new layout should look like.

    Args:
        layout: The instances to create on each selected GPU.
        device_filter: Restrict the entry to GPU models: a :class:`GpuModel` (all its PCI
            IDs), one PCI ID string, several, or None for every GPU.
        devices: ``"all"`` or the GPU indices on the node.

    Raises:
        pydantic.ValidationError: a malformed PCI ID or GPU index.
    """
    filters: tuple[str, ...] | None
    if device_filter is None:
        filters = None
    elif isinstance(device_filter, GpuModel):
        filters = tuple(device_filter.device_filter())
    elif isinstance(device_filter, str):
        filters = (device_filter,)
    else:
        filters = tuple(device_filter)
    return MigConfigEntry(
        devices="all" if devices == "all" else tuple(devices),
        device_filter=filters,
        mig_enabled=True,
        mig_devices=layout.as_dict(),
    )


def merge_configs(
    base: MigPartedConfig,
    extra: MigPartedConfig | Mapping[str, Sequence[MigConfigEntry]],
    *,
    replace: bool = False,
) -> MigPartedConfig:
    """Add ``extra``'s named configs to ``base`` without dropping any of ``base``'s.

    The applier writes its configs into a ConfigMap other tools share, so it must never
    lose a config it did not write, and must not overwrite one by accident. Names keep
    their place in ``base``; new names are appended.

    Args:
        base: The config already in place.
        extra: Configs to add, as a config or ``{name: entries}``.
        replace: Allow a name in both to take ``extra``'s (different) entries.

    Raises:
        ConfigConflictError: a name exists in ``base`` with different entries and
            ``replace`` is false. Identical entries are not a conflict.
    """
    additions = extra.mig_configs if isinstance(extra, MigPartedConfig) else extra
    merged: dict[str, tuple[MigConfigEntry, ...]] = dict(base.mig_configs)
    clashes = [n for n, e in additions.items() if n in merged and merged[n] != tuple(e)]
    if clashes and not replace:
        raise ConfigConflictError(
            f"config {', '.join(clashes)} already exists with different entries; "
            "pass replace=True to overwrite"
        )
    merged.update({name: tuple(entries) for name, entries in additions.items()})
    return MigPartedConfig.of(merged)


# --------------------------------------------------------------------------------------------
# Checking against the catalogue


@dataclass(frozen=True)
class ConfigReport:
    """The verdict on one named config.

    Attributes:
        name: The config name (the value of ``nvidia.com/mig.config``).
        errors: One line each: config, entry index, model and why.
        warnings: Things that did not make the config invalid but were not checked or
            look wrong (an uncatalogued PCI ID, a name no label can select).
        models: Keys of the catalogued models the config applies to and was found valid on.
        applies: False when checking for one GPU model (``gpu=``) and the config is meant
            for other models only: its entries' filters name other GPUs, or its profiles
            are other models' names (``all-1g.5gb`` on an H200). Such a config is skipped,
            not an error: mig-parted's own default file holds configs for every GPU.
    """

    name: str
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    applies: bool = True

    @property
    def ok(self) -> bool:
        """True when no error was found."""
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape ``validate-config --output json`` prints per config."""
        return {
            "name": self.name,
            "valid": self.ok,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "models": list(self.models),
            "applies": self.applies,
        }


@dataclass(frozen=True)
class ConfigCheck:
    """The verdict on a whole config file, one :class:`ConfigReport` per name, in file order."""

    configs: tuple[ConfigReport, ...]
    gpu: str | None = None
    models_checked: tuple[str, ...] = field(default=())
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every named config is valid and the file as a whole is sound."""
        return not self.errors and all(report.ok for report in self.configs)

    @property
    def not_applicable(self) -> tuple[ConfigReport, ...]:
        """With ``gpu``: the configs meant for other GPU models only."""
        return tuple(report for report in self.configs if not report.applies)

    @property
    def invalid(self) -> tuple[ConfigReport, ...]:
        """The configs with errors."""
        return tuple(report for report in self.configs if not report.ok)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every warning of every config."""
        return tuple(w for report in self.configs for w in report.warnings)

    def __getitem__(self, name: str) -> ConfigReport:
        """The report of the config called ``name``."""
        for report in self.configs:
            if report.name == name:
                return report
        raise KeyError(name)


def entry_applies_to(entry: MigConfigEntry, model: GpuModel) -> bool:
    """Whether ``entry``'s device-filter selects ``model`` (no filter selects every GPU).

    Only the device+vendor part counts: the subsystem suffix and the case are ignored,
    because the catalogue knows models by device ID.
    """
    if entry.device_filter is None:
        return True
    return any(_filter_id(f) in model.pci_device_ids for f in entry.device_filter)


def check_config(config: MigPartedConfig, *, gpu: GpuModel | None = None) -> ConfigCheck:
    """Check every named config's layouts against the MIG catalogue.

    Without ``gpu``, an entry is checked on each catalogued model it can reach: the models
    its device-filter names, or, without a filter, every model that offers all its profile
    names (it would fail on such a node if the layout does not fit). With ``gpu``, every
    config meant for that model must fit it; configs meant for other models only (their
    filters name other GPUs, or their profiles are other models' names) are reported as
    not applicable, and it is an error if no config applies at all.

    Args:
        config: A parsed config.
        gpu: Check for this one model only.

    Returns:
        A :class:`ConfigCheck` with a report per config name.
    """
    reports = tuple(
        _check_named(name, entries, gpu) for name, entries in config.mig_configs.items()
    )
    if gpu is None:
        return ConfigCheck(reports, None, tuple(m.key for m in all_models()))
    errors: tuple[str, ...] = ()
    if not any(report.applies for report in reports):
        errors = (f"no config in the file applies to {gpu.key}",)
    return ConfigCheck(reports, gpu.key, (gpu.key,), errors)


@dataclass
class _Findings:
    """What checking one named config found so far."""

    name: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    models: set[str] = field(default_factory=set)

    def report(self) -> ConfigReport:
        order = [m.key for m in all_models()]
        models = sorted(self.models, key=lambda k: order.index(k) if k in order else len(order))
        return ConfigReport(self.name, tuple(self.errors), tuple(self.warnings), tuple(models))


def _check_named(
    name: str, entries: Sequence[MigConfigEntry], gpu: GpuModel | None
) -> ConfigReport:
    found = _Findings(name)
    if not _LABEL_VALUE.match(name):
        found.warnings.append(
            f"{name}: not a valid Kubernetes label value, so nvidia.com/mig.config cannot select it"
        )
    if gpu is None:
        for index, entry in enumerate(entries):
            _check_entry_on_catalogue(found, index, entry)
        return found.report()
    meant = [
        (i, e)
        for i, e in enumerate(entries)
        if entry_applies_to(e, gpu) and not _meant_for_other_models(e, gpu)
    ]
    if not meant:
        return ConfigReport(name, warnings=tuple(found.warnings), applies=False)
    for index, entry in meant:
        _check_entry_on(found, index, entry, gpu)
    return found.report()


def _meant_for_other_models(entry: MigConfigEntry, gpu: GpuModel) -> bool:
    """An unfiltered entry whose profiles are all other models' names, not typos.

    mig-parted's files name profiles per model (``all-1g.5gb`` is for A100-40GB), so such
    an entry is not meant for ``gpu``. A name no catalogued model offers stays an error.
    """
    if entry.device_filter is not None or not entry.mig_enabled or not entry.mig_devices:
        return False
    names = list(entry.mig_devices)
    if any(gpu.has_profile(n) for n in names):
        return False
    return any(all(m.has_profile(n) for n in names) for m in all_models())


def _check_entry_on_catalogue(found: _Findings, index: int, entry: MigConfigEntry) -> None:
    """Check one entry on every catalogued model it can reach (no ``--gpu``)."""
    if entry.device_filter is not None:
        targets: list[GpuModel] = []
        for text in entry.device_filter:
            model = _model_for_filter(text)
            if model is None:
                found.warnings.append(
                    f"{found.name}: entry {index}: {text} is not in the catalogue; not checked"
                )
            elif model not in targets:
                targets.append(model)
    elif not entry.mig_enabled or not entry.mig_devices:
        targets = list(all_models())
    else:
        targets = [m for m in all_models() if all(m.has_profile(p) for p in entry.mig_devices)]
        if not targets:
            found.errors.append(
                f"{found.name}: entry {index}: {_missing_profiles(list(entry.mig_devices))}"
            )
    for model in targets:
        _check_entry_on(found, index, entry, model)


def _check_entry_on(found: _Findings, index: int, entry: MigConfigEntry, model: GpuModel) -> None:
    """Check one entry's layout on one model, recording an error or the model."""
    reason = _layout_problem(entry, model)
    if reason is None:
        found.models.add(model.key)
    else:
        found.errors.append(f"{found.name}: entry {index} on {model.key}: {reason}")


def _layout_problem(entry: MigConfigEntry, model: GpuModel) -> str | None:
    """Why the entry's layout cannot be built on ``model``, or None if it can."""
    if not entry.mig_enabled or not entry.mig_devices:
        return None
    return is_valid(model, entry.mig_devices).reason


def _missing_profiles(names: Sequence[str]) -> str:
    """Why no model offers all of ``names``: the unknown ones, or that they never meet."""
    unknown = [n for n in names if not any(m.has_profile(n) for m in all_models())]
    if unknown:
        return f"no catalogued GPU offers {', '.join(unknown)}"
    return f"no catalogued GPU offers {' and '.join(names)} together"


def _filter_id(text: str) -> int:
    """The packed device+vendor ID of a device-filter string (validated already)."""
    try:
        return parse_pci_device_id(text)
    except CatalogueError:  # pragma: no cover - the schema admits only well-formed IDs
        return -1


def _model_for_filter(text: str) -> GpuModel | None:
    wanted = _filter_id(text)
    return next((m for m in all_models() if wanted in m.pci_device_ids), None)
