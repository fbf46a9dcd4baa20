"""The errors of the Prometheus client, and how server text is quoted in their messages.

Why a module of its own: every other part of the client (the request loop, the envelope
check, the result parsers) raises these, and they are what callers catch; keeping them apart
from the machinery lets a caller read the hierarchy in one place.

Every message is one line that names the URL (credentials removed). Server text quoted in a
message (an error string, the start of an HTML page, the query) is folded onto one line and
cut to a length, so that a proxy's 50 kB error page cannot flood a terminal.
"""

from __future__ import annotations

from migscope.core import UserError, one_line

QUERY_IN_MESSAGE = 200
"""Characters of a query a message quotes (the exception keeps the whole query)."""

SERVER_TEXT_IN_MESSAGE = 300
"""Characters of server text (an error string, a body) a message quotes."""


def clip(text: str | BaseException, limit: int = SERVER_TEXT_IN_MESSAGE) -> str:
    """``text`` on one line, cut to ``limit`` characters (``...`` marks the cut).

    Args:
        text: Server text, a query, or an exception (then :func:`one_line` of it, which
            names the exception type when its message is empty).
        limit: The longest result.

    Returns:
        The folded, possibly shortened text; ``""`` for blank text.
    """
    flat = one_line(text) if isinstance(text, BaseException) else " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class PrometheusError(UserError):
    """Base of every error the client raises; the message is one line that names the URL.

    Attributes:
        url: The request URL (credentials removed) the error is about.
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class PrometheusUnreachable(PrometheusError):
    """No HTTP answer at all: refused, reset, DNS, TLS, or connect timeout.

    Retried before raising, except TLS verification failures, which no retry can fix.
    """


class PrometheusTimeout(PrometheusError):
    """The server did not answer within the read timeout, or its query timed out.

    A query timeout is Prometheus's 503 ``errorType: timeout``. Not retried: the same query
    would be as slow again.
    """


class PrometheusQueryError(PrometheusError):
    """The server rejected the query (400/422: bad PromQL, too many samples, ...). Not retried.

    Attributes:
        error_type: The envelope's ``errorType`` (``bad_data``, ``execution``; VictoriaMetrics
            puts the HTTP status there, e.g. ``"422"``).
        server_message: The envelope's ``error`` text, as the server wrote it.
        query: The full query (the message holds at most its first 200 characters).
        status_code: The HTTP status.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str,
        error_type: str,
        server_message: str,
        query: str | None,
        status_code: int,
    ) -> None:
        super().__init__(message, url=url)
        self.error_type = error_type
        self.server_message = server_message
        self.query = query
        self.status_code = status_code


class PrometheusResponseError(PrometheusError):
    """An answer that is not a usable Prometheus API response.

    Not JSON, HTML from a proxy or login page, a redirect, the wrong envelope, 401/403/404,
    or 5xx/429 after every retry.

    Attributes:
        status_code: The HTTP status, or ``None`` when the problem is not tied to one.
    """

    def __init__(self, message: str, *, url: str, status_code: int | None) -> None:
        super().__init__(message, url=url)
        self.status_code = status_code
