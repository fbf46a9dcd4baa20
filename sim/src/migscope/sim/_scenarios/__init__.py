"""Scenarios that ship with migscope, so demos and the sim backend work with no files at hand.

``h200-node`` is one HGX H200 node (4 MIG GPUs + 4 whole GPUs) whose workloads tell the story
the analyzer should find; ``fleet-mixed`` is three H100/A100 nodes with a re-partition on
day 3. ``resolve_scenario`` accepts either name or a path to a scenario file.
"""

from __future__ import annotations

from pathlib import Path

from migscope.core import UserError

__all__ = [
    "BUILTIN_SCENARIOS",
    "DEMO_SCENARIO",
    "resolve_scenario",
]

_HERE = Path(__file__).resolve().parent
BUILTIN_SCENARIOS: dict[str, Path] = {p.stem: p for p in sorted(_HERE.glob("*.yaml"))}
DEMO_SCENARIO = BUILTIN_SCENARIOS["h200-node"]


class UnknownScenarioError(UserError, FileNotFoundError):
    """Neither a built-in scenario nor a file (a ``FileNotFoundError`` for older callers)."""

    def __str__(self) -> str:
        # FileNotFoundError's str() of one argument is the argument: keep it unquoted.
        return str(self.args[0]) if self.args else super().__str__()


def resolve_scenario(name_or_path: str | Path) -> Path:
    """A built-in scenario by name (``h200-node``), else the path as given.

    Raises:
        UnknownScenarioError: neither a built-in name nor an existing file; the message
            lists the built-in names.
    """
    text = str(name_or_path)
    if text in BUILTIN_SCENARIOS:
        return BUILTIN_SCENARIOS[text]
    path = Path(name_or_path)
    if path.is_file():
        return path
    names = ", ".join(BUILTIN_SCENARIOS)
    raise UnknownScenarioError(f"no scenario file {text!r} (built-in scenarios: {names})")
