"""Send one API request: authentication, timeouts, limits, and the retries that are safe.

Why a module of its own: which failures to retry is the client's most delicate rule.
Connection errors (refused, reset, DNS, connect timeout), HTTP 5xx (except 501, 505 and a 503
that says the query timed out) and 429 are retried with jittered exponential backoff, or after
the server's ``Retry-After``; bad PromQL (400/422), auth failures, read timeouts, a request
httpx refuses to send and TLS verification failures never are, because the same request would
fail the same way. Every failure leaves as one :class:`PrometheusError` line with the cause
chained.

Limits: a request, its retries and their waits included, ends by one
:class:`~.deadline.Deadline` (the longest of the timeouts: ``--timeout``), however slowly the
server sends; a wait for a retry that would end past it is not made. Every answer is read
within :data:`~.body.DEFAULT_MAX_RESPONSE_BYTES` decoded bytes (:mod:`.body`).
"""

from __future__ import annotations

import email.utils
import logging
import random
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone

import httpx

from migscope.analyzer._intake.prometheus.auth import BearerToken
from migscope.analyzer._intake.prometheus.body import read_body
from migscope.analyzer._intake.prometheus.connection import (
    redact,
)
from migscope.analyzer._intake.prometheus.deadline import Deadline, deadline_seconds
from migscope.analyzer._intake.prometheus.envelope import (
    Envelope,
    check_response,
    describe,
    maybe_json,
)
from migscope.analyzer._intake.prometheus.errors import (
    QUERY_IN_MESSAGE,
    PrometheusError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
    clip,
)
from migscope.analyzer._intake.prometheus.usage import UsageTally

# The client's construction lives in .connection; its names stay importable from here.

# The package's logger, whichever module of it logs: one name to configure and filter on.
_log = logging.getLogger(__name__.rpartition(".")[0])

_NOT_RETRIED_5XX = frozenset({501, 505})
_STATS_PATHS = ("api/v1/query", "api/v1/query_range")


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


def _tls_advice(reason: str) -> str:
    """What to try after a failed TLS handshake, in the CLI's terms and the client's.

    A certificate alert from the server (``alert bad certificate``, ``alert certificate
    required``, ``alert unknown ca``) means the server refused us: it wants a client
    certificate it trusts. Anything else is the client refusing the server's certificate.
    """
    said = reason.lower()
    if "alert" in said and ("certificate" in said or "unknown ca" in said):
        return (
            "the server wants a client certificate it trusts: give it with --client-cert and "
            "--client-key (client_cert= in Python)"
        )
    return (
        "give the server's CA with --ca-file (ca_file= in Python; --insecure-skip-verify or "
        "verify=False to test)"
    )


def _attempts(count: int) -> str:
    return f"{count} attempt" + ("s" if count != 1 else "")


