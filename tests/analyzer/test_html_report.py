"""The HTML report: self-contained, escaped, every GPU drawn, and clean in a real Chromium.

The demo fleet (two days) is the input here; tests/analyzer/test_html_report_sections.py
checks the sections' numbers on a 1,000-slice fleet and test_html_report_browser.py drives
the page's tables in Chromium.
"""

from __future__ import annotations

import copy
import html
import math
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.report_page import Grid, decode_png, parse_page

from migscope.analyzer._analysis import run
from migscope.analyzer._intake.base import Source
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._report import build_report, render_html, validate_report, write_reports
from migscope.analyzer._report.html import LAYOUT_LEFT_PX, LAYOUT_SLICE_PX
from migscope.analyzer._report.html.png import LEVELS, UNKNOWN
from migscope.analyzer._result import AnalysisResult
from migscope.cli._analyze_inputs import choose_source, parse_window
from migscope.cli._demo_cmd import DEMO_FLEET
from migscope.cli.main import cli
from migscope.core._catalogue import find_model
from migscope.core._spec.v1 import report_json

HOSTILE_POD = "<script>alert('pod')</script>"
HOSTILE_NS = '"><img src=x onerror=alert(1)>'
HOSTILE_NODE = "node-<b>bold</b>&amp;"

_RECT = re.compile(
    r'<rect class="instance (now|proposed)" data-profile="([^"]*)" data-start="(\d+)" '
    r'data-size="(\d+)" x="(\d+)"'
)
_LAYOUT = re.compile(r'<svg class="chart layout" data-node="([^"]*)" data-gpu="(\d+)"(.*?)</svg>')


def _demo_source() -> Source:
    """The demo fleet, simulated, as ``migscope analyze --simulate`` chooses it."""
    return choose_source(
        source=None,
        simulate=DEMO_FLEET,
        prometheus=None,
        embedded=False,
        bearer_token_file=None,
        timeout_s=60.0,
        progress=None,
    )


@pytest.fixture(scope="module")
def result() -> AnalysisResult:
    source = _demo_source()
    return run(source, AnalyzeOptions(window_s=parse_window("2d")))


@pytest.fixture(scope="module")
def report(result: AnalysisResult) -> dict[str, Any]:
    data = report_json(build_report(result))
    assert data["recommendations"], "the demo fleet should need a layout change"
    return data


def _hostile(report: dict[str, Any]) -> dict[str, Any]:
    """The report with user-controlled names replaced by markup."""
    data = copy.deepcopy(report)
    for s in data["slices"]:
        if s["pod"] is not None:
            s["pod"], s["namespace"] = HOSTILE_POD, HOSTILE_NS
            s["owners"] = [{"namespace": HOSTILE_NS, "pod": HOSTILE_POD, "fraction": 1.0}]
        s["reason"] = HOSTILE_POD
        s["pool"] = HOSTILE_POD
        s["profile_note"] = HOSTILE_POD  # an unknown field: never drawn
    for row in data["savings"]["by_namespace"]:
        row["namespace"] = HOSTILE_NS
    for rec in data["recommendations"]:
        rec["pods_to_move"] = [f"{HOSTILE_NS}/{HOSTILE_POD}"]
        rec["mig_config"] = HOSTILE_POD
    for pool in data["pools"]:
        pool["pool"] = HOSTILE_NS
        pool["model"] = HOSTILE_POD
        pool["solve"]["status"] = HOSTILE_POD
        for replay in pool["replay"].values():
            for p in replay["profiles"]:
                p["profile"] = HOSTILE_POD
                p["hours_short"] = 3
    data["what_if"] = {
        "configs": {HOSTILE_NODE: HOSTILE_POD},
        "served_share": 0.5,
        "unmet_instance_hours": 1.0,
        "proposed": {"served_share": 0.9},
    }
    point = {
        "run": HOSTILE_POD,
        "created": HOSTILE_NS,
        "window_start": HOSTILE_NS,
        "window_end": HOSTILE_POD,
        "window_end_unix": 1.0,
        "window_hours": 48.0,
        "slices": 3,
        "idle_slices": 1,
        "unallocated_slices": 1,
        "oversized_slices": 0,
        "wasted_gpu_hours": 10.0,
        "gpus_freed": 0,
        "gpu_hours_freed": 0.0,
        "by_namespace": {HOSTILE_NS: 5.0},
    }
    data["trend"] = [point]
    data["grafana"] = {
        "url": "https://grafana.example/it's&amp",  # what a URL may hold that HTML may not
        "dashboards": {"fleet": HOSTILE_POD, "node": HOSTILE_NS, "namespaces": "x"},
    }
    data["provenance"]["source"] = {"kind": HOSTILE_POD, "url": HOSTILE_NS}
    first = data["slices"][0]["node"]
    for s in data["slices"]:
        if s["node"] == first:
            s["node"] = HOSTILE_NODE
    for rec in data["recommendations"]:
        if rec["node"] == first:
            rec["node"] = HOSTILE_NODE
    data["notes"] = [HOSTILE_POD]
    return data


