"""The ``migscope`` command: one entry point, one subcommand per job.

Errors a user can fix (bad input, unknown GPU model, invalid config) are raised as
:class:`click.ClickException` subclasses and print as one line on stderr, exit code 1; usage
errors (unknown option, missing argument) are click's and exit with 2. No traceback reaches
the user unless ``MIGSCOPE_DEBUG=1`` is set.
"""

from __future__ import annotations

import logging
import os
import sys

import click

from migscope.cli import analyze_cmd, catalog_cmd, config_cmd, demo_cmd, exporter_cmd

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="migscope", prog_name="migscope")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def cli(verbose: int) -> None:
    """migscope: find idle and mis-sized MIG slices, and fix the partitioning."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


cli.add_command(catalog_cmd.catalog)
cli.add_command(config_cmd.validate_config)
cli.add_command(exporter_cmd.exporter)
cli.add_command(analyze_cmd.analyze_command)
cli.add_command(demo_cmd.demo)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; turn unexpected exceptions into one line unless debugging."""
    try:
        cli.main(args=argv, prog_name="migscope", standalone_mode=True)
    except Exception as exc:  # pragma: no cover - last-resort guard, exercised by hand
        if os.environ.get("MIGSCOPE_DEBUG"):
            raise
        click.echo(f"migscope: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