def _attempt_timeout(timeout: httpx.Timeout, deadline: Deadline) -> httpx.Timeout:
    """``timeout`` with every limit shortened to the time the deadline leaves."""
    return httpx.Timeout(
        connect=deadline.cap(timeout.connect),
        read=deadline.cap(timeout.read),
        write=deadline.cap(timeout.write),
        pool=deadline.cap(timeout.pool),
    )


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
        bearer: The ``Authorization: Bearer`` header, if any.
        timeout: The httpx client's timeout (for messages); the longest of its limits is the
            deadline of a whole request (:func:`~.deadline.deadline_seconds`).
        max_response_bytes: The most decoded bytes one answer may have.
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
        bearer: BearerToken,
        timeout: httpx.Timeout,
        max_response_bytes: int,
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
        self._bearer = bearer
        self._timeout = timeout
        self._deadline_s = deadline_seconds(timeout)
        self._max_response_bytes = max_response_bytes
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._stats = stats
        self._sleep = sleep

    @property
    def params(self) -> dict[str, str]:
        """The query parameters sent with every request (a copy)."""
        return dict(self._params)

    def url(self, path: str) -> str:
        """The URL of ``path`` under the base, as messages show it."""
        return redact(self.base.join(path))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _delay(self, attempt: int) -> float:
        base = min(self._max_backoff, self._backoff * (2**attempt))
        return float(base * (0.75 + random.random() / 4))

    def _retry(self, deadline: Deadline, delay: float, shown: str, reason: str) -> bool:
        """Wait ``delay`` and say True, or say False when the wait would end past the deadline."""
        if not deadline.allows(delay):
            _log.info("not retrying %s after %s: the deadline is too close", shown, reason)
            return False
        _log.info("retrying %s in %.2f s after %s", shown, delay, reason)
        self._sleep(delay)
        return True

    def _no_time(self, last: bool) -> str:
        """What to add to a final message when the deadline, not the count, ended the retries."""
        if last or self._deadline_s is None:
            return ""
        return f"; no time left to retry within the {self._deadline_s:g} s deadline"

    def _past_deadline(self, shown: str, query: str | None, attempts: int) -> PrometheusTimeout:
        about = f" for query {clip(query, QUERY_IN_MESSAGE)}" if query else ""
        retried = f", {_attempts(attempts)}" if attempts > 1 else ""
        within = f"{self._deadline_s or 0:g} s"
        return PrometheusTimeout(
            f"Prometheus at {shown} did not answer within {within} (the deadline of the whole "
            f"request{retried}){about}; raise the timeout or query a shorter range",
            url=shown,
        )

    def _timed_out(
        self, exc: httpx.TimeoutException, shown: str, query: str | None
    ) -> PrometheusTimeout:
        """A read, write or pool timeout (one wait, not the deadline): not retried."""
        phase = type(exc).__name__.replace("Timeout", "").lower() or "request"
        limit = {
            "read": self._timeout.read,
            "write": self._timeout.write,
            "pool": self._timeout.pool,
        }.get(phase)
        within = f" within {limit} s" if limit is not None else ""
        about = f" for query {clip(query, QUERY_IN_MESSAGE)}" if query else ""
        return PrometheusTimeout(
            f"Prometheus at {shown} did not answer{within} ({phase} timeout){about}; "
            "raise the timeout or query a shorter range",
            url=shown,
        )

    def _send(
        self,
        method: str,
        url: httpx.URL,
        items: list[tuple[str, str]],
        deadline: Deadline,
        shown: str,
    ) -> httpx.Response:
        """One attempt: the answer with its body read, within the limit and the deadline."""
        headers = self._bearer.headers()
        timeout = _attempt_timeout(self._timeout, deadline)
        if method == "GET":
            request = self._http.build_request(
                method, url, params=tuple(items), headers=headers, timeout=timeout
            )
        else:
            request = self._http.build_request(
                method, url, data=_form(items), headers=headers, timeout=timeout
            )
        response = self._http.send(request, stream=True)
        return read_body(response, shown=shown, limit=self._max_response_bytes, deadline=deadline)

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
        with Deadline(self._deadline_s).applied() as deadline:
            return self._attempt_all(method, url, items, deadline, shown, query, attempts)

    def _attempt_all(
        self,
        method: str,
        url: httpx.URL,
        items: list[tuple[str, str]],
        deadline: Deadline,
        shown: str,
        query: str | None,
        attempts: int,
    ) -> Envelope:
        """The attempts of :meth:`request`, all within ``deadline``."""
        for attempt in range(attempts):
            last = attempt == attempts - 1
            if deadline.expired():
                raise self._past_deadline(shown, query, attempt)
            self._tally.add(requests=1, retries=1 if attempt else 0)
            refused = False
            try:
                response = self._send(method, url, items, deadline, shown)
            except httpx.TimeoutException as exc:
                if deadline.hit or deadline.expired():
                    raise self._past_deadline(shown, query, attempt + 1) from exc
                if not isinstance(exc, httpx.ConnectTimeout):
                    raise self._timed_out(exc, shown, query) from exc
                if last or not self._retry(
                    deadline, self._delay(attempt), shown, f"connect timeout: {exc}"
                ):
                    raise PrometheusUnreachable(
                        f"cannot reach Prometheus at {shown}: no answer to the connection "
                        f"within {self._timeout.connect} s ({_attempts(attempt + 1)}"
                        f"{self._no_time(last)})",
                        url=shown,
                    ) from exc
                continue
            except httpx.LocalProtocolError:
                refused = True
            except httpx.TransportError as exc:
                reason = clip(exc)
                if _has_ssl_cause(exc):
                    raise PrometheusUnreachable(
                        f"TLS with {shown} failed: {reason}; {_tls_advice(reason)}",
                        url=shown,
                    ) from exc
                if (
                    isinstance(exc, httpx.UnsupportedProtocol | httpx.ProxyError)
                    or last
                    or not self._retry(deadline, self._delay(attempt), shown, reason)
                ):
                    final = last or isinstance(exc, httpx.UnsupportedProtocol | httpx.ProxyError)
                    raise PrometheusUnreachable(
                        f"cannot reach Prometheus at {shown}: {reason} ({_attempts(attempt + 1)}"
                        f"{self._no_time(final)})",
                        url=shown,
                    ) from exc
                continue
            except httpx.HTTPError as exc:  # e.g. a body that does not decode (bad gzip)
                raise PrometheusResponseError(
                    f"could not read the answer of {shown}: {clip(exc)}",
                    url=shown,
                    status_code=None,
                ) from exc
            if refused:
                # Raised out of the except block, neither caused by nor in the context of h11's
                # error: that quotes the header, which may hold a credential (the bearer token
                # and the extra headers are checked before sending; this is the last guard).
                raise PrometheusError(
                    f"cannot send the request to {shown}: httpx refused it as invalid HTTP",
                    url=shown,
                )
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
                honoured = retry_after is None or retry_after <= self._max_backoff
                delay = retry_after if retry_after is not None else self._delay(attempt)
                if not last and honoured and self._retry(deadline, delay, shown, f"HTTP {status}"):
                    continue
                why = (
                    f"; it asked to retry after {retry_after:g} s (more than max_backoff="
                    f"{self._max_backoff:g} s)"
                    if retry_after is not None and not honoured
                    else self._no_time(last)
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
