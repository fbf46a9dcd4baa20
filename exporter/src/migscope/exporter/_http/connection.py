"""cheroot's connection, request and TLS adapter, adapted to the exporter's intake.

:mod:`.intake` performs the TLS handshake and reads each request before a worker sees the
connection; the classes here are what cheroot then works with:

* :class:`Connection` reads through :class:`.reader.RequestReader`, which replays the bytes
  the intake read, and remembers whether its TLS handshake is done.
* :class:`Request` reads headers with :class:`.headers.StrictHeaderReader` (obs-fold and
  control characters get 400), logs each error it answers (400, 408, 413, 414) in one line
  (through the server's ``answer_log`` throttle when it has one), and does not send a second
  ``100 Continue`` when the intake already sent one.
* :class:`TLSAdapter` wraps accepted sockets for TLS *without* handshaking: cheroot would
  handshake in the thread that accepts connections, where one silent client on the TLS port
  stops everyone else from connecting.
"""

from __future__ import annotations

import logging
import socket
import ssl
from typing import Any

from cheroot.makefile import MakeFile, StreamReader, StreamWriter
from cheroot.server import HTTPConnection, HTTPRequest
from cheroot.ssl import Adapter

from migscope.exporter._http.clientlog import Throttle, peer
from migscope.exporter._http.headers import StrictHeaderReader
from migscope.exporter._http.reader import RequestReader

_log = logging.getLogger(__name__)


class _HeadersWithoutExpect(StrictHeaderReader):
    """The strict header reader, dropping ``Expect`` (answered already by the intake)."""

    def __call__(self, rfile: Any, hdict: Any = None) -> Any:
        fields = super().__call__(rfile, hdict)
        fields.pop(b"Expect", None)
        return fields


_WITHOUT_EXPECT = _HeadersWithoutExpect()


class Request(HTTPRequest):
    """cheroot's request, logging each error it answers (400, 408, 413, 414) in one line."""

    header_reader = StrictHeaderReader()

    def __init__(self, server: Any, conn: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(server, conn, *args, **kwargs)
        if getattr(conn, "continue_sent", False):
            conn.continue_sent = False
            self.header_reader = _WITHOUT_EXPECT

    def simple_response(self, status: Any, msg: str = "") -> None:
        """Log a 4xx/5xx answer in one line, then write it as cheroot does."""
        code = str(status)[:3]
        if code[:1] in ("4", "5"):
            detail = f" ({' '.join(str(msg).split())[:200]})" if msg else ""
            throttle: Throttle | None = getattr(self.server, "answer_log", None)
            warn = throttle.warn if throttle is not None else _log.warning
            warn("answered %s to %s%s", status, peer(self.conn), detail)
        super().simple_response(status, msg)


class Connection(HTTPConnection):
    """A cheroot connection whose requests the intake has read (see the module docstring)."""

    RequestHandlerClass = Request

    def __init__(self, server: Any, sock: socket.socket, makefile: Any = MakeFile) -> None:
        def files(sock: socket.socket, mode: str = "r", bufsize: int = 8192) -> Any:
            return RequestReader(sock, bufsize) if "r" in mode else makefile(sock, mode, bufsize)

        super().__init__(server, sock, files)
        self.tls_ready = not isinstance(sock, ssl.SSLSocket)
        """False until the intake has completed the TLS handshake."""
        self.continue_sent = False
        """The intake answered this request's ``Expect: 100-continue``."""


class TLSAdapter(Adapter):
    """Wraps accepted sockets for TLS without handshaking (see the module docstring).

    It carries a ready :class:`ssl.SSLContext` built from the web-config; cheroot's
    builtin adapter would build its own from file names and cannot set client
    verification or TLS versions.
    """

    def __init__(self, context: ssl.SSLContext) -> None:
        """Use ``context`` for every connection."""
        # Adapter.__init__ only stores file names this adapter does not use.
        self.certificate = self.private_key = self.certificate_chain = None
        self.ciphers = None
        self.private_key_password = None
        self.context = context

    def bind(self, sock: socket.socket) -> socket.socket:
        """Nothing to do at bind time."""
        return sock

    def wrap(self, sock: socket.socket) -> tuple[ssl.SSLSocket, dict[str, str]]:
        """The TLS socket over ``sock``; the intake performs the handshake."""
        wrapped = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, self.get_environ()

    def get_environ(self) -> dict[str, str]:
        """WSGI environ entries for every request on a TLS connection."""
        return {"wsgi.url_scheme": "https", "HTTPS": "on"}

    def makefile(self, sock: socket.socket, mode: str = "r", bufsize: int = -1) -> Any:
        """A buffered stream over ``sock``, as cheroot makes them (Connection reads its own)."""
        if bufsize < 0:
            bufsize = 8192
        return (
            StreamReader(sock, mode, bufsize) if "r" in mode else StreamWriter(sock, mode, bufsize)
        )
