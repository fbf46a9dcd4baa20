"""Send one API request: the httpx client, authentication, the deadline, the size limit, retries.

What a client is built with (its base URL without credentials, the TLS context, the headers,
the timeouts and the deadline-keeping connections of :mod:`.deadline`) is decided once, at
construction (:func:`make_http_client`); :class:`ApiTransport` then sends with it.

Retries: which failures to retry is the client's most delicate rule. Connection errors
(refused, reset, DNS, connect timeout), HTTP 5xx (except 501, 505 and a 503 that says the
query timed out) and 429 are retried with jittered exponential backoff, or after the server's
``Retry-After``; bad PromQL (400/422), auth failures, read timeouts, a request httpx refuses to
send and TLS verification failures never are, because the same request would fail the same
way. Every failure leaves as one :class:`~.answers.PrometheusError` line with the cause
chained.

Limits: a request, its retries and their waits included, ends by one
:class:`~.deadline.Deadline` (the longest of the timeouts: ``--timeout``), however slowly the
server sends; a wait for a retry that would end past it is not made. Every answer is read
within :data:`~.body.DEFAULT_MAX_RESPONSE_BYTES` decoded bytes (:func:`~.body.read_body`).

Secrets: a token read from a file with a newline inside (two lines pasted, a comment under
the token) made httpx refuse the header with a message that quotes it (``Illegal header value
b'Bearer <the token>'``), and that message reached the terminal. The bearer token and the
extra headers are checked here (:class:`BearerToken`, :func:`check_headers`), where the client
knows what they are, and a problem is reported by where the value came from, never by its
content.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import httpx

from migscope.analyzer._intake.prometheus.answers import (
    QUERY_IN_MESSAGE,
    Envelope,
    PrometheusError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
    check_response,
    clip,
    describe,
    maybe_json,
)
from migscope.analyzer._intake.prometheus.body import ACCEPT_ENCODING, read_body
from migscope.analyzer._intake.prometheus.deadline import Deadline, deadline_seconds, install
from migscope.analyzer._options import DEFAULT_TIMEOUT_SECONDS

# The package's logger, whichever module of it logs: one name to configure and filter on.
_log = logging.getLogger(__name__.rpartition(".")[0])

# --------------------------------------------------------------------------------------------
# The httpx client: URL, TLS, headers, timeouts


#: Connect quickly or fail (an unreachable host should say so in seconds); give a window query
#: a minute to evaluate, which is the order of Prometheus's own default ``-query.timeout`` (2m).

CONNECT_TIMEOUT_SECONDS = 5.0
"""Connecting takes milliseconds when the server is there; waiting longer only hides it."""

DEFAULT_TIMEOUT = httpx.Timeout(DEFAULT_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)


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


def checked_options(
    base_url: str,
    *,
    basic_auth: tuple[str, str] | None,
    bearer: tuple[str | None, str | os.PathLike[str] | None],
    verify: bool,
    ca_file: str | os.PathLike[str] | None,
    counts: tuple[float, ...],
    max_response_bytes: int,
) -> tuple[httpx.URL, tuple[str, str] | None]:
    """Check a :class:`~.client.PrometheusClient`'s options together.

    Args:
        base_url: The URL as given.
        basic_auth: ``(user, password)`` as given.
        bearer: The bearer token and the bearer token file as given.
        verify: Whether to verify the server's certificate.
        ca_file: The CA bundle as given.
        counts: ``retries``, ``backoff`` and ``max_backoff``.
        max_response_bytes: The size limit of one answer.

    Returns:
        The URL and the basic auth to use (the URL's user info, if it has one).

    Raises:
        ValueError: Bad URL scheme, conflicting auth or TLS options, a negative count or a
            limit that is not positive.
    """
    url = httpx.URL(base_url)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"Prometheus URL must be http(s)://host[:port][/prefix], got {base_url!r}")
    if min(counts) < 0:
        raise ValueError("retries, backoff and max_backoff must not be negative")
    if max_response_bytes <= 0:
        raise ValueError("max_response_bytes must be positive")
    if url.username or url.password:
        if basic_auth is not None:
            raise ValueError("give basic auth in the URL or as basic_auth=, not both")
        basic_auth = (url.username, url.password)
    if sum(x is not None for x in (*bearer, basic_auth)) > 1:
        raise ValueError("choose one of bearer_token, bearer_token_file and basic_auth")
    if not verify and (ca_file is not None):
        raise ValueError("ca_file has no effect with verify=False; drop one of them")
    return url, basic_auth


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
    base URL, and :func:`~.answers.check_response` says so. Its connections keep each request's
    deadline (:func:`~.deadline.install`).

    Raises:
        ValueError: A header value httpx could not send (its name is said, not its value).
    """
    check_headers(headers)
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
    client = httpx.Client(
        auth=httpx.BasicAuth(*basic_auth) if basic_auth is not None else None,
        headers={
            "Accept": "application/json",
            "Accept-Encoding": ACCEPT_ENCODING,
            **(headers or {}),
        },
        verify=verify_arg,
        timeout=timeout,
        trust_env=trust_env,
        follow_redirects=False,
        transport=transport,
    )
    install(client)
    return client


# --------------------------------------------------------------------------------------------
# The bearer token and extra headers: checked before they are sent, and never quoted


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


# --------------------------------------------------------------------------------------------
# Running totals over one client's calls, and the server warnings it has seen, thread-safely:
# the request loop below counts requests, retries and bytes, the client's calls count results
# and wall time


@dataclass(slots=True)
class ClientUsage:
    """Running totals over every call of one client, for benchmarks and progress reports.

    Attributes:
        calls: Results returned (one per call).
        requests: HTTP requests sent, retries included.
        retries: Requests that were repeats after a retryable failure.
        wall_seconds: Client-side wall time of all calls.
        server_eval_seconds: Sum of ``evalTotalTime`` over the requests that reported it.
        requests_with_stats: How many requests reported ``evalTotalTime``.
        bytes_received: Response body bytes.
    """

    calls: int = 0
    requests: int = 0
    retries: int = 0
    wall_seconds: float = 0.0
    server_eval_seconds: float = 0.0
    requests_with_stats: int = 0
    bytes_received: int = 0


class UsageTally:
    """One client's :class:`ClientUsage` and distinct warnings, behind one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage = ClientUsage()
        self._seen_warnings: dict[str, None] = {}

    def add(
        self,
        *,
        calls: int = 0,
        requests: int = 0,
        retries: int = 0,
        wall_seconds: float = 0.0,
        server_eval_seconds: float | None = None,
        bytes_received: int = 0,
    ) -> None:
        """Add to the totals.

        Args:
            calls: Results returned.
            requests: HTTP requests sent.
            retries: Requests that repeated a failed one.
            wall_seconds: Client-side wall time.
            server_eval_seconds: The server's ``evalTotalTime`` of one request; ``None``
                when it reported none (then :attr:`ClientUsage.requests_with_stats` stays).
            bytes_received: Response body bytes.
        """
        with self._lock:
            usage = self._usage
            usage.calls += calls
            usage.requests += requests
            usage.retries += retries
            usage.wall_seconds += wall_seconds
            usage.bytes_received += bytes_received
            if server_eval_seconds is not None:
                usage.server_eval_seconds += server_eval_seconds
                usage.requests_with_stats += 1

    def snapshot(self) -> ClientUsage:
        """A copy of the totals so far."""
        with self._lock:
            return dataclasses.replace(self._usage)

    def new_warnings(self, warnings: Iterable[str]) -> list[str]:
        """Record ``warnings`` and return those not seen before, in order (to log once)."""
        with self._lock:
            fresh = [w for w in dict.fromkeys(warnings) if w not in self._seen_warnings]
            self._seen_warnings.update(dict.fromkeys(fresh))
        return fresh

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every distinct warning recorded so far, in order."""
        with self._lock:
            return tuple(self._seen_warnings)


# --------------------------------------------------------------------------------------------
# Sending, with the retries that are safe


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
