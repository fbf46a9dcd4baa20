"""Two click commands for tests of how the ``migscope`` group reports errors.

``user-error`` raises a library-style :class:`UserError` with a chained cause; ``bug`` raises
an exception no one meant to raise. Real commands, mounted through the group's lazy loader.
"""

from __future__ import annotations

import click

from migscope.core._errors import UserError


class _LibraryError(UserError):
    """What a library raises for input the user can fix."""


@click.command("user-error")
def user_error() -> None:
    """Fail the way a library does on bad input."""
    try:
        int("seven")
    except ValueError as exc:
        raise _LibraryError("the answer must be a number,\nnot 'seven'") from exc


@click.command("bug")
def bug() -> None:
    """Fail the way a bug does."""
    raise ZeroDivisionError("a bug")
