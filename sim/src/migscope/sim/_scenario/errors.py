"""How a problem in a scenario is named: ``FILE:LINE: scenario nodes[0].gpus[1]: reason``.

Loading (shape) and building (meaning) both find problems in a scenario, and both report them
the same way, by the path of the field and the line it was written on.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from migscope.core import Loc, UserError, line_for


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
