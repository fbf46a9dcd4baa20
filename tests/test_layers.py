"""The layer contracts in pyproject.toml are enforced, and they really catch violations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))
# Every distribution's source root (`<folder>/src`); "." is the root distribution (the CLI).
DISTRIBUTIONS = ("core", "sim", "kube", "exporter", "analyzer", "applier", "scheduler", ".")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(root / d / "src") for d in DISTRIBUTIONS)
    return subprocess.run(
        [LINT_IMPORTS, str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _copy_tree(tmp_path: Path) -> Path:
    """Copy the sources under another top-level name, so the installed package can't mix in.

    ``migscope`` is a namespace package and the editable install puts the repository on
    ``sys.path``; a plain copy would be merged with it. Renaming the copy to ``layercheck``
    (in code and in the contracts) makes the linter see the copy alone.
    """
    root = tmp_path / "repo"
    for name in DISTRIBUTIONS:
        source, copy = ROOT / name / "src" / "migscope", root / name / "src" / "layercheck"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in root.rglob("*.py"):
        path.write_text(path.read_text().replace("migscope.", "layercheck."))
    config = (ROOT / "pyproject.toml").read_text()
    config = config.replace("migscope.", "layercheck.").replace('"migscope"', '"layercheck"')
    (root / "pyproject.toml").write_text(config)
    return root


def test_the_repository_keeps_its_layers(tmp_path: Path) -> None:
    result = _lint(_copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_core_importing_the_exporter_is_caught(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    with (root / "core/src/layercheck/core/__init__.py").open("a") as f:
        f.write("\nimport layercheck.exporter  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout


def test_exporter_importing_pandas_is_caught(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    with (root / "exporter/src/layercheck/exporter/__init__.py").open("a") as f:
        f.write("\nimport pandas  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "The exporter stays slim" in result.stdout


def test_the_applier_importing_kubernetes_directly_is_caught(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    with (root / "applier/src/layercheck/applier/__init__.py").open("a") as f:
        f.write("\nimport kubernetes  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "Only layercheck.kube talks to Kubernetes" in result.stdout


def test_the_analyzer_importing_the_applier_is_caught(tmp_path: Path) -> None:
    """Siblings stay independent: a plan reaches the applier as a file, never as an import."""
    root = _copy_tree(tmp_path)
    with (root / "analyzer/src/layercheck/analyzer/__init__.py").open("a") as f:
        f.write("\nimport layercheck.applier  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "Distributions:" in result.stdout


def test_the_pipeline_reaching_for_a_source_is_caught(tmp_path: Path) -> None:
    """Decisions take data: the pipeline reads the intake's statistics, never a source."""
    root = _copy_tree(tmp_path)
    with (root / "analyzer/src/layercheck/analyzer/_pipeline.py").open("a") as f:
        f.write("\nimport layercheck.analyzer._intake.file  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "Analyzer decisions take data" in result.stdout


def test_a_decision_module_importing_an_http_client_is_caught(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    with (root / "analyzer/src/layercheck/analyzer/_judge/classify.py").open("a") as f:
        f.write("\nimport httpx  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "Analyzer decisions take data" in result.stdout


def test_the_intake_reaching_for_the_report_is_caught(tmp_path: Path) -> None:
    """The flow runs one way: intake → judge → plan → report, never back."""
    root = _copy_tree(tmp_path)
    with (root / "analyzer/src/layercheck/analyzer/_intake/file.py").open("a") as f:
        f.write("\nimport layercheck.analyzer._report  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "Analyzer along its flow" in result.stdout
