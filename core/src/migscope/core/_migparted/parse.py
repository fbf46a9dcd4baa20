"""Reading a mig-parted config strictly: YAML node tree -> plain data with lines -> model.

The YAML is composed into a node tree first (``compose_node``, with its size, depth and alias
limits) rather than loaded, because the node tree keeps line marks, shows duplicate keys, and
lets config names and profile names stay the text the user wrote even where YAML 1.1 would
read ``on`` as a boolean. Schema problems are worded by the one formatter of pydantic errors
(:func:`migscope.core._validation.describe_error`) in mig-parted's terms.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError
from yaml.constructor import SafeConstructor

from migscope.core._migparted.config import (
    ENTRY_KEYS,
    SCHEMA_ERROR,
    TOP_KEYS,
    ConfigError,
    MigPartedConfig,
)
from migscope.core._validation import Wording, describe_error
from migscope.core._yaml_messages import (
    Loc,
    YamlProblem,
    compose_node,
    describe_location,
    describe_value,
    yaml_problem,
)

STR_TAG = "tag:yaml.org,2002:str"
"""The tag of a YAML scalar every reader takes as a string."""
_MERGE_TAG = "tag:yaml.org,2002:merge"

WORDING: Wording = {
    "extra_forbidden": "unknown key {key} in {where} (allowed: {allowed})",
    "missing": "missing required key {key} in {where}",
    "greater_than_equal": "must be >= {ge}, got {raw}",
    "dict_type": "must be a mapping, got {value}",
    "model_type": "must be a mapping, got {value}",
    "model_attributes_type": "must be a mapping, got {value}",
}
"""Where mig-parted's terms differ from the shared wording of pydantic's errors."""


def _allowed(where: Loc) -> tuple[str, ...]:
    """The keys allowed at ``where``: the file's at the top level, an entry's below."""
    return TOP_KEYS if not where else ENTRY_KEYS


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
        raise ConfigError(exc.message, line=exc.line) from exc
    if root is None:
        raise ConfigError("empty document (expected version: v1 and mig-configs)", line=1)
    builder = _Builder()
    try:
        data = builder.build(root, ())
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text) from exc
    try:
        return MigPartedConfig.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        # A missing key is often the echo of a misspelt one: report the misspelling first.
        ranked = sorted(
            (
                (
                    err["type"] == "missing",
                    *describe_error(
                        err,
                        builder.lines,
                        custom_type=SCHEMA_ERROR,
                        allowed=_allowed,
                        wording=WORDING,
                    ),
                )
                for err in exc.errors()
            ),
            key=lambda p: (p[0], p[1] is None, p[1] or 0),
        )
        problems = [(line, message) for _, line, message in ranked]
        line, message = problems[0]
        raise ConfigError(message, line=line, problems=problems) from exc


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
        if path == ("mig-configs",) and node.tag != STR_TAG:
            reading = self._constructor.construct_object(node)
            if not isinstance(reading, (int, float)) or str(reading) != node.value:
                kind = "null" if reading is None else describe_value(reading)
                raise ConfigError(
                    f"config name {node.value!r} is read as {kind} by YAML 1.1 parsers such as "
                    f'mig-parted\'s; quote it: "{node.value}"',
                    line=line,
                )
        return str(node.value)
