"""Flags that used to be taken silently are refused in one line (issue 22, item 7).

``--headroom 5`` was 500 %, ``--what-if`` on a node not in the data replayed nothing and read
like a loss, and ``--previous-reports /nonexistent`` gave no trend and no word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from migscope.cli._analyze_inputs import parse_headroom
from migscope.cli._errors import InvalidInput
from migscope.cli.main import cli

BASE = ["analyze", "--simulate", "h200-node", "--window", "1d", "-q"]


def _run(*args: str) -> tuple[int, str, str]:
    got = CliRunner().invoke(cli, [*BASE, *args])
    return got.exit_code, got.stdout, got.stderr


@pytest.mark.parametrize(("text", "value"), [("0.1", 0.1), ("0", 0.0), ("1", 1.0), ("25%", 0.25)])
def test_headroom_forms(text: str, value: float) -> None:
    assert parse_headroom(text) == pytest.approx(value)


def test_headroom_above_one_is_refused_unless_a_percentage() -> None:
    code, _, err = _run("--headroom", "5", "-o", "json")
    assert code == 1
    assert err.strip().splitlines() == [
        "migscope: error: --headroom 5: a bare number is a fraction from 0 to 1 "
        "(0.1 = 10%); write 500% if that is meant"
    ]
    with pytest.raises(InvalidInput, match="must be 0 or more"):
        parse_headroom("-0.1")
    code, out, err = _run("--headroom", "500%", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["pools"][0]["demand"]["headroom"] is not None


def test_what_if_on_an_unknown_node_is_refused() -> None:
    code, _, err = _run("--what-if", "gpu-node-z=all-balanced", "-o", "json")
    assert code == 1
    assert err.strip().splitlines() == [
        "migscope: error: --what-if names node(s) not in the data: gpu-node-z (nodes: gpu-node-a)"
    ]
    code, _, err = _run("--what-if", "gpu-node-a=all-balanced", "-o", "json")
    assert code == 0, err


def test_previous_reports_that_do_not_exist_are_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    code, _, err = _run("--previous-reports", str(missing), "-o", "json")
    assert code == 1
    assert err.strip().splitlines() == [
        f"migscope: error: --previous-reports {missing}: no such directory"
    ]
