#!/usr/bin/env python3
"""Write the values table of deploy/helm/migscope/README.md from values.yaml.

Each key of values.yaml carries a ``# -- description`` comment (the helm-docs convention),
directly above it; continuation lines are further ``#`` lines before the key. A documented
key whose value is a map or a list is one row (a Kubernetes fragment such as ``resources``);
an undocumented map is descended into. An undocumented leaf is an error, so a new value
cannot be added without a row. The default column is the value from values.yaml as JSON.

Usage (PyYAML needed; the project's venv has it):

    .venv/bin/python deploy/helm/gen-values-table.py           # rewrite the README table
    .venv/bin/python deploy/helm/gen-values-table.py --check   # exit 1 if it is stale

tests/deploy/test_helm.py fails when the README's table differs from what this prints.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "migscope"
START = "<!-- values-table:start -->"
END = "<!-- values-table:end -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-/\"]+):(?P<rest>.*)$")


class UndocumentedValueError(ValueError):
    """A leaf of values.yaml without a ``# --`` comment."""


def rows(text: str) -> list[tuple[str, Any, str]]:
    """``(dotted key, default, description)`` for every documented key, in file order."""
    values = yaml.safe_load(text) or {}
    out: list[tuple[str, Any, str]] = []
    stack: list[tuple[int, str]] = []
    comments: list[str] = []
    skip_deeper_than: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if skip_deeper_than is not None:
            if not stripped or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if not stripped:
            comments = []
            continue
        if stripped.startswith("#"):
            comments.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if match is None or stripped.startswith("- "):
            raise UndocumentedValueError(f"values.yaml:{number}: cannot place {stripped!r}")
        key = match["key"].strip('"')
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = [k for _, k in stack] + [key]
        dotted = ".".join(path)
        description = _description(comments)
        comments = []
        rest = match["rest"].split(" #", 1)[0].strip()
        if description is not None:
            out.append((dotted, _lookup(values, path), description))
            skip_deeper_than = indent
            continue
        if rest:  # an inline value with no description
            raise UndocumentedValueError(f"values.yaml:{number}: {dotted} has no '# --' comment")
        stack.append((indent, key))
        if not isinstance(_lookup(values, path), dict):
            raise UndocumentedValueError(f"values.yaml:{number}: {dotted} has no '# --' comment")
    return out


def _description(comments: list[str]) -> str | None:
    for i, text in enumerate(comments):
        if text.startswith("--"):
            return " ".join([text[2:].strip(), *comments[i + 1 :]]).strip()
    return None


def _lookup(values: Any, path: list[str]) -> Any:
    for key in path:
        values = values[key]
    return values


def table(text: str) -> str:
    """The Markdown table for values.yaml's text."""
    lines = ["| key | default | description |", "|---|---|---|"]
    for key, default, description in rows(text):
        shown = _cell(json.dumps(default, separators=(", ", ": ")))
        lines.append(f"| `{key}` | `{shown}` | {_cell(description)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def updated_readme(readme: str, values_text: str) -> str:
    """README text with the part between the markers replaced by the current table."""
    head, sep, rest = readme.partition(START)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"README.md lacks the markers {START} ... {END}")
    return f"{head}{START}\n{table(values_text)}{END}{tail}"


def main(argv: list[str]) -> int:
    """Rewrite (or, with --check, verify) the README's values table."""
    readme_path = CHART / "README.md"
    readme = readme_path.read_text()
    new = updated_readme(readme, (CHART / "values.yaml").read_text())
    if "--check" in argv:
        if new != readme:
            print(f"{readme_path}: stale values table; run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    readme_path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
