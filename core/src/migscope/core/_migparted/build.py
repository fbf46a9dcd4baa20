"""Making mig-parted entries from migscope's layouts, and adding configs to an existing file.

What the analyzer's plan and the applier need to turn layouts into a config MIG Manager can
apply: the entry that gives GPUs a layout, and a merge that never drops or silently replaces
a config someone else wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._layout import Layout
from migscope.core._migparted.errors import ConfigConflictError
from migscope.core._migparted.model import MigConfigEntry, MigPartedConfig


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
