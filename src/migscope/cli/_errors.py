"""The CLI's own one-line error: wrong input that only the command line can know about.

Library code raises :class:`~migscope.core._errors.UserError` subclasses, which the ``migscope``
group prints as one line; :class:`InvalidInput` is the same kind of error raised by the CLI
itself (a flag combination, an unreadable file named on the command line). It is both a
``UserError`` (one root for everything a user can fix) and a ``click.ClickException`` (so
that click prints it and exits 1 even when a command runs outside the group, as in tests).
"""

from __future__ import annotations

from typing import IO, Any

import click

from migscope.core import UserError


class InvalidInput(UserError, click.ClickException):
    """Input that parsed as a command line but is wrong: exit 1, one line on stderr."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        click.ClickException.__init__(self, message)

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``migscope: error: <message>`` and nothing else."""
        click.echo(f"migscope: error: {self.format_message()}", err=True, file=file)
