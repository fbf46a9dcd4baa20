"""How migscope names a place in a YAML file and a wrong value in one-line error messages.

mig-parted configs and analyzer policy files are both read strictly, and their errors should
read the same way: ``mig-configs.custom[0]``, ``idle.activity_p95_below``, "got the string
'yes'" — what YAML made of the text matters more than Python's repr of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeAlias

__all__ = ["Loc", "describe_location", "describe_value", "line_for", "yaml_quote"]

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
