"""``migscope analyze`` and ``migscope demo``: exit codes, one-line errors, outputs."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.prometheus import requires_prometheus

from migscope.analyzer._report import validate_report
from migscope.cli._analyze_inputs import parse_window
from migscope.cli._errors import InvalidInput
from migscope.cli.main import cli
from migscope.core._migparted import check_config, parse_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MIGSCOPE = Path(sys.executable).with_name("migscope")
PROGRESS_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[\s*\d+\.\ds\] \S")


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("7d", 604800.0),
        ("24h", 86400.0),
        ("90m", 5400.0),
        ("1d12h", 129600.0),
        ("1w", 604800.0),
        ("7d 1h", 608400.0),  # one duration grammar: YAML's "1h 30m" reads the same
    ],
)
def test_parse_window(text: str, seconds: float) -> None:
    assert parse_window(text) == seconds


@pytest.mark.parametrize("text", ["7x", "", "d7", "0d", "-1d", "24"])
def test_parse_window_rejects(text: str) -> None:
    with pytest.raises(InvalidInput, match="bad --window"):
        parse_window(text)


def test_simulate_json_matches_schema() -> None:
    code, out, err = _run("analyze", "--simulate", "h200-node", "--window", "1d", "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    validate_report(data)
    statuses = {s["status"] for s in data["slices"]}
    assert {"idle", "unallocated", "oversized", "saturated", "healthy"} <= statuses
    # stderr is not a terminal here: only timestamped progress lines, if the run lasted past
    # --progress-interval (5 s) on a loaded machine; never the report or anything else.
    assert all(PROGRESS_LINE.match(line) for line in err.splitlines()), err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--simulate", "h200-node", "--window", "7x"], "bad --window '7x'"),
        (["--source", "/nonexistent/metrics.txt"], "/nonexistent/metrics.txt: No such file"),
        (["--simulate", "no-such-scenario"], "no scenario file 'no-such-scenario'"),
        ([], "give exactly one of"),
        (["--simulate", "h200-node", "--source", "x"], "give exactly one of"),
        (["--simulate", "h200-node", "--policy", "/nonexistent.yaml"], "/nonexistent.yaml"),
        (
            ["--prometheus", "http://127.0.0.1:1", "--prometheus-embedded"],
            "--prometheus-embedded goes with --simulate or --source",
        ),
    ],
)
def test_one_line_errors(args: list[str], message: str) -> None:
    code, out, err = _run("analyze", *args)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("migscope: error: ")
    assert message in err


def test_file_without_mig_series(tmp_path: Path) -> None:
    path = tmp_path / "other.txt"
    path.write_text("# TYPE up gauge\nup 1 1767571200000\n")
    code, _, err = _run("analyze", "--source", str(path))
    assert code == 1
    assert err.count("\n") == 1
    assert "no MIG series found" in err


def test_source_file_of_dcgm_exporter() -> None:
    scrape = FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt"
    code, out, err = _run("analyze", "--source", str(scrape), "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    validate_report(data)
    assert len(data["slices"]) == 3
    assert {s["gpu_instance_id"] for s in data["slices"]} == {
        s["gpu_instance_id"] for s in data["slices"] if s["current"]
    }


def test_unreachable_prometheus() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _, err = _run("analyze", "--prometheus", f"http://127.0.0.1:{port}")
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith("migscope: error: ")
    assert f"127.0.0.1:{port}" in err


def test_out_dir_writes_everything(tmp_path: Path) -> None:
    code, out, err = _run(
        "analyze", "--simulate", "h200-node", "--window", "1d", "--out", str(tmp_path)
    )
    assert code == 0, err
    assert "GPU(s) freeable" in out
    for name in ("report.json", "report.md", "slices.csv", "mig-parted-config.yaml"):
        assert (tmp_path / name).is_file()
    assert check_config(parse_config((tmp_path / "mig-parted-config.yaml").read_text())).ok


def test_demo_console_script(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [str(MIGSCOPE), "demo", "--out", str(out), "--window", "1d"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "idle" in proc.stdout
    assert "GPU(s) freeable" in proc.stdout
    data = json.loads((out / "report.json").read_text())
    validate_report(data)
    nodes = {s["node"] for s in data["slices"]}
    assert nodes == {"h100-node-1", "h100-node-2", "a100-node-1", "gpu-node-a"}
    plan = json.loads((out / "node-plan.json").read_text())
    assert {n["node"] for n in plan["nodes"]} == nodes
    assert check_config(parse_config((out / "mig-parted-config.yaml").read_text())).ok
    assert (out / "slices.csv").read_text().count("\n") == 1 + len(data["slices"])


def _current_statuses(report: dict[str, Any]) -> set[tuple[str, int, int, str, str]]:
    return {
        (s["node"], s["gpu"], s["gpu_instance_id"], s["profile"], s["status"])
        for s in report["slices"]
        if s["current"]
    }


@requires_prometheus
def test_demo_through_an_embedded_prometheus_says_the_same(tmp_path: Path) -> None:
    """The week backfilled into a real Prometheus gives the verdicts and plan of the direct run."""
    direct, through = tmp_path / "direct", tmp_path / "prom"
    code, out, err = _run("demo", "--window", "2d", "--out", str(direct))
    assert code == 0, err
    code, out, err = _run("demo", "--window", "2d", "--out", str(through), "--prometheus-embedded")
    assert code == 0, err
    assert "through a local Prometheus" in out
    a = json.loads((direct / "report.json").read_text())
    b = json.loads((through / "report.json").read_text())
    validate_report(b)
    assert a["window"] == b["window"]
    assert _current_statuses(a) == _current_statuses(b)
    assert a["node_configs"] == b["node_configs"]
    assert a["mig_parted_config"] == b["mig_parted_config"]


def test_prometheus_embedded_without_prometheus_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither prometheus nor promtool
    args = ["--simulate", "h200-node", "--window", "1h", "--prometheus-embedded"]
    code, out, err = _run("analyze", *args)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "prometheus and promtool not found on PATH" in err
