"""The CSV report: one row per slice, for spreadsheets and ``pandas.read_csv``.

Columns are flat and stable (the JSON report's slice fields, evidence flattened to the
numbers people sort by); unknown numbers are empty cells, never 0.
"""

from __future__ import annotations

import csv
import io

from migscope.analyzer.result import AnalysisResult

__all__ = ["CSV_COLUMNS", "render_csv"]

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
    "reason",
)
"""The CSV header, in order."""


def render_csv(result: AnalysisResult) -> str:
    """One row per slice (history-only slices included, ``current`` says which)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for item in result.slices:
        row = item.to_dict()
        evidence = row["evidence"]
        assert isinstance(evidence, dict)
        merged = {**evidence, **row}
        writer.writerow(["" if merged.get(c) is None else merged.get(c) for c in CSV_COLUMNS])
    return out.getvalue()
