"""Read an API answer within a size limit on its decoded bytes and within the call's timeout.

The official client, asked not to deserialize
(``_preload_content=False``), hands back the urllib3 response, and ``response.data`` reads it
whole, however large, decoded in one go: a broken or hostile API server (or a proxy in front
of it) could make one list cost gigabytes, and a gzip-encoded answer many times its size on
the wire. Here the answer is read in pieces of at most :data:`READ_PIECE_BYTES` decoded bytes
(urllib3 decodes ``Content-Encoding`` piece by piece), counted against the limit as it
arrives, and the call's timeout is checked between pieces, so that an answer sent a byte at
a time ends too.

What this does not cover: an error status (4xx/5xx) is read by the official client itself to
build its ``ApiException``, and a watch stream by its line reader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from urllib3.exceptions import HTTPError

from migscope.core import UserError, one_line

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The most decoded bytes one answer may have (64 MiB).

The largest answers migscope reads are pages of 500 pods (a few MiB for big pod specs) and a
node list; etcd refuses objects over 1.5 MiB. An answer past 64 MiB is not one of them.
"""

READ_PIECE_BYTES = 256 * 1024
"""The most decoded bytes one read returns."""


def _mib(count: int) -> str:
    return f"{count / (1 << 20):g} MiB" if count >= 1 << 20 else f"{count} bytes"


def read_answer(
    response: Any,
    *,
    what: str,
    limit: int,
    timeout_s: float,
    started: float,
    error: Callable[[str], UserError],
    clock: Callable[[], float] = time.monotonic,
) -> bytes:
    """The decoded body of a urllib3 ``response``, read within ``limit`` and the timeout.

    Args:
        response: What the official client returns with ``_preload_content=False``.
        what: The call, for messages (``listing pods``).
        limit: The most decoded bytes the body may have.
        timeout_s: The call's timeout; the body must be in by ``started + timeout_s``.
        started: When the call started, on ``clock``.
        error: Builds the error to raise from its message (the client's ``ApiError``).
        clock: Monotonic seconds.

    Raises:
        UserError: From ``error``: the body is larger than ``limit``, it was not in by the
            deadline, or it could not be read.
    """
    parts: list[bytes] = []
    total = 0
    complete = False
    try:
        while True:
            if clock() - started > timeout_s:
                raise error(f"{what}: the answer was not complete within {timeout_s:g} s")
            piece = response.read1(READ_PIECE_BYTES, decode_content=True)
            if not piece:
                complete = True
                break
            total += len(piece)
            if total > limit:
                raise error(
                    f"{what}: the answer is larger than {_mib(limit)} decoded, the limit of "
                    "one answer"
                )
            parts.append(piece)
    except (HTTPError, OSError) as exc:
        raise error(f"{what}: {one_line(exc)}") from exc
    finally:
        if not complete:
            response.close()  # unread bytes left: the connection cannot be reused
        response.release_conn()
    return b"".join(parts)


def read_json(
    response: Any,
    *,
    what: str,
    limit: int,
    timeout_s: float,
    started: float,
    error: Callable[[str], UserError],
) -> dict[str, Any]:
    """:func:`read_answer`, parsed as the JSON object the API answers with.

    Raises:
        UserError: From ``error``: see :func:`read_answer`, or the body is not a JSON object.
    """
    body = read_answer(
        response, what=what, limit=limit, timeout_s=timeout_s, started=started, error=error
    )
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise error(f"{what}: the answer is not JSON ({one_line(exc)})") from exc
    if not isinstance(data, dict):
        raise error(f"{what}: the answer is JSON but not an object")
    return data
