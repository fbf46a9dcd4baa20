"""slices.csv carries the report's node pool and wasted GPU-hours per slice.

Why: the CSV is what a platform team sorts and pivots in a spreadsheet ("who wastes most, in
which pool"); its numbers must be the report's own, so that the column adds up to the
headline the HTML and Markdown reports print.
"""

from __future__ import annotations

import csv
import io
import math

from support.planted_fleet import planted_fleet

from migscope.analyzer._report import build_report, render, render_csv
from migscope.core._spec.v1 import report_json


def test_pool_and_waste_columns_are_the_reports_and_add_up_to_the_headline() -> None:
    result = planted_fleet(120, seed=6)
    report = build_report(result)
    data = report_json(report)
    rows = list(csv.DictReader(io.StringIO(render_csv(result), newline="")))
    assert len(rows) == len(data["slices"])
    for row, entry in zip(rows, data["slices"], strict=True):
        assert (row["node"], int(row["gpu"]), int(row["gpu_instance_id"])) == (
            entry["node"],
            entry["gpu"],
            entry["gpu_instance_id"],
        )
        assert row["pool"] == (entry["pool"] or "")
        assert float(row["wasted_gpu_hours"]) == entry["wasted_gpu_hours"]
    total = sum(float(r["wasted_gpu_hours"]) for r in rows)
    headline = data["savings"]["wasted_gpu_hours"]
    assert headline > 0
    assert math.isclose(total, headline, abs_tol=0.0001 * len(rows) + 0.05)
    assert any(r["pool"] for r in rows)
    assert render(result, "csv") == render_csv(result, report)
