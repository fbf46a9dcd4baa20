"""Benchmark of the HTML report: bytes per slice and how fast headless Chromium opens it.

Issue 14: the report of 5,274 slices was 177 MB and took 94 s to render. This measures, in
one run, the report before issue 14 (``old``: the HTML renderer of commit
:data:`OLD_COMMIT`, read from git into a temporary package) and the current one (``new``)
on the same validated report, at several fleet sizes, and prints the ratios old / new.

* **Input**: :func:`support.planted_fleet.planted_fleet` (planted week statistics with
  168 hours of activity per slice, analysed by the real pipeline), then
  :func:`migscope.analyzer._report.build_report`: what ``migscope analyze --out``
  renders.
* **Render**: the Python time of ``render_html`` (``render s``).
* **Browser**: a fresh headless Chromium per page (Debian's ``chromium``), driven over the
  DevTools pipe (``tests/support/cdp.py``): ``DCL`` and ``load`` are the page's own
  navigation timing (``domContentLoadedEventEnd``, ``loadEventEnd``, ms from navigation
  start), ``FCP`` its first-contentful-paint entry, ``ready`` the time of the second
  animation frame after both (the page laid out and drawn), ``open s`` the wall time from
  the navigate command to the load event. ``DOM`` counts the page's elements.
  Nothing is asserted: benchmarks never gate CI.

Run: ``.venv/bin/python bench/report_bench.py --slices 100 1000 5000 [--json out.json]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "f29f197148319a98ec9c188e60c6baa0d29584c2"
"""The last commit before issue 14's report (the renderer of the 177 MB page)."""
_OLD_PACKAGE = "old_report_html"
_HTML_DIR = "analyzer/src/migscope/analyzer/_report/html"
_TIMINGS = """new Promise(function(done){
  var nav = performance.getEntriesByType('navigation')[0];
  function finish(fcp){ requestAnimationFrame(function(){ requestAnimationFrame(function(){
    done({dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, fcp: fcp,
      ready: performance.now(), dom: document.getElementsByTagName('*').length,
      errors: (document.getElementById('js-errors') || {}).textContent || ''}); }); }); }
  var seen = performance.getEntriesByName('first-contentful-paint');
  if (seen.length) { finish(seen[0].startTime); return; }
  new PerformanceObserver(function(list){
    list.getEntries().forEach(function(e){
      if (e.name === 'first-contentful-paint') finish(e.startTime); });
  }).observe({type: 'paint', buffered: true});
  setTimeout(function(){ finish(null); }, 60000);
})"""


def old_renderer(commit: str, work: Path) -> Callable[..., str]:
    """``render_html`` of the HTML renderer at ``commit``, imported from a copy of its files."""
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{commit}:{_HTML_DIR}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    package = work / _OLD_PACKAGE
    package.mkdir()
    for name in names:
        if not name.endswith(".py"):
            continue
        text = subprocess.run(
            ["git", "show", f"{commit}:{_HTML_DIR}/{name}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (package / name).write_text(text.replace("migscope.analyzer._report.html", _OLD_PACKAGE))
    sys.path.insert(0, str(work))
    module = importlib.import_module(_OLD_PACKAGE)
    render: Callable[..., str] = module.render_html
    return render


def browse(page: Path, timeout_s: float) -> dict[str, Any]:
    """Open ``page`` in a fresh headless Chromium and read its timings."""
    from support.cdp import Browser

    with Browser(timeout_s=timeout_s) as browser:
        tab = browser.page()
        tab.call("Page.bringToFront")
        opened = tab.open(page.as_uri(), timeout_s=timeout_s)
        timings: dict[str, Any] = tab.evaluate(_TIMINGS, timeout_s=timeout_s)
        timings["open"] = opened
    return timings


def measure(n: int, old: Callable[..., str], work: Path, timeout_s: float) -> dict[str, Any]:
    """Both pages of an ``n``-slice fleet: bytes, render time and browser timings."""
    from support.planted_fleet import planted_fleet

    from migscope.analyzer._report import build_report, render_html

    start = time.perf_counter()
    report = build_report(planted_fleet(n))
    row: dict[str, Any] = {"slices": n, "analyse_s": time.perf_counter() - start}
    for name, render in (("old", old), ("new", render_html)):
        start = time.perf_counter()
        html = render(report)
        rendered = time.perf_counter() - start
        page = work / f"{name}-{n}.html"
        page.write_text(html, encoding="utf-8")
        del html
        size = page.stat().st_size
        timings = browse(page, timeout_s)
        row[name] = {"bytes": size, "bytes_per_slice": size / n, "render_s": rendered, **timings}
        page.unlink()
        print(f"  {name} {n}: {size / 1e6:.2f} MB, load {timings['load']:.0f} ms", flush=True)
    return row


def _ms(value: float | None) -> str:
    return f"{value:9.0f}" if value is not None else "      n/a"


def report(rows: list[dict[str, Any]]) -> str:
    """The results as a table, then the ratios old / new."""
    lines = [
        " slices page       MB  B/slice render s    DCL ms   load ms    FCP ms  ready ms"
        "  open s     DOM",
        "-" * 92,
    ]
    for row in rows:
        for name in ("old", "new"):
            r = row[name]
            lines.append(
                f"{row['slices']:7d} {name:4s} {r['bytes'] / 1e6:8.2f} {r['bytes_per_slice']:8.0f} "
                f"{r['render_s']:8.2f} {_ms(r['dcl'])} {_ms(r['load'])} {_ms(r['fcp'])} "
                f"{_ms(r['ready'])} {r['open']:7.2f} {r['dom']:7d}"
            )
    lines += ["", " slices  bytes old/new  load old/new  FCP old/new  ready old/new"]
    for row in rows:
        old, new = row["old"], row["new"]
        fcp = (
            f"{old['fcp'] / new['fcp']:11.1f}x"
            if old["fcp"] is not None and new["fcp"]
            else "        n/a"
        )
        lines.append(
            f"{row['slices']:7d} {old['bytes'] / new['bytes']:14.1f}x "
            f"{old['load'] / new['load']:12.1f}x {fcp} {old['ready'] / new['ready']:13.1f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--slices", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--old-commit", default=OLD_COMMIT)
    parser.add_argument("--timeout", type=float, default=600.0, help="per browser step, s")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        work = Path(tmp)
        old = old_renderer(args.old_commit, work)
        for n in args.slices:
            rows.append(measure(n, old, work, args.timeout))
    print(report(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
