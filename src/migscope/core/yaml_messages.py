"""How migscope names a place in a YAML file and a wrong value in one-line error messages.

mig-parted configs and analyzer policy files are both read strictly, and their errors should
read the same way: ``mig-configs.custom[0]``, ``idle.activity_p95_below``, "got the string
'yes'" — what YAML made of the text matters more than Python's repr of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeAlias

import yaml
from yaml.constructor import SafeConstructor

__all__ = [
    "FileProblemError",
    "Loc",
    "YamlProblem",
    "compose_with_lines",
    "describe_location",
    "describe_value",
    "first_problem",
    "line_for",
    "yaml_quote",
]

Loc: TypeAlias = tuple[str | int, ...]
"""A path into a YAML document: mapping keys and list positions."""

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def yaml_quote(text: str) -> str:
    """A YAML double-quoted scalar; everything outside printable ASCII is escaped."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def describe_location(loc: Loc) -> str:
    """``mig-configs.custom[0]``: keys with dots or odd characters quoted, positions in brackets."""
    if not loc:
        return "the top level"
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{yaml_quote(part)}]"
    return text


def describe_value(value: object) -> str:
    """A wrong value as YAML read it: "the boolean true", "the string 'x'", "a list"."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def line_for(loc: Loc, lines: Mapping[Loc, int]) -> int | None:
    """The line of ``loc``, or of its nearest ancestor that appears in the text."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


class FileProblemError(ValueError):
    """A file that cannot be used; the message is ``FILE:LINE: what``.

    The one shape of user-facing file errors (policy, schedule, exposition files), so that
    every one reads the same and editors can jump to the line.

    Attributes:
        source: The file (or the name given to a text).
        line: 1-based line of the problem, or None when it belongs to no line.
        reason: What is wrong, without the place.
    """

    def __init__(self, reason: str, *, source: str, line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


class YamlProblem(ValueError):
    """A YAML document that cannot be read as plain data: the problem and its line.

    Callers turn it into their own error type (``PolicyError``, ``ScheduleError``), which
    adds the file name, so that every strict YAML reader reports the same way.
    """

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


_CONSTRUCTOR = SafeConstructor()


def compose_with_lines(text: str) -> tuple[object, dict[Loc, int]]:
    """YAML text as plain data, and the line of every key and item (``{loc: line}``).

    Composing instead of ``yaml.safe_load`` keeps line numbers for error messages and
    catches duplicate keys, which ``safe_load`` resolves silently by keeping the last one.
    An empty document is ``None``.

    Raises:
        YamlProblem: a syntax error, a duplicate key or a non-scalar key, with its line.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        raise YamlProblem(
            f"YAML syntax error: {what}", mark.line + 1 if mark is not None else None
        ) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(f"YAML syntax error: {' '.join(str(exc).split())}") from None
    lines: dict[Loc, int] = {}
    if root is None:
        return None, lines
    return _plain(root, (), lines), lines


def _plain(node: yaml.Node, path: Loc, lines: dict[Loc, int]) -> object:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[str, object] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlProblem(f"{describe_location(path)}: keys must be plain names", line)
            key = str(key_node.value)
            child = (*path, key)
            if key in result:
                raise YamlProblem(
                    f"{describe_location(child)}: duplicate key (first at line {lines[child]})",
                    line,
                )
            lines[child] = line
            result[key] = _plain(value_node, child, lines)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, (*path, i), lines) for i, item in enumerate(node.value)]
    return _CONSTRUCTOR.construct_object(node, deep=True)


def first_problem(problems: Iterable[tuple[int | None, str]]) -> tuple[int | None, str]:
    """The problem nearest the top of the file, saying how many more there are.

    One line per error keeps messages readable; the count tells the user the file has more
    to fix than the line shown.
    """
    ordered = sorted(problems, key=lambda p: (p[0] is None, p[0] or 0))
    line, message = ordered[0]
    more = len(ordered) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return line, message
