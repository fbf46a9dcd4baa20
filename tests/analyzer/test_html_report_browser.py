"""The HTML report's script in a real browser: tables sort and group, rows filter, cells tell.

Headless Chromium (Debian's ``chromium``) opens the page of a 1,000-slice fleet and is driven
through the DevTools protocol (tests/support/cdp.py): a click on a column header, a choice
in a "group by" list, text in a find box, a pointer over a heatmap cell. Each result is
compared with the report the page was made from. No timing is asserted (the benchmark,
bench/report_bench.py, measures them).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from support.cdp import CHROMIUM, Browser, Page
from support.planted_fleet import planted_fleet

from migscope.analyzer._report import build_report, render_html, validate_report
from migscope.core._spec.v1 import report_json

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian package chromium not installed")

SLICES = 1000


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return report_json(build_report(planted_fleet(SLICES)))


@pytest.fixture(scope="module")
def tab(data: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    page = tmp_path_factory.mktemp("browser") / "report.html"
    page.write_text(render_html(validate_report(data)), encoding="utf-8")
    with Browser(window=(1280, 1000)) as browser:
        tab = browser.page()
        tab.call("Page.bringToFront")
        tab.open(Path(page).as_uri())
        yield tab


def _js(tab: Page, script: str) -> Any:
    return tab.evaluate(f"(function(){{{script}}})()")


def _column(tab: Page, table: str, title: str) -> list[str]:
    """The visible rows' text in a column (group header rows left out)."""
    return list(
        _js(
            tab,
            f"""var t=document.getElementById({json.dumps(table)});
            var i=Array.prototype.findIndex.call(t.tHead.rows[0].cells,
              function(c){{return c.textContent==={json.dumps(title)};}});
            return Array.prototype.filter.call(t.tBodies[0].rows,function(r){{
              return !r.classList.contains('grp');}}).map(function(r){{
              return r.cells[i].textContent;}});""",
        )
    )


def _click_header(tab: Page, table: str, title: str) -> str:
    return str(
        _js(
            tab,
            f"""var t=document.getElementById({json.dumps(table)});
            var th=Array.prototype.find.call(t.tHead.rows[0].cells,
              function(c){{return c.textContent==={json.dumps(title)};}});
            th.click();return th.getAttribute('aria-sort');""",
        )
    )


def _numbers(cells: list[str]) -> list[float]:
    return [float(c.replace(",", "")) for c in cells]


def test_the_page_runs_cleanly(tab: Page) -> None:
    assert tab.evaluate("document.getElementById('js-errors').textContent") == ""
    assert tab.console_errors() == []


def test_a_numeric_column_sorts_most_first_then_least(tab: Page, data: dict[str, Any]) -> None:
    # Start from another order, so that the click has something to do.
    assert _click_header(tab, "idle-slices", "node") == "ascending"
    nodes = _column(tab, "idle-slices", "node")
    assert nodes == sorted(nodes, key=str.lower)
    assert _click_header(tab, "idle-slices", "wasted GPU-h") == "descending"
    wasted = _numbers(_column(tab, "idle-slices", "wasted GPU-h"))
    assert wasted == sorted(wasted, reverse=True)
    expected = sorted(
        (s["wasted_gpu_hours"] for s in data["slices"] if s["status"] in ("idle", "unallocated")),
        reverse=True,
    )
    assert wasted == [round(v, 1) for v in expected]
    assert _click_header(tab, "idle-slices", "wasted GPU-h") == "ascending"  # again: reversed
    assert _numbers(_column(tab, "idle-slices", "wasted GPU-h")) == sorted(wasted)


def test_memory_sorts_by_bytes_not_by_text(tab: Page, data: dict[str, Any]) -> None:
    assert _click_header(tab, "all-slices", "p95 memory") == "descending"
    shown = _column(tab, "all-slices", "p95 memory")
    gib = [float(m.split(" ")[0]) for m in shown if m != "n/a"]
    assert gib == sorted(gib, reverse=True)
    assert shown[-1] == "n/a" or all(m != "n/a" for m in shown)


