"""One error root: a UserError from anywhere is one line and exit 1; a bug keeps its traceback."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from migscope.cli import main as cli_main
from migscope.cli._errors import InvalidInput
from migscope.core._errors import MigscopeError, UserError


@pytest.fixture(autouse=True)
def _mounted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        cli_main._COMMANDS, "user-error", ("support.failing_commands", "user_error", None)
    )
    monkeypatch.setitem(cli_main._COMMANDS, "bug", ("support.failing_commands", "bug", None))
    monkeypatch.delenv("MIGSCOPE_DEBUG", raising=False)


def test_a_library_user_error_is_one_line_exit_1() -> None:
    result = CliRunner().invoke(cli_main.cli, ["user-error"])
    assert result.exit_code == 1
    assert result.stderr == "migscope: error: the answer must be a number, not 'seven'\n"
    assert result.stdout == ""


def test_debug_shows_the_chained_cause() -> None:
    result = CliRunner(env={"MIGSCOPE_DEBUG": "1"}).invoke(cli_main.cli, ["user-error"])
    assert isinstance(result.exception, UserError)
    assert isinstance(result.exception.__cause__, ValueError)


def test_a_bug_keeps_its_traceback() -> None:
    result = CliRunner().invoke(cli_main.cli, ["bug"])
    assert isinstance(result.exception, ZeroDivisionError)
    assert "migscope: error" not in result.stderr


def test_every_error_class_migscope_defines_has_the_root() -> None:
    """Walk every product package: each Exception subclass defined there is a MigscopeError."""
    import importlib
    import pkgutil

    import migscope

    strays = []
    for info in pkgutil.walk_packages(migscope.__path__, "migscope."):
        if info.name.endswith(("api_pb2", "api_pb2_grpc")):
            continue  # generated gRPC stubs
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not issubclass(obj, MigscopeError)
            ):
                strays.append(f"{info.name}.{obj.__name__}")
    assert strays == []
    assert issubclass(InvalidInput, UserError)
