"""An answer read within the size limit and by the deadline, decoded piece by piece.

``response.content`` would hold the whole body in memory, decoded in one go, however large it
is (a 200 MB answer cost 684 MB, and a gzip "bomb" under 1 MB cost 1.66 GB). Here the body is
read as it arrives and decoded in pieces of at most :data:`DECODE_PIECE_BYTES`, with the limit
counted on the decoded bytes, so that an answer past the limit stops at the limit with memory
bounded by it, whatever its compression ratio; between chunks the deadline is checked as well.
gzip and deflate (what the client asks for with ``Accept-Encoding``) are decoded here, with
httpx's rules: a ``deflate`` body may be zlib-wrapped or raw, several encodings are undone in
reverse order, unknown ones are left as they are. An encoding the client did not ask for and
httpx still knows (``br`` or ``zstd`` when their packages are installed) is decoded by httpx,
one network chunk at a time, with the same limit counted.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

import httpx

from migscope.analyzer._intake.prometheus.answers import PrometheusResponseError
from migscope.analyzer._intake.prometheus.deadline import Deadline

DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024
"""The most decoded bytes one answer may have (256 MiB).

A week of 1-minute samples of one series is about 10,000 points, some 300 kB of JSON; the
analyzer's queries, batched by node, stay far below this. An answer past it is a query over far
too many series, or a server that is not a Prometheus API.
"""

DECODE_PIECE_BYTES = 256 * 1024
"""The most bytes one decoding step produces: what a compressed chunk may expand to at once."""

ACCEPT_ENCODING = "gzip, deflate"
"""The encodings the client asks for: the ones decoded here in bounded pieces."""

_DECODED_HERE = frozenset({"gzip", "deflate", "identity"})
_FRAMING = ("content-encoding", "content-length", "transfer-encoding")


def size_text(count: int) -> str:
    """``count`` bytes as a message shows them: ``256 MiB``, ``1.5 KiB``, ``100 bytes``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} bytes"


class _Inflater:
    """One ``gzip`` or ``deflate`` layer, decoded in pieces of at most ``piece`` bytes."""

    def __init__(self, encoding: str, piece: int) -> None:
        self._raw_fallback = encoding == "deflate"  # zlib-wrapped, else raw (as httpx does)
        self._wbits = zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS
        self._inflate = zlib.decompressobj(self._wbits)
        self._piece = piece
        self._started = False

    def _step(self, data: bytes) -> bytes:
        try:
            out = self._inflate.decompress(data, self._piece)
        except zlib.error as exc:
            if not (self._raw_fallback and not self._started):
                raise httpx.DecodingError(str(exc)) from exc
            self._raw_fallback = False
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._step(data)
        self._started = True
        return out

    def pipe(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """The decoded bytes of ``chunks``, in pieces of at most ``piece`` bytes."""
        for chunk in chunks:
            data = chunk
            while True:  # until this chunk is consumed and nothing more is pending
                out = self._step(data)
                if out:
                    yield out
                data = self._inflate.unconsumed_tail
                if not data and len(out) < self._piece:
                    break
        try:
            tail = self._inflate.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(str(exc)) from exc
        if tail:
            yield tail


def _encodings(response: httpx.Response) -> list[str]:
    values = response.headers.get_list("content-encoding", split_commas=True)
    return [value.strip().lower() for value in values if value.strip()]


def _decoded(response: httpx.Response, deadline: Deadline) -> Iterator[bytes]:
    """The body's decoded bytes in bounded pieces, checking ``deadline`` between chunks."""

    def raw() -> Iterator[bytes]:
        for chunk in response.iter_raw():
            if deadline.expired():
                deadline.hit = True
                raise httpx.ReadTimeout("the request's deadline passed", request=response.request)
            yield chunk

    encodings = _encodings(response)
    if not set(encodings) <= _DECODED_HERE:
        # Not asked for, but httpx can decode it: its decoder, one network chunk at a time.
        for chunk in response.iter_bytes():
            if deadline.expired():
                deadline.hit = True
                raise httpx.ReadTimeout("the request's deadline passed", request=response.request)
            yield chunk
        return
    pieces: Iterable[bytes] = raw()
    for encoding in reversed(encodings):
        if encoding != "identity":
            pieces = _Inflater(encoding, DECODE_PIECE_BYTES).pipe(pieces)
    yield from pieces


def _too_large(response: httpx.Response, shown: str, limit: int) -> PrometheusResponseError:
    return PrometheusResponseError(
        f"the answer of {shown} is larger than {size_text(limit)} decoded, the limit of one "
        "response; query a shorter range or fewer series",
        url=shown,
        status_code=response.status_code,
    )


def read_body(
    response: httpx.Response, *, shown: str, limit: int, deadline: Deadline
) -> httpx.Response:
    """Read the streamed ``response`` whole, within ``limit`` decoded bytes and the deadline.

    Args:
        response: An answer from ``httpx.Client.send(..., stream=True)``; closed here.
        shown: The request URL without credentials, for messages.
        limit: The most decoded bytes the body may have.
        deadline: The request's deadline, checked between chunks.

    Returns:
        The same answer with its decoded body in memory (``content``, ``text``), its headers
        less the framing ones (``Content-Encoding``, ``Content-Length``).

    Raises:
        PrometheusResponseError: The body is larger than ``limit`` (reading stops there).
        httpx.ReadTimeout: The deadline passed (``deadline.hit`` is set).
        httpx.HTTPError: The body could not be read or decoded.
    """
    try:
        declared = response.headers.get("content-length", "")
        if not _encodings(response) and declared.isdigit() and int(declared) > limit:
            raise _too_large(response, shown, limit)
        parts: list[bytes] = []
        total = 0
        for piece in _decoded(response, deadline):
            total += len(piece)
            if total > limit:
                raise _too_large(response, shown, limit)
            parts.append(piece)
    finally:
        response.close()
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _FRAMING]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=b"".join(parts),
        request=response.request,
    )
