"""Names from the cluster cannot break the Markdown tables or run as CSV formulas (issue 12).

Node, namespace and pod names reach the reports from Prometheus labels, which may hold any
text. A ``|`` or a newline in one broke the Markdown tables (a row split into extra columns,
or into two lines); a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a CR ran as a
formula when ``slices.csv`` was opened in a spreadsheet (CSV injection). The analysis runs
the real pipeline on slices whose names are hostile.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re

import pytest
from support.planted_slices import WEEK, planted_week

from migscope.analyzer._model import Owner, SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import (
    CSV_COLUMNS,
    build_report,
    render_csv,
    render_markdown,
    validate_report,
)
from migscope.analyzer._result import AnalysisResult
from migscope.core._catalogue import find_model
from migscope.core._layout import is_valid
from migscope.core._spec.v1 import report_json

H200 = find_model("H200-141GB")
BALANCED = {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
NODE = "gpu|a\nb\r\nc"
"""The node the plan changes: a pipe, a newline and a CRLF in its name."""
HOSTILE = [
    ("=cmd|' /C calc'!A0", '=HYPERLINK("http://evil")'),
    ("+team", "@SUM(1+1)"),
    ("-team", "\tpod"),
    ("\rteam", "pod|with|pipes"),
    ("team\nline", "pod\\|escaped"),
]
"""(namespace, pod) of the idle slices."""
_LINES = re.compile(r"\r\n|\r|\n")


def _result() -> AnalysisResult:
    placed = is_valid(H200, BALANCED).placements
    slices: list[SliceStats] = []
    for gpu in (0, 1):
        for gi, p in enumerate(placed):
            role = "unallocated" if gpu == 1 else "busy"
            stats = planted_week(H200, NODE, gpu, gi + 1, p.profile.name, p.start, role)[0]
            slices.append(stats)
    for k, (namespace, pod) in enumerate(HOSTILE):
        p = placed[k % len(placed)]
        stats = planted_week(H200, f"other-{k}", 0, k + 1, p.profile.name, p.start, "idle")[0]
        slices.append(dataclasses.replace(stats, owners=(Owner(namespace, pod, 1.0),)))
    options = AnalyzeOptions(time_limit_s=2.0, headroom=0.0)
    return analyze(slices, window=(0.0, WEEK), options=options)


@pytest.fixture(scope="module")
def result() -> AnalysisResult:
    return _result()


def _cells(row: str) -> list[str]:
    """A GFM table row split at its unescaped pipes (a backslash escapes the next character)."""
    cells, cell, chars = [], "", iter(row.strip())
    for ch in chars:
        if ch == "\\":
            cell += ch + next(chars, "")
        elif ch == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += ch
    cells.append(cell)
    return cells[1:-1]  # the row starts and ends with a pipe


def _unescaped(cell: str) -> str:
    out, chars = "", iter(cell)
    for ch in chars:
        out += next(chars, "") if ch == "\\" else ch
    return out


def _tables(markdown: str) -> list[list[str]]:
    tables: list[list[str]] = []
    current: list[str] = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def test_markdown_rows_keep_their_columns(result: AnalysisResult) -> None:
    md = render_markdown(build_report(result))
    tables = _tables(md)
    assert tables
    for table in tables:
        width = len(_cells(table[0]))
        for row in table:
            assert len(_cells(row)) == width, row


def test_markdown_names_are_on_one_line_and_read_back(result: AnalysisResult) -> None:
    md = render_markdown(build_report(result))
    # Every line break of a name became a space: no line starts with a name's remainder.
    lines = md.splitlines()
    assert "b" not in lines
    assert not any(line.startswith(("c |", "line/", "team/")) for line in lines)
    held_by = {
        _unescaped(_cells(row)[4]).strip()
        for table in _tables(md)
        if "held by" in table[0] and "reason" not in table[0]
        for row in table[2:]
    }
    expected = {f"{ns}/{pod}" for ns, pod in HOSTILE}
    flat = {" ".join(_LINES.split(text)).strip() for text in expected}
    assert flat <= held_by
    nodes = {_unescaped(_cells(row)[0]).strip() for table in _tables(md) for row in table[2:]}
    assert "gpu|a b c" in nodes


def test_the_recommendation_heading_is_one_line(result: AnalysisResult) -> None:
    data = report_json(build_report(result))
    assert NODE in [r["node"] for r in data["recommendations"]]
    md = render_markdown(validate_report(data))
    headings = [line for line in md.splitlines() if line.startswith("### ")]
    assert len(headings) == len(data["recommendations"])
    assert any(h.startswith("### gpu\\|a b c → `migscope-") for h in headings), headings


def test_csv_text_cells_cannot_start_a_formula(result: AnalysisResult) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(result), newline="")))
    assert len(rows) == len(result.slices)
    for row in rows:
        for column in ("node", "namespace", "pod"):
            value = row[column]
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (column, value)
    by_pod = {row["pod"]: row for row in rows if row["pod"]}
    for namespace, pod in HOSTILE:
        key = f"'{pod}" if pod[0] in "=+-@\t\r" else pod
        row = by_pod[key]
        assert row["namespace"] == (f"'{namespace}" if namespace[0] in "=+-@\t\r" else namespace)


def test_csv_numbers_stay_numbers(result: AnalysisResult) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(result), newline="")))
    numeric = ("gpu", "gpu_instance_id", "placement_start", "confidence", "coverage")
    for row in rows:
        for column in numeric:
            float(row[column])  # not "'0"
    assert list(rows[0]) == list(CSV_COLUMNS)


def test_a_negative_number_is_not_quoted() -> None:
    """Only text is neutralised: a number below zero is a number, not a formula."""
    from migscope.analyzer._report.csv_report import neutralise

    assert neutralise(-1.5) == -1.5
    assert neutralise("-1.5") == "'-1.5"
    assert neutralise("gpu-a") == "gpu-a"
    assert neutralise(None) is None
