"""The exporter's WSGI application: ``/metrics``, ``/healthz`` and a landing page.

``/metrics`` is rendered by prometheus_client's own WSGI app, so content negotiation
(text 0.0.4 or OpenMetrics) and ``name[]`` filtering behave exactly as in every other
Python exporter (filtering needs a registry that knows its collectors' names, or one built
with ``support_collectors_without_names=True``, as the exporter's is). Whether to gzip is
decided here, for both renderers (:func:`gzip_wanted`): prometheus_client gzips whenever
``gzip`` is named, even with ``q=0``. Around it this module adds what the design guide asks
of a node agent:

* Bounded concurrency. At most ``max_concurrent_scrapes`` renders run at once; a request
  that cannot get a slot within ``scrape_wait_seconds`` gets ``503 too many concurrent
  scrapes`` instead of joining an unbounded queue. A render only formats the latest
  snapshot (milliseconds), so the limit is only reached by a misconfigured or hostile
  client, and it keeps such a client from starving the sampler thread of the GIL.
* A health endpoint driven by a callable the exporter passes in (sampler fresh? backend
  up?), answering 200 ``ok`` or 503 with the reason, and never raising.
* GET and HEAD only, exact paths only; everything else is 404 or 405.

Response headers from the web-config file (``X-Frame-Options`` and friends) are added by
:class:`HeadersMiddleware`, outside authentication, so 401 and 404 carry them too.
"""

from __future__ import annotations

import gzip
import html
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app

if TYPE_CHECKING:
    from types import TracebackType

    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

_log = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]
"""``health() -> (healthy, reason)``; the reason is shown on /healthz, without auth."""

_Headers = list[tuple[str, str]]
_ALLOWED_METHODS = "GET, HEAD"
_TEXT = "text/plain; charset=utf-8"


