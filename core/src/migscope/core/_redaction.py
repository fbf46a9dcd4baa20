"""Credentials out of text before it is logged, posted or recorded: one rule for all of it.

Why one function: a command line, a child's output line and an error message reach logs,
webhooks and run records from several places, and a rule applied in one of them and not in
another is a leak (issue 20: the scheduler logged ``--prometheus
http://alice:S3cretPW@prom:9090/?api_key=...`` in full). Every such place calls
:func:`redact_argv` (a command line) or :func:`redact_text` (any text); :func:`redact_data`
walks JSON-like data. What is replaced, always by :data:`REDACTED`:

* a URL's user info, user and password both (``http://***@prom:9090/``): a user alone can be
  a token (``https://TOKEN@host``), so nothing before the ``@`` is kept;
* the value of a credential-named parameter, in a URL's query or fragment or anywhere as
  ``name=value`` (``?api_key=***``, ``X-Amz-Signature=***``, ``--token=***``);
* the value of a credential-named header or key written ``Name: value``
  (``Authorization: ***``, ``"password": "***"``, to the end of the line or the quote),
  and the token after ``Bearer``;
* in a command line, the value of every ``--header``/``-H`` (whatever its name: analyze
  never shows a header's value either) and of every credential-named option
  (``--password ***``, ``--api-key=***``).

A name is credential-named (:func:`is_secret_name`) when its **last** word (split at
``-``, ``_``, ``.``, spaces and camelCase, case-insensitive, percent-decoded) is one of
:data:`SECRET_WORDS` or ends with one of :data:`SECRET_SUFFIXES`: ``api_key``, ``apikey``,
``X-Api-Key``, ``access_token``, ``X-Amz-Security-Token``, ``X-Amz-Credential``,
``X-Amz-Signature``, ``sig``, ``client_secret``, ``password``, ``Authorization``,
``Cookie`` are; ``--bearer-token-file``, ``--basic-auth-user``, ``token_expiry`` and
``KeyError`` are not (a file's path, a user name, a time and an exception's name are not
credentials). The rule errs towards hiding: ``--client-key FILE`` shows as
``--client-key ***``. The result is stable under a second pass, so layers may each redact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import overload

REDACTED = "***"
"""What a credential is replaced with."""

SECRET_WORDS = frozenset(
    {
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "key",
        "pass",
        "pwd",
        "session",
        "sig",
    }
)
"""A name whose last word is one of these names a credential (``api_key``, ``X-Auth``)."""

SECRET_SUFFIXES = (
    "apikey",
    "credential",
    "credentials",
    "passphrase",
    "passwd",
    "password",
    "secret",
    "signature",
    "token",
)
"""A name whose last word ends with one of these names a credential (``accesstoken``)."""

_HEADER_OPTIONS = frozenset({"--header", "-H"})
"""Command-line options whose value is an HTTP header (migscope analyze's, curl's)."""

# scheme://USERINFO@ : the user info runs to the last "@" before the path, query or
# fragment (as URL parsers read it), so a raw "@" in a password is hidden too.
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://)([^\s/?#\"'<>]*)@")

# NAME followed by "=" or ":" (quotes and blanks around it allowed, as in JSON or YAML).
# The look-behind makes a name start only where a name can start, so a long run of name
# characters is scanned once, not once per character.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.%\-])(?P<name>[A-Za-z0-9_.%\-]*[A-Za-z0-9])"
    r"(?P<open>[\"']?)[ \t]*(?P<sep>[:=])[ \t]*(?P<quote>[\"']?)"
)
_EQUALS_VALUE = re.compile(r"[^\s&#;\"'<>]*")
_COLON_VALUE = re.compile(r"[^\r\n\"']*")
_SCHEMES = frozenset({"basic", "bearer", "token"})
_SCHEME_TOKEN = re.compile(r"(?:[ \t]+[^\s&#;\"'<>]+)?")
_BEARER = re.compile(r"\b(Bearer[ \t]+)(?!\*\*\*)[^\s\"']+")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_OPTION = re.compile(r"(?P<flag>-{1,2}[A-Za-z0-9][A-Za-z0-9_.\-]*)(?:=(?P<value>.*))?", re.DOTALL)


def is_secret_name(name: str) -> bool:
    """Whether ``name`` (a parameter, header, key or option) names a credential.

    Its last word decides (the module docstring): ``api_key`` and ``X-Amz-Signature`` do,
    ``--bearer-token-file`` and ``token_expiry`` do not.
    """
    decoded = _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), name)
    words = [w for w in _WORD_SPLIT.split(_CAMEL.sub(r"\1 \2", decoded).lower()) if w]
    if not words:
        return False
    last = words[-1]
    return last in SECRET_WORDS or last.endswith(SECRET_SUFFIXES)


def redact_text(text: str) -> str:
    """``text`` with every credential it shows replaced by :data:`REDACTED`.

    URL user info, credential-named ``name=value`` and ``Name: value`` pairs, and the token
    after ``Bearer`` (the module docstring has the rule). Idempotent.
    """
    if not text:
        return text
    text = _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    text = _redact_assignments(text)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def _redact_assignments(text: str) -> str:
    parts: list[str] = []
    pos = 0
    while True:
        found = _ASSIGNMENT.search(text, pos)
        if found is None:
            break
        start = found.end()
        if not is_secret_name(found.group("name")):
            # Go on right after the name: what follows may itself be a pair (a=b&token=c).
            parts.append(text[pos : found.end("name")])
            pos = found.end("name")
            continue
        quote = found.group("quote")
        close = text.find(quote, start) if quote else -1
        if close != -1:
            end = close  # a quoted value: up to its closing quote
        else:
            value = _COLON_VALUE if found.group("sep") == ":" or quote else _EQUALS_VALUE
            end = _end_of(value, text, start)
            if value is _EQUALS_VALUE and text[start:end].lower() in _SCHEMES:
                end = _end_of(_SCHEME_TOKEN, text, end)  # Authorization=Bearer TOKEN
        parts.append(text[pos:start])
        if end > start:
            parts.append(REDACTED)
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _end_of(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Where ``pattern`` (which matches the empty string too) ends, matched at ``start``."""
    found = pattern.match(text, start)
    return found.end() if found is not None else start


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line fit for a log: :func:`redact_text` on every argument, and more.

    The value of every ``--header``/``-H`` keeps only the header's name
    (``Authorization: ***``), and the value of every credential-named option is hidden,
    given as ``--password VALUE`` or ``--password=VALUE``. Program names, paths and other
    options stay as they are, so the line still says what ran.
    """
    out: list[str] = []
    hide_next: str | None = None  # "header": a header follows; "value": a secret follows
    for arg in argv:
        if hide_next == "header":
            out.append(_redact_header(arg))
            hide_next = None
            continue
        if hide_next == "value" and not arg.startswith("-"):
            out.append(REDACTED)
            hide_next = None
            continue
        hide_next = None
        option = _OPTION.fullmatch(arg)
        if option is not None:
            flag, value = option.group("flag"), option.group("value")
            if flag in _HEADER_OPTIONS:
                if value is None:
                    hide_next = "header"
                else:
                    arg = f"{flag}={_redact_header(value)}"
            elif is_secret_name(flag):
                if value is None:
                    hide_next = "value"
                elif value:
                    arg = f"{flag}={REDACTED}"
        out.append(redact_text(arg))
    return out


def _redact_header(text: str) -> str:
    """``Name: ***`` (any header: its value may be a credential), ``***`` without a name."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        return REDACTED
    return f"{name}: {REDACTED}" if value.strip() else f"{name}:"


@overload
def redact_data(value: str) -> str: ...


@overload
def redact_data(value: Mapping[str, object]) -> dict[str, object]: ...


@overload
def redact_data(value: object) -> object: ...


def redact_data(value: object) -> object:
    """JSON-like ``value`` with :func:`redact_text` applied to every string in it.

    A mapping's credential-named keys (:func:`is_secret_name`) get :data:`REDACTED` for a
    string value. Numbers, booleans and None stay; other objects become their redacted
    ``str`` (what ``json.dumps(..., default=str)`` would have written).
    """
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {
            key: (
                REDACTED
                if isinstance(item, str) and item and is_secret_name(str(key))
                else redact_data(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_data(item) for item in value]
    return redact_text(str(value))
