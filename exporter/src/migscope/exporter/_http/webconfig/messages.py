"""Pydantic's errors about a web-config file as ``(key, message)``, in the file's terms.

The words come from the one formatter every migscope reader uses
(:func:`migscope.core._validation.describe_error`); what is this file's own is adapted here
before it is called. :class:`~migscope.exporter._http.webconfig.WebConfigError` names the
key apart from the message, and names the missing key itself (``tls_server_config.key_file:
required key is missing``); a bad mapping key is a user name, named by its mapping; and a
wrong type says what kind of value YAML read ("got a number"), never the value, which may
be a password hash.
"""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from migscope.core import OTHER, describe_location, describe_problem
from migscope.exporter._http.webconfig.schema import CUSTOM_TYPE

_WORDING = {
    OTHER: "{msg}",  # pydantic's own text for what this file does not word, as it always read
    "extra_forbidden": "unknown key",
    "missing": "required key is missing",
    "string_type": "must be a string, got {got}",
    "bool_type": "must be true or false, got {got}",
    "dict_type": "must be a mapping, got {got}",
    "model_type": "must be a mapping, got {got}",
    "model_attributes_type": "must be a mapping, got {got}",
    "literal_error": "must be one of {expected}, got {raw}",
}
"""This file's wording over the core's; ``{got}`` is the kind of value (:func:`_kind`).

``extra_forbidden`` and ``missing`` are worded about the key itself, not the mapping that
holds it, because :class:`WebConfigError` names that key (``tls_server_config.key_file:
required key is missing``).
"""

_TYPE_ERRORS = frozenset(
    {"string_type", "bool_type", "dict_type", "model_type", "model_attributes_type"}
)


def describe_validation_error(exc: ValidationError) -> tuple[str, str]:
    """The first of pydantic's errors as ``(key, message)``, counting the others.

    Args:
        exc: What :meth:`WebConfig.model_validate` raised.

    Returns:
        The key of the problem (``tls_server_config.cert_file``) and what is wrong, with
        "(and N more problems)" when there are more.
    """
    first = _in_file_terms(exc.errors(include_url=False)[0])
    problem = describe_problem(first, {}, custom_type=CUSTOM_TYPE, wording=_WORDING)
    message = problem.reason
    more = exc.error_count() - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return describe_location(problem.loc), message


def _in_file_terms(error: ErrorDetails) -> ErrorDetails:
    """``error`` with a bad mapping key named by its mapping, and ``{got}`` to word it with.

    pydantic marks a bad mapping key as ``(..., key, "[key]")``; the key is a user name, and
    the message names it (quoted), so the place is the mapping.
    """
    loc = error["loc"]
    kind = error["type"]
    value = error.get("input")
    ctx = {**(error.get("ctx") or {}), "got": _kind(value)}
    if loc and loc[-1] == "[key]":
        loc = loc[:-2]
        if kind in _TYPE_ERRORS:
            kind = CUSTOM_TYPE
            ctx = {
                "message": f"user name {value!r} must be a string, got {_kind(value)} "
                "(quote it: YAML reads on, yes, no, 1 as other types)"
            }
    return ErrorDetails(
        type=kind,
        loc=tuple(str(part) for part in loc),
        msg=error["msg"],
        input=value,
        ctx=ctx,
        url="",
    )


def _kind(value: object) -> str:
    """What kind of value YAML read, without the value: "a number", "nothing (null)"."""
    if value is None:
        return "nothing (null)"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "a mapping",
        str: "a string",
    }.get(type(value), type(value).__name__)