def _gpus(report: dict[str, Any]) -> set[tuple[str, int]]:
    now = {(s["node"], s["gpu"]) for s in report["slices"] if s["current"]}
    planned = {(r["node"], g["gpu"]) for r in report["recommendations"] for g in r["gpus"]}
    return now | planned


def _layouts(page: str) -> dict[tuple[str, int], str]:
    return {(m[1], int(m[2])): m[3] for m in _LAYOUT.finditer(page)}


def test_write_reports_writes_html(result: AnalysisResult, tmp_path: Path) -> None:
    written = write_reports(result, tmp_path)
    assert written["html"] == tmp_path / "report.html"
    page = written["html"].read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count('<svg class="chart layout"') >= 3
    assert page.count('<img class="heat act"') >= 3


def test_cli_output_html() -> None:
    out = CliRunner().invoke(
        cli, ["analyze", "--simulate", "h200-node", "--window", "1d", "--format", "html"]
    )
    assert out.exit_code == 0, out.output
    assert out.output.startswith("<!DOCTYPE html>")
    assert '<svg class="chart layout"' in out.output


def test_self_contained(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    assert "Content-Security-Policy" in page
    assert "img-src data:" in page
    assert "<link" not in page
    assert "@import" not in page
    sources = re.findall(r' src="([^"]*)"', page)
    assert sources, "the heatmaps are images"
    assert all(src.startswith("data:image/png;base64,") for src in sources)
    assert "<script src" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # no Grafana URL given: no link


def test_hostile_names_are_escaped(report: dict[str, Any]) -> None:
    page = render_html(validate_report(_hostile(report)))
    assert page.count("<script>") == 2  # the error hook and the page's own script
    assert "alert('pod')" not in page
    assert "<img src=x" not in page  # the report's own images are <img class="heat"
    assert "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#x27;pod&#x27;)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert f'data-node="{html.escape(HOSTILE_NODE, quote=True)}"' in page
    # Every new part drew its hostile text escaped: pools, replay, what-if, trend, Grafana.
    pool_title = f"Pool {html.escape(HOSTILE_NS, quote=True)}:"
    assert pool_title in page or "Pool " + html.escape(HOSTILE_POD, quote=True) in page
    assert "what-if" in page
    assert html.escape(HOSTILE_NODE, quote=True) + "=" in page  # the what-if config
    assert 'id="trend-table"' in page
    assert 'href="https://grafana.example/it&#x27;s&amp;amp/d/' in page
    assert "onerror=alert(1)>" not in page
    assert "profile_note" not in page


def test_every_gpu_gets_a_before_after_diagram(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    layouts = _layouts(page)
    assert set(layouts) == _gpus(report)
    for body in layouts.values():
        assert ">now</text>" in body
        assert ">re-created</text>" in body or ">unchanged</text>" in body


def test_a_recreated_gpu_keeps_nothing_in_the_diagram(report: dict[str, Any]) -> None:
    # Issue 10 item 7: mig-parted re-creates every instance of a changed GPU, so the diagram
    # must not draw any of its instances as kept, and its pods are listed as losing a device.
    page = render_html(validate_report(report))
    layouts = _layouts(page)
    recs = [r for r in report["recommendations"] if r["gpus_recreated"]]
    assert recs, "the fixture report should change a GPU"
    for rec in recs:
        for gpu in rec["gpus_recreated"]:
            body = layouts[(rec["node"], gpu)]
            assert ">re-created</text>" in body
            assert ": unchanged</title>" not in body
        for pod in rec["pods_to_move"]:
            assert html.escape(pod) in page


def test_placements_drawn_at_their_offsets(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    layouts = _layouts(page)
    for rec in report["recommendations"]:
        model = find_model(rec["model"])
        for g in rec["gpus"]:
            body = layouts[(rec["node"], g["gpu"])]
            proposed = [m for m in _RECT.finditer(body) if m[1] == "proposed"]
            drawn = {(m[2], int(m[3])) for m in proposed}
            assert drawn == {(p["profile"], p["start"]) for p in g["placements"]}
            for m in proposed:
                start, size = int(m[3]), int(m[4])
                assert size == model.profile(m[2]).memory_slices
                assert int(m[5]) == LAYOUT_LEFT_PX + start * LAYOUT_SLICE_PX + 2
    for s in report["slices"]:
        if not s["current"] or s["placement_start"] is None:
            continue
        body = layouts[(s["node"], s["gpu"])]
        now = [m for m in _RECT.finditer(body) if m[1] == "now"]
        match = [m for m in now if m[2] == s["profile"] and int(m[3]) == s["placement_start"]]
        assert len(match) == 1, (s["node"], s["gpu"], s["profile"], s["placement_start"])
        assert int(match[0][5]) == LAYOUT_LEFT_PX + s["placement_start"] * LAYOUT_SLICE_PX + 2


def _slice_grids(page: str) -> dict[str, Grid]:
    return {g.node: g for g in parse_page(page).grids if g.node is not None}


def _level(value: float | None, gamma: float = 0.5) -> int:
    """The palette index the page draws ``value`` at: activity on a square-root scale."""
    if value is None:
        return UNKNOWN
    return round(math.sqrt(value) * LEVELS if gamma == 0.5 else value * LEVELS)


def test_heatmap_of_window_statistics_without_hours(report: dict[str, Any]) -> None:
    data = copy.deepcopy(report)
    for s in data["slices"]:
        s["hourly"] = None  # a window off the hour grid, or an older report
    page = render_html(validate_report(data))
    assert 'data-kind="window-stats"' in page
    assert "not per-hour activity" in page
    grids = _slice_grids(page)
    current = [s for s in data["slices"] if s["current"]]
    assert set(grids) == {s["node"] for s in current}
    for node, grid in grids.items():
        mine = [s for s in current if s["node"] == node]
        width, height, rows, _ = decode_png(grid.activity)
        assert (width, height) == (3, len(mine))
        expected = {
            (s["gpu"], s["gpu_instance_id"]): [
                _level(s["evidence"].get(f"activity_{k}")) for k in ("p50", "p95", "max")
            ]
            for s in mine
        }
        drawn = {_gpu_gi(label): row for label, row in zip(grid.labels, rows, strict=True)}
        assert drawn == expected


def _gpu_gi(label: str) -> tuple[int, int]:
    found = re.match(r"GPU (\d+) · GI (\d+) · ", label)
    assert found is not None, label
    return int(found[1]), int(found[2])


def test_heatmap_of_hourly_activity_per_slice_and_memory(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    assert all(len(s["hourly"]["activity"]) == 48 for s in report["slices"])  # a 2-day window
    assert 'data-kind="hourly"' in page
    grids = _slice_grids(page)
    current = [s for s in report["slices"] if s["current"]]
    assert sum(len(g.labels) for g in grids.values()) == len(current)
    for node, grid in grids.items():
        mine = {(s["gpu"], s["gpu_instance_id"]): s for s in current if s["node"] == node}
        width, height, rows, _ = decode_png(grid.activity)
        _, _, memory, _ = decode_png(grid.memory)
        assert (width, height) == (48, len(mine))
        for label, row, mem in zip(grid.labels, rows, memory, strict=True):
            s = mine[_gpu_gi(label)]
            assert row == [_level(v) for v in s["hourly"]["activity"]], label
            ev = s["evidence"]
            share = ev["memory_p95_bytes"] / ev["memory_total_bytes"]
            assert mem == [_level(share, gamma=1.0)], label


def test_pool_heatmap_rows_are_nodes_weighted_by_compute(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    grids = [g for g in parse_page(page).grids if g.node is None]
    current = [s for s in report["slices"] if s["current"]]
    assert sorted(n for g in grids for n in g.labels) == sorted({s["node"] for s in current})
    for grid in grids:
        _, _, rows, _ = decode_png(grid.activity)
        for node, row in zip(grid.labels, rows, strict=True):
            mine = [s for s in current if s["node"] == node]
            weight = [find_model(s["model"]).profile(s["profile"]).compute_slices for s in mine]
            for hour, level in enumerate(row):
                known = [
                    (w, s["hourly"]["activity"][hour])
                    for w, s in zip(weight, mine, strict=True)
                    if s["hourly"]["activity"][hour] is not None
                ]
                mean = sum(w * v for w, v in known) / sum(w for w, _ in known) if known else None
                assert level == _level(mean), (node, hour)


def test_time_axis_shows_the_window_dates(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    # The demo's two days: Monday 5 and Tuesday 6 January 2026 (UTC).
    assert ">Mon 05 Jan</text>" in page
    assert ">Tue 06 Jan</text>" in page
    assert "Mon 05 Jan 2026 00:00 UTC → Wed 07 Jan 2026 00:00 UTC" in page


def test_waste_table_per_namespace(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    table = parse_page(page).tables["waste-by-namespace"]
    rows = report["savings"]["by_namespace"]
    assert rows
    assert [r[0].removesuffix(" Grafana") for r in table.rows] == [r["namespace"] for r in rows]
    assert table.column("wasted GPU-h") == [f"{r['wasted_gpu_hours']:,.1f}" for r in rows]
    assert page.count('<span class="bar"') == 2 * len(rows)


# --- a real browser ---------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian package chromium not installed"
)


def _chromium(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp / f"profile-{len(list(tmp.iterdir()))}"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={profile}",
            *extra,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _console_errors(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if "ERROR:CONSOLE" in line or "Uncaught" in line or "Content Security Policy" in line
    ]


def _js_errors(dom: str) -> str:
    found = re.search(r'<div id="js-errors" hidden="">(.*?)</div>', dom, re.S)
    assert found is not None, "the error hook's element is missing from the DOM"
    return found[1]


@needs_chromium
def test_renders_in_chromium(report: dict[str, Any], tmp_path: Path) -> None:
    data = _hostile(report)
    page = tmp_path / "report.html"
    page.write_text(render_html(validate_report(data)), encoding="utf-8")
    run = _chromium(page, tmp_path, "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert _console_errors(run.stderr) == []
    assert _js_errors(dom) == ""
    gpus = _gpus(data)
    assert dom.count('<svg class="chart layout"') == len(gpus)
    assert dom.count('<img class="heat act"') == dom.count('<div class="hm"')
    current = sum(1 for s in data["slices"] if s["current"] and s["placement_start"] is not None)
    assert dom.count('<rect class="instance now"') == current
    planned = sum(len(g["placements"]) for r in data["recommendations"] for g in r["gpus"])
    assert dom.count('<rect class="instance proposed"') >= planned
    # The hostile names were parsed as text: no element came from them.
    assert dom.count("<script>") == 2
    assert "<img src=" not in dom

    shot = tmp_path / "shot.png"
    run = _chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000")
    assert run.returncode == 0, run.stderr[-2000:]
    assert _console_errors(run.stderr) == []
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1280, 2000)
    assert len(png) > 50_000  # charts and text, not a blank page


@needs_chromium
def test_chromium_check_catches_script_errors(report: dict[str, Any], tmp_path: Path) -> None:
    """Negative control: a page that throws is caught by the same checks."""
    broken = render_html(validate_report(report)).replace(
        "</body>", "<script>throw new Error('planted failure');</script></body>"
    )
    page = tmp_path / "broken.html"
    page.write_text(broken, encoding="utf-8")
    run = _chromium(page, tmp_path, "--dump-dom")
    assert "planted failure" in _js_errors(run.stdout)
    assert any("planted failure" in line for line in _console_errors(run.stderr))


@needs_chromium
def test_readme_screenshots_are_made_by_the_script(tmp_path: Path) -> None:
    """scripts/screenshot-report makes the README's images with the same headless Chromium."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OUT_DIR": str(tmp_path), "BIN": str(Path(sys.executable).parent)}
    run = subprocess.run(
        [str(root / "scripts" / "screenshot-report")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    readme = (root / "README.md").read_text()
    for name in ("report.png", "report-layouts.png"):
        assert f"docs/img/{name}" in readme
        fresh = (tmp_path / name).read_bytes()
        committed = (root / "docs" / "img" / name).read_bytes()
        for png in (fresh, committed):
            assert png[:8] == b"\x89PNG\r\n\x1a\n"
            assert len(png) > 50_000  # charts and text, not a blank page
        assert struct.unpack(">II", fresh[16:24]) == struct.unpack(">II", committed[16:24])


def test_a_snapshot_says_so_at_the_top() -> None:
    # Issue 10 item 1: one scrape is a snapshot; the page must not read like a plan.
    scrape = (
        Path(__file__).resolve().parents[1] / "fixtures" / "migscope" / "sim-h200-node-once.txt"
    )
    out = CliRunner().invoke(cli, ["analyze", "--source", str(scrape), "-o", "html"])
    assert out.exit_code == 0, out.stderr
    page = out.output
    assert 'id="snapshot"' in page
    assert "Snapshot: no change recommended." in page
    assert page.index('id="snapshot"') < page.index('id="layouts"')


def test_a_week_is_not_a_snapshot(report: dict[str, Any]) -> None:
    assert report["evidence"]["enough_for_a_plan"] is True
    assert 'id="snapshot"' not in render_html(validate_report(report))


def test_replay_table_has_the_what_if_layout() -> None:
    source = _demo_source()
    options = AnalyzeOptions(window_s=parse_window("2d"), what_if={"*": "all-balanced"})
    data = report_json(build_report(run(source, options)))
    page = render_html(validate_report(data))
    table = parse_page(page).tables["replay"]
    assert table.titles[-2:] == ["what-if: served", "short under the what-if"]
    pools = [p for p in data["pools"] if p["replay"]]
    for pool, row in zip(pools, table.rows, strict=True):
        share = pool["replay"]["what_if"]["served_share"]
        assert row[-2].startswith(f"{share * 100:.1f}%")
    what_if = data["what_if"]
    text = parse_page(page).text_by_id["what-if"]
    assert text.startswith(f"What-if *=all-balanced: serves {what_if['served_share'] * 100:.1f}%")
