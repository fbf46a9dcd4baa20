"""The pipeline on a small simulated fleet with planted idle, unallocated and oversized slices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from migscope.analyzer._intake.base import local_stats
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices, simulation_window
from migscope.analyzer._judge.classify import Status
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import (
    build_report,
    render_csv,
    render_markdown,
    validate_report,
    write_reports,
)
from migscope.analyzer._result import AnalysisResult
from migscope.core._catalogue import find_model
from migscope.core._layout import is_valid
from migscope.core._migparted import check_config, parse_config
from migscope.core._spec.v1 import report_json

SCENARIO = {
    "version": 1,
    "seed": 3,
    "start": "2026-01-05T00:00:00Z",
    "nodes": [
        {
            "name": "node-a",
            "gpus": [
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "3g.71gb",
                            "start": 4,
                            "workload": {"pattern": "constant", "level": 0.6, "memory": 0.5},
                            "pod": {"namespace": "prod", "pod": "busy-0", "container": "c"},
                        },
                        {
                            "profile": "2g.35gb",
                            "start": 0,
                            "workload": {"pattern": "idle"},
                            "pod": {"namespace": "lab", "pod": "forgotten", "container": "c"},
                        },
                        {"profile": "1g.18gb", "start": 2},
                        {"profile": "1g.18gb", "start": 3},
                    ],
                },
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "7g.141gb",
                            "workload": {"pattern": "constant", "level": 0.08, "memory": 0.05},
                            "pod": {"namespace": "prod", "pod": "small-1", "container": "c"},
                        }
                    ],
                },
            ],
        }
    ],
}

EXPECTED = {
    (0, "3g.71gb", 4): Status.HEALTHY,
    (0, "2g.35gb", 0): Status.IDLE,
    (0, "1g.18gb", 2): Status.UNALLOCATED,
    (0, "1g.18gb", 3): Status.UNALLOCATED,
    (1, "7g.141gb", 0): Status.OVERSIZED,
}


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> AnalysisResult:
    path = tmp_path_factory.mktemp("scn") / "planted.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    sim = load_fleet([path])
    window = simulation_window(sim, window_s=86400.0)
    return analyze(
        local_stats(simulate_slices(sim, window_s=86400.0), window),
        window=window,
        options=AnalyzeOptions(price_per_gpu_hour=2.0),
    )


def test_exactly_the_planted_statuses(result: AnalysisResult) -> None:
    found = {
        (s.stats.info.key.gpu, s.stats.info.profile, s.stats.info.placement_start): s.status
        for s in result.slices
    }
    assert found == EXPECTED
    assert all(s.current for s in result.slices)
    assert all(s.stats.samples == 1440 for s in result.slices)


def test_recommendations_are_valid_and_keep_in_use_instances(result: AnalysisResult) -> None:
    model = find_model("H200-141GB")
    (pool,) = result.pools
    in_use = {
        (g.node, g.index, i.profile, i.start) for g in pool.gpus for i in g.instances if i.in_use
    }
    assert in_use == {("node-a", 0, "3g.71gb", 4)}
    for gpu in pool.plan.gpus:
        placed = [(p.profile.name, p.start) for p in gpu.placements]
        assert is_valid(model, [n for n, _ in placed], keep=placed).ok
        for inst in gpu.destroyed:
            assert (gpu.node, gpu.index, inst.profile, inst.start) not in in_use
    kept = {(g.index, p.profile.name, p.start) for g in pool.plan.gpus for p in g.placements}
    assert (0, "3g.71gb", 4) in kept
    # Demand: the busy 3g stays, the oversized 7g becomes a 1g; both fit on GPU 0.
    assert pool.demand.total == {"1g.18gb": 1, "3g.71gb": 1}
    assert pool.plan.unmet_total == 0
    assert result.savings["gpus_freed"] == 1
    (rec,) = result.recommendations()
    assert rec["node"] == "node-a"
    assert rec["disruptive"] is True  # the 7g's pod must move to its new 1g
    assert rec["pods_to_move"] == ["prod/small-1"]


def test_mig_parted_config_passes_the_checker(result: AnalysisResult) -> None:
    assert result.mig_parted is not None
    assert check_config(result.mig_parted).ok
    assert set(result.node_configs.values()) <= set(result.mig_parted.mig_configs)


def test_json_matches_schema_and_savings(result: AnalysisResult) -> None:
    data = json.loads(json.dumps(report_json(build_report(result)), allow_nan=False))
    report = validate_report(data)
    assert report.schema_version == 1
    assert data["window"]["start"] == "2026-01-05T00:00:00Z"
    assert data["window"]["end"] == "2026-01-06T00:00:00Z"
    sav = data["savings"]
    assert (sav["idle_slices"], sav["unallocated_slices"], sav["oversized_slices"]) == (1, 2, 1)
    # Idle 2g for 24 h = 2/7 GPU x 24 h; unallocated 2 x 1g = 2/7 x 24; 7g -> 1g: 6/7 x 24.
    assert sav["idle_gpu_hours"] == pytest.approx(24 * 2 / 7, abs=1e-3)
    assert sav["unallocated_gpu_hours"] == pytest.approx(24 * 2 / 7, abs=1e-3)
    assert sav["oversized_gpu_hours"] == pytest.approx(24 * 6 / 7, abs=1e-3)
    assert sav["gpu_hours_freed"] == pytest.approx(24.0)
    assert sav["freed_cost"] == pytest.approx(48.0)
    by_ns = {row["namespace"]: row for row in sav["by_namespace"]}
    assert by_ns["lab"]["idle_gpu_hours"] == pytest.approx(24 * 2 / 7, abs=1e-3)
    idle = next(s for s in data["slices"] if s["status"] == "idle")
    assert (idle["namespace"], idle["pod"], idle["gpu"]) == ("lab", "forgotten", 0)


def test_reports_and_files(result: AnalysisResult, tmp_path: Path) -> None:
    written = write_reports(result, tmp_path / "out")
    assert {p.name for p in written.values()} == {
        "report.json",
        "report.md",
        "report.html",
        "slices.csv",
        "mig-parted-config.yaml",
        "node-plan.json",
        "request-changes.yaml",
    }
    assert check_config(parse_config(written["mig-parted"].read_text())).ok
    plan = json.loads(written["plan"].read_text())
    assert [n["node"] for n in plan["nodes"]] == ["node-a"]
    md = render_markdown(build_report(result))
    assert "lab/forgotten" in md
    assert "## Recommendations" in md
    assert "```yaml" in md
    rows = render_csv(result).splitlines()
    assert len(rows) == 1 + len(EXPECTED)
    assert rows[0].startswith("node,gpu,gpu_uuid,gpu_instance_id")


def test_repartition_keeps_only_current_slices_in_the_plan() -> None:
    sim = load_fleet(["fleet-mixed"])
    window = simulation_window(sim, window_s=5 * 86400.0)
    result = analyze(local_stats(simulate_slices(sim, window_s=5 * 86400.0), window), window=window)
    node2 = [s for s in result.slices if s.stats.info.key.node == "h100-node-2"]
    current = sorted(
        (s.stats.info.profile, s.stats.info.placement_start) for s in node2 if s.current
    )
    assert current == [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)]
    assert sum(not s.current for s in node2) == 7  # the seven 1g of days 0-3
    for pool in result.pools:
        for gpu in pool.gpus:
            starts = [i.start for i in gpu.instances]
            assert len(starts) == len(set(starts))
