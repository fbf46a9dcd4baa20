"""The ``migscope`` command: one entry point, one subcommand per job.

Errors a user can fix (bad input, unknown GPU model, invalid config, a Prometheus that does
not answer) are :class:`~migscope.core._errors.UserError` and print as one line on stderr,
``migscope: error: ...``, exit code 1 (``MIGSCOPE_DEBUG=1`` shows the chained causes); usage
errors (unknown option, missing argument) are click's and exit with 2. Anything else is a bug
and keeps its traceback, so that it can be reported.
"""

from __future__ import annotations

import importlib
import logging
import os

import click

from migscope.cli._errors import InvalidInput
from migscope.core import UserError, one_line

__all__ = ["cli", "main"]

# name -> (module, attribute, extra that provides its distribution). Commands are imported
# when used: each lives with (or next to) the distribution that does the work, and
# `migscope exporter` must neither need nor load the analyzer's numpy/HiGHS/httpx.
_COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "analyze": ("migscope.cli._analyze_cmd", "analyze_command", "analyzer"),
    "apply": ("migscope.cli._apply_cmd", "apply_command", "analyzer"),
    "catalog": ("migscope.cli._catalog_cmd", "catalog", None),
    "demo": ("migscope.cli._demo_cmd", "demo", "analyzer"),
    "exporter": ("migscope.exporter", "exporter", "exporter"),
    "schedule": ("migscope.cli._schedule_cmd", "schedule_command", "analyzer"),
    "validate-config": ("migscope.cli._config_cmd", "validate_config", None),
}


class _LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand is needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module, attr, extra = spec
        try:
            command = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            return _unavailable(cmd_name, extra, exc)
        if not isinstance(command, click.Command):  # pragma: no cover - a wiring mistake
            raise TypeError(f"{module}.{attr} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> object:
        """Run the subcommand; a :class:`UserError` from anywhere below becomes one line."""
        try:
            return super().invoke(ctx)
        except click.ClickException:
            raise  # click's usage errors, and InvalidInput: printed by click as they are
        except UserError as exc:
            if os.environ.get("MIGSCOPE_DEBUG"):
                raise
            raise InvalidInput(one_line(exc)) from exc


def _unavailable(name: str, extra: str | None, exc: ImportError) -> click.Command:
    """A stand-in saying which extra to install, instead of a traceback at import."""
    hint = f"pip install 'migscope[{extra}]'" if extra else "reinstall migscope"
    message = f"'{name}' needs {exc.name or 'a missing module'}: {hint}"

    @click.command(
        name,
        help=f"(unavailable: {hint})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
    def unavailable() -> None:
        raise click.ClickException(message)

    return unavailable


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="migscope", prog_name="migscope")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def cli(verbose: int) -> None:
    """migscope: find idle and mis-sized MIG slices, and fix the partitioning."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI: a :class:`UserError` is one line and exit 1; a bug keeps its traceback."""
    cli.main(args=argv, prog_name="migscope", standalone_mode=True)
