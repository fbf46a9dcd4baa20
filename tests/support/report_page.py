"""Read the HTML report back: its tables, its heatmaps' pixels, its links.

Why a reader: the report's tests compare what the page shows with report.json, so they
need the page's tables as rows of text and its heatmaps as values. The page is parsed with
the standard library's HTML parser (entities decoded, as a browser would) and the heatmap
PNGs are decoded here (8-bit palette, filter 0 on every row: what
``migscope.analyzer._report.html.png`` writes).
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass, field
from html.parser import HTMLParser

__all__ = ["Grid", "Page", "Table", "decode_png", "parse_page"]


def decode_png(uri: str) -> tuple[int, int, list[list[int]], list[tuple[int, int, int]]]:
    """``(width, height, palette index rows, palette)`` of a ``data:image/png`` URI."""
    prefix = "data:image/png;base64,"
    assert uri.startswith(prefix), uri[:40]
    data = base64.b64decode(uri[len(prefix) :])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, palette, width, height = 8, b"", [], 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 3)
        elif kind == b"PLTE":
            palette = [tuple(body[i : i + 3]) for i in range(0, len(body), 3)]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    rows = []
    for r in range(height):
        line = raw[r * (width + 1) : (r + 1) * (width + 1)]
        assert line[0] == 0, "filter 0"
        rows.append(list(line[1:]))
    return width, height, rows, palette  # type: ignore[return-value]


@dataclass
class Table:
    """A table: its id, column titles, header attributes and rows of cell text."""

    id: str
    titles: list[str] = field(default_factory=list)
    header_attrs: list[dict[str, str | None]] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    sort_values: list[list[str | None]] = field(default_factory=list)

    def column(self, title: str) -> list[str]:
        """The text of every row in the column titled ``title``."""
        i = self.titles.index(title)
        return [row[i] for row in self.rows]


@dataclass
class Grid:
    """A heatmap grid: its attributes, its row labels and its two images."""

    attrs: dict[str, str | None]
    labels: list[str] = field(default_factory=list)
    label_titles: list[str | None] = field(default_factory=list)
    activity: str = ""
    memory: str = ""
    node: str | None = None
    """The node whose drill-down holds this grid (None: a pool's grid of nodes)."""


@dataclass
class Page:
    """What the tests read from a page."""

    tables: dict[str, Table] = field(default_factory=dict)
    grids: list[Grid] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    text_by_id: dict[str, str] = field(default_factory=dict)
    details_ids: list[str] = field(default_factory=list)


_VOID = frozenset({"area", "base", "br", "col", "hr", "img", "input", "link", "meta", "wbr"})
"""HTML elements without an end tag."""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._table: Table | None = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._row_values: list[str | None] | None = None
        self._in_head = False
        self._grid: Grid | None = None
        self._in_labels = 0
        self._label: list[str] | None = None
        self._ids: list[tuple[str, str, int]] = []  # (id, tag, depth)
        self._texts: dict[str, list[str]] = {}
        self._depth = 0
        self._summary_node: str | None = None
        self._in_summary_b = False
        self._current_node: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag not in _VOID:
            self._depth += 1
        if a.get("id") and tag not in ("img",):
            self._ids.append((str(a["id"]), tag, self._depth))
            self._texts[str(a["id"])] = []
        if tag == "a" and a.get("href"):
            self.page.links.append(str(a["href"]))
        if tag == "details":
            self.page.details_ids.append(str(a.get("id")))
            if "node" in (a.get("class") or "").split():
                self._current_node = ""
        if tag == "b" and self._current_node == "" and self._summary_node is None:
            self._in_summary_b = True
            self._summary_node = ""
        if tag == "table":
            self._table = Table(str(a.get("id")))
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr" and self._table is not None:
            self._row, self._row_values = [], []
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
            if tag == "th" and self._in_head:
                self._table.header_attrs.append(a)
            elif self._row_values is not None:
                self._row_values.append(a.get("data-v"))
        elif tag == "div" and "hm" in (a.get("class") or "").split():
            self._grid = Grid(a, node=self._current_node or None)
        elif tag == "div" and a.get("class") == "hl" and self._grid is not None:
            self._in_labels = self._depth
        elif tag == "div" and self._in_labels and self._depth == self._in_labels + 1:
            self._label = []
            assert self._grid is not None
            self._grid.label_titles.append(a.get("title"))
        elif tag == "img" and self._grid is not None:
            classes = (a.get("class") or "").split()
            if "act" in classes:
                self._grid.activity = str(a.get("src"))
            elif "mem" in classes:
                self._grid.memory = str(a.get("src"))
                self.page.grids.append(self._grid)
                self._grid = None

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            text = "".join(self._cell).strip()
            if self._in_head:
                self._table.titles.append(text)
            elif self._row is not None:
                self._row.append(text)
            self._cell = None
        elif tag == "thead":
            self._in_head = False
        elif tag == "tr" and self._table is not None and self._row is not None:
            if self._row and not self._in_head:
                self._table.rows.append(self._row)
                self._table.sort_values.append(self._row_values or [])
            self._row = None
        elif tag == "table" and self._table is not None:
            self.page.tables[self._table.id] = self._table
            self._table = None
        elif tag == "b" and self._in_summary_b:
            self._in_summary_b = False
            self._current_node = self._summary_node
            self._summary_node = None
        elif tag == "details":
            self._current_node = None
        if tag == "div" and self._label is not None and self._grid is not None:
            self._grid.labels.append("".join(self._label).strip())
            self._label = None
        elif tag == "div" and self._in_labels and self._depth == self._in_labels:
            self._in_labels = 0
        while self._ids and self._ids[-1][2] == self._depth and self._ids[-1][1] == tag:
            ident, _, _ = self._ids.pop()
            self.page.text_by_id[ident] = "".join(self._texts.pop(ident, []))
        if tag not in _VOID:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._label is not None:
            self._label.append(data)
        if self._in_summary_b and self._summary_node is not None:
            self._summary_node += data
        for ident, _, _ in self._ids:
            self._texts[ident].append(data)


def parse_page(html_text: str) -> Page:
    """The tables, heatmap grids, links and element texts (by id) of a report page."""
    parser = _Parser()
    parser.feed(html_text)
    parser.close()
    return parser.page
