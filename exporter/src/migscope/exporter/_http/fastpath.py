"""Plain scrapes answered by the intake thread itself, when the answer is already made.

Most scrapes are the same request (``GET /metrics``, text format, maybe gzip) for a body the
exporter has already rendered: the collector renders once per snapshot and the application
gzips once per body. Handing such a scrape to a worker costs two thread hand-offs, cheroot's
request parsing and a WSGI call, each waiting for the GIL behind the sampler (issue 24).
:class:`CachedMetrics` lets :mod:`.intake` answer it instead, with a non-blocking send, when
all of this holds (anything else goes to a worker, as before):

* a plain-HTTP connection (TLS goes to a worker) and no basic auth configured (the server
  builds no :class:`CachedMetrics` then);
* the request line is exactly ``GET /metrics`` with at most a query of URL-safe characters,
  ``HTTP/1.1`` or ``HTTP/1.0``; the head has no ``Content-Length``, ``Transfer-Encoding`` or
  ``Expect`` field and nothing follows it (no body, no pipelined request);
* :meth:`.app.ExporterApp.cached_metrics` has the answer made: text format (no ``name[]``,
  an ``Accept`` with ``text/plain`` or ``*/*``, or none), body rendered for the current
  snapshot and, when :func:`.app.gzip_wanted`, already gzipped. It never renders or
  compresses, so the intake thread never does either.

The answer is byte for byte what a worker sends: the application's status and headers,
passed through the web-config's extra headers (:class:`.app.HeadersMiddleware`), then the
fields cheroot adds in ``HTTPRequest.send_headers`` (``Connection``, ``Keep-Alive``,
``Date``, ``Server``) under the same rules, which :meth:`CachedMetrics.head` repeats;
``tests/exporter/test_fast_path.py`` compares the two paths' bytes.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable

from migscope.exporter._http.app import ExporterApp, HeadersMiddleware
from migscope.exporter._http.framing import RequestFrame
from migscope.exporter._http.pending import Answer

# The only request lines answered here; cheroot parses anything else (and may refuse it).
_REQUEST_LINE = re.compile(rb"GET /metrics(?:\?([A-Za-z0-9._~=&%+\-]*))? HTTP/1\.([01])\r\n")
# A body, or a promise of one: a worker's business.
_FOR_A_WORKER = (b"Content-Length", b"Transfer-Encoding", b"Expect")
_CRLF = b"\r\n"


class CachedMetrics:
    """Answers a plain ``GET /metrics`` whose answer is made (see the module docstring).

    Args:
        app: The exporter's application (not wrapped).
        headers: The web-config's extra headers, as the server wraps ``app`` with them;
            None without.
        server_name: cheroot's ``server_name`` (its ``Server`` header).
        protocol: cheroot's ``protocol`` (its status line's version).
        keepalive_timeout: cheroot's ``timeout`` (its ``Keep-Alive: timeout=`` value).
        can_keep_alive: cheroot's ``can_add_keepalive_connection`` (False once stopping).
    """

    def __init__(
        self,
        app: ExporterApp,
        *,
        headers: HeadersMiddleware | None,
        server_name: str,
        protocol: str,
        keepalive_timeout: object,
        can_keep_alive: Callable[[], bool],
    ) -> None:
        self._app = app
        self._headers = headers
        self._server = server_name.encode("ISO-8859-1")
        self._protocol = protocol.encode("ascii")
        self._keep_alive = f"timeout={keepalive_timeout}".encode("ISO-8859-1")
        self._can_keep_alive = can_keep_alive
        self._last_head: tuple[object, bytes] = (None, b"")
        self.answered = 0
        """Requests answered here (for tests and curiosity)."""

    def answer(self, request: bytes | bytearray, frame: RequestFrame) -> Answer | None:
        """The response to ``request`` (all the bytes received), or None for a worker."""
        fields = frame.fields
        if fields is None or frame.head_end != len(request):
            return None
        line = _REQUEST_LINE.match(request)
        if line is None or any(name in fields for name in _FOR_A_WORKER):
            return None
        made = self._app.cached_metrics(
            query=(line.group(1) or b"").decode("ascii"),
            accept=_text(fields.get(b"Accept")),
            accept_encoding=_text(fields.get(b"Accept-Encoding")),
        )
        if made is None:
            return None
        status, headers, body = made
        if self._headers is not None:
            headers = self._headers.apply(headers)
        http11 = line.group(2) == b"1"
        connection = fields.get(b"Connection", b"")
        # cheroot's read_request_headers, then send_headers: exact comparisons, as there.
        close = connection == b"close" if http11 else connection != b"Keep-Alive"
        if not close:
            close = not self._can_keep_alive()
        self.answered += 1
        return Answer(self.head(status, headers, http11=http11, close=close), body, close)

    def head(
        self, status: str, headers: list[tuple[str, str]], *, http11: bool, close: bool
    ) -> bytes:
        """Status line and headers as cheroot's ``send_headers`` writes them (200 + length).

        The last head is kept, with what it was made of and its ``Date`` second: scrapes of
        one body within a second share it.
        """
        second = int(time.time())
        key = (second, status, tuple(headers), http11, close)
        if self._last_head[0] == key:
            return self._last_head[1]
        out = [(k.encode("ISO-8859-1"), v.encode("ISO-8859-1")) for k, v in headers]
        names = {k.lower() for k, _ in out}
        if b"connection" not in names:
            if http11:
                if close:
                    out.append((b"Connection", b"close"))
            elif not close:
                out.append((b"Connection", b"Keep-Alive"))
        if (b"Connection", b"Keep-Alive") in out:
            out.append((b"Keep-Alive", self._keep_alive))
        if b"date" not in names:
            date = email.utils.formatdate(second, usegmt=True)
            out.append((b"Date", date.encode("ISO-8859-1")))
        if b"server" not in names:
            out.append((b"Server", self._server))
        lines = [self._protocol + b" " + status.encode("ISO-8859-1") + _CRLF]
        lines.extend(k + b": " + v + _CRLF for k, v in out)
        lines.append(_CRLF)
        head = b"".join(lines)
        self._last_head = (key, head)
        return head


def _text(value: bytes | None) -> str | None:
    """A header value as the WSGI environ holds it."""
    return None if value is None else value.decode("ISO-8859-1")
