"""Decode a kubelet ``List`` answer one pod at a time instead of all at once.

Decoding a whole ``ListPodResourcesResponse`` costs about 7 times its size on the wire when it
is made of many small messages (protobuf's upb keeps every pod, container and device entry
of the answer in one arena until the answer is dropped): 58 MiB for an 8 MiB answer, and the
process's memory stays that high afterwards. The answer has one field, ``pod_resources = 1``,
a repeated message, so the watcher walks the answer's top level by hand and decodes each
``PodResources`` on its own: only one pod is decoded at any time, next to the answer's bytes.

Other top-level fields (a later kubelet may add some) are skipped by their wire type, as
protobuf itself skips unknown fields.
"""

from __future__ import annotations

from collections.abc import Iterator

from migscope.core import MigscopeError

from . import api_pb2

_POD_RESOURCES = 1  # ListPodResourcesResponse.pod_resources
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


class WireError(MigscopeError, ValueError):
    """The answer is not a well-formed protobuf message."""


def _varint(data: memoryview, i: int) -> tuple[int, int]:
    """The varint at ``data[i]`` and the offset after it."""
    value = shift = 0
    while shift < 64:
        if i >= len(data):
            raise WireError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
    raise WireError("varint longer than 10 bytes")


def iter_pods(answer: bytes) -> Iterator[api_pb2.PodResources]:
    """Each ``PodResources`` of a serialized ``ListPodResourcesResponse``, decoded in turn.

    Yields the same messages, in the same order, as
    ``ListPodResourcesResponse.FromString(answer).pod_resources``.

    Raises:
        WireError: The bytes are not a well-formed message (truncated, a group or an unknown
            wire type, or a length past the end).
        google.protobuf.message.DecodeError: A pod's own bytes do not decode.
    """
    data = memoryview(answer)
    i, end = 0, len(data)
    while i < end:
        tag, i = _varint(data, i)
        kind = tag & 7
        if kind == _LEN:
            length, i = _varint(data, i)
            if i + length > end:
                raise WireError("field length past the end of the answer")
            if tag >> 3 == _POD_RESOURCES:
                yield api_pb2.PodResources.FromString(bytes(data[i : i + length]))
            i += length
        elif kind == _VARINT:
            _, i = _varint(data, i)
        elif kind == _FIXED64:
            i += 8
        elif kind == _FIXED32:
            i += 4
        else:
            raise WireError(f"unsupported wire type {kind}")
        if i > end:
            raise WireError("field past the end of the answer")
