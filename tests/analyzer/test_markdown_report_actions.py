"""The Markdown report leads to the same action as the HTML one: next step, Grafana, trend.

A CronJob's Markdown report is what reaches a chat channel or a ticket; it must say what to
do next with the same commands as the page (both come from ``report/next_step.py``), link
the dashboards over the window when Grafana's address is known, and show how the waste moved
across the runs the job kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.planted_fleet import planted_fleet

from migscope.analyzer._report import (
    ReportExtras,
    build_report,
    render_html,
    render_markdown,
    validate_report,
    write_reports,
)
from migscope.analyzer._report.grafana import dashboard_uids
from migscope.analyzer._report.next_step import next_step
from migscope.analyzer._report.trend import per_week, read_trend
from migscope.core._spec.v1 import ReportV1, report_json


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReportV1, str, str]:
    """A report with two earlier runs and a Grafana URL: the model, its Markdown and HTML."""
    folder = tmp_path_factory.mktemp("runs")
    for name, seed in (("20260105T060000Z", 1), ("20260112T060000Z", 2)):
        write_reports(planted_fleet(120, seed=seed), folder / name, formats=("json",))
    extras = ReportExtras(trend=read_trend(folder), grafana_url="https://grafana.example/g")
    report = build_report(planted_fleet(120, seed=3), extras)
    return report, render_markdown(report), render_html(report)


def _section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_next_step_has_the_pages_commands(reports: tuple[ReportV1, str, str]) -> None:
    report, markdown, page = reports
    step = next_step(report)
    assert step.kind == "apply", "the planted fleet has changes to apply"
    section = _section(markdown, "Next step")
    fenced = re.search(r"Apply the plan[^\n]*\n\n```sh\n(.*?)\n```", section, re.S)
    assert fenced is not None
    assert tuple(fenced.group(1).splitlines()) == step.commands
    assert f"Apply the plan: {report.savings.gpus_changed} GPU(s) on " in section
    assert f"on {len(report.recommendations)} node(s)" in section
    pre = re.search(r'<p id="step-apply">.*?<pre><code>(.*?)</code></pre>', page, re.S)
    assert pre is not None
    assert tuple(pre.group(1).splitlines()) == step.commands
    assert markdown.index("## Next step") < markdown.index("## Idle slices")


def test_a_snapshot_says_to_wait_in_both_formats(tmp_path: Path) -> None:
    data = report_json(build_report(planted_fleet(60, seed=4)))
    data["evidence"] = {**data["evidence"], "enough_for_a_plan": False, "history_hours": 0.5}
    report = validate_report(data)
    assert next_step(report).kind == "snapshot"
    section = _section(render_markdown(report), "Next step")
    assert "Let the exporter collect at least" in section
    assert "(there is 0.5 h)" in section
    assert "migscope apply" not in section
    assert "migscope apply --plan" not in render_html(report).split('id="next-step"')[1]
    # Issue 22: minutes of history named pods busy over a week as idle, to be given back.
    assert report.savings.idle_slices > 0
    assert "give them back" not in section
    assert "give them back" not in render_html(report).split('id="next-step"')[1]


def test_grafana_links_every_dashboard_over_the_window(
    reports: tuple[ReportV1, str, str],
) -> None:
    report, markdown, _ = reports
    window = f"from={int(report.window.start_unix * 1000)}&to={int(report.window.end_unix * 1000)}"
    links = re.findall(r"\]\(<([^>]+)>\)", markdown)
    assert sorted(links) == sorted(
        f"https://grafana.example/g/d/{uid}?{window}" for uid in dashboard_uids().values()
    )


def test_no_grafana_line_without_a_url() -> None:
    report = build_report(planted_fleet(60, seed=4))
    assert "Grafana" not in render_markdown(report)


def test_the_trend_table_and_the_change_since_the_last_run(
    reports: tuple[ReportV1, str, str],
) -> None:
    report, markdown, _ = reports
    assert report.trend is not None
    assert len(report.trend) == 2
    rows = [
        line.split(" | ")
        for line in _section(markdown, "Waste of earlier runs").splitlines()
        if line.startswith("| ") and not line.startswith("| run ")
    ]
    assert [r[0].lstrip("| ") for r in rows] == [
        "this report",
        "20260112T060000Z",
        "20260105T060000Z",
    ]
    expected: list[Any] = [report.savings.wasted_gpu_hours] + [
        p.wasted_gpu_hours for p in reversed(report.trend)
    ]
    assert [float(r[3].replace(",", "")) for r in rows] == pytest.approx(expected, abs=0.05)
    hours = [report.window.hours] + [p.window_hours for p in reversed(report.trend)]
    assert [float(r[4].replace(",", "")) for r in rows] == pytest.approx(
        [per_week(w, h) for w, h in zip(expected, hours, strict=True)], abs=0.05
    )
    last = report.trend[-1]
    line = next(x for x in markdown.splitlines() if x.startswith("- Since the run ending"))
    assert line.startswith(f"- Since the run ending {last.window_end[:10]}: waste ")
    assert f"{last.wasted_gpu_hours:,.1f} → {report.savings.wasted_gpu_hours:,.1f}" in line


def test_no_trend_section_without_earlier_runs() -> None:
    report = build_report(planted_fleet(60, seed=4))
    markdown = render_markdown(report)
    assert "## Waste of earlier runs" not in markdown
    assert "Since the run ending" not in markdown


def test_an_edited_earlier_report_cannot_break_the_page(
    reports: tuple[ReportV1, str, str],
) -> None:
    """Trend points come from report.json files on a volume anyone may have edited."""
    report, _, _ = reports
    assert report.trend is not None
    hostile = report.trend[-1].model_copy(update={"window_end": "2026\n# x|y", "run": "r|\n## z"})
    markdown = render_markdown(report.model_copy(update={"trend": [*report.trend[:-1], hostile]}))
    assert "\n# x" not in markdown
    assert "\n## z" not in markdown
    line = next(x for x in markdown.splitlines() if x.startswith("- Since the run ending"))
    assert "2026 # x\\|y" in line
    rows = [x for x in _section(markdown, "Waste of earlier runs").splitlines() if "r\\|" in x]
    assert len(rows) == 1
    assert rows[0].count(" | ") == 5
