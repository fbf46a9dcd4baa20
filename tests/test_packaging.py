"""Packaging promises: one distribution, one console script, a slim exporter install."""

from __future__ import annotations

import re
from importlib import metadata

HEAVY_FOR_EXPORTER = {"pandas", "kubernetes", "httpx", "apscheduler", "numpy"}


def _requirements() -> list[tuple[str, str | None]]:
    """(requirement name, extra it belongs to or None for the base install)."""
    out = []
    for line in metadata.requires("migscope") or []:
        name = re.split(r"[\s<>=!~;\[]", line, maxsplit=1)[0].lower()
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", line)
        out.append((name, extra.group(1) if extra else None))
    return out


def test_exporter_install_pulls_no_analyzer_weight() -> None:
    reqs = _requirements()
    base = {name for name, extra in reqs if extra is None}
    exporter = {name for name, extra in reqs if extra == "exporter"}
    assert "prometheus-client" in exporter
    assert not (base | exporter) & HEAVY_FOR_EXPORTER


def test_one_console_script_named_migscope() -> None:
    scripts = [
        ep
        for ep in metadata.entry_points(group="console_scripts")
        if ep.dist and ep.dist.name == "migscope"
    ]
    assert [ep.name for ep in scripts] == ["migscope"]
    assert scripts[0].value == "migscope.cli.main:main"


def test_python_floor_is_3_10() -> None:
    assert metadata.metadata("migscope")["Requires-Python"] == ">=3.10"
