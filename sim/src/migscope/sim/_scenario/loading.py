"""Reading a scenario, and naming a problem in one: ``FILE:LINE: scenario nodes[0].gpus: why``.

YAML is read through the one strict loader, then validated in the file's terms. Pydantic's
errors are worded by the one formatter (:mod:`migscope.core._validation`); scenario files keep
pydantic's own texts ("Input should be less than or equal to 1"), which ``docs/scenario.md``
quotes, and add theirs for unknown keys and workload or fault kinds. The first problem is
reported, with how many more there are.

Loading (shape) and building the simulation (meaning, :mod:`migscope.sim._build`) both find
problems in a scenario, and both report them the same way, as a :class:`ScenarioError` naming
the path of the field and the line it was written on (:func:`format_path`, :func:`line_of`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from migscope.core import (
    BUILTIN_WORDING,
    Loc,
    UserError,
    Wording,
    YamlProblem,
    compose_node,
    construct_strict,
    describe_problem,
    line_for,
)
from migscope.sim._scenario.spec import Scenario


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


def format_path(loc: Sequence[str | int]) -> str:
    """``("nodes", 0, "gpus")`` → ``nodes[0].gpus``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def node_lines(root: yaml.Node | None) -> dict[Loc, int]:
    """The 1-based line of every key and item of a YAML node tree, by path.

    A key's line is that of the key (the first one, should a key repeat); an item's that of
    the item. Merge keys (``<<``) are not followed: merged values have no line of their own.
    """
    lines: dict[Loc, int] = {}
    if root is None:
        return lines
    lines[()] = root.start_mark.line + 1
    stack: list[tuple[yaml.Node, Loc]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        children: list[tuple[yaml.Node, Loc, int]] = []
        if isinstance(node, yaml.MappingNode):
            children = [
                (value, (*path, key.value), key.start_mark.line + 1)
                for key, value in node.value
                if isinstance(key, yaml.ScalarNode)
            ]
        elif isinstance(node, yaml.SequenceNode):
            children = [
                (item, (*path, i), item.start_mark.line + 1) for i, item in enumerate(node.value)
            ]
        for child, child_path, line in children:
            if child_path not in lines:
                lines[child_path] = line
                stack.append((child, child_path))
    return lines


def line_of(root: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """The 1-based YAML line of the node at ``loc`` (or of its deepest existing parent)."""
    return line_for(tuple(loc), node_lines(root))


WORDING: Wording = {
    **dict.fromkeys(BUILTIN_WORDING, "{msg}"),
    "extra_forbidden": "unknown field (check the spelling; see docs/scenario.md)",
    "union_tag_invalid": "unknown {discriminator} {tag!r} (expected {expected_tags})",
    "union_tag_not_found": "field required",
    "value_error": "{error}",
}
"""Pydantic's own text for every error, but for unknown keys, kinds and validators' reasons."""

_TAGS = {"idle", "constant", "periodic", "bursty", "trace"} | {
    "gpu_lost",
    "layout_change",
    "slow_call",
    "nvml_error",
}
_TAG_ERRORS = ("union_tag_invalid", "union_tag_not_found")


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


def _as_written(err: ErrorDetails) -> ErrorDetails:
    """``err`` at the path the file has: union tags dropped, a bad kind at its ``kind`` key."""
    loc = _clean_loc(list(err["loc"]))
    if err["type"] in _TAG_ERRORS:
        loc.append(str((err.get("ctx") or {}).get("discriminator", "kind")).strip("'"))
    cleaned = err.copy()
    cleaned["loc"] = tuple(loc)
    return cleaned


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
        problem = describe_problem(_as_written(exc.errors()[0]), node_lines(tree), wording=WORDING)
        message = problem.reason
        more = exc.error_count() - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise ScenarioError(
            format_path(problem.loc), message, line=problem.line, source=source
        ) from exc


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

    Read through the one strict loader (:func:`migscope.core._yaml_messages.compose_node`):
    its size, depth and alias limits apply, and duplicate keys are refused.

    Raises:
        ScenarioError: unreadable file, YAML syntax, a YAML limit passed or a duplicate key.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError("", f"cannot read: {exc.strerror or exc}", source=str(path)) from exc
    try:
        tree = compose_node(text)
        # Building flattens merge keys in place: build from a second tree, keep the first
        # as written for line numbers.
        built = compose_node(text)
        data = None if built is None else construct_strict(built, text)
    except YamlProblem as exc:
        raise ScenarioError(
            "", f"invalid YAML: {exc.problem}", line=exc.line, source=str(path)
        ) from exc
    return data, tree
