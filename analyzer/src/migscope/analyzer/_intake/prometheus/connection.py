"""The httpx client of one :class:`~.client.PrometheusClient`: URL, TLS, headers, timeouts.

Why a module of its own: what a client is built with (its base URL without credentials, the
TLS context, the headers, the timeouts and the deadline-keeping connections of
:mod:`.deadline`) is decided once, at construction; :mod:`.transport` only sends with it.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

import httpx

from migscope.analyzer._intake.prometheus.auth import check_headers
from migscope.analyzer._intake.prometheus.body import ACCEPT_ENCODING
from migscope.analyzer._intake.prometheus.deadline import install
from migscope.analyzer._options import DEFAULT_TIMEOUT_SECONDS

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
    base URL, and :func:`~.envelope.check_response` says so. Its connections keep each request's
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
