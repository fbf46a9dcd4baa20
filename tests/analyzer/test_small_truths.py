"""Small truths of the report (issue 22, item 8), each reproduced first.

* A snapshot's summary said "over 168 h" and its idle slices "held for 100 % of the window"
  at 0.05 % coverage: they now say how much data they rest on.
* Waste per namespace added the unallocated slices' hours to the idle column.
* ``slices.csv`` had 32 rows for "25 slices": the summary names the history-only ones too.
(The next step's one order for Markdown and HTML is held by test_workloads.py.)
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from migscope.analyzer._analysis import run
from migscope.analyzer._intake.file import FileSource
from migscope.analyzer._intake.simulation import SimulationSource
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._report import build_report, render_csv, render_markdown
from migscope.analyzer._result import AnalysisResult
from migscope.cli._summary import summary_lines

ONCE = Path(__file__).parent.parent / "fixtures" / "migscope" / "sim-h200-node-once.txt"


@pytest.fixture(scope="module")
def demo() -> AnalysisResult:
    return run(SimulationSource(["fleet-mixed", "h200-node"]), AnalyzeOptions())


def test_a_snapshot_says_what_it_covers() -> None:
    result = run(FileSource(str(ONCE)), AnalyzeOptions())
    first = summary_lines(build_report(result))[0]
    assert "over a 168 h window (1 min of data seen)" in first, first
    idle = [s for s in build_report(result).slices if s.status == "idle"]
    assert idle
    assert all("of the 1 min it was seen, but unused" in s.reason for s in idle)
    assert not any("of the window" in s.reason for s in idle)


def test_a_week_says_only_the_window(demo: AnalysisResult) -> None:
    assert " over 168 h: " in summary_lines(build_report(demo))[0]


def test_unallocated_hours_are_not_idle_hours(demo: AnalysisResult) -> None:
    sav = demo.savings
    rows = {r["namespace"]: r for r in sav["by_namespace"]}
    unalloc = rows["(unallocated)"]
    assert unalloc["idle_gpu_hours"] == 0
    assert unalloc["unallocated_gpu_hours"] == pytest.approx(sav["unallocated_gpu_hours"])
    assert sum(r["idle_gpu_hours"] for r in rows.values()) == pytest.approx(
        sav["idle_gpu_hours"], abs=1e-3
    )
    assert sum(r["wasted_gpu_hours"] for r in rows.values()) == pytest.approx(
        sav["wasted_gpu_hours"], abs=1e-3
    )
    md = render_markdown(build_report(demo))
    assert "| namespace | slices | idle GPU-h | unallocated GPU-h | oversized GPU-h |" in md


def test_csv_rows_agree_with_the_summary(demo: AnalysisResult) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(demo))))
    current = sum(1 for r in rows if r["current"] == "True")
    history = len(rows) - current
    assert history > 0, "the demo re-partitions on day 3"
    assert summary_lines(build_report(demo))[0].startswith(
        f"{current} slices (+{history} history-only, in slices.csv) on "
    )
