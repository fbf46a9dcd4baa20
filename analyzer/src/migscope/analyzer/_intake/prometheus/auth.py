"""The bearer token and extra headers: checked before they are sent, and never quoted.

Why a module of its own: a token read from a file with a newline inside (two lines pasted, a
comment under the token) made httpx refuse the header with a message that quotes it (``Illegal
header value b'Bearer <the token>'``), and that message reached the terminal. Secrets are
checked here, where the client knows what they are, and a problem is reported by where the
value came from, never by its content.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from migscope.analyzer._intake.prometheus.errors import PrometheusError


def header_problem(value: str, *, tab_allowed: bool = False) -> str | None:
    """What makes ``value`` unsendable as an HTTP header value, without quoting it; or None.

    Args:
        value: The header value (or the token that goes into one).
        tab_allowed: Whether a tab counts as allowed (HTTP allows it inside a header value;
            a token never holds one).

    Returns:
        ``"contains a newline"``, ``"contains a control or non-ASCII character"``, or None.
    """
    if "\n" in value or "\r" in value:
        return "contains a newline"
    if any(not (" " <= c <= "~") and not (tab_allowed and c == "\t") for c in value):
        return "contains a control or non-ASCII character"
    return None


def check_headers(headers: Mapping[str, str] | None) -> None:
    """Refuse extra headers that httpx would reject with their value in the message.

    Raises:
        ValueError: A value with a newline or a character HTTP cannot carry (its name says
            which; the value is not quoted, as it may be a credential).
    """
    for name, value in (headers or {}).items():
        problem = header_problem(value, tab_allowed=True)
        if problem is not None:
            raise ValueError(f"header {name}: the value {problem}")


class BearerToken:
    """The ``Authorization: Bearer`` header: a fixed token, or a file read for every request.

    Args:
        token: The token itself.
        path: A file holding the token (surrounding whitespace is dropped), read before every
            request so that rotated service-account tokens work.
        url: The base URL, for messages.

    Raises:
        ValueError: ``token`` cannot be sent (what is wrong, not the token).
    """

    def __init__(self, token: str | None, path: str | os.PathLike[str] | None, *, url: str) -> None:
        if token is not None and (problem := header_problem(token)) is not None:
            raise ValueError(f"bearer_token {problem}")
        self._token = token
        self._path = path
        self._url = url

    def headers(self) -> dict[str, str]:
        """``{"Authorization": "Bearer ..."}``, or nothing without a token.

        Raises:
            PrometheusError: The file cannot be read, or its token cannot be sent.
        """
        token = self._token
        if self._path is not None:
            try:
                with open(self._path, encoding="utf-8") as fh:
                    token = fh.read().strip()
            except (OSError, UnicodeDecodeError) as exc:
                # Not the decoder's message: it quotes the bytes around the bad one.
                reason = (exc.strerror or exc) if isinstance(exc, OSError) else "not UTF-8 text"
                raise PrometheusError(
                    f"cannot read the bearer token file {self._path}: {reason}", url=self._url
                ) from (exc if isinstance(exc, OSError) else None)
            problem = header_problem(token)
            if problem is not None:
                raise PrometheusError(
                    f"bearer token file {self._path}: {problem}; it must hold the token alone "
                    "on one line",
                    url=self._url,
                )
        return {"Authorization": f"Bearer {token}"} if token else {}
