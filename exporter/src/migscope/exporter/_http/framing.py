"""Where a request ends in the bytes received so far, so that a worker gets it whole.

The exporter reads each request off the worker threads (see :mod:`.intake`) and hands a
connection to a worker only when the worker can parse it and answer without waiting on the
client again. :class:`RequestFrame` decides when that is, reading the bytes as cheroot will:

* the head (request line and headers) has ended with an empty line, and a
  ``Content-Length`` body of at most the body limit has fully arrived (cheroot reads such a
  body, to keep the connection, even when the application ignores it);
* or cheroot can already answer an error without reading more: a line ending in a bare LF
  (400), a second empty line before the request line (400), a head past the size limit
  (413/414), a malformed header or ``Content-Length`` (400), a body over the limit (413).

A chunked body is not waited for: the exporter's application never reads one and cheroot
does not drain it, and an embedding application that reads it does so under the same
request deadline (:class:`.reader.RequestClock`). Headers are parsed by the worker's own
reader (:class:`.headers.StrictHeaderReader`), so ``Content-Length`` and ``Expect`` mean
exactly what they will mean to the worker, and a head it refuses (a folded line, a control
character) is handed over at once for its 400.
"""

from __future__ import annotations

import io

from migscope.exporter._http.headers import StrictHeaderReader

# Bytes past the header limit after which cheroot has certainly raised its size error: it
# reads lines 256 bytes at a time and checks the total after each read.
_SIZE_SLACK = 1024
_CR = 0x0D
_READ_HEADERS = StrictHeaderReader()


class RequestFrame:
    """Incremental scan of one request's bytes; :meth:`ready` says when to hand it over.

    Feed the whole buffer of the request each time (it only grows); lines already scanned
    are not scanned again.
    """

    def __init__(self, *, max_head: int, max_body: int) -> None:
        """Scan a new request.

        Args:
            max_head: The server's limit on request line plus headers, in bytes.
            max_body: The server's limit on a request body, in bytes.
        """
        self._max_head = max_head
        self._max_body = max_body
        self._line_start = 0
        self._headers_start: int | None = None
        self._skipped_empty_line = False
        self._total: int | None = None
        self.head_end: int | None = None
        """Offset just past the empty line that ends the head, once seen."""
        self.expect_continue = False
        """The head asked for ``100 Continue`` before it sends its body."""
        self.fields: dict[bytes, bytes] | None = None
        """The head's header fields as the worker will read them, once the head has ended
        (None if the worker will refuse them)."""

    def ready(self, buf: bytes | bytearray) -> bool:
        """Whether ``buf`` holds the whole request, or enough for cheroot's error answer."""
        if self._total is not None:
            return len(buf) >= self._total
        while (nl := buf.find(b"\n", self._line_start)) >= 0:
            start, self._line_start = self._line_start, nl + 1
            if nl == start or buf[nl - 1] != _CR:
                return True  # bare LF: cheroot answers 400 "HTTP requires CRLF terminators"
            if nl - start > 1:
                if self._headers_start is None:
                    self._headers_start = nl + 1  # that was the request line
                continue
            if self._headers_start is None:  # an empty line before the request line
                if self._skipped_empty_line:
                    return True  # cheroot skips one, then answers 400
                self._skipped_empty_line = True
                continue
            self.head_end = nl + 1
            self._total = self._request_length(bytes(buf[self._headers_start : self.head_end]))
            return len(buf) >= self._total
        return len(buf) > self._max_head + _SIZE_SLACK

    def body_pending(self, received: int) -> bool:
        """Whether the head is complete and its body has not fully arrived yet."""
        return self._total is not None and received < self._total

    def _request_length(self, headers: bytes) -> int:
        """Head plus the body the worker will read, or just the head when it will not wait."""
        assert self.head_end is not None
        try:
            fields = _READ_HEADERS(io.BytesIO(headers))
            length = int(fields.get(b"Content-Length", 0))
        except ValueError:
            return self.head_end  # cheroot answers 400 from the head alone
        self.fields = fields
        if length <= 0 or length > self._max_body:
            return self.head_end  # no body to drain, or 413 without reading it
        self.expect_continue = fields.get(b"Expect", b"") == b"100-continue"
        return self.head_end + length
