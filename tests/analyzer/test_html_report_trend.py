"""The waste trend across runs and the links to Grafana: read from files, drawn without a server.

The trend is read from earlier runs' report.json files laid out as the Helm CronJob and
``migscope schedule`` keep them (``<dir>/<UTC time>/report.json`` and ``latest``); Grafana
links are built from a base URL and the uids of the dashboards migscope ships.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.planted_fleet import planted_fleet
from support.report_page import parse_page

from migscope.analyzer._report import (
    ReportExtras,
    build_report,
    render_html,
    validate_report,
    write_reports,
)
from migscope.analyzer._report.grafana import (
    GrafanaUrlError,
    dashboard_uids,
    dashboard_url,
    normalise_base_url,
)
from migscope.analyzer._report.trend import read_trend
from migscope.cli.main import cli
from migscope.core._spec.v1 import report_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two earlier runs (different fleets, so different waste), ``latest`` and clutter."""
    folder = tmp_path_factory.mktemp("reports")
    for name, seed, price in (("20260105T060000Z", 1, 2.0), ("20260112T060000Z", 2, 2.5)):
        write_reports(planted_fleet(200, seed=seed, price_per_gpu_hour=price), folder / name)
    os.symlink("20260112T060000Z", folder / "latest")  # the same run again: counted once
    (folder / "20260101T000000Z").mkdir()
    (folder / "20260101T000000Z" / "report.json").write_text("{not json", encoding="utf-8")
    (folder / ".latest-new-1").mkdir()  # a half-swapped link: never read
    (folder / ".latest-new-1" / "report.json").write_text("{}", encoding="utf-8")
    (folder / "20260119T060000Z").mkdir()  # the run being written now: no report yet
    (folder / "notes.txt").write_text("not a run", encoding="utf-8")
    return folder


def _saved(folder: Path, run: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / run / "report.json").read_text())
    return data


def test_trend_reads_each_earlier_run_once_oldest_first(runs: Path) -> None:
    trend = read_trend(runs, exclude=[runs / "20260119T060000Z"])
    assert [p["run"] for p in trend.points] == ["20260105T060000Z", "20260112T060000Z"]
    for point in trend.points:
        saved = _saved(runs, point["run"])
        sav = saved["savings"]
        assert point["wasted_gpu_hours"] == sav["wasted_gpu_hours"]
        assert point["idle_gpu_hours"] == sav["idle_gpu_hours"]
        assert point["unallocated_gpu_hours"] == sav["unallocated_gpu_hours"]
        assert point["oversized_gpu_hours"] == sav["oversized_gpu_hours"]
        assert point["wasted_cost"] == sav["wasted_cost"]
        assert point["gpus_freed"] == sav["gpus_freed"]
        assert point["window_end"] == saved["window"]["end"]
        assert point["slices"] == saved["summary"]["slices"]
        assert point["by_namespace"] == {
            r["namespace"]: r["wasted_gpu_hours"] for r in sav["by_namespace"]
        }
    assert len(trend.notes) == 1
    assert "20260101T000000Z/report.json left out: not JSON" in trend.notes[0]


def test_trend_keeps_the_newest_runs(runs: Path) -> None:
    trend = read_trend(runs, limit=1)
    assert [p["run"] for p in trend.points] == ["20260112T060000Z"]


def test_a_missing_folder_gives_no_trend_and_a_note(tmp_path: Path) -> None:
    """A fresh volume, or the chart's command line run elsewhere, still reports."""
    trend = read_trend(tmp_path / "missing")
    assert trend.points == ()
    assert trend.notes == (
        f"trend: {tmp_path / 'missing'}: No such file or directory: no earlier runs read",
    )


def test_a_report_that_breaks_the_contract_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    report = {"schema_version": 1, "window": {"start": "x"}, "savings": {}}
    (tmp_path / "run" / "report.json").write_text(json.dumps(report), encoding="utf-8")
    trend = read_trend(tmp_path)
    assert trend.points == ()
    assert "not a migscope report (" in trend.notes[0]


@pytest.fixture(scope="module")
def with_trend(runs: Path) -> tuple[dict[str, Any], str]:
    extras = ReportExtras(trend=read_trend(runs), grafana_url="https://grafana.example/g/")
    data = report_json(build_report(planted_fleet(200, seed=3), extras))
    return data, render_html(validate_report(data))


def test_the_trend_is_in_the_report_and_its_notes(
    with_trend: tuple[dict[str, Any], str],
) -> None:
    data, _ = with_trend
    assert [p["run"] for p in data["trend"]] == ["20260105T060000Z", "20260112T060000Z"]
    assert any("left out: not JSON" in n for n in data["notes"])
    validate_report(json.loads(json.dumps(data)))  # what report.json holds reads back


