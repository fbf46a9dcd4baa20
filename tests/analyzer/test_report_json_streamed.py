"""report.json at fleet scale: written piece by piece, hourly buckets to 6 decimals.

Why: at 10,000 slices the JSON report was 97 MB and building it as one string took half of a
run's peak memory (docs/analyzer-benchmark.md); the file must stay the same JSON whichever
way it is written, and the rounding must stay far below anything the report decides.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from support.planted_fleet import planted_fleet

from migscope.analyzer._report import (
    build_report,
    json_text,
    validate_report,
    write_report,
    write_reports,
)
from migscope.core._spec.v1 import report_json


def test_the_streamed_json_is_the_text_byte_for_byte(tmp_path: Path) -> None:
    result = planted_fleet(60, seed=5)
    report = build_report(result)
    stream = io.StringIO()
    write_report(result, "json", stream, report=report)
    assert stream.getvalue() == json_text(report)
    written = write_reports(result, tmp_path, formats=("json",))
    assert written["json"].read_text(encoding="utf-8") == json_text(report)
    validate_report(json.loads(stream.getvalue()))


def test_hourly_buckets_are_rounded_to_six_decimals() -> None:
    result = planted_fleet(60, seed=5)
    data = report_json(build_report(result))
    by_key = {
        (s.stats.info.key.node, s.stats.info.key.gpu, s.stats.info.key.gpu_instance_id): s
        for s in result.slices
    }
    checked = 0
    for row in data["slices"]:
        stats = by_key[(row["node"], row["gpu"], row["gpu_instance_id"])].stats
        if row["hourly"] is None:
            assert stats.hourly is None
            continue
        assert stats.hourly is not None
        for got, want in [
            *zip(row["hourly"]["activity"], stats.hourly.activity, strict=True),
            *zip(row["hourly"]["allocated"], stats.hourly.allocated, strict=True),
        ]:
            if want is None or not math.isfinite(want):
                assert got is None
                continue
            assert got == round(want, 6)
            assert abs(got - want) <= 5e-7
            checked += 1
    assert checked > 60 * 100  # most slices have a week of buckets
