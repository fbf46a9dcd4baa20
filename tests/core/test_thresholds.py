"""One idle threshold: the policy file, the Prometheus rules and the dashboards say what
``migscope.core._thresholds`` says, so that a report, an alert and a panel agree on "idle"."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from migscope.analyzer._judge.policy import Policy
from migscope.core._dashboards import DASHBOARDS, panel_queries
from migscope.core._metrics import metric
from migscope.core._thresholds import IDLE_ACTIVITY_BELOW, IDLE_MEMORY_BELOW

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "analyzer" / "src" / "migscope" / "analyzer" / "_judge" / "policy-default.yaml"
RULE_FILES = [
    ROOT / "deploy" / "prometheus" / "migscope-rules.yaml",
    ROOT / "deploy" / "helm" / "migscope" / "files" / "prometheus" / "migscope-rules.yaml",
]
ACTIVITY = metric("mig_graphics_active_ratio").name
PERCENT = f"{round(IDLE_ACTIVITY_BELOW * 100, 6):g} %"
"""The threshold as the rules' and panels' prose writes it ("5 %")."""


def test_the_policy_file_writes_out_the_thresholds() -> None:
    idle = yaml.safe_load(POLICY_FILE.read_text())["idle"]
    assert idle["activity_p95_below"] == IDLE_ACTIVITY_BELOW
    assert idle["memory_p95_below"] == IDLE_MEMORY_BELOW


def test_the_policy_defaults_are_the_thresholds() -> None:
    idle = Policy().idle
    assert idle.activity_p95_below == IDLE_ACTIVITY_BELOW
    assert idle.memory_p95_below == IDLE_MEMORY_BELOW


def _rules(path: Path) -> dict[str, dict[str, Any]]:
    """Every rule of a rule file, by its record or alert name."""
    groups = yaml.safe_load(path.read_text())["groups"]
    return {rule.get("record") or rule["alert"]: rule for g in groups for rule in g["rules"]}


def _activity_thresholds(expr: str) -> list[float]:
    """The numbers that slice activity (raw or recorded) is compared with in ``expr``."""
    series = rf"[\w:]*{ACTIVITY}[\w:]*(?:\{{[^}}]*\}})?(?:\[\w+\])?\)*"
    return [float(n) for n in re.findall(rf"{series}\s*<\s*(?:bool\s+)?([0-9.]+)", expr)]


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_rules_compare_activity_with_the_threshold(path: Path) -> None:
    rules = _rules(path)
    held_idle = rules["slice_pod:migscope_mig_held_idle:1h"]["expr"]
    assert _activity_thresholds(held_idle) == [IDLE_ACTIVITY_BELOW]
    # No other rule compares activity with a number of its own.
    for name, rule in rules.items():
        assert set(_activity_thresholds(rule["expr"])) <= {IDLE_ACTIVITY_BELOW}, name
    # The alert says it in words, as a percentage.
    description = " ".join(rules["MigSliceIdle"]["annotations"]["description"].split())
    assert f"averaged under {PERCENT}:" in description


def test_the_dashboards_compare_activity_with_the_threshold() -> None:
    found = []
    for build in DASHBOARDS.values():
        model = build()
        for title, expr in panel_queries(model):
            found += [(title, n) for n in _activity_thresholds(expr)]
        for panel in model["panels"]:
            if "idle" in panel["description"].lower() and "%" in panel["description"]:
                assert f"under {PERCENT}" in panel["description"], panel["title"]
    assert found, "no panel tests activity against the idle threshold"
    assert {n for _, n in found} == {IDLE_ACTIVITY_BELOW}, found
