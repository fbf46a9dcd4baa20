"""A mig-parted config (``api/spec/v1``): its strict schema, its errors, and making one.

What a valid config is, as strict pydantic models: how text becomes one is :mod:`.parse`, and
whether its layouts fit a GPU is :mod:`.check`. Validators word their own problems (a bare
``devices: 7`` is mig-parted #44, a PCI ID YAML read as a number) as ``PydanticCustomError``
of type :data:`SCHEMA_ERROR`, which the reader shows as written.

The two ways a config goes wrong for its reader are :class:`ConfigError` (it cannot be read)
and :class:`ConfigConflictError` (a merge would clash); both are
:class:`~migscope.core._errors.UserError`: a person wrote the file (or chose to merge into one)
and can fix it. The reader, the writer and :func:`merge_configs` raise them.

What the analyzer's plan and the applier need to turn layouts into a config MIG Manager can
apply is here too: :func:`entry_for_layout` (the entry that gives GPUs a layout) and
:func:`merge_configs` (a merge that never drops or silently replaces a config someone else
wrote).

Python code builds entries with the underscored names (``mig_enabled=True``); YAML uses
mig-parted's hyphenated keys, and only those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from migscope.core._errors import UserError
from migscope.core._gpu_models.gpu_model import GpuModel, is_profile_name, normalise_profile_name
from migscope.core._layout import Layout
from migscope.core._migparted.filters import DeviceFilterError, parse_device_filter
from migscope.core._yaml_messages import describe_value

Devices: TypeAlias = Literal["all"] | tuple[int, ...]
"""mig-parted's ``devices``: ``"all"`` or GPU indices (never a bare integer, mig-parted #44)."""

TOP_KEYS = ("version", "mig-configs")
"""The keys of a config file, in mig-parted's order."""
ENTRY_KEYS = ("devices", "device-filter", "mig-enabled", "mig-devices")
"""The keys of one entry of a named config, in mig-parted's order."""
SCHEMA_ERROR = "migparted"
"""The ``PydanticCustomError`` type of the schema's own problems."""


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
        context["line_key"] = key
    return PydanticCustomError(SCHEMA_ERROR, "{message}", context)


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
    mig-parted's hyphenated keys, and only those (see
    :func:`migscope.core._migparted.parse_config`).
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
    """Raise unless ``item`` is a quoted PCI ID mig-parted reads (base 0: hex or decimal)."""
    if isinstance(item, int) and not isinstance(item, bool):
        raise _problem(
            f'PCI IDs must be quoted strings like "0x233510DE"; got the number {item} '
            f"(YAML reads an unquoted 0x{item:08X} as an integer)"
        )
    if not isinstance(item, str):
        raise _problem(f'{item!r} is not a PCI ID (expected a string such as "0x233510DE")')
    try:
        parse_device_filter(item)
    except DeviceFilterError as exc:
        raise _problem(
            f"{item!r} is not a PCI ID mig-parted can match: {exc} (expected 0xDDDDVVVV such "
            'as "0x233510DE" or its decimal value, optionally with a subsystem ":0xSSSSvvvv")'
        ) from None


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
