"""Errors the CLI reports as one line with exit code 1 (invalid input, not usage)."""

from __future__ import annotations

from typing import IO, Any

import click

__all__ = ["InvalidInput"]


class InvalidInput(click.ClickException):
    """Input that parsed as a command line but is wrong: exit 1, one line on stderr."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``migscope: error: <message>`` and nothing else."""
        click.echo(f"migscope: error: {self.format_message()}", err=True, file=file)
