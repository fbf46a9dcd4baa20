"""``migscope catalog check``: a pasted -lgip/-lgipp against the catalogue, exit codes, JSON.

Every real -lgip/-lgipp capture in the repository is run through the command by
tests/real/test_real_corpus.py (``test_catalog_check_exits_0``); here are the command's own
rules, on real captures wrapped the way pastes arrive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from migscope.cli.main import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200_LGIP = FIXTURES / "h200" / "lgip.txt"
H200_LGIPP = FIXTURES / "h200" / "lgipp.txt"
H200_BOTH = H200_LGIP.read_text(encoding="utf-8") + H200_LGIPP.read_text(encoding="utf-8")


def check(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["catalog", "check", *args], input=stdin)


def test_a_real_h200_paste_agrees(tmp_path: Path) -> None:
    paste = tmp_path / "node.md"
    paste.write_text(
        "On our node:\r\n\r\n```\r\n$ nvidia-smi mig -lgip\r\n"
        + H200_BOTH.replace("\n", "\r\n")
        + "```\r\n",
        encoding="utf-8",
    )
    result = check(str(paste), "--driver", "580.65.06")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "GPU 0: H200-141GB, identified by its profiles (7 of 7 agree on identity); "
        "driver 580.65.06",
        "ok: 1 GPU table agrees with the catalogue on identity and placements "
        "(0 warnings, 0 notes)",
    ]


def test_identical_gpus_are_reported_once() -> None:
    gpu1 = H200_BOTH.replace("|   0  MIG", "|   1  MIG").replace("GPU  0 ", "GPU  1 ")
    result = check("-", stdin=H200_BOTH + gpu1)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("GPUs 0-1: H200-141GB")
    assert "ok: 2 GPU tables agree" in result.stdout


def test_json_lists_every_difference_with_its_severity() -> None:
    changed = H200_BOTH.replace(
        "|   0  MIG 3g.71gb          9     2/2        69.75      No     60",
        "|   0  MIG 3g.71gb          9     2/2        69.75      No     62",
    )
    assert changed != H200_BOTH
    result = check("-", "-o", "json", stdin=changed)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False
    (table,) = data["tables"]
    assert (table["model"], table["gpus"], table["errors"]) == ("H200-141GB", [0], 1)
    assert table["differences"] == [
        {
            "severity": "error",
            "profile": "3g.71gb (id 9)",
            "field": "sm_count",
            "observed": "62",
            "catalogue": "60",
            "message": "3g.71gb (id 9): SMs: GPU 62, catalogue 60",
        }
    ]


def test_an_error_exits_1_and_says_so_on_stderr() -> None:
    changed = H200_BOTH.replace(
        "Profile ID  9 Placements: {0,4}:4", "Profile ID  9 Placements: {0,2}:4"
    )
    result = check("-", stdin=changed)
    assert result.exit_code == 1
    assert "  error: 3g.71gb (id 9): placements: GPU {0,2}:4, catalogue {0,4}:4" in result.stdout
    assert result.stderr == (
        "differs: 1 error (0 warnings, 0 notes) in 1 of 1 distinct GPU tables in -\n"
    )


def test_lgipp_alone_is_ambiguous_until_a_model_is_given() -> None:
    result = check(str(H200_LGIPP))
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"migscope: error: {H200_LGIPP}: GPU 0's table matches several")
    assert "H200-141GB" in line
    assert line.endswith("; pass --model")
    given = check(str(H200_LGIPP), "--model", "h200")
    assert given.exit_code == 0, given.output
    assert "given by --model" in given.stdout
    assert "names, sizes and counts not checked (no -lgip)" in given.stdout


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["/nonexistent/x.txt"], None, "/nonexistent/x.txt: cannot read: No such file"),
        (
            ["-"],
            "$ nvidia-smi mig -lgip\nNo MIG-enabled devices found.\n",
            '-: no `nvidia-smi mig -lgip` or `-lgipp` table found; the text says "No '
            'MIG-enabled devices found"',
        ),
        (["-", "--driver", "latest"], "", "--driver: not a driver version: 'latest'"),
        (["-", "--model", "V100"], "", "--model: unknown GPU model 'V100'"),
    ],
)
def test_unreadable_input_is_one_line(args: list[str], stdin: str | None, message: str) -> None:
    result = check(*args, stdin=stdin)
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"migscope: error: {message}")


def test_catalog_model_and_catalog_show_model_are_the_same_command() -> None:
    short = CliRunner().invoke(cli, ["catalog", "H200", "-o", "json"])
    full = CliRunner().invoke(cli, ["catalog", "show", "H200", "-o", "json"])
    assert short.exit_code == full.exit_code == 0
    assert short.stdout == full.stdout
    listing = CliRunner().invoke(cli, ["catalog"])
    assert listing.exit_code == 0
    assert "H200-141GB" in listing.stdout
    helped = CliRunner().invoke(cli, ["catalog", "--help"])
    assert "migscope catalog check FILE" in helped.stdout