class ExporterApp:
    """Routes requests to the metrics renderer, the health check and the landing page."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        health: HealthCheck,
        name: str = "migscope exporter",
        version: str = "",
        max_concurrent_scrapes: int = 4,
        scrape_wait_seconds: float = 1.0,
        render_text: Callable[[], bytes] | None = None,
        cached_text: Callable[[], bytes | None] | None = None,
    ) -> None:
        """Build the application.

        Args:
            registry: What ``/metrics`` renders: the exporter's own registry, whose
                collectors only read the latest snapshot.
            render_text: A faster renderer of the same registry content as text format
                0.0.4 (the exporter's ``SnapshotCollector.render_text``). When given it
                serves every scrape that accepts that format (Prometheus always does) and
                does not filter by ``name[]``; other requests use the registry.
            cached_text: What ``render_text`` would return now if that needs no render,
                else None; never renders (the exporter's ``SnapshotCollector.cached_text``).
                Lets :meth:`cached_metrics` answer from the server's intake thread.
            health: Called for each ``/healthz`` request; must be cheap and must not block.
            name: Shown on the landing page.
            version: Shown on the landing page next to the name.
            max_concurrent_scrapes: Renders of ``/metrics`` allowed at the same time.
            scrape_wait_seconds: How long a scrape waits for a free slot before 503.
        """
        if max_concurrent_scrapes < 1:
            raise ValueError(f"max_concurrent_scrapes must be >= 1, got {max_concurrent_scrapes}")
        if scrape_wait_seconds < 0:
            raise ValueError(f"scrape_wait_seconds must be >= 0, got {scrape_wait_seconds}")
        self._metrics = make_wsgi_app(registry)
        self._render_text = render_text
        self._cached_text = cached_text
        self._gzip_cache: tuple[bytes | None, bytes] = (None, b"")
        self._gzip_verdict: tuple[str | None, bool] = (None, False)  # last Accept-Encoding
        self._health = health
        self._slots = threading.BoundedSemaphore(max_concurrent_scrapes)
        self._wait = scrape_wait_seconds
        self._landing = _landing_page(name=name, version=version)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Answer one request."""
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "")
        status: str
        headers: _Headers
        body: bytes
        if path not in ("/metrics", "/healthz", "/"):
            status, headers, body = "404 Not Found", [("Content-Type", _TEXT)], b"not found\n"
        elif method not in ("GET", "HEAD"):
            status = "405 Method Not Allowed"
            headers = [("Content-Type", _TEXT), ("Allow", _ALLOWED_METHODS)]
            body = f"method {method} not allowed; use GET or HEAD\n".encode()
        elif path == "/metrics":
            status, headers, body = self._serve_metrics(environ)
        elif path == "/healthz":
            status, headers, body = self._serve_health()
        else:
            status = "200 OK"
            headers = [("Content-Type", "text/html; charset=utf-8")]
            body = self._landing
        headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [b""] if method == "HEAD" else [body]

    def _serve_health(self) -> tuple[str, _Headers, bytes]:
        try:
            healthy, reason = self._health()
        except Exception as exc:  # the probe must answer, whatever the check does
            _log.warning("health check raised %s: %s", type(exc).__name__, exc)
            healthy, reason = False, f"health check failed: {type(exc).__name__}"
        headers = [("Content-Type", _TEXT), ("Cache-Control", "no-store")]
        if healthy:
            return "200 OK", headers, b"ok\n"
        text = " ".join(str(reason).split()) or "unhealthy"
        return "503 Service Unavailable", headers, f"{text}\n".encode()

    def _serve_metrics(self, environ: WSGIEnvironment) -> tuple[str, _Headers, bytes]:
        if not self._slots.acquire(timeout=self._wait):
            _log.warning(
                "rejected a scrape from %s: too many concurrent scrapes",
                environ.get("REMOTE_ADDR", "?"),
            )
            return (
                "503 Service Unavailable",
                [("Content-Type", _TEXT), ("Retry-After", "1")],
                b"too many concurrent scrapes\n",
            )
        try:
            return self._render(environ)
        except Exception as exc:
            # Collectors degrade per metric and should never raise; if one does anyway,
            # answer 500 with one log line rather than a traceback per scrape.
            _log.error("rendering /metrics failed: %s: %s", type(exc).__name__, exc)
            return "500 Internal Server Error", [("Content-Type", _TEXT)], b"scrape failed\n"
        finally:
            self._slots.release()

    def _render(self, environ: WSGIEnvironment) -> tuple[str, _Headers, bytes]:
        if self._render_text is not None and _fast_path_ok(environ):
            body = self._render_text()
            zipped = gzip_wanted(environ.get("HTTP_ACCEPT_ENCODING"))
            if zipped:
                body = self._gzipped(body)
            return "200 OK", _text_headers(gzipped=zipped), body
        return self._render_registry(environ)

    def cached_metrics(
        self, *, query: str, accept: str | None, accept_encoding: str | None
    ) -> tuple[str, _Headers, bytes] | None:
        """``GET /metrics``'s answer when it is already made; None if it needs work.

        The status, headers (``Content-Length`` included) and body that :meth:`__call__`
        answers a ``GET /metrics`` with this query and these header values, when the text
        body of the current snapshot is already rendered (and gzipped, if gzip is wanted);
        None when answering needs a render, a compression, the registry (``name[]``,
        OpenMetrics) or no ``cached_text`` was given. Never renders or compresses, so the
        server's intake thread may call it. It takes no scrape slot: the slots bound
        renders, and this is not one (under a flood of renders, a scrape the cache answers
        still gets 200 rather than waiting for a slot).
        """
        if self._cached_text is None or self._render_text is None:
            return None
        if not _fast_path_ok({"QUERY_STRING": query, "HTTP_ACCEPT": accept or ""}):
            return None
        body = self._cached_text()
        if body is None:
            return None
        seen, zipped = self._gzip_verdict
        if accept_encoding != seen:
            zipped = gzip_wanted(accept_encoding)
            self._gzip_verdict = (accept_encoding, zipped)
        if zipped:
            source, compressed = self._gzip_cache
            if source is not body:
                return None
            body = compressed
        headers = _text_headers(gzipped=zipped)
        headers.append(("Content-Length", str(len(body))))
        return "200 OK", headers, body

    def _gzipped(self, body: bytes) -> bytes:
        """``body`` gzipped, compressed once per body object (the renderer reuses it).

        One (source, result) pair, replaced as a whole, so concurrent scrapes at worst
        compress the same body twice; identity, not equality, so no byte comparison.
        """
        source, zipped = self._gzip_cache
        if source is not body:
            zipped = gzip.compress(body, compresslevel=1)
            self._gzip_cache = (body, zipped)
        return zipped

    def _render_registry(self, environ: WSGIEnvironment) -> tuple[str, _Headers, bytes]:
        """Run prometheus_client's app, collecting its response into one buffer.

        HEAD is rendered as GET (prometheus_client answers HEAD with 405) so that the
        headers, ``Content-Length`` included, are those a GET would get.
        """
        captured: list[tuple[str, _Headers]] = []

        def capture(
            status: str,
            headers: list[tuple[str, str]],
            exc_info: tuple[type[BaseException], BaseException, TracebackType]
            | tuple[None, None, None]
            | None = None,
        ) -> Callable[[bytes], object]:
            captured.append((status, list(headers)))
            return lambda _chunk: None

        inner = dict(environ)
        inner["REQUEST_METHOD"] = "GET"
        # prometheus_client gzips whenever the header names gzip, q=0 or not: decide here.
        inner["HTTP_ACCEPT_ENCODING"] = (
            "gzip" if gzip_wanted(environ.get("HTTP_ACCEPT_ENCODING")) else ""
        )
        chunks = self._metrics(inner, capture)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        status, headers = captured[-1]
        return status, headers, body


_TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


def _text_headers(*, gzipped: bool) -> _Headers:
    """The text format's headers, before ``Content-Length`` (both paths use these)."""
    headers = [("Content-Type", _TEXT_FORMAT)]
    if gzipped:
        headers.append(("Content-Encoding", "gzip"))
    return headers


_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


def gzip_wanted(accept_encoding: str | None) -> bool:
    """Whether to gzip a response to a request with this ``Accept-Encoding`` value.

    RFC 9110 section 12.5.3: a coding is acceptable when the header lists it, or lists ``*``
    without it, with a qvalue above 0 (``q=0`` means "not acceptable"); coding names and
    ``q`` are case-insensitive, and ``x-gzip`` is ``gzip``. The exporter gzips whenever gzip
    is acceptable, unless the client rates identity (by name or through ``*``) above gzip.
    Without the header, or with an empty one, it does not gzip (Prometheus always sends
    ``gzip``). A qvalue that is not one (``q=2``, ``q=0.0001``, ``q=abc``) refuses its coding.

    When identity is refused too (``identity;q=0`` or ``*;q=0`` and no acceptable gzip), the
    response is sent without coding anyway rather than ``406``: RFC 9110 section 12.1 lets a
    server disregard the header, and a scrape must not fail over it.
    """
    if not accept_encoding:
        return False
    rated: dict[str, float] = {}
    for element in accept_encoding.split(","):
        coding, *params = (part.strip() for part in element.split(";"))
        coding = coding.lower()
        if not coding:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                value = value.strip()
                q = float(value) if _QVALUE.fullmatch(value) else 0.0
        coding = "gzip" if coding == "x-gzip" else coding
        rated[coding] = max(q, rated.get(coding, 0.0))
    star = rated.get("*")
    q_gzip = rated.get("gzip", star or 0.0)
    q_identity = rated.get("identity", star)
    return q_gzip > 0 and (q_identity is None or q_gzip >= q_identity)


def _fast_path_ok(environ: WSGIEnvironment) -> bool:
    """Whether the text-format fast path answers this request as the registry would.

    It does unless the client filters by ``name[]`` or refuses ``text/plain`` outright
    (Prometheus lists ``text/plain;version=0.0.4`` in every Accept header it sends). The
    query is decoded as prometheus_client decodes it: Prometheus' scrape ``params`` arrive
    URL-encoded (``name%5B%5D=...``), and the filter must apply to that spelling too.
    """
    if "name[]" in parse_qs(environ.get("QUERY_STRING", "")):
        return False
    accept = environ.get("HTTP_ACCEPT", "")
    return not accept or "text/plain" in accept or "*/*" in accept


def _landing_page(*, name: str, version: str) -> bytes:
    """A small static page: what this is, and a link to the metrics (and the probe)."""
    title = html.escape(f"{name} {version}".strip())
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n'
        f'<head><meta charset="utf-8"><title>{title}</title></head>\n'
        "<body>\n"
        f"<h1>{title}</h1>\n"
        "<p>Prometheus exporter for NVIDIA MIG slices.</p>\n"
        "<ul>\n"
        '<li><a href="metrics">/metrics</a>: the metrics</li>\n'
        '<li><a href="healthz">/healthz</a>: health check</li>\n'
        "</ul>\n"
        "</body>\n"
        "</html>\n"
    ).encode()


class HeadersMiddleware:
    """Adds fixed response headers (from web-config) to every response of ``app``."""

    def __init__(self, app: WSGIApplication, *, headers: Mapping[str, str]) -> None:
        """Wrap ``app``; a header ``app`` sets itself is replaced, not duplicated."""
        self._app = app
        self._headers = list(headers.items())
        self._names = {name.lower() for name in headers}

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Call the wrapped app with a ``start_response`` that appends the headers."""
        if not self._headers:
            return self._app(environ, start_response)

        def start(
            status: str,
            headers: list[tuple[str, str]],
            exc_info: tuple[type[BaseException], BaseException, TracebackType]
            | tuple[None, None, None]
            | None = None,
        ) -> Callable[[bytes], object]:
            return start_response(status, self.apply(headers), exc_info)

        return self._app(environ, start)

    def apply(self, headers: Iterable[tuple[str, str]]) -> _Headers:
        """``headers`` as this middleware passes them on: its own replace same-named ones."""
        kept = [(k, v) for k, v in headers if k.lower() not in self._names]
        return kept + self._headers
