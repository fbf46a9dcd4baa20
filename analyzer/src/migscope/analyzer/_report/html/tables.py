"""The HTML report's tables: sortable, groupable, and the same markup for every one of them.

Why one builder: each table (idle and unallocated slices, mis-sized slices, every slice,
waste per namespace, pools, replay) sorts by a click on a column and groups by a column
(node pool, namespace, status, node) with the group's total of wasted GPU-hours, through
the page's one small script (:mod:`.scripts`); without script they read as plain tables,
already in the order that matters (most waste first).

Markup the script relies on (and the tests check): ``<table class="sortable">`` with a
``<thead>`` whose ``<th>`` carry ``data-type="num"`` for numbers and ``data-sum`` on the
column a group adds up; a ``<td data-v>`` holds the value to sort by where the text is not
it ("12.0 GiB (37%)"); a ``<select class="group-by" data-table="<id>">`` lists the
columns to group by as their index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from migscope.analyzer._judge.claims import resize_text
from migscope.analyzer._report.html.format import (
    badge,
    escape,
    gib,
    hours,
    money,
    number,
    owner_text,
    pct,
)
from migscope.core import SliceV1

Cell = str | tuple[str, float | str]
"""A cell: its HTML, or its HTML and the value it sorts by."""


@dataclass(frozen=True)
class Column:
    """A column: its title, whether it sorts as a number, and whether groups sum it."""

    title: str
    numeric: bool = False
    sums: bool = False
    group: str | None = None
    """Offer grouping by this column, under this name."""


def _td(cell: Cell) -> str:
    if isinstance(cell, tuple):
        html_text, value = cell
        sort = f"{value:.6g}" if isinstance(value, float) else escape(value)
        return f'<td data-v="{sort}">{html_text}</td>'
    return f"<td>{cell}</td>"


def sortable_table(
    table_id: str,
    columns: Sequence[Column],
    rows: Iterable[Sequence[Cell]],
    *,
    empty: str = "<p>None found.</p>",
    filter_box: bool = False,
) -> str:
    """A sortable (and, where a column offers it, groupable) table.

    Args:
        table_id: The ``id`` of the table (fixed text, not user input).
        columns: The columns.
        rows: One sequence of cells per row, HTML already escaped.
        empty: What to show when there are no rows.
        filter_box: Add a text box that hides the rows not containing its text.

    Returns:
        HTML: the tools line (group by, filter) and the table.
    """
    body = ["<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in rows]
    if not body:
        return empty
    groups = [(i, c.group) for i, c in enumerate(columns) if c.group is not None]
    tools = []
    if groups:
        options = "".join(f'<option value="{i}">{escape(name)}</option>' for i, name in groups)
        tools.append(
            f'<label>Group by <select class="group-by" data-table="{table_id}">'
            f'<option value="">nothing</option>{options}</select></label>'
        )
    if filter_box:
        tools.append(
            f'<label>Find <input class="filter" data-table="{table_id}" type="search" '
            'placeholder="node, namespace, pod, profile…"></label>'
        )
    head = "".join(
        "<th"
        + (' data-type="num"' if c.numeric else "")
        + (" data-sum" if c.sums else "")
        + f">{escape(c.title)}</th>"
        for c in columns
    )
    out = []
    if tools:
        out.append(f'<div class="tools">{" ".join(tools)}</div>')
    out.append(
        f'<div class="scroll"><table id="{table_id}" class="sortable"><thead><tr>{head}</tr>'
        "</thead><tbody>" + "\n".join(body) + "</tbody></table></div>"
    )
    return "\n".join(out)


def _memory_cell(s: SliceV1) -> Cell:
    used = number(s.evidence.memory_p95_bytes)
    total = number(s.evidence.memory_total_bytes)
    if used is None:
        return ("n/a", -1.0)
    share = f" ({used / total * 100:.0f}%)" if total else ""
    return (f"{gib(used)}{share}", used)


def _wasted_cell(s: SliceV1) -> Cell:
    return hours(s.wasted_gpu_hours) if s.wasted_gpu_hours is not None else ("n/a", -1.0)


def _namespace(s: SliceV1) -> str:
    return s.namespace if s.namespace is not None else "(unallocated)"


_ID_COLUMNS = (
    Column("pool", group="node pool"),
    Column("node", group="node"),
    Column("GPU", numeric=True),
    Column("GI", numeric=True),
    Column("profile", group="profile"),
    Column("status", group="status"),
    Column("namespace", group="namespace"),
    Column("held by"),
)


def _id_cells(s: SliceV1) -> list[Cell]:
    return [
        escape(s.pool or "—"),
        escape(s.node),
        str(s.gpu),
        str(s.gpu_instance_id),
        escape(s.profile),
        (badge(s.status), s.status),
        escape(_namespace(s)),
        escape(owner_text(s)),
    ]


def _by_waste(slices: Iterable[SliceV1]) -> list[SliceV1]:
    """Most wasted GPU-hours first (the input order breaks ties)."""
    return sorted(slices, key=lambda s: -(s.wasted_gpu_hours or 0.0))


def idle_table(slices: Sequence[SliceV1], *, price: float | None) -> str:
    """The idle and unallocated ones of ``slices``: the capacity to give back today.

    Args:
        slices: The current slices.
        price: Price per GPU-hour, for a cost column (None: no column).

    Returns:
        HTML: ``<table id="idle-slices">``, or a sentence when there are none.
    """
    rows = _by_waste(s for s in slices if s.status in ("idle", "unallocated"))
    columns = [
        *_ID_COLUMNS,
        Column("p95 activity", numeric=True),
        Column("p95 memory", numeric=True),
        Column("wasted GPU-h", numeric=True, sums=True),
    ]
    if price is not None:
        columns.append(Column("cost", numeric=True))
    columns += [Column("confidence", numeric=True), Column("why")]

    def cells(s: SliceV1) -> list[Cell]:
        out: list[Cell] = [
            *_id_cells(s),
            pct(s.evidence.activity_p95),
            _memory_cell(s),
            _wasted_cell(s),
        ]
        if price is not None:
            out.append(money((s.wasted_gpu_hours or 0.0) * price))
        return [*out, f"{s.confidence:.2f}", escape(s.reason)]

    return sortable_table("idle-slices", columns, (cells(s) for s in rows))


def mis_sized_table(slices: Sequence[SliceV1]) -> str:
    """The oversized and saturated ones of ``slices``, with the profile that fits.

    Returns:
        HTML: ``<table id="mis-sized">``, or a sentence when there are none.
    """
    rows = _by_waste(s for s in slices if s.status in ("oversized", "saturated"))
    columns = [
        *_ID_COLUMNS,
        Column("right size"),
        Column("p95 activity", numeric=True),
        Column("p95 memory", numeric=True),
        Column("wasted GPU-h", numeric=True, sums=True),
        Column("why"),
    ]
    return sortable_table(
        "mis-sized",
        columns,
        (
            [
                *_id_cells(s),
                escape(s.demand_profile or s.suggested_profile or "—"),
                pct(s.evidence.activity_p95),
                _memory_cell(s),
                _wasted_cell(s),
                escape(s.reason) + (f"<br>{escape(advice)}" if (advice := resize_text(s)) else ""),
            ]
            for s in rows
        ),
    )


def all_slices_table(slices: Sequence[SliceV1]) -> str:
    """Every current slice, most waste first, with a find box.

    Returns:
        HTML: ``<table id="all-slices">``, or a sentence when there are none.
    """
    columns = [
        *_ID_COLUMNS,
        Column("p95 activity", numeric=True),
        Column("max activity", numeric=True),
        Column("p95 memory", numeric=True),
        Column("coverage", numeric=True),
        Column("wasted GPU-h", numeric=True, sums=True),
        Column("confidence", numeric=True),
    ]
    return sortable_table(
        "all-slices",
        columns,
        (
            [
                *_id_cells(s),
                pct(s.evidence.activity_p95),
                pct(s.evidence.activity_max),
                _memory_cell(s),
                pct(s.evidence.coverage),
                _wasted_cell(s),
                f"{s.confidence:.2f}",
            ]
            for s in _by_waste(slices)
        ),
        empty="<p>No current slices.</p>",
        filter_box=True,
    )
