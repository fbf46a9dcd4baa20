"""Pydantic's validation errors in the terms of the file a person wrote: one formatter for all.

Every configuration migscope reads (policy, schedule, mig-parted config, scenario, exporter
settings, web config) is a pydantic model, and a wrong value must come back as
``FILE:LINE: key: what is wrong``, not as pydantic's multi-line report. The wording of
pydantic's built-in error types is the same everywhere (:data:`BUILTIN_WORDING`); a reader
only adds what is its own: its custom error type (raised by its validators as a
``PydanticCustomError`` whose context holds ``message`` and optionally ``key``, ``at`` or
``line_key``), the keys it allows at a place, and any wording of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from migscope.core._yaml_messages import (
    Loc,
    describe_location,
    describe_value,
    first_problem,
    line_for,
)

Wording = Mapping[str, str]
"""``{pydantic error type: template}``.

A template says what is wrong and is written after the place (``key: <template>``), unless
it names ``{place}`` or ``{where}``: then it is the whole message (the key problems,
``extra_forbidden`` and ``missing``, are worded so, because they are about the mapping that
holds the key). Templates may use ``{value}`` (the value as YAML read it: "the string
'x'"), ``{raw}`` (its ``repr``), ``{msg}`` (pydantic's text), any key of the error's context
(``{ge}``, ``{expected}``, ``{error}``), ``{place}`` (the place, ``idle.activity``),
``{where}`` (the mapping holding it, ``idle``), ``{key}`` (the last key, quoted: ``'activity'``)
and ``{allowed}`` (the keys allowed in ``where``, comma-separated)."""

OTHER = "*"
"""The :data:`Wording` key of the template for every error type no other key names."""

BUILTIN_WORDING: Wording = {
    "bool_type": "must be true or false, got {value}",
    "bool_parsing": "must be true or false, got {value}",
    "int_type": "must be an integer, got {value}",
    "int_parsing": "must be an integer, got {value}",
    "int_from_float": "must be an integer, got {value}",
    "float_type": "must be a number, got {value}",
    "float_parsing": "must be a number, got {value}",
    "greater_than_equal": "must be at least {ge}, got {raw}",
    "greater_than": "must be above {gt}, got {raw}",
    "less_than_equal": "must be at most {le}, got {raw}",
    "less_than": "must be below {lt}, got {raw}",
    "string_type": "must be a string, got {value}",
    "string_too_short": "must not be empty",
    "too_short": "must not be empty",
    "list_type": "must be a list, got {value}",
    "tuple_type": "must be a list, got {value}",
    "dict_type": "must be a mapping of keys, got {value}",
    "model_type": "must be a mapping of keys, got {value}",
    "model_attributes_type": "must be a mapping of keys, got {value}",
    "literal_error": "must be one of {expected}, got {value}",
    "extra_forbidden": "{place}: unknown key (allowed here: {allowed})",
    "missing": "{where}: missing required key {key}",
    OTHER: "invalid value {value} ({msg})",
}

_UNKNOWN_KEY = "{place}: unknown key"
"""``extra_forbidden`` where the reader names no allowed keys."""

_PLACE_FIELDS = ("{place}", "{where}")


@dataclass(frozen=True)
class Problem:
    """One pydantic error in the reader's terms.

    Attributes:
        loc: The place: the error's path without pydantic's ``[key]`` parts, refined by a
            custom error's ``key`` or ``at``.
        line: 1-based line of the place (or of its nearest ancestor in the text), or None.
        reason: What is wrong, without the place (a whole-message template's text as is).
        message: The one line: ``place: reason``, or the whole-message template's text.
    """

    loc: Loc
    line: int | None
    reason: str
    message: str


def _fill(template: str, err: ErrorDetails, fields: Mapping[str, object]) -> str:
    value = err.get("input")
    values = {str(k): v for k, v in (err.get("ctx") or {}).items()}
    values.update(fields, value=describe_value(value), raw=repr(value), msg=err["msg"])
    try:
        return template.format(**values)
    except (KeyError, IndexError):  # a template naming context this error lacks
        return f"invalid value {describe_value(value)} ({err['msg']})"


def describe_problem(
    err: ErrorDetails,
    lines: Mapping[Loc, int],
    *,
    custom_type: str | None = None,
    allowed: Callable[[Loc], Sequence[str]] | None = None,
    wording: Wording | Callable[[Loc], Wording] | None = None,
) -> Problem:
    """One pydantic error as a :class:`Problem`: its place, line and what is wrong.

    Args:
        err: One entry of ``ValidationError.errors()``.
        lines: ``{loc: line}`` of the document (from ``compose_with_lines``).
        custom_type: The reader's own ``PydanticCustomError`` type: its ``message`` is used
            as is; ``key`` (one more key) or ``at`` (a path) refine the place, and
            ``line_key`` (a key below the place) only the line, for a rule about a whole
            mapping that one of its keys breaks.
        allowed: The keys allowed at a place, named in an "unknown key" message.
        wording: Templates that replace :data:`BUILTIN_WORDING` for this reader, or a
            function of the place that returns them (wording that depends on the key).

    Returns:
        The problem; ``message`` is what :func:`describe_error` returns.
    """
    loc: Loc = tuple(part for part in err["loc"] if part != "[key]")
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if custom_type is not None and kind == custom_type:
        if "key" in ctx:
            loc = (*loc, str(ctx["key"]))
        loc = (*loc, *ctx.get("at", ()))
        line_loc = (*loc, str(ctx["line_key"])) if "line_key" in ctx else loc
        reason = str(ctx["message"])
        message = f"{describe_location(loc)}: {reason}"
        return Problem(loc, line_for(line_loc, lines), reason, message)
    own = wording(loc) if callable(wording) else (wording or {})
    templates = {**BUILTIN_WORDING, **own}
    keys = list(allowed(loc[:-1])) if allowed is not None and kind == "extra_forbidden" else []
    if kind == "extra_forbidden" and not keys and kind not in own:
        template = _UNKNOWN_KEY
    else:
        template = templates.get(kind, templates[OTHER])
    place = describe_location(loc)
    fields = {
        "place": place,
        "where": describe_location(loc[:-1]),
        "key": repr(loc[-1]) if loc else "",
        "allowed": ", ".join(keys),
    }
    reason = _fill(template, err, fields)
    whole = any(name in template for name in _PLACE_FIELDS)
    return Problem(loc, line_for(loc, lines), reason, reason if whole else f"{place}: {reason}")


def describe_error(
    err: ErrorDetails,
    lines: Mapping[Loc, int],
    *,
    custom_type: str | None = None,
    allowed: Callable[[Loc], Sequence[str]] | None = None,
    wording: Wording | Callable[[Loc], Wording] | None = None,
) -> tuple[int | None, str]:
    """One pydantic error as ``(line, "key: what is wrong")``.

    Args:
        err: One entry of ``ValidationError.errors()``.
        lines: ``{loc: line}`` of the document (from ``compose_with_lines``).
        custom_type: The reader's own ``PydanticCustomError`` type (see
            :func:`describe_problem`).
        allowed: The keys allowed at a place, named in an "unknown key" message.
        wording: Templates that replace :data:`BUILTIN_WORDING` for this reader, or a
            function of the place that returns them.
    """
    problem = describe_problem(
        err, lines, custom_type=custom_type, allowed=allowed, wording=wording
    )
    return problem.line, problem.message


def first_validation_problem(
    exc: ValidationError,
    lines: Mapping[Loc, int],
    **options: object,
) -> tuple[int | None, str]:
    """The problem nearest the top of the file, with how many more there are.

    ``options`` are :func:`describe_error`'s keyword arguments.
    """
    problems: Iterable[tuple[int | None, str]] = (
        describe_error(err, lines, **options)  # type: ignore[arg-type]
        for err in exc.errors()
    )
    return first_problem(problems)
