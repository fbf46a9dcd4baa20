"""The CSV report: one row per slice, for spreadsheets and ``pandas.read_csv``.

Columns are flat and stable (the JSON report's slice fields, evidence flattened to the
numbers people sort by, the node pool and the GPU-hours the slice wasted, as the report's
tables have them); unknown numbers are empty cells, never 0.

Text cells come from Prometheus labels (node, namespace, pod...), which may hold anything,
and a spreadsheet runs a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a CR as a
formula (CSV injection). Such a text cell is written with a ``'`` in front
(:func:`neutralise`), the usual defence, which a spreadsheet shows as text; numbers are
never touched, so ``-0.5`` stays a number. A script reading the CSV sees the ``'``: the JSON
report has the names as they are.
"""

from __future__ import annotations

import csv
import io
from typing import TypeVar

from migscope.analyzer._report.data import build_report
from migscope.analyzer._result import AnalysisResult
from migscope.core import ReportV1, SliceV1

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""First characters a spreadsheet may read as a formula (with their full-width forms, which
some spreadsheets fold to the ASCII ones)."""

_T = TypeVar("_T")

CSV_COLUMNS = (
    "node",
    "gpu",
    "gpu_uuid",
    "gpu_instance_id",
    "model",
    "profile",
    "placement_start",
    "status",
    "confidence",
    "suggested_profile",
    "namespace",
    "pod",
    "current",
    "in_use",
    "demand_profile",
    "coverage",
    "allocated_fraction",
    "activity_p50",
    "activity_p95",
    "activity_max",
    "memory_p95_bytes",
    "memory_peak_bytes",
    "memory_total_bytes",
    "energy_joules",
    "pool",
    "wasted_gpu_hours",
    "reason",
)
"""The CSV header, in order."""


def neutralise(value: _T) -> _T | str:
    """A text cell that a spreadsheet cannot run as a formula; anything else as it is.

    Args:
        value: A cell's value.

    Returns:
        ``'`` + ``value`` for a string starting with one of :data:`FORMULA_STARTS`, else
        ``value`` (numbers, booleans and None unchanged).
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def render_csv(result: AnalysisResult, report: ReportV1 | None = None) -> str:
    r"""One row per slice (history-only slices included, ``current`` says which).

    Args:
        result: The analysis.
        report: Its report (:func:`~.data.build_report`), when the caller has it already
            (else it is built): the rows are its slices, so pool and waste are the report's
            own numbers.

    Text cells are neutralised (:func:`neutralise`). The csv module quotes a cell holding a
    ``\n`` but not one holding a lone ``\r``, which readers take for the end of the row,
    so a row with one has all its text cells quoted.
    """
    if report is None:
        report = build_report(result)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    quoting = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    writer.writerow(CSV_COLUMNS)
    for s in report.slices:
        cells = ["" if (v := _value(s, c)) is None else neutralise(v) for c in CSV_COLUMNS]
        carriage = any(isinstance(c, str) and "\r" in c for c in cells)
        (quoting if carriage else writer).writerow(cells)
    return out.getvalue()


def _value(s: SliceV1, column: str) -> object:
    """The slice's field of that name where the report has it, else its evidence's."""
    if column in s.model_fields_set or column in (s.model_extra or {}):
        return getattr(s, column)
    return getattr(s.evidence, column, None)
