"""Subcommands load their dependencies only when used, so each extra installs on its own."""

from __future__ import annotations

import json
import subprocess
import sys

import click
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


HEAVY_MODULES = (
    "pandas",
    "numpy",
    "highspy",
    "httpx",
    "kubernetes",
    "pynvml",
    "prometheus_client",
    "apscheduler",
    "pydantic",
    "migscope.kube",
    "migscope.sim",
    "migscope.scheduler._config",
    "migscope.scheduler._service",
    "migscope.scheduler._runs",
    "migscope.applier._applier",
    "migscope.applier._plan",
    "migscope.applier._workflow",
    "migscope.analyzer._pipeline",
    "migscope.analyzer._judge.policy",
    "migscope.analyzer._analysis",
    "migscope.analyzer._report",
    "migscope.analyzer._intake",
    "migscope.analyzer._intake.stats_local",
)
"""What printing help must not load: the libraries and the engines behind the commands."""

_PROBE = (
    "import json, sys; from migscope.cli.main import cli\n"
    "try:\n"
    "    cli.main(args=json.loads(sys.argv[1]), prog_name='migscope', standalone_mode=False)\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(json.dumps(sorted(sys.modules)))"
)


def _help_pages() -> list[list[str]]:
    """``--version``, and ``--help`` of the group and of every command and subcommand."""
    group = cli_main.cli
    pages = [["--version"], ["--help"]]
    for name in group.list_commands(click.Context(group)):
        pages.append([name, "--help"])
        command = group.get_command(click.Context(group), name)
        if isinstance(command, click.Group):
            subcommands = command.list_commands(click.Context(command))
            pages += [[name, sub, "--help"] for sub in subcommands]
    return pages


@pytest.mark.parametrize("args", _help_pages(), ids=" ".join)
def test_help_and_version_load_no_heavy_library(args: list[str]) -> None:
    """A help page answers at once: no numpy, Kubernetes client, scheduler or analyzer engine.

    In a fresh interpreter, since this one has loaded everything already (issue 26).
    """
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    heavy = [m for m in loaded if any(m == h or m.startswith(f"{h}.") for h in HEAVY_MODULES)]
    assert heavy == [], f"migscope {' '.join(args)} loaded {heavy}"
