"""The option conventions every ``migscope`` command shares, written once.

- ``--out DIR``: where a command writes its files; ``--format FMT`` (``-o``): what it prints
  on stdout. ``--output`` used to mean the format; it stays for one release as a deprecated
  alias (a warning on stderr says what to use).
- Durations everywhere (:mod:`migscope.core._durations`): ``--window 7d``, ``--timeout 30s``,
  ``--step 60s``; a bare number is seconds, which keeps the old spellings working.
- A name means one thing: ``--window`` is the analysed window (``analyze``, ``demo``); the
  applier's maintenance windows are ``--maintenance-window`` (``apply --window`` stays as
  a deprecated alias).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from migscope.cli._errors import InvalidInput
from migscope.core import DurationError, format_duration, parse_duration

F = TypeVar("F", bound=Callable[..., Any])

_EXAMPLES = "a duration such as 7d, 24h, 90m or 1d12h"


def parse_duration_flag(
    flag: str, text: str, *, positive: bool = True, unit_required: bool = False
) -> float:
    """``text`` given to ``flag`` in seconds.

    Raises:
        InvalidInput: not a duration (``bad --window '7x': expected a duration ...``).
    """
    try:
        return parse_duration(text, what=flag, positive=positive, unit_required=unit_required)
    except DurationError:
        raise InvalidInput(f"bad {flag} {text!r}: expected {_EXAMPLES}") from None


class Duration(click.ParamType[float]):
    """A click type for durations: the value reaches the command as seconds (a float).

    Why exit 1 and not click's usage error: a wrong duration is wrong input, reported the
    same one-line way as every other (``migscope: error: bad --window '7x': ...``).
    """

    name = "duration"

    def __init__(self, *, positive: bool = True, unit_required: bool = False) -> None:
        self.positive = positive
        self.unit_required = unit_required

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Seconds from ``value`` (already seconds when it is a default number)."""
        if isinstance(value, float):
            return value
        flag = param.opts[0] if param is not None and param.opts else "duration"
        return parse_duration_flag(
            flag, str(value), positive=self.positive, unit_required=self.unit_required
        )


def seconds(value: float) -> str:
    """A default in seconds as ``--help`` shows it (``7d``, ``60s``)."""
    return format_duration(value)


def deprecated_alias(old: str, new: str, dest: str, **attrs: Any) -> Callable[[F], F]:
    """A hidden option ``old`` whose value goes to ``dest`` and that warns to use ``new``.

    Kept for one release so that scripts and CronJobs written against the old flag keep
    working while they are updated.
    """

    def warn(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        given = value not in (None, (), False)
        if given and ctx.get_parameter_source(param.name or "") is (
            click.core.ParameterSource.COMMANDLINE
        ):
            click.echo(f"migscope: warning: {old} is deprecated, use {new}", err=True)
        return value

    return click.option(old, dest, hidden=True, callback=warn, expose_value=True, **attrs)


def format_option(choices: Sequence[str], *, help_text: str) -> Callable[[F], F]:
    """``--format``/``-o`` with ``choices``, and the deprecated ``--output`` alias of it.

    The command receives ``format_`` and ``output``; :func:`chosen_format` picks one and
    applies the command's default (so that ``--output json`` alone still means json).
    """

    def decorate(fn: F) -> F:
        fn = deprecated_alias(
            "--output", "--format (-o)", "output", type=click.Choice(list(choices))
        )(fn)
        option = click.option(
            "--format",
            "-o",
            "format_",
            type=click.Choice(list(choices)),
            default=None,
            help=help_text,
        )
        return option(fn)

    return decorate


def chosen_format(format_: str | None, output: str | None, default: str | None) -> str | None:
    """The format asked for: ``--format``, else the deprecated ``--output``, else ``default``."""
    if format_ is not None:
        return format_
    return output if output is not None else default