def test_the_trend_chart_has_a_bar_per_run(with_trend: tuple[dict[str, Any], str]) -> None:
    data, page = with_trend
    runs = len(data["trend"]) + 1  # the earlier ones and this one
    assert page.count('<rect class="run idle"') == runs
    assert page.count('<rect class="run unallocated"') == runs
    assert page.count('<rect class="run oversized"') == runs
    totals = re.findall(r'<text class="total"[^>]*>([^<]*)</text>', page)
    want = [p["wasted_gpu_hours"] for p in data["trend"]] + [data["savings"]["wasted_gpu_hours"]]
    assert totals == [f"{v:,.1f}" for v in want]  # 7-day windows: GPU-hours as they are
    table = parse_page(page).tables["trend-table"]
    assert table.column("wasted GPU-h") == [f"{v:,.1f}" for v in reversed(want)]
    assert table.column("run")[0] == "this report"


def test_the_headline_says_the_change_since_the_last_run(
    with_trend: tuple[dict[str, Any], str],
) -> None:
    data, page = with_trend
    last = data["trend"][-1]["wasted_gpu_hours"]
    now = data["savings"]["wasted_gpu_hours"]
    text = parse_page(page).text_by_id["trend-delta"]
    assert f"{now - last:+,.1f} ({(now - last) / last * 100:+.0f}%)" in text
    assert data["trend"][-1]["window_end"][:10] in text


def test_each_namespace_shows_its_change(with_trend: tuple[dict[str, Any], str]) -> None:
    data, page = with_trend
    table = parse_page(page).tables["waste-by-namespace"]
    before = data["trend"][-1]["by_namespace"]
    change = table.column("change since last run (GPU-h)")
    for row, shown in zip(data["savings"]["by_namespace"], change, strict=True):
        was = before.get(row["namespace"])
        want = "new" if was is None else f"{row['wasted_gpu_hours'] - was:+,.1f}"
        assert shown == want, row["namespace"]


def test_windows_of_other_lengths_compare_per_week(runs: Path) -> None:
    trend = read_trend(runs)
    short = dict(trend.points[-1])
    short["window_hours"] = 84.0  # half a week: twice the waste per week
    extras = ReportExtras(trend=type(trend)((short,), ()))
    data = report_json(build_report(planted_fleet(200, seed=3), extras))
    page = render_html(validate_report(data))
    totals = re.findall(r'<text class="total"[^>]*>([^<]*)</text>', page)
    assert totals[0] == f"{short['wasted_gpu_hours'] * 2:,.1f}"
    assert "each bar is scaled to a week" in page
    text = parse_page(page).text_by_id["trend-delta"]
    delta = data["savings"]["wasted_gpu_hours"] - 2 * short["wasted_gpu_hours"]
    assert f"{delta:+,.1f} per week" in text


# --- Grafana ------------------------------------------------------------------------------------


def test_dashboard_uids_are_the_shipped_ones() -> None:
    uids = dashboard_uids()
    for name, file in (
        ("fleet", "migscope-fleet.json"),
        ("node", "migscope-node.json"),
        ("namespaces", "migscope-namespaces.json"),
    ):
        shipped = json.loads((ROOT / "dashboards" / file).read_text())
        assert uids[name] == shipped["uid"]


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://grafana.example", "https://grafana.example"),
        ("https://grafana.example/", "https://grafana.example"),
        ("http://example.org:3000/grafana/", "http://example.org:3000/grafana"),
    ],
)
def test_base_urls_accepted(url: str, base: str) -> None:
    assert normalise_base_url(url) == base


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("javascript:alert(1)", "http:// or https://"),
        ("ftp://grafana.example", "http:// or https://"),
        ("grafana.example", "http:// or https://"),
        ("https://admin:secret@grafana.example", "no user or password"),
        ("https://grafana.example/?orgId=1", "no query or fragment"),
        ("https://grafana.example/#x", "no query or fragment"),
        ("https://grafana.example:99999/", "not a URL"),
        ("https://grafana.example/a b", "characters a URL cannot hold: ' '"),
        ("https://grafana.example/g>[x](javascript:x)", "characters a URL cannot hold: '>'"),
        ("https://grafana.example/g\nb", "characters a URL cannot hold: '\\n'"),
    ],
)
def test_base_urls_refused(url: str, message: str) -> None:
    with pytest.raises(GrafanaUrlError, match=re.escape(message)):
        normalise_base_url(url)
    assert dashboard_url(url, "migscope-node", start_unix=0, end_unix=1) is None


