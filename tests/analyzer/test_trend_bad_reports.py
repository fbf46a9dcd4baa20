"""An earlier run's report.json that cannot be used is left out of the trend with a note.

Issue 20: one earlier report with ``NaN`` in ``savings.wasted_gpu_hours`` (Python's ``json``
reads and writes ``NaN``, ``Infinity`` and ``-Infinity``, which JSON itself has no words for)
crashed every later ``analyze --previous-reports`` with a traceback and a half-written
report.json. Each bad file here is a real report written by ``migscope analyze``, then
damaged the way a disk, a hand edit or another tool damages one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from migscope.analyzer._report import validate_report
from migscope.analyzer._report.trend import read_trend
from migscope.cli.main import cli

ANALYZE = ["analyze", "--simulate", "h200-node", "--window", "1d", "-q"]

Damage = Callable[[dict[str, Any]], object]


def _set(section: str, key: str, value: object) -> Damage:
    def damage(report: dict[str, Any]) -> None:
        report[section][key] = value

    return damage


def _set_namespace_waste(value: object) -> Damage:
    def damage(report: dict[str, Any]) -> None:
        report["savings"]["by_namespace"][0]["wasted_gpu_hours"] = value

    return damage


NUMBERS: dict[str, tuple[Damage, str]] = {
    "nan": (_set("savings", "wasted_gpu_hours", math.nan), "savings.wasted_gpu_hours is NaN"),
    "infinity": (
        _set("savings", "wasted_gpu_hours", math.inf),
        "savings.wasted_gpu_hours is Infinity",
    ),
    "minus-infinity": (
        _set("savings", "wasted_gpu_hours", -math.inf),
        "savings.wasted_gpu_hours is -Infinity",
    ),
    "nan-as-text": (
        _set("savings", "wasted_gpu_hours", "NaN"),
        'savings.wasted_gpu_hours is not a number ("NaN")',
    ),
    "text": (
        _set("savings", "wasted_gpu_hours", "lots"),
        "not a migscope report (wasted_gpu_hours: Input should be a valid number",
    ),
    "boolean": (
        _set("savings", "wasted_gpu_hours", True),
        "savings.wasted_gpu_hours is not a number (true)",
    ),
    "null": (
        _set("savings", "wasted_gpu_hours", None),
        "not a migscope report (wasted_gpu_hours: Input should be a valid number",
    ),
    "negative": (
        _set("savings", "idle_gpu_hours", -3.0),
        "savings.idle_gpu_hours is -3.0, below zero",
    ),
    "nan-window": (_set("window", "hours", math.nan), "window.hours is NaN"),
    "nan-namespace": (
        _set_namespace_waste(math.nan),
        "savings.by_namespace[0].wasted_gpu_hours is NaN",
    ),
    "overflows-per-week": (  # finite, but a week of it is not: the headline would say inf
        _set("savings", "wasted_gpu_hours", 1e308),
        "savings.wasted_gpu_hours per week is beyond a number",
    ),
}


@pytest.fixture(scope="module")
def good_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("good")
    result = CliRunner().invoke(cli, [*ANALYZE, "--out", str(out)])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def _runs(folder: Path, good: dict[str, Any], bad_text: str) -> Path:
    """An earlier good run and a later bad one, as the report CronJob keeps them."""
    for run, text in (("20260105T060000Z", json.dumps(good)), ("20260112T060000Z", bad_text)):
        (folder / run).mkdir(parents=True)
        (folder / run / "report.json").write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize(("damage", "why"), list(NUMBERS.values()), ids=list(NUMBERS))
def test_a_report_with_unusable_numbers_is_left_out_with_a_note(
    tmp_path: Path, good_report: dict[str, Any], damage: Damage, why: str
) -> None:
    bad = json.loads(json.dumps(good_report))
    damage(bad)
    runs = _runs(tmp_path, good_report, json.dumps(bad))  # json writes NaN, Infinity
    trend = read_trend(runs)
    assert [p["run"] for p in trend.points] == ["20260105T060000Z"]
    assert len(trend.notes) == 1
    note = trend.notes[0]
    assert note.startswith(f"trend: {runs / '20260112T060000Z' / 'report.json'} left out: ")
    assert why in note


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (lambda good: json.dumps(good)[:5000], "not JSON ("),  # truncated: the disk filled
        (lambda good: "", "not JSON ("),
        (lambda good: "[" * 100_000, "not JSON (nested too deeply)"),
        (lambda good: json.dumps({**good, "schema_version": 2}), "not schema_version 1"),
        (lambda good: json.dumps([good]), "not schema_version 1"),
        (lambda good: json.dumps({**good, "savings": None}), "not a migscope report ("),
        (lambda good: json.dumps({**good, "window": {"start": "x"}}), "not a migscope report ("),
        (lambda good: b"\xff\xfe{}".decode("latin-1"), "not JSON ("),
    ],
    ids=["truncated", "empty", "deep", "schema-2", "a-list", "no-savings", "bad-window", "bytes"],
)
def test_a_report_that_is_no_report_is_left_out_with_a_note(
    tmp_path: Path,
    good_report: dict[str, Any],
    text: Callable[[dict[str, Any]], str],
    why: str,
) -> None:
    runs = _runs(tmp_path, good_report, text(good_report))
    trend = read_trend(runs)
    assert [p["run"] for p in trend.points] == ["20260105T060000Z"]
    assert len(trend.notes) == 1
    assert why in trend.notes[0]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "NaN"], ids=repr)
def test_analyze_reports_despite_an_earlier_report_with_nan(
    tmp_path: Path, good_report: dict[str, Any], value: object
) -> None:
    """The issue's reproduction: the run used to die in json.dumps with a traceback."""
    bad = json.loads(json.dumps(good_report))
    bad["savings"]["wasted_gpu_hours"] = value
    runs = _runs(tmp_path / "runs", good_report, json.dumps(bad))
    out = tmp_path / "now"
    result = CliRunner().invoke(cli, [*ANALYZE, "--out", str(out), "--previous-reports", str(runs)])
    assert result.exit_code == 0, result.output
    text = (out / "report.json").read_text()
    report = json.loads(text, parse_constant=lambda word: pytest.fail(f"{word} in report.json"))
    validate_report(report)
    assert [p["run"] for p in report["trend"]] == ["20260105T060000Z"]
    notes = [n for n in report["notes"] if n.startswith("trend: ")]
    assert len(notes) == 1
    assert "20260112T060000Z/report.json left out: savings.wasted_gpu_hours is " in notes[0]
    assert notes[0] in (out / "report.md").read_text()
