"""Subcommands load their dependencies only when used, so each extra installs on its own."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from migscope.cli import main as cli_main


def test_the_exporter_command_never_loads_the_analyzer() -> None:
    code = (
        "import sys; from migscope.cli.main import cli; "
        "cli.get_command(None, 'exporter'); "
        "bad = sorted(m for m in sys.modules if m.startswith(('migscope.analyzer', 'numpy', "
        "'highspy', 'httpx', 'pandas'))); print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_command_whose_extra_is_missing_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(cli_main._COMMANDS, "ghost", ("no_such_module_xyz", "x", "analyzer"))
    result = CliRunner().invoke(cli_main.cli, ["ghost", "--anything"])
    assert result.exit_code == 1
    assert "pip install 'migscope[analyzer]'" in result.output
    assert "Traceback" not in result.output
    listing = CliRunner().invoke(cli_main.cli, ["--help"])
    assert "ghost" in listing.output
