"""The HTML report at fleet scale: every section carries report.json's numbers, within budget.

A 1,000-slice fleet of planted statistics (tests/support/planted_fleet.py), analysed by the
real pipeline, rendered from its validated report; the page is read back
(tests/support/report_page.py) and compared with the report it came from. Issue 14: the
report was 33 KB per slice with no mis-sized table, replay, dates, memory, cost, next step,
Grafana links or trend.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

import pytest
from support.planted_fleet import planted_fleet
from support.report_page import Page, parse_page

from migscope.analyzer._report import build_report, render_html, validate_report
from migscope.analyzer._result import AnalysisResult
from migscope.core._spec.v1 import report_json

SLICES = 1000
BYTES_PER_SLICE = 4096
"""Issue 14's budget: under ~4 KiB of report.html per slice."""


@pytest.fixture(scope="module")
def result() -> AnalysisResult:
    return planted_fleet(SLICES)


@pytest.fixture(scope="module")
def data(result: AnalysisResult) -> dict[str, Any]:
    return report_json(build_report(result))


@pytest.fixture(scope="module")
def page_text(data: dict[str, Any]) -> str:
    return render_html(validate_report(data))


@pytest.fixture(scope="module")
def page(page_text: str) -> Page:
    return parse_page(page_text)


def _current(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in data["slices"] if s["current"]]


def _gib(value: float) -> str:
    return f"{value / (1 << 30):.1f} GiB"


def test_size_per_slice_is_within_budget(page_text: str) -> None:
    size = len(page_text.encode("utf-8"))
    assert size / SLICES < BYTES_PER_SLICE, f"{size / SLICES:.0f} bytes per slice"


def test_the_fleet_is_a_fleet(data: dict[str, Any]) -> None:
    """The fixture has what the sections show: every status, two pools, a plan, waste."""
    statuses = Counter(s["status"] for s in _current(data))
    assert {"idle", "unallocated", "oversized", "healthy", "unknown"} <= set(statuses)
    assert len(data["pools"]) == 2
    assert data["recommendations"]
    assert data["savings"]["wasted_gpu_hours"] > 0
    assert data["savings"]["price_per_gpu_hour"] is not None


def test_per_slice_waste_adds_up_to_the_headline(data: dict[str, Any]) -> None:
    current = _current(data)
    total = sum(s["wasted_gpu_hours"] for s in current)
    assert total == pytest.approx(data["savings"]["wasted_gpu_hours"], abs=0.01)
    by_ns: dict[str, float] = defaultdict(float)
    for s in current:
        ns = s["namespace"] if s["status"] != "unallocated" else "(unallocated)"
        by_ns[ns or "(unallocated)"] += s["wasted_gpu_hours"]
    for row in data["savings"]["by_namespace"]:
        assert by_ns[row["namespace"]] == pytest.approx(row["wasted_gpu_hours"], abs=0.01)


def test_each_slice_names_the_pool_that_planned_it(data: dict[str, Any]) -> None:
    pools = {p["pool"] for p in data["pools"]}
    for s in _current(data):
        assert s["pool"] == s["model"], s  # no selector: a pool is a GPU model
        assert s["pool"] in pools


def _card(page_text: str, name: str) -> str:
    found = re.search(rf'id="card-{name}"><b>([^<]*)</b>', page_text)
    assert found is not None, name
    return found[1]


def test_summary_cards_carry_the_savings(data: dict[str, Any], page_text: str) -> None:
    sav = data["savings"]
    assert _card(page_text, "wasted-gpu-hours") == f"{sav['wasted_gpu_hours']:,.1f}"
    assert _card(page_text, "wasted-cost") == f"{sav['wasted_cost']:,.2f}"
    assert _card(page_text, "gpus-freed") == str(sav["gpus_freed"])
    assert _card(page_text, "idle") == str(sav["idle_slices"])
    assert _card(page_text, "unallocated") == str(sav["unallocated_slices"])
    assert _card(page_text, "oversized") == str(sav["oversized_slices"])
    assert _card(page_text, "gpus-changed") == str(sav["gpus_changed"])
    assert _card(page_text, "unmet") == str(sav["unmet_demand"])
    assert _card(page_text, "slices") == str(data["summary"]["slices"])
    assert page_text.index('id="summary"') < page_text.index('id="activity"')


