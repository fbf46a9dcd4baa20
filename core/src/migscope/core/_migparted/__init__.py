"""mig-parted configs: read them strictly, write them back, and check them against the catalogue.

MIG Manager applies whatever entry of its mig-parted config a node's ``nvidia.com/mig.config``
label names, and it only finds out that an entry is wrong on the node, mid-change, with the
operands already paused. So migscope reads configs more strictly than a YAML loader would:
every schema problem (unknown key, ``devices: 7``, a missing ``mig-enabled``, a duplicate
key that YAML silently drops) is reported with its line number, and every ``mig-devices``
layout is checked for placement validity on each catalogued GPU model it can reach.

The schema follows mig-parted's ``api/spec/v1`` (see ``reference/mig-manager.md`` §1).

One module per job: :mod:`.config` (the schema and its errors, entries from layouts, merging
configs), :mod:`.parse` (text to a validated config, with the line of every problem),
:mod:`.emit` (a config back to text), :mod:`.check` (layouts against the catalogue),
:mod:`.instances` (the GPU instances a ``mig-devices`` mapping with compute-instance profiles
makes), :mod:`.filters` (``device-filter`` strings read base 0, as mig-parted reads them) and
:mod:`.source` (the config inside a ConfigMap, a manifest or ``kubectl get cm -o yaml``).
This package is pure: it takes and returns text and data, never files.
"""

from __future__ import annotations

from migscope.core._migparted.check import check_config, entry_applies_to
from migscope.core._migparted.config import (
    ConfigConflictError,
    ConfigError,
    MigConfigEntry,
    MigPartedConfig,
    entry_for_layout,
    merge_configs,
)
from migscope.core._migparted.emit import emit_config
from migscope.core._migparted.filters import DeviceFilterError, parse_device_filter
from migscope.core._migparted.instances import gpu_instances
from migscope.core._migparted.parse import parse_config
from migscope.core._migparted.source import PLAIN_FORM, read_config_sources

__all__ = [
    "PLAIN_FORM",
    "ConfigConflictError",
    "ConfigError",
    "DeviceFilterError",
    "MigConfigEntry",
    "MigPartedConfig",
    "check_config",
    "emit_config",
    "entry_applies_to",
    "entry_for_layout",
    "gpu_instances",
    "merge_configs",
    "parse_config",
    "parse_device_filter",
    "read_config_sources",
]
