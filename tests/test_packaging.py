"""Packaging promises: one distribution per folder, one version, a slim exporter install."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
# folder -> distribution; "." is the root distribution (the `migscope` command).
DISTRIBUTIONS = {
    ".": "migscope",
    "core": "migscope-core",
    "sim": "migscope-sim",
    "kube": "migscope-kube",
    "exporter": "migscope-exporter",
    "analyzer": "migscope-analyzer",
    "applier": "migscope-applier",
    "scheduler": "migscope-scheduler",
}
HEAVY_FOR_EXPORTER = {"pandas", "kubernetes", "httpx", "apscheduler", "numpy", "highspy"}


def _project(folder: str) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())[
        "project"
    ]
    return project


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements}


def _closure(dist: str) -> set[str]:
    """Every distribution ``dist`` pulls in (base requirements, recursively, workspace ones)."""
    by_name = {name: folder for folder, name in DISTRIBUTIONS.items()}
    seen: set[str] = set()
    todo = [dist]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in by_name:
            deps = _project(by_name[name]).get("dependencies", [])
            assert isinstance(deps, list)
            todo.extend(_names(deps))
    return seen


@pytest.mark.parametrize(("folder", "dist"), sorted(DISTRIBUTIONS.items()))
def test_every_folder_is_one_installed_distribution_owning_one_package(
    folder: str, dist: str
) -> None:
    assert _project(folder)["name"] == dist
    assert metadata.version(dist) == _project(".")["version"]
    packages = sorted(p.name for p in (ROOT / folder / "src" / "migscope").iterdir() if p.is_dir())
    expected = "cli" if dist == "migscope" else dist.removeprefix("migscope-")
    assert [p for p in packages if p != "__pycache__"] == [expected]
    assert not (ROOT / folder / "src" / "migscope" / "__init__.py").exists()  # PEP 420 namespace


def test_workspace_requirements_pin_the_one_version() -> None:
    version = _project(".")["version"]
    for folder in DISTRIBUTIONS:
        deps = _project(folder).get("dependencies", [])
        assert isinstance(deps, list)
        for req in deps:
            if req.startswith("migscope-"):
                assert req.endswith(f"=={version}"), (folder, req)


def test_exporter_install_pulls_no_analyzer_code_or_weight() -> None:
    pulled = _closure("migscope-exporter")
    assert pulled & set(DISTRIBUTIONS.values()) == {
        "migscope-exporter",
        "migscope-core",
        "migscope-sim",
    }
    assert not pulled & HEAVY_FOR_EXPORTER
    assert "prometheus-client" in pulled


def test_console_scripts() -> None:
    scripts = {
        ep.name: (ep.dist.name if ep.dist else None, ep.value)
        for ep in metadata.entry_points(group="console_scripts")
        if ep.name.startswith("migscope")
    }
    assert scripts == {
        "migscope": ("migscope", "migscope.cli.main:main"),
        "migscope-exporter": ("migscope-exporter", "migscope.exporter._cli:main"),
    }


def test_python_floor_is_3_10() -> None:
    for dist in DISTRIBUTIONS.values():
        assert metadata.metadata(dist)["Requires-Python"] == ">=3.10"
