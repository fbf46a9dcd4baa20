"""Reading a scenario: YAML through the one strict loader, then validation in the file's terms.

Pydantic's errors are worded by the one formatter (:mod:`migscope.core._validation`); scenario
files keep pydantic's own texts ("Input should be less than or equal to 1"), which
``docs/scenario.md`` quotes, and add theirs for unknown keys and workload or fault kinds. The
first problem is reported, with how many more there are.
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
    Wording,
    YamlProblem,
    compose_node,
    construct_strict,
    describe_problem,
)
from migscope.sim._scenario.errors import ScenarioError, format_path, node_lines
from migscope.sim._scenario.spec import Scenario

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
