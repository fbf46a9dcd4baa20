"""Writing a mig-parted config back as YAML that mig-parted reads and migscope reads back equal.

The applier writes configs into a ConfigMap people also read and diff, so the text copies
mig-parted's own default config (hyphenated keys, quoted profile names and PCI IDs, flow
lists), and config names are quoted wherever a YAML 1.1 reader (Go's yaml.v2, mig-parted's)
would take them for something other than the string.
"""

from __future__ import annotations

import re

from migscope.core._migparted.config import MigConfigEntry, MigPartedConfig
from migscope.core._migparted.parse import STR_TAG
from migscope.core._yaml_messages import YamlProblem, compose_node, yaml_quote


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
    return name if node is not None and node.tag == STR_TAG else yaml_quote(name)
