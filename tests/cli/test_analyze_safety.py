"""``migscope analyze`` on little data: a snapshot, never a plan (issue 10, items 1, 4 and 6).

Each test reproduces a reported defect through the CLI, the way a new user meets it:

1. a single scrape (the README's own example) made every slice ``unknown`` (the whole-hour
   window was snapped *back*, past the scrape's only sample) and still emptied every GPU,
   pods and all, as "not disruptive";
4. ``--simulate ... --apply`` would relabel a real cluster from simulated data;
6. three minutes of history gave a confident plan, and a brand-new install was told "no
   MIG series found".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from migscope.analyzer._report import validate_report
from migscope.cli._analyze_inputs import parse_end
from migscope.cli._errors import InvalidInput
from migscope.cli.main import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRAPES = [
    FIXTURES / "migscope" / "sim-h200-node-once.txt",
    FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt",
    FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-4gi-active.txt",
]


def _json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["analyze", *args, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    validate_report(data)
    return data


@pytest.mark.parametrize("scrape", SCRAPES, ids=lambda p: p.name)
def test_a_single_scrape_is_a_snapshot(scrape: Path) -> None:
    data = _json("--source", str(scrape))
    with_samples = [s for s in data["slices"] if s["evidence"]["samples"] > 0]
    assert with_samples, "every fixture scrape has samples"
    assert [s for s in with_samples if s["status"] == "unknown"] == []
    # Who holds what, what is unallocated: yes. A plan: no.
    assert data["recommendations"] == []
    assert data["evidence"]["enough_for_a_plan"] is False
    assert data["evidence"]["history_hours"] < 1
    assert any("no change recommended" in n for n in data["notes"])
    assert all(s["pin"] for s in data["slices"] if s["current"])
    # The window holds the scrape: these captures carry no timestamps, so their samples are
    # stamped with the file's time, and the window ends at (or within the hour after) it.
    taken = scrape.stat().st_mtime
    assert data["window"]["start_unix"] < taken <= data["window"]["end_unix"] < taken + 3600


def test_a_single_scrape_says_so_in_the_summary(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["analyze", "--source", str(SCRAPES[0]), "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.stderr
    assert "plan: no change recommended: 1 min of history, 24.0 h needed" in result.stdout
    markdown = (tmp_path / "report.md").read_text()
    assert "No change recommended: 1 min of history" in markdown


def test_minutes_of_history_give_no_plan_and_low_confidence() -> None:
    data = _json("--simulate", "h200-node", "--window", "3m")
    assert data["recommendations"] == []
    assert data["savings"]["gpus_freed"] == 0
    assert data["evidence"]["history_hours"] == pytest.approx(0.05)
    # Fully covered, but three minutes: confidence says how little that is.
    assert max(s["confidence"] for s in data["slices"]) < 0.01


def test_a_day_of_history_is_enough_for_a_plan() -> None:
    data = _json("--simulate", "h200-node", "--window", "1d")
    assert data["evidence"]["enough_for_a_plan"] is True
    assert data["recommendations"], "the h200-node day has idle slices to reclaim"


def test_the_policy_sets_the_minimum(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("evidence:\n  min_history_hours: 48\n")
    data = _json("--simulate", "h200-node", "--window", "1d", "--policy", str(policy))
    assert data["recommendations"] == []
    assert data["evidence"] == {
        "history_hours": 24.0,
        "min_history_hours": 48.0,
        "enough_for_a_plan": False,
    }


def test_simulate_with_apply_is_refused_before_anything_runs() -> None:
    result = CliRunner().invoke(
        cli, ["analyze", "--simulate", "h200-node", "--apply", "--drain", "--kubeconfig", "/x"]
    )
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "simulated data is never applied" in result.stderr


def test_reports_record_their_provenance(tmp_path: Path) -> None:
    sim = _json("--simulate", "h200-node", "--window", "1d")
    assert sim["provenance"]["simulated"] is True
    assert sim["provenance"]["source"] == {"kind": "simulation", "scenarios": ["h200-node"]}
    scrape = _json("--source", str(SCRAPES[0]))
    assert scrape["provenance"]["simulated"] is False
    assert scrape["provenance"]["source"] == {"kind": "file", "path": str(SCRAPES[0])}
    assert scrape["provenance"]["created_unix"] > scrape["window"]["end_unix"] - 3600
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["analyze", "--source", str(SCRAPES[0]), "--out", str(out)])
    assert result.exit_code == 0
    plan = json.loads((out / "node-plan.json").read_text())
    assert plan["provenance"]["source"]["kind"] == "file"


def test_end_sets_a_past_window() -> None:
    # The scrape's samples are stamped with the file's time; a window ending 8 days before
    # holds none.
    taken = SCRAPES[0].stat().st_mtime
    result = CliRunner().invoke(
        cli, ["analyze", "--source", str(SCRAPES[0]), "--end", str(taken - 8 * 86400)]
    )
    assert result.exit_code == 1, result.stdout
    assert result.stderr.count("\n") == 1
    assert "is --end right?" in result.stderr
    later = taken + 7200
    data = _json("--source", str(SCRAPES[0]), "--end", str(later))
    assert data["window"]["end_unix"] >= later


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-11-30T06:00:00Z", 1796018400.0),
        ("2026-11-30T07:00:00+01:00", 1796018400.0),
        ("2026-11-30T06:00:00", 1796018400.0),
        ("1796018400", 1796018400.0),
    ],
)
def test_parse_end(text: str, seconds: float) -> None:
    assert parse_end(text) == seconds


def test_parse_end_rejects_garbage() -> None:
    with pytest.raises(InvalidInput, match="bad --end 'last tuesday'"):
        parse_end("last tuesday")


def test_what_the_reader_left_out_reaches_the_report(tmp_path: Path) -> None:
    # Issue 10 item 10: a real capture cut down to its SM_CLOCK family: every instance is
    # known to exist, nothing about its use. The report says so instead of dropping it.
    real = FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt"
    lines = [ln for ln in real.read_text().splitlines() if "DCGM_FI_DEV_SM_CLOCK" in ln]
    clocks = tmp_path / "clocks.txt"
    clocks.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["analyze", "--source", str(clocks), "-o", "json"])
    # Nothing but presence has no sample to judge by: one line, not a report of unknowns.
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "no MIG samples in the window" in result.stderr
    with_memory = [ln for ln in real.read_text().splitlines() if "FB_USED" in ln or "FB_FREE" in ln]
    memory = tmp_path / "memory.txt"
    memory.write_text("\n".join(lines + with_memory) + "\n")
    data = _json("--source", str(memory))
    assert {s["status"] for s in data["slices"]} != {"unknown"}
    assert any("activity unknown" in s["reason"] for s in data["slices"])
    # Half of them with memory, the other half presence only: reported, and the note says so.
    one_gi = [ln for ln in with_memory if 'GPU_I_ID="9"' in ln]
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("\n".join(lines + one_gi) + "\n")
    data = _json("--source", str(mixed))
    assert len(data["slices"]) == 3
    assert any("appear only in" in n for n in data["notes"]), data["notes"]


def test_missing_pod_attribution_is_said() -> None:
    # The real dcgm-exporter captures carry pod="" on every series (dcgm-exporter#272).
    data = _json("--source", str(SCRAPES[1]))
    assert any("pod attribution is missing" in n for n in data["notes"])
    held = _json("--source", str(SCRAPES[0]))  # migscope's own exposition names its pods
    assert not any("pod attribution is missing" in n for n in held["notes"])


def test_a_window_shorter_than_the_minimum_says_to_lengthen_it() -> None:
    data = _json("--simulate", "h200-node", "--window", "20h")
    assert data["recommendations"] == []
    assert any("use a longer --window" in n for n in data["notes"])
