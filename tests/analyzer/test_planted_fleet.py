"""A simulated week with planted truths, analysed through every engine and both dialects.

Twelve MIG GPUs (H200 and H100 pools) get four layouts and, per instance, a role drawn from a
seeded generator: idle (held, unused), unallocated (no pod), oversized (held, a little load
on a big profile), saturated or healthy. The week is then analysed five ways — the embedded
engine on the simulator's ground truth, and a real Prometheus 2 and a real VictoriaMetrics
backfilled with the exporters' text in migscope's and dcgm-exporter's dialects — and every
way must find exactly the planted statuses and recommend layouts that are placement-valid,
keep every in-use instance where it is, and cover the demand.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.prometheus import HistorySeries, requires_prometheus
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.backfill import iter_history
from migscope.analyzer._intake.base import local_stats
from migscope.analyzer._intake.dialect import Dialect
from migscope.analyzer._intake.local_prometheus import LocalPrometheus
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices
from migscope.analyzer._intake.stats_promql import remote_slice_stats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report
from migscope.analyzer._result import AnalysisResult
from migscope.core._catalogue import find_model
from migscope.core._layout import is_valid
from migscope.core._migparted import check_config

WEEK = 7 * 86400.0
STEP = 300.0
SEED = 20261130

# Layouts as (size class, start): the same four shapes on both models.
LAYOUTS = [
    [("3g", 4), ("2g", 0), ("1g", 2), ("1g", 3)],
    [("7g", 0)],
    [("4g", 0), ("3g", 4)],
    [("2g", 0), ("2g", 2), ("2g", 4), ("1g", 6)],
]
PROFILES = {
    "H200": {"1g": "1g.18gb", "2g": "2g.35gb", "3g": "3g.71gb", "4g": "4g.71gb", "7g": "7g.141gb"},
    "H100-80GB": {
        "1g": "1g.10gb",
        "2g": "2g.20gb",
        "3g": "3g.40gb",
        "4g": "4g.40gb",
        "7g": "7g.80gb",
    },
}
WORKLOADS: dict[str, dict[str, Any]] = {
    "idle": {"pattern": "idle"},
    "unallocated": {"pattern": "idle"},
    "oversized": {"pattern": "constant", "level": 0.08, "memory": 0.05},
    "saturated": {"pattern": "constant", "level": 0.97, "memory": 0.6},
    "healthy": {"pattern": "constant", "level": 0.6, "memory": 0.5},
}


def _scenario() -> tuple[dict[str, Any], dict[tuple[str, int, str, int], str]]:
    """The scenario and the planted status of every instance, by (node, gpu, profile, start)."""
    rng = random.Random(SEED)
    nodes: list[dict[str, Any]] = []
    truth: dict[tuple[str, int, str, int], str] = {}
    models = ["H200"] * 4 + ["H100-80GB"] * 2
    for n, model in enumerate(models):
        name = f"{model.split('-')[0].lower()}-{n}"
        gpus = []
        for g in range(2):
            layout = LAYOUTS[(n * 2 + g) % len(LAYOUTS)]
            instances = []
            for k, (size, start) in enumerate(layout):
                roles = ["idle", "unallocated", "saturated", "healthy"]
                if size != "1g":
                    roles.append("oversized")  # a 1g has nothing smaller to move to
                role = rng.choice(roles)
                profile = PROFILES[model][size]
                inst: dict[str, Any] = {
                    "profile": profile,
                    "start": start,
                    "workload": WORKLOADS[role],
                }
                if role != "unallocated":
                    inst["pod"] = {"namespace": f"team-{k % 3}", "pod": f"{name}-{g}-{k}"}
                instances.append(inst)
                truth[(name, g, profile, start)] = role
            gpus.append({"model": model, "mig": True, "instances": instances})
        nodes.append({"name": name, "gpus": gpus})
    scenario = {"version": 1, "seed": SEED, "start": "2026-03-02T00:00:00Z", "nodes": nodes}
    return scenario, truth


SCENARIO, TRUTH = _scenario()


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("planted") / "planted-fleet.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return path


def _window(scenario_file: Path) -> tuple[float, float]:
    start = load_fleet([scenario_file]).clock.start
    return start, start + WEEK


def _slices(scenario_file: Path) -> Iterator[Any]:
    return simulate_slices(load_fleet([scenario_file]), window_s=WEEK, step_s=STEP)


def _history(scenario_file: Path, dialect: Dialect) -> list[HistorySeries]:
    return [
        HistorySeries(name, labels, zip((stamps / 1000.0).tolist(), values.tolist(), strict=True))
        for name, labels, stamps, values in iter_history(_slices(scenario_file), dialect)
    ]


def _through_server(url: str, window: tuple[float, float]) -> AnalysisResult:
    with PrometheusClient(url, retries=0, trust_env=False) as client:
        run = remote_slice_stats(client, start=window[0], end=window[1], step=STEP)
        return analyze(
            run, window=(run.window_start, run.window_end), options=AnalyzeOptions(step_s=STEP)
        )


@dataclass(frozen=True)
class Way:
    """One way through the analyzer and what it concluded."""

    name: str
    result: AnalysisResult


@pytest.fixture(
    scope="module",
    params=[
        "embedded",
        pytest.param("prometheus-migscope", marks=requires_prometheus),
        pytest.param("prometheus-dcgm", marks=requires_prometheus),
        pytest.param("victoria-migscope", marks=requires_victoria),
        pytest.param("victoria-dcgm", marks=requires_victoria),
    ],
)
def way(request: pytest.FixtureRequest, scenario_file: Path) -> Way:
    name: str = request.param
    window = _window(scenario_file)
    if name == "embedded":
        return Way(
            name,
            analyze(
                local_stats(_slices(scenario_file), window, STEP),
                window=window,
                options=AnalyzeOptions(step_s=STEP),
            ),
        )
    engine, dialect_name = name.split("-")
    dialect = Dialect(dialect_name)
    if engine == "prometheus":
        server = LocalPrometheus(slices=_slices(scenario_file), dialect=dialect, span_seconds=WEEK)
        with server:
            return Way(name, _through_server(server.url, window))
    with VictoriaServer(_history(scenario_file, dialect)) as vm:
        return Way(name, _through_server(vm.url, window))


def _found(result: AnalysisResult) -> dict[tuple[str, int, str, int], str]:
    found: dict[tuple[str, int, str, int], str] = {}
    for s in result.slices:
        key = s.stats.info.key
        start = s.stats.info.placement_start
        if start is None:  # dcgm-exporter: the plan inferred it from the GI id
            start = next(
                i.start
                for p in result.pools
                for g in p.gpus
                if (g.node, g.index) == (key.node, key.gpu)
                for i in g.instances
                if i.profile == s.stats.info.profile
                and (key.node, key.gpu, i.profile, i.start) in TRUTH
                and _gi_matches(p.model.key, i.profile, i.start, key.gpu_instance_id)
            )
        found[(key.node, key.gpu, s.stats.info.profile, start)] = s.status.value
    return found


def _gi_matches(model_key: str, profile: str, start: int, gi_id: int) -> bool:
    """NVML's GI id for an instance at ``start`` (ids number the memory-slice tree)."""
    model = find_model(model_key)
    size = model.profile(profile).memory_slices
    return model.memory_slices // size - 1 + start // size == gi_id


