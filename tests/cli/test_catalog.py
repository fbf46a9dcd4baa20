"""``migscope catalog``: JSON shape, placements from real hardware, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from migscope.cli.main import cli
from migscope.core._catalogue import all_models
from migscope.core._layout import is_valid, maximal_layouts, valid_layouts
from migscope.core._nvidia_smi import parse_lgipp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MIGSCOPE = str(Path(sys.executable).with_name("migscope"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed console script, as a user would."""
    return subprocess.run([MIGSCOPE, *args], capture_output=True, text=True, check=False)


def test_h200_json_placements_match_the_real_lgipp() -> None:
    result = run("catalog", "H200", "--output", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["model"] == "H200-141GB"
    real = {
        row.profile_id: [[start, row.size] for start in row.starts]
        for row in parse_lgipp((FIXTURES / "h200" / "lgipp.txt").read_text())
    }
    assert {p["id"]: p["placements"] for p in data["profiles"]} == real
    for profile in data["profiles"]:
        assert set(profile) >= {
            "name",
            "id",
            "compute_slices",
            "memory_slices",
            "memory_mib",
            "max_instances",
            "placements",
        }


def test_layouts_json_lists_every_valid_layout_with_placements() -> None:
    result = CliRunner().invoke(cli, ["catalog", "A30", "--layouts", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    listed = data["layouts"]
    model = next(m for m in all_models() if m.key == "A30-24GB")
    assert len(listed) == len(valid_layouts(model))
    assert sum(entry["maximal"] for entry in listed) == len(maximal_layouts(model))
    for entry in listed:
        names = [n for n, c in entry["instances"].items() for _ in range(c)]
        assert is_valid(model, names, keep=[(n, s) for n, s, _ in entry["placements"]]).ok


def test_table_lists_all_models_and_profiles() -> None:
    listing = CliRunner().invoke(cli, ["catalog"])
    assert listing.exit_code == 0
    for model in all_models():
        assert model.key in listing.output
    detail = CliRunner().invoke(cli, ["catalog", "0x233510DE"])
    assert detail.exit_code == 0
    assert "3g.71gb" in detail.output
    assert "{0,4}:4" in detail.output


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["catalog", "H100"], 1, "ambiguous: H100-80GB, H100-PCIE-80GB, H100-NVL-94GB"),
        (["catalog", "V100"], 1, "unknown GPU model 'V100'"),
        (["catalog", "--layouts"], 2, "--layouts needs a MODEL"),
        (["catalog", "H200", "--format", "yaml"], 2, "Invalid value for '--format' / '-o'"),
        (["catalog", "H200", "--output", "yaml"], 2, "Invalid value for '--output'"),
    ],
)
def test_errors_are_one_line_with_the_right_exit_code(
    args: list[str], code: int, needle: str
) -> None:
    result = run(*args)
    assert result.returncode == code
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    if code == 1:
        assert result.stderr.count("\n") == 1
        assert result.stdout == ""


def test_every_command_has_help() -> None:
    for args in (["--help"], ["catalog", "--help"], ["validate-config", "--help"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0
        assert "Usage:" in result.output


def test_the_deprecated_output_flag_still_works_and_says_what_to_use() -> None:
    result = run("catalog", "H200", "--output", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"] == "H200-141GB"
    assert result.stderr == "migscope: warning: --output is deprecated, use --format (-o)\n"