def test_top_namespaces_are_the_biggest_waste(data: dict[str, Any], page: Page) -> None:
    text = page.text_by_id["top-namespaces"]
    price = data["savings"]["price_per_gpu_hour"]
    for row in data["savings"]["by_namespace"][:5]:
        cost = row["wasted_gpu_hours"] * price
        assert f"{row['namespace']}: {row['wasted_gpu_hours']:,.1f} GPU-hours, {cost:,.2f}" in text


def test_next_step_is_the_apply_command(data: dict[str, Any], page: Page) -> None:
    text = page.text_by_id["next-step"]
    assert "migscope apply --plan report.json\n" in text
    disruptive = any(r["disruptive"] for r in data["recommendations"])
    drain = " --drain" if disruptive else ""
    assert f"migscope apply --plan report.json --apply --max-nodes 1{drain}" in text
    assert f"on {len(data['recommendations'])} node(s)" in text
    assert f"the {data['savings']['idle_slices']} idle slice(s)" in text


def _keys(rows: list[list[str]], table_titles: list[str]) -> list[tuple[str, int, int]]:
    node, gpu, gi = (table_titles.index(t) for t in ("node", "GPU", "GI"))
    return [(r[node], int(r[gpu]), int(r[gi])) for r in rows]


def _key(s: dict[str, Any]) -> tuple[str, int, int]:
    return (s["node"], s["gpu"], s["gpu_instance_id"])


def test_idle_table_lists_every_idle_and_unallocated_slice(
    data: dict[str, Any], page: Page
) -> None:
    table = page.tables["idle-slices"]
    expected = {_key(s): s for s in _current(data) if s["status"] in ("idle", "unallocated")}
    keys = _keys(table.rows, table.titles)
    assert sorted(keys) == sorted(expected)
    price = data["savings"]["price_per_gpu_hour"]
    for key, row in zip(keys, table.rows, strict=True):
        s = expected[key]
        cells = dict(zip(table.titles, row, strict=True))
        assert cells["status"] == s["status"]
        assert cells["wasted GPU-h"] == f"{s['wasted_gpu_hours']:,.1f}"
        assert cells["cost"] == f"{s['wasted_gpu_hours'] * price:,.2f}"
        assert cells["p95 memory"].startswith(_gib(s["evidence"]["memory_p95_bytes"]))
        assert cells["why"] == s["reason"]
        assert cells["pool"] == s["pool"]
    wasted = [float(v.replace(",", "")) for v in table.column("wasted GPU-h")]
    assert wasted == sorted(wasted, reverse=True)  # most waste first, without script


def test_mis_sized_table_lists_oversized_and_saturated(data: dict[str, Any], page: Page) -> None:
    table = page.tables["mis-sized"]
    expected = {_key(s): s for s in _current(data) if s["status"] in ("oversized", "saturated")}
    assert expected
    keys = _keys(table.rows, table.titles)
    assert sorted(keys) == sorted(expected)
    for key, row in zip(keys, table.rows, strict=True):
        cells = dict(zip(table.titles, row, strict=True))
        assert cells["right size"] == expected[key]["demand_profile"]
        assert cells["profile"] == expected[key]["profile"]


def test_every_slice_table_has_every_current_slice(data: dict[str, Any], page: Page) -> None:
    table = page.tables["all-slices"]
    assert sorted(_keys(table.rows, table.titles)) == sorted(_key(s) for s in _current(data))


def test_tables_carry_what_the_script_sorts_and_groups_by(page: Page) -> None:
    for name in ("idle-slices", "mis-sized", "all-slices"):
        table = page.tables[name]
        numeric = [
            t for t, a in zip(table.titles, table.header_attrs, strict=True) if "data-type" in a
        ]
        assert {"GPU", "GI", "p95 activity", "p95 memory", "wasted GPU-h"} <= set(numeric)
        sums = [t for t, a in zip(table.titles, table.header_attrs, strict=True) if "data-sum" in a]
        assert sums == ["wasted GPU-h"]
        memory = table.titles.index("p95 memory")
        for values, row in zip(table.sort_values, table.rows, strict=True):
            if row[memory] != "n/a":
                assert values[memory] is not None
                assert float(values[memory]) >= 0


def test_group_by_offers_pool_namespace_status_node(page_text: str) -> None:
    for table in ("idle-slices", "mis-sized", "all-slices"):
        select = re.search(
            rf'<select class="group-by" data-table="{table}">(.*?)</select>', page_text, re.S
        )
        assert select is not None, table
        names = re.findall(r"<option value=\"\d+\">([^<]*)</option>", select[1])
        assert {"node pool", "namespace", "status", "node"} <= set(names)