def test_dashboard_url_sets_the_window_and_variables() -> None:
    url = dashboard_url(
        "https://g.example/sub/",
        "migscope-node",
        start_unix=1767571200.0,
        end_unix=1768176000.0,
        variables={"node": "gpu node/a&b"},
    )
    assert url == (
        "https://g.example/sub/d/migscope-node?from=1767571200000&to=1768176000000"
        "&var-node=gpu%20node%2Fa%26b"
    )


def test_the_page_links_every_node_and_namespace(
    with_trend: tuple[dict[str, Any], str],
) -> None:
    data, page = with_trend
    assert data["grafana"] == {"url": "https://grafana.example/g", "dashboards": dashboard_uids()}
    start, end = (int(data["window"][k] * 1000) for k in ("start_unix", "end_unix"))
    window = f"from={start}&to={end}"
    links = [href for href in parse_page(page).links if href.startswith("https://")]
    root = "https://grafana.example/g/d/"
    for uid in dashboard_uids().values():
        assert f"{root}{uid}?{window}" in links
    nodes = {s["node"] for s in data["slices"] if s["current"]}
    node_links = {h for h in links if h.startswith(f"{root}migscope-node?{window}&var-node=")}
    assert {h.rsplit("=", 1)[1] for h in node_links} == nodes
    ns_links = {h for h in links if "&var-namespace=" in h}
    teams = {r["namespace"] for r in data["savings"]["by_namespace"]} - {"(unallocated)"}
    assert {h.rsplit("=", 1)[1] for h in ns_links} == teams
    assert all(h.startswith(root) for h in links)


# --- the command line ---------------------------------------------------------------------------


def test_cli_writes_the_trend_and_grafana(tmp_path: Path) -> None:
    base = ["analyze", "--simulate", "h200-node", "--window", "1d", "-q"]
    first = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "run1")])
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(
        cli,
        [
            *base,
            "--out",
            str(tmp_path / "run2"),
            "--previous-reports",
            str(tmp_path),
            "--grafana-url",
            "https://grafana.example",
        ],
    )
    assert second.exit_code == 0, second.output
    report = json.loads((tmp_path / "run2" / "report.json").read_text())
    earlier = json.loads((tmp_path / "run1" / "report.json").read_text())
    assert [p["run"] for p in report["trend"]] == ["run1"]
    assert report["trend"][0]["wasted_gpu_hours"] == earlier["savings"]["wasted_gpu_hours"]
    assert report["grafana"]["url"] == "https://grafana.example"
    page = (tmp_path / "run2" / "report.html").read_text()
    assert 'id="trend-table"' in page
    assert 'href="https://grafana.example/d/migscope-fleet?' in page


def test_cli_refuses_a_bad_grafana_url() -> None:
    out = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--simulate",
            "h200-node",
            "--window",
            "1d",
            "-o",
            "html",
            "--grafana-url",
            "javascript:alert(1)",
        ],
    )
    assert out.exit_code == 1
    assert out.stderr.startswith("migscope: error: --grafana-url 'javascript:alert(1)'")
    assert out.stderr.count("\n") == 1


def test_cli_refuses_previous_runs_that_do_not_exist() -> None:
    """A --previous-reports DIR that does not exist is a typo: one line, not a silent report."""
    out = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--simulate",
            "h200-node",
            "--window",
            "1d",
            "-o",
            "json",
            "--previous-reports",
            "/nonexistent/reports",
        ],
    )
    assert out.exit_code == 1, out.output
    assert out.stderr == (
        "migscope: error: --previous-reports /nonexistent/reports: no such directory\n"
    )


def test_schedule_reports_carry_the_trend_of_the_runs_before(tmp_path: Path) -> None:
    """`migscope schedule` passes its out_dir, where it keeps the runs, as the earlier runs."""
    out_dir = tmp_path / "reports"
    config = tmp_path / "schedule.yaml"
    config.write_text(
        "jobs:\n  - name: weekly\n    kind: report\n    cron: '0 6 * * 1'\n"
        '    args: ["--simulate", "h200-node", "--window", "1d"]\n'
        f"    out_dir: {json.dumps(str(out_dir))}\n",
        encoding="utf-8",
    )
    for _ in range(2):
        out = CliRunner().invoke(cli, ["schedule", "--config", str(config), "--once", "weekly"])
        assert out.exit_code == 0, out.output
    runs = sorted(p.name for p in out_dir.iterdir() if p.name != "latest")
    assert len(runs) == 2
    latest = json.loads((out_dir / "latest" / "report.json").read_text())
    assert [p["run"] for p in latest["trend"]] == runs[:1]
