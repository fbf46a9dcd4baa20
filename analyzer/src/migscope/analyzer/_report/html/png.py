"""Heatmaps as small palette PNGs: one pixel per cell, scaled up by the browser.

Why images and not one SVG ``<rect>`` per cell: a week of hourly cells is 168 elements per
slice, which made the report 33 KB per slice and a 5,000-slice page take minutes in a
browser. A palette PNG stores a cell in one byte before zlib, so a node's week is a few
hundred bytes, and the browser draws it as one image (``image-rendering: pixelated`` keeps
the cells sharp). The Content-Security-Policy allows ``data:`` images and nothing else.

Values are 0..1 and drawn in :data:`LEVELS` + 1 steps of a colour scale; :data:`UNKNOWN`
(no data) is grey and :data:`EMPTY` (no such cell: a node with fewer slices) is white. A
scale's colours are linear in each channel of ``value ** gamma``: activity uses the square
root (gamma 0.5), so that the little work that tells a slice from an idle one (5 % is the
idle threshold) shows as a visible tint rather than as white. The page's script reads a
cell's value back from its colour for the tooltip (``scripts.py``).
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

LEVELS = 200
"""Steps of a scale: index ``round(v * LEVELS)`` for a value ``v`` in 0..1."""
UNKNOWN = 255
"""Palette index of a cell without data (grey)."""
EMPTY = 254
"""Palette index of a cell that does not exist (white)."""


@dataclass(frozen=True)
class Scale:
    """A colour scale: the colour of 0 and of 1, linear in between in ``value ** gamma``."""

    low: tuple[int, int, int]
    high: tuple[int, int, int]
    gamma: float = 1.0


ACTIVITY_SCALE = Scale((247, 251, 255), (8, 48, 107), gamma=0.5)
"""Activity: white to dark blue, square root (5 % is a fifth of the way)."""
MEMORY_SCALE = Scale((255, 247, 236), (127, 39, 4))
"""Memory held: cream to dark brown, linear."""
_UNKNOWN_RGB = (224, 224, 224)
_EMPTY_RGB = (255, 255, 255)


def colour(scale: Scale, position: float | None) -> tuple[int, int, int]:
    """The colour at ``position`` (0..1, clamped) along ``scale``; grey for None."""
    if position is None:
        return _UNKNOWN_RGB
    t = min(max(position, 0.0), 1.0)
    r, g, b = (round(a + (z - a) * t) for a, z in zip(scale.low, scale.high, strict=True))
    return (r, g, b)


def level(scale: Scale, value: float | None) -> int:
    """The palette index of ``value`` on ``scale``: ``round(value ** gamma * LEVELS)``."""
    if value is None or value != value:  # None or NaN
        return UNKNOWN
    return round(float(min(max(value, 0.0), 1.0) ** scale.gamma) * LEVELS)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def heat_png(rows: Sequence[Sequence[float | None]], width: int, scale: Scale) -> bytes:
    """A PNG of ``rows`` (one pixel per value; short rows padded with empty cells).

    Args:
        rows: One sequence of 0..1 values (None: unknown) per image row.
        width: Columns of the image (at least 1).
        scale: The colour scale.

    Returns:
        The PNG file (8-bit palette, zlib level 9).
    """
    width = max(1, width)
    palette = bytearray()
    for i in range(256):
        if i <= LEVELS:
            palette += bytes(colour(scale, i / LEVELS))
        elif i == UNKNOWN:
            palette += bytes(_UNKNOWN_RGB)
        else:
            palette += bytes(_EMPTY_RGB)
    raw = bytearray()
    pad = bytes([EMPTY]) * width
    for row in rows or [[]]:
        cells = bytes(level(scale, v) for v in row[:width])
        raw += b"\x00" + cells + pad[len(cells) :]
    header = struct.pack(">IIBBBBB", width, max(1, len(rows)), 8, 3, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"PLTE", bytes(palette))
        + _chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + _chunk(b"IEND", b"")
    )


def png_data_uri(png: bytes) -> str:
    """The PNG as a ``data:`` URI for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
