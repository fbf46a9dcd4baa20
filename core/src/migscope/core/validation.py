"""Pydantic's validation errors in the terms of the file a person wrote: one formatter for all.

Every configuration migscope reads (policy, schedule, mig-parted config, exporter settings,
web config) is a pydantic model, and a wrong value must come back as ``FILE:LINE: key: what
is wrong``, not as pydantic's multi-line report. The wording of pydantic's built-in error
types is the same everywhere (:data:`BUILTIN_WORDING`); a reader only adds what is its own:
its custom error type (raised by its validators as a ``PydanticCustomError`` whose context
holds ``message`` and optionally ``key`` or ``at``), the keys it allows at a place, and any
wording of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from migscope.core.yaml_messages import (
    Loc,
    describe_location,
    describe_value,
    first_problem,
    line_for,
)

__all__ = ["BUILTIN_WORDING", "Wording", "describe_error", "first_validation_problem"]

Wording = Mapping[str, str]
"""``{pydantic error type: template}``; templates may use ``{value}`` (the value as YAML read
it: "the string 'x'"), ``{raw}`` (its ``repr``), ``{msg}`` (pydantic's text) and any key of
the error's context (``{ge}``, ``{expected}``)."""

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
    "missing": "missing required key",
}


def _fill(template: str, err: ErrorDetails) -> str:
    value = err.get("input")
    fields = {str(k): v for k, v in (err.get("ctx") or {}).items()}
    fields.update(value=describe_value(value), raw=repr(value), msg=err["msg"])
    try:
        return template.format(**fields)
    except (KeyError, IndexError):  # a template naming context this error lacks
        return f"invalid value {describe_value(value)} ({err['msg']})"


def describe_error(
    err: ErrorDetails,
    lines: Mapping[Loc, int],
    *,
    custom_type: str | None = None,
    allowed: Callable[[Loc], Sequence[str]] | None = None,
    wording: Wording | None = None,
) -> tuple[int | None, str]:
    """One pydantic error as ``(line, "key: what is wrong")``.

    Args:
        err: One entry of ``ValidationError.errors()``.
        lines: ``{loc: line}`` of the document (from ``compose_with_lines``).
        custom_type: The reader's own ``PydanticCustomError`` type: its ``message`` is used
            as is, and ``key`` (one more key) or ``at`` (a path) refine the place.
        allowed: The keys allowed at a place, named in an "unknown key" message.
        wording: Templates that replace :data:`BUILTIN_WORDING` for this reader.
    """
    loc: Loc = tuple(part for part in err["loc"] if part != "[key]")
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if custom_type is not None and kind == custom_type:
        if "key" in ctx:
            loc = (*loc, str(ctx["key"]))
        loc = (*loc, *ctx.get("at", ()))
        return line_for(loc, lines), f"{describe_location(loc)}: {ctx['message']}"
    if kind == "missing" and loc:
        where, key = describe_location(loc[:-1]), loc[-1]
        return line_for(loc, lines), f"{where}: missing required key {key!r}"
    templates = {**BUILTIN_WORDING, **(wording or {})}
    if kind == "extra_forbidden":
        keys = list(allowed(loc[:-1])) if allowed is not None else []
        message = f"unknown key (allowed here: {', '.join(keys)})" if keys else "unknown key"
    elif kind in templates:
        message = _fill(templates[kind], err)
    else:
        message = f"invalid value {describe_value(err.get('input'))} ({err['msg']})"
    return line_for(loc, lines), f"{describe_location(loc)}: {message}"


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
