"""Send one API request: authentication, timeouts, and the retries that are safe.

Why a module of its own: which failures to retry is the client's most delicate rule.
Connection errors (refused, reset, DNS, connect timeout), HTTP 5xx (except 501, 505 and a 503
that says the query timed out) and 429 are retried with jittered exponential backoff, or after
the server's ``Retry-After``; bad PromQL (400/422), auth failures, read timeouts and TLS
verification failures never are, because the same request would fail the same way. Every
failure leaves as one :class:`PrometheusError` line with the cause chained.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone

import httpx

from migscope.analyzer.sources.prometheus.envelope import (
    Envelope,
    check_response,
    describe,
    maybe_json,
)
from migscope.analyzer.sources.prometheus.errors import (
    QUERY_IN_MESSAGE,
    PrometheusError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
    clip,
)
from migscope.analyzer.sources.prometheus.usage import UsageTally

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TIMEOUT_SECONDS",
    "ApiTransport",
    "api_base",
    "make_http_client",
    "redact",
    "request_timeout",
]

# The package's logger, whichever module of it logs: one name to configure and filter on.
_log = logging.getLogger(__name__.rpartition(".")[0])

#: Connect quickly or fail (an unreachable host should say so in seconds); give a window query
#: a minute to evaluate, which is the order of Prometheus's own default ``-query.timeout`` (2m).
DEFAULT_TIMEOUT_SECONDS = 60.0
"""How long one request may take: a week of statistics for a big chunk of nodes is slow."""

CONNECT_TIMEOUT_SECONDS = 5.0
"""Connecting takes milliseconds when the server is there; waiting longer only hides it."""

DEFAULT_TIMEOUT = httpx.Timeout(DEFAULT_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)

_NOT_RETRIED_5XX = frozenset({501, 505})
_STATS_PATHS = ("api/v1/query", "api/v1/query_range")


def redact(url: httpx.URL) -> str:
    """``url`` as text without user info, for messages."""
    return str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)


def api_base(url: httpx.URL) -> httpx.URL:
    """The base URL requests are joined to: no credentials or query, no ``/api/v1``, ``/`` last.

    A trailing ``/api/v1`` (a common copy-paste from a Grafana data source) is tolerated.
    """
    path = url.path.rstrip("/")
    if path.endswith("/api/v1"):
        path = path[: -len("/api/v1")]
    return url.copy_with(username=None, password=None, path=path + "/", query=None)


def request_timeout(timeout: httpx.Timeout | float) -> httpx.Timeout:
    """``timeout`` as an httpx timeout; seconds also bound connecting to 5 of them at most."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_SECONDS))


def make_http_client(
    *,
    basic_auth: tuple[str, str] | None,
    ca_file: str | os.PathLike[str] | None,
    client_cert: str | tuple[str, str] | None,
    verify: bool,
    headers: Mapping[str, str] | None,
    timeout: httpx.Timeout,
    trust_env: bool,
    transport: httpx.BaseTransport | None,
) -> httpx.Client:
    """The httpx client of one :class:`PrometheusClient`: auth, TLS, headers, no redirects.

    Redirects are not followed: a redirect from a Prometheus API is a login page or a wrong
    base URL, and :func:`check_response` says so.
    """
    verify_arg: ssl.SSLContext | bool = verify
    if ca_file is not None or client_cert is not None:
        context = ssl.create_default_context(
            cafile=os.fspath(ca_file) if ca_file is not None else None
        )
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if client_cert is not None:
            certfile, keyfile = (client_cert, None) if isinstance(client_cert, str) else client_cert
            context.load_cert_chain(certfile, keyfile)
        verify_arg = context
    return httpx.Client(
        auth=httpx.BasicAuth(*basic_auth) if basic_auth is not None else None,
        headers={"Accept": "application/json", **(headers or {})},
        verify=verify_arg,
        timeout=timeout,
        trust_env=trust_env,
        follow_redirects=False,
        transport=transport,
    )


