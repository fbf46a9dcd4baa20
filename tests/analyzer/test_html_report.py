"""The HTML report: self-contained, escaped, every GPU drawn, and clean in a real Chromium."""

from __future__ import annotations

import copy
import html
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

from migscope.analyzer.options import AnalyzeOptions
from migscope.analyzer.report import render_html, validate_report, write_reports
from migscope.analyzer.report.html import LAYOUT_LEFT_PX, LAYOUT_SLICE_PX
from migscope.analyzer.result import AnalysisResult
from migscope.analyzer.run import run
from migscope.cli.analyze_inputs import choose_source, parse_window
from migscope.cli.demo_cmd import DEMO_FLEET
from migscope.cli.main import cli
from migscope.core.catalogue import find_model

HOSTILE_POD = "<script>alert('pod')</script>"
HOSTILE_NS = '"><img src=x onerror=alert(1)>'
HOSTILE_NODE = "node-<b>bold</b>&amp;"

_RECT = re.compile(
    r'<rect class="instance (now|proposed)" data-profile="([^"]*)" data-start="(\d+)" '
    r'data-size="(\d+)" x="(\d+)"'
)
_LAYOUT = re.compile(r'<svg class="chart layout" data-node="([^"]*)" data-gpu="(\d+)"(.*?)</svg>')


@pytest.fixture(scope="module")
def result() -> AnalysisResult:
    source = choose_source(
        source=None,
        simulate=DEMO_FLEET,
        prometheus=None,
        embedded=False,
        bearer_token_file=None,
        timeout_s=60.0,
        progress=None,
    )
    return run(source, AnalyzeOptions(window_s=parse_window("2d")))


@pytest.fixture(scope="module")
def report(result: AnalysisResult) -> dict[str, Any]:
    data = result.to_json()
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
    for row in data["savings"]["by_namespace"]:
        row["namespace"] = HOSTILE_NS
    for rec in data["recommendations"]:
        rec["pods_to_move"] = [f"{HOSTILE_NS}/{HOSTILE_POD}"]
        rec["mig_config"] = HOSTILE_POD
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
    assert page.count('<svg class="chart') >= 3


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
    assert "<link" not in page
    assert " src=" not in page
    assert "@import" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}


def test_hostile_names_are_escaped(report: dict[str, Any]) -> None:
    page = render_html(validate_report(_hostile(report)))
    assert page.count("<script>") == 1  # only the error hook
    assert "alert('pod')" not in page
    assert "<img" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#x27;pod&#x27;)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert f'data-node="{html.escape(HOSTILE_NODE, quote=True)}"' in page


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


def test_heatmap_of_window_statistics_without_hours(report: dict[str, Any]) -> None:
    data = copy.deepcopy(report)
    for s in data["slices"]:
        s["hourly"] = None  # a window off the hour grid, or an older report
    page = render_html(validate_report(data))
    current = sum(1 for s in data["slices"] if s["current"])
    assert 'data-kind="window-stats"' in page
    assert page.count('<rect class="cell"') == 3 * current
    assert "not per-hour activity" in page


def test_heatmap_of_hourly_activity(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    current = sum(1 for s in report["slices"] if s["current"])
    assert all(len(s["hourly"]["activity"]) == 48 for s in report["slices"])  # a 2-day window
    assert 'data-kind="hourly"' in page
    assert page.count('<rect class="cell"') == 48 * current


def test_waste_bars_per_namespace(report: dict[str, Any]) -> None:
    page = render_html(validate_report(report))
    rows = report["savings"]["by_namespace"]
    assert rows
    assert page.count('<rect class="bar idle"') == len(rows)
    assert page.count('<rect class="bar oversized"') == len(rows)


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
    assert dom.count("<svg ") == 2 + len(gpus)  # heatmap, waste bars, one per GPU
    assert dom.count('<svg class="chart layout"') == len(gpus)
    current = sum(1 for s in data["slices"] if s["current"] and s["placement_start"] is not None)
    assert dom.count('<rect class="instance now"') == current
    planned = sum(len(g["placements"]) for r in data["recommendations"] for g in r["gpus"])
    assert dom.count('<rect class="instance proposed"') >= planned
    # The hostile names were parsed as text: no element came from them.
    assert dom.count("<script>") == 1
    assert "<img" not in dom

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