def test_waste_table_matches_savings_with_cost(data: dict[str, Any], page: Page) -> None:
    table = page.tables["waste-by-namespace"]
    rows = data["savings"]["by_namespace"]
    price = data["savings"]["price_per_gpu_hour"]
    assert table.column("namespace") == [r["namespace"] for r in rows]
    assert table.column("idle GPU-h") == [f"{r['idle_gpu_hours']:,.1f}" for r in rows]
    assert table.column("oversized GPU-h") == [f"{r['oversized_gpu_hours']:,.1f}" for r in rows]
    assert table.column("cost") == [f"{r['wasted_gpu_hours'] * price:,.2f}" for r in rows]
    assert table.column("slices") == [str(r["slices"]) for r in rows]


def test_pools_table_matches_the_pools(data: dict[str, Any], page: Page) -> None:
    table = page.tables["pools-table"]
    assert table.column("pool") == [p["pool"] for p in data["pools"]]
    for pool, row in zip(data["pools"], table.rows, strict=True):
        cells = dict(zip(table.titles, row, strict=True))
        mine = [s for s in _current(data) if s["pool"] == pool["pool"]]
        assert cells["GPUs"] == str(pool["gpus"])
        assert cells["slices"] == str(len(mine))
        assert cells["nodes"] == str(len({s["node"] for s in mine}))
        assert cells["idle"] == str(sum(s["status"] == "idle" for s in mine))
        assert cells["GPUs used after"] == str(pool["plan"]["gpus_used"])
        assert cells["bound"] == str(pool["lower_bound"]["gpus"])
        wasted = sum(s["wasted_gpu_hours"] for s in mine)
        assert cells["wasted GPU-h"] == f"{wasted:,.1f}"


def test_replay_table_matches_the_pools_replay(data: dict[str, Any], page: Page) -> None:
    table = page.tables["replay"]
    pools = [p for p in data["pools"] if p["replay"]]
    assert pools
    assert table.column("pool") == [p["pool"] for p in pools]
    for pool, row in zip(pools, table.rows, strict=True):
        cells = dict(zip(table.titles, row, strict=True))
        for key, title in (("current", "current layout"), ("proposed", "proposed plan")):
            share = pool["replay"][key]["served_share"]
            assert cells[f"{title}: served"].startswith(f"{share * 100:.1f}%")


def test_activity_is_one_row_per_node_then_per_slice(data: dict[str, Any], page: Page) -> None:
    current = _current(data)
    pool_grids = [g for g in page.grids if g.node is None]
    node_grids = {g.node: g for g in page.grids if g.node is not None}
    assert len(pool_grids) == len(data["pools"])
    assert sorted(n for g in pool_grids for n in g.labels) == sorted({s["node"] for s in current})
    assert set(node_grids) == {s["node"] for s in current}
    per_node = Counter(s["node"] for s in current)
    for node, grid in node_grids.items():
        assert len(grid.labels) == per_node[node]
        assert grid.attrs["data-kind"] == "hourly"
        assert grid.attrs["data-cols"] == "168"
        assert float(grid.attrs["data-start"] or "nan") == data["window"]["start_unix"]
    # The node's title names its statuses; a slice's names its owner and memory.
    titles = [t for g in pool_grids for t in g.label_titles]
    assert all(re.search(r": \d+ slices \(", t or "") for t in titles)


def test_time_axis_has_every_day_of_the_week(page_text: str) -> None:
    for day in ("Mon 05 Jan", "Tue 06 Jan", "Wed 07 Jan", "Thu 08 Jan", "Sat 10 Jan"):
        assert f">{day}</text>" in page_text


def test_every_changed_node_has_its_layouts(data: dict[str, Any], page_text: str) -> None:
    drawn = set(re.findall(r'<svg class="chart layout" data-node="([^"]*)"', page_text))
    assert {r["node"] for r in data["recommendations"]} <= drawn
    assert 'id="unchanged-layouts"' in page_text


def test_no_grafana_without_a_url(page_text: str) -> None:
    assert 'id="grafana"' not in page_text
    assert 'class="gf"' not in page_text


def test_no_trend_says_how_to_get_one(page_text: str) -> None:
    assert "--previous-reports" in page_text
    assert 'id="trend-delta"' not in page_text