def test_group_by_namespace_sums_each_team(tab: Page, data: dict[str, Any]) -> None:
    groups = _js(
        tab,
        """var s=document.querySelector('select.group-by[data-table="idle-slices"]');
        var o=Array.prototype.find.call(s.options,function(o){
          return o.textContent==='namespace';});
        s.value=o.value;s.dispatchEvent(new Event('change'));
        return Array.prototype.map.call(
          document.querySelectorAll('#idle-slices tr.grp'),function(r){
          return r.textContent;});""",
    )
    want: dict[str, list[float]] = defaultdict(list)
    for s in data["slices"]:
        if s["current"] and s["status"] in ("idle", "unallocated"):
            want[s["namespace"] or "(unallocated)"].append(s["wasted_gpu_hours"])
    assert len(groups) == len(want)
    seen = []
    for text in groups:
        found = re.fullmatch(r"namespace: (.+) · (\d+) row\(s\) · ([\d.]+) wasted GPU-h", text)
        assert found is not None, text
        name, rows, total = found[1], int(found[2]), float(found[3])
        assert rows == len(want[name])
        assert total == pytest.approx(sum(want[name]), abs=0.06)
        seen.append(total)
    assert seen == sorted(seen, reverse=True)  # the team that wastes most first
    # Every row sits under its group's header.
    order = _js(
        tab,
        """var out=[],g=null;Array.prototype.forEach.call(
          document.getElementById('idle-slices').tBodies[0].rows,function(r){
          if(r.classList.contains('grp')){g=r.textContent.split(' · ')[0].slice(11);}
          else{out.push([g,r.cells[6].textContent]);}});return out;""",
    )
    assert all(group == namespace for group, namespace in order)
    # Back to no grouping: the headers go.
    _js(
        tab,
        """var s=document.querySelector('select.group-by[data-table="idle-slices"]');
        s.value='';s.dispatchEvent(new Event('change'));return 1;""",
    )
    assert _js(tab, "return document.querySelectorAll('#idle-slices tr.grp').length;") == 0


def test_find_box_keeps_the_rows_with_the_text(tab: Page, data: dict[str, Any]) -> None:
    pod = next(s["pod"] for s in data["slices"] if s["pod"] is not None)
    visible = _js(
        tab,
        f"""document.getElementById('all-slices').closest('details').open=true;
        var f=document.querySelector('input.filter[data-table="all-slices"]');
        f.value={json.dumps(pod)};f.dispatchEvent(new Event('input'));
        return Array.prototype.filter.call(
          document.getElementById('all-slices').tBodies[0].rows,function(r){{
          return getComputedStyle(r).display!=='none';}}).map(function(r){{
          return r.textContent;}});""",
    )
    assert visible
    assert all(pod in row for row in visible)
    assert len(visible) == sum(1 for s in data["slices"] if s["current"] and s["pod"] == pod)


def test_a_node_link_opens_its_slices(tab: Page) -> None:
    opened = _js(
        tab,
        """var a=document.querySelector('a.drill');a.click();
        var d=document.getElementById(a.getAttribute('href').slice(1));
        return [d.tagName, d.open, d.querySelector('summary b').textContent, a.textContent];""",
    )
    assert opened[0] == "DETAILS"
    assert opened[1] is True
    assert opened[2] == opened[3]


def test_hovering_a_cell_tells_its_time_and_value(tab: Page, data: dict[str, Any]) -> None:
    tip = _js(
        tab,
        """var d=document.querySelector('details.node');d.open=true;
        var img=d.querySelector('img.heat.act'),hm=img.parentNode,b=img.getBoundingClientRect();
        var cols=+hm.getAttribute('data-cols'),rows=+hm.getAttribute('data-rows');
        var c=40,r=rows-1;
        img.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,
          clientX:b.left+(c+0.5)*b.width/cols,clientY:b.top+(r+0.5)*b.height/rows}));
        return [document.getElementById('tip').textContent, c, r,
          d.querySelector('summary b').textContent];""",
    )
    text, column, row, node = tip
    mine = [s for s in data["slices"] if s["current"] and s["node"] == node]
    mine.sort(key=lambda s: (s["gpu"], s["placement_start"], s["gpu_instance_id"]))
    s = mine[row]
    label = f"GPU {s['gpu']} · GI {s['gpu_instance_id']} · {s['profile']}"
    assert text.startswith(label)
    when = datetime.fromtimestamp(
        data["window"]["start_unix"] + column * 3600, tz=timezone.utc
    ).strftime("%a %Y-%m-%d %H:%M UTC")
    assert when in text
    found = re.search(r"activity (\d+)%$", text)
    assert found is not None, text
    value = s["hourly"]["activity"][column]
    assert int(found[1]) == pytest.approx(value * 100, abs=1)
