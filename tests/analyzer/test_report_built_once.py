"""A run builds its report once: the recommendations are computed once, and every file reads them.

Why: the recommendations are the plan checked against the safety contract, the costliest part
of writing a report at fleet scale; and a writer that recomputes them may disagree with the
others (issue 26). The real method runs, wrapped only to count its calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from migscope.analyzer._result import AnalysisResult
from migscope.cli.main import cli


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[AnalysisResult]:
    """Every call of :meth:`AnalysisResult.recommendations` from here on, by its result."""
    seen: list[AnalysisResult] = []
    real: Callable[[AnalysisResult], list[dict[str, Any]]] = AnalysisResult.recommendations

    def counted(self: AnalysisResult) -> list[dict[str, Any]]:
        seen.append(self)
        return real(self)

    monkeypatch.setattr(AnalysisResult, "recommendations", counted)
    return seen


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_demo_computes_the_recommendations_once(
    tmp_path: Path, calls: list[AnalysisResult]
) -> None:
    _run("demo", "--out", str(tmp_path))
    assert len(calls) == 1
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["recommendations"], "the demo fleet should need a layout change"


def test_analyze_with_out_and_a_format_computes_them_once(
    tmp_path: Path, calls: list[AnalysisResult]
) -> None:
    out = tmp_path / "out"
    printed = _run(
        "analyze", "--simulate", "fleet-mixed", "--window", "2d", "--out", str(out), "-o", "json"
    )
    assert len(calls) == 1
    written = (out / "report.json").read_text(encoding="utf-8")
    assert json.loads(printed) == json.loads(written)
    plan = json.loads((out / "node-plan.json").read_text(encoding="utf-8"))
    recs = {r["node"]: r for r in json.loads(written)["recommendations"]}
    for node in plan["nodes"]:
        if node["node"] in recs:
            assert node["pods_to_move"] == recs[node["node"]]["pods_to_move"]
            assert node["disruptive"] == recs[node["node"]]["disruptive"]


def test_analyze_printing_markdown_computes_them_once(calls: list[AnalysisResult]) -> None:
    assert "## Recommendations" in _run("analyze", "--simulate", "fleet-mixed", "--window", "2d")
    assert len(calls) == 1