def _retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _has_ssl_cause(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError | ssl.CertificateError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _attempts(count: int) -> str:
    return f"{count} attempt" + ("s" if count != 1 else "")


def _form(items: Sequence[tuple[str, str]]) -> dict[str, str | list[str]]:
    """Form fields for httpx: repeated keys (``match[]``) become lists."""
    out: dict[str, str | list[str]] = {}
    for key, value in items:
        existing = out.get(key)
        if existing is None:
            out[key] = value
        elif isinstance(existing, list):
            existing.append(value)
        else:
            out[key] = [existing, value]
    return out


class ApiTransport:
    """Requests to one API base URL, with the retry rules of the module docstring.

    Args:
        base: The normalised base URL (no credentials, no query, ends with ``/``).
        http: The httpx client (see :func:`make_http_client`).
        tally: Where requests, retries and bytes are counted, and warnings recorded.
        params: Query parameters sent with every request.
        bearer_token: Sent as ``Authorization: Bearer ...``.
        bearer_token_file: Read before every request, so rotated tokens work.
        timeout: The httpx client's timeout (for messages).
        retries: Retries after the first attempt.
        backoff: First retry delay in seconds.
        max_backoff: Longest single wait, and the longest ``Retry-After`` honoured.
        stats: Ask query endpoints for ``stats=all``.
        sleep: Called with each retry delay.
    """

    def __init__(
        self,
        base: httpx.URL,
        http: httpx.Client,
        tally: UsageTally,
        *,
        params: Mapping[str, str],
        bearer_token: str | None,
        bearer_token_file: str | os.PathLike[str] | None,
        timeout: httpx.Timeout,
        retries: int,
        backoff: float,
        max_backoff: float,
        stats: bool,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base = base
        self._http = http
        self._tally = tally
        self._params = dict(params)
        self._bearer_token = bearer_token
        self._bearer_token_file = bearer_token_file
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._stats = stats
        self._sleep = sleep

    def url(self, path: str) -> str:
        """The URL of ``path`` under the base, as messages show it."""
        return redact(self.base.join(path))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _headers(self) -> dict[str, str]:
        token = self._bearer_token
        if self._bearer_token_file is not None:
            try:
                with open(self._bearer_token_file, encoding="utf-8") as fh:
                    token = fh.read().strip()
            except OSError as exc:
                raise PrometheusError(
                    f"cannot read the bearer token file {self._bearer_token_file}: "
                    f"{exc.strerror or exc}",
                    url=str(self.base),
                ) from exc
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _delay(self, attempt: int) -> float:
        base = min(self._max_backoff, self._backoff * (2**attempt))
        return float(base * (0.75 + random.random() / 4))

    def _wait(self, attempt: int, retry_after: float | None, shown: str, reason: str) -> None:
        delay = retry_after if retry_after is not None else self._delay(attempt)
        _log.info("retrying %s in %.2f s after %s", shown, delay, reason)
        self._sleep(delay)

    def _send(self, method: str, url: httpx.URL, items: list[tuple[str, str]]) -> httpx.Response:
        if method == "GET":
            return self._http.request(method, url, params=tuple(items), headers=self._headers())
        return self._http.request(method, url, data=_form(items), headers=self._headers())

    def request(
        self,
        method: str,
        path: str,
        *,
        form: Mapping[str, str] | Sequence[tuple[str, str]],
        query: str | None,
    ) -> Envelope:
        """Send one API request with retries and return its checked envelope.

        Args:
            method: ``GET`` (parameters in the URL) or ``POST`` (a form body).
            path: The endpoint under the base, e.g. ``api/v1/query``.
            form: The parameters.
            query: The PromQL sent, if any, for messages.

        Raises:
            PrometheusError: Unreachable, timed out, rejected, or not an API answer.
        """
        url = self.base.join(path)
        shown = redact(url)
        items = list(form.items()) if isinstance(form, Mapping) else list(form)
        if self._stats and path in _STATS_PATHS:
            items.append(("stats", "all"))
        items += list(self._params.items())
        attempts = self._retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            self._tally.add(requests=1, retries=1 if attempt else 0)
            try:
                response = self._send(method, url, items)
            except httpx.ConnectTimeout as exc:
                if last:
                    raise PrometheusUnreachable(
                        f"cannot reach Prometheus at {shown}: no answer to the connection "
                        f"within {self._timeout.connect} s ({_attempts(attempts)})",
                        url=shown,
                    ) from exc
                self._wait(attempt, None, shown, f"connect timeout: {exc}")
                continue
            except httpx.TimeoutException as exc:
                phase = type(exc).__name__.replace("Timeout", "").lower() or "request"
                limit = {
                    "read": self._timeout.read,
                    "write": self._timeout.write,
                    "pool": self._timeout.pool,
                }.get(phase)
                within = f" within {limit} s" if limit is not None else ""
                about = f" for query {clip(query, QUERY_IN_MESSAGE)}" if query else ""
                raise PrometheusTimeout(
                    f"Prometheus at {shown} did not answer{within} ({phase} timeout){about}; "
                    "raise the timeout or query a shorter range",
                    url=shown,
                ) from exc
            except httpx.TransportError as exc:
                reason = clip(exc)
                if _has_ssl_cause(exc):
                    raise PrometheusUnreachable(
                        f"TLS with {shown} failed: {reason}; give the server's CA with "
                        "ca_file= (or verify=False to test)",
                        url=shown,
                    ) from exc
                if isinstance(exc, httpx.UnsupportedProtocol | httpx.ProxyError) or last:
                    raise PrometheusUnreachable(
                        f"cannot reach Prometheus at {shown}: {reason} ({_attempts(attempt + 1)})",
                        url=shown,
                    ) from exc
                self._wait(attempt, None, shown, reason)
                continue
            except httpx.HTTPError as exc:  # e.g. a body that does not decode (bad gzip)
                raise PrometheusResponseError(
                    f"could not read the answer of {shown}: {clip(exc)}",
                    url=shown,
                    status_code=None,
                ) from exc

            self._tally.add(bytes_received=len(response.content))
            status = response.status_code
            if status == 429 or (status >= 500 and status not in _NOT_RETRIED_5XX):
                payload = maybe_json(response)
                if (
                    status == 503
                    and isinstance(payload, dict)
                    and payload.get("errorType") == "timeout"
                ):
                    message = clip(str(payload.get("error", "")))
                    about = f"; query: {clip(query, QUERY_IN_MESSAGE)}" if query else ""
                    raise PrometheusTimeout(
                        f"query timed out on the server {shown}: {message}{about}", url=shown
                    )
                retry_after = _retry_after(response)
                if not last and (retry_after is None or retry_after <= self._max_backoff):
                    self._wait(attempt, retry_after, shown, f"HTTP {status}")
                    continue
                why = (
                    f"; it asked to retry after {retry_after:g} s (more than max_backoff="
                    f"{self._max_backoff:g} s)"
                    if retry_after is not None and retry_after > self._max_backoff
                    else ""
                )
                raise PrometheusResponseError(
                    f"HTTP {status} from {shown} after {_attempts(attempt + 1)}{why}: "
                    f"{describe(response, payload)}",
                    url=shown,
                    status_code=status,
                )
            envelope = check_response(response, shown, query)
            for warning in self._tally.new_warnings(envelope.warnings):
                _log.warning("Prometheus at %s warns: %s", shown, clip(warning))
            envelope.requests = attempt + 1
            return envelope
        raise AssertionError("unreachable: the last attempt returns or raises")