def test_the_planted_truth_has_every_status() -> None:
    assert set(TRUTH.values()) == {"idle", "unallocated", "oversized", "saturated", "healthy"}
    assert len(TRUTH) >= 30


def test_exactly_the_planted_statuses(way: Way) -> None:
    found = _found(way.result)
    assert found == TRUTH, way.name
    assert all(s.current for s in way.result.slices)


def test_the_plan_is_valid_keeps_in_use_instances_and_covers_demand(way: Way) -> None:
    result = way.result
    assert {p.model.key for p in result.pools} == {"H200-141GB", "H100-80GB"}
    for pool in result.pools:
        in_use = {
            (g.node, g.index, i.profile, i.start)
            for g in pool.gpus
            for i in g.instances
            if i.in_use
        }
        assert in_use, pool.pool
        for key in in_use:
            assert TRUTH[key] in ("healthy", "saturated")
        for gpu in pool.plan.gpus:
            placed = [(p.profile.name, p.start) for p in gpu.placements]
            assert is_valid(pool.model, [n for n, _ in placed], keep=placed).ok
            kept = {(gpu.node, gpu.index, n, s) for n, s in placed}
            assert {k for k in in_use if k[:2] == (gpu.node, gpu.index)} <= kept
        assert pool.plan.unmet_total == 0
    assert result.mig_parted is not None
    assert check_config(result.mig_parted).ok
    idle_or_unallocated = sum(1 for v in TRUTH.values() if v in ("idle", "unallocated"))
    assert result.savings["idle_slices"] + result.savings["unallocated_slices"] == (
        idle_or_unallocated
    )


def test_every_way_recommends_the_same_plan(way: Way, scenario_file: Path) -> None:
    """The source does not change the decision: configs and node plan equal the embedded ones."""
    window = _window(scenario_file)
    embedded = analyze(
        local_stats(_slices(scenario_file), window, STEP),
        window=window,
        options=AnalyzeOptions(step_s=STEP),
    )
    assert way.result.node_configs == embedded.node_configs
    assert build_report(way.result).mig_parted_config == build_report(embedded).mig_parted_config
