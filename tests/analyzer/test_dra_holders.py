"""Slices held through Kubernetes DRA ResourceClaims are held, in both dialects and every engine.

Issue 21. A MIG slice a pod holds through a ResourceClaim is labelled by dcgm-exporter
4.6.0-4.8.3+ with ``dra_claim_name``/``dra_claim_namespace`` (and ``dra_*`` device labels),
sometimes without the pod labels (NVIDIA/dcgm-exporter#718), and by migscope's exporter with
``claim``/``claim_namespace`` on ``migscope_mig_pod_info``. Such a slice must be ``idle`` or
busy, never ``unallocated``; a busy one is demand; a GPU holding one whose pod is unknown is
never changed; and an oversized one gets advice naming the claim and the CEL selector.

Data: the planted dcgm-exporter scrape ``tests/fixtures/dcgm/dcgm-dra-mig-h100nvl-planted.txt``
(written by hand in #664's label shape, not a capture), and a planted week of a simulated H200
node whose holders are turned into claims, analysed embedded, from its exposition text in
either dialect, and through a real Prometheus and a real VictoriaMetrics.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from support.prometheus import HistorySeries, PrometheusServer, requires_prometheus
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.backfill import iter_history, write_openmetrics
from migscope.analyzer._intake.base import local_stats
from migscope.analyzer._intake.dialect import (
    DIALECT_METRICS,
    Dialect,
    holder_of,
    iter_slice_series,
)
from migscope.analyzer._intake.openmetrics import read_exposition
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices
from migscope.analyzer._intake.stats_local import SliceSeries
from migscope.analyzer._intake.stats_promql import remote_slice_stats
from migscope.analyzer._judge.claims import profile_selector, template_origin
from migscope.analyzer._model import Holder
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report, render_html, render_markdown
from migscope.analyzer._result import AnalysisResult
from migscope.cli.main import cli
from migscope.core._spec.v1 import ReportV1, report_json, validate_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PLANTED_SCRAPE = FIXTURES / "dcgm" / "dcgm-dra-mig-h100nvl-planted.txt"
WEEK = 7 * 86400.0
STEP = 300.0


# ---------------------------------------------------------------------------------------------
# Labels


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"namespace": "ml", "pod": "p"}, ("ml", "p")),  # device plugin: unchanged
        (  # dcgm-exporter DRA series with pod labels
            {"namespace": "ml", "pod": "p", "dra_claim_name": "c", "dra_claim_namespace": "ml"},
            ("ml", "p", "c"),
        ),
        ({"dra_claim_name": "c", "dra_claim_namespace": "ml"}, ("ml", "", "c")),  # #718: no pod
        (  # honor_labels false, the workload's labels renamed
            {
                "namespace": "gpu-operator",
                "pod": "dcgm-exporter-x",
                "exported_namespace": "ml",
                "exported_pod": "p",
                "exported_dra_claim_name": "c",
                "exported_dra_claim_namespace": "ml",
            },
            ("ml", "p", "c"),
        ),
        (  # no workload pod label: pod/namespace are the scraped exporter's, not the holder
            {
                "namespace": "gpu-operator",
                "pod": "dcgm-exporter-x",
                "dra_claim_name": "c",
                "dra_claim_namespace": "ml",
            },
            ("ml", "", "c"),
        ),
        (  # migscope_mig_pod_info of a DRA holder
            {
                "namespace": "ml",
                "pod": "p",
                "container": "w",
                "resource": "gpu.nvidia.com",
                "claim": "c",
                "claim_namespace": "ml",
                "attribution": "dra-resourceslice",
            },
            ("ml", "p", "c"),
        ),
        ({"claim": "c", "namespace": "ml"}, ("ml", "", "c")),  # claim namespace from namespace
        ({"dra_driver_name": "gpu.nvidia.com", "dra_claim_name": ""}, None),  # nothing held
    ],
)
def test_holder_of(labels: dict[str, str], expected: Holder | None) -> None:
    got = holder_of(labels)
    assert got == expected
    if got is not None and len(got) == 3:
        assert got[1] == "" or got[0] == labels.get("exported_namespace", labels.get("namespace"))


@pytest.mark.parametrize(
    ("claim", "pod", "expected"),
    [
        ("trainer-0-gpu-x7k2q", "trainer-0", (True, "gpu")),
        ("trainer-0-mig-claim-bcd24", "trainer-0", (True, "mig-claim")),
        ("shared-mig", "trainer-0", (False, None)),  # a claim created by hand
        ("trainer-0-gpu-x7k2q", "", (False, None)),  # no pod: nothing said
        ("trainer-0-gpu-x7kaq", "trainer-0", (False, None)),  # 'a' is not in the suffix alphabet
        ("other-pod-gpu-x7k2q", "trainer-0", (False, None)),
        # both parts cut in proportion to fit 57 characters (the controller's rule)
        ("a" * 40 + "-" + "b" * 15 + "-x7k2q", "a" * 60, (True, None)),
    ],
)
def test_template_origin(claim: str, pod: str, expected: tuple[bool, str | None]) -> None:
    assert template_origin(claim, pod) == expected


def test_profile_selector_is_the_drivers_cel_form() -> None:
    # the form of kubernetes-sigs/dra-driver-nvidia-gpu's MIG guide (tests/fixtures/real/dra/)
    guide = FIXTURES / "real" / "dra" / "dra-driver-docs-mig-guide-claim-templates-and-pod.yaml"
    assert f'expression: "{profile_selector("1g.5gb")}"' in guide.read_text()


# ---------------------------------------------------------------------------------------------
# The planted dcgm-exporter scrape, through the file source and the CLI


def test_planted_dra_scrape_reads_claims_as_holders() -> None:
    series = read_exposition(PLANTED_SCRAPE, keep=DIALECT_METRICS, default_timestamp=1.76e9)
    slices = {s.info.key.gpu_instance_id: s for s in iter_slice_series(series)}
    assert dict.fromkeys(slices[2].holders) == {("ml", "trainer-0", "trainer-0-gpu-x7k2q"): None}
    assert list(slices[3].holders) == [("research", "", "shared-mig")]
    assert list(slices[9].holders) == [("ml", "infer-0", "infer-0-mig-b2c4d")]
    assert not slices[10].holders
    assert slices[3].info.mig_uuid == "MIG-1f2e3d4c-5b6a-5978-8a9b-0c1d2e3f4a5b"


def test_planted_dra_scrape_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["analyze", "--source", str(PLANTED_SCRAPE), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text())
    validate_report(data)
    by_gi = {s["gpu_instance_id"]: s for s in data["slices"]}
    assert by_gi[3]["status"] == "idle"  # held through a claim with no pod: not unallocated
    assert (by_gi[3]["namespace"], by_gi[3]["pod"], by_gi[3]["claim"]) == (
        "research",
        None,
        "shared-mig",
    )
    assert by_gi[10]["status"] == "unallocated"
    assert by_gi[9]["status"] == "healthy"
    assert by_gi[9]["owners"] == [
        {"namespace": "ml", "pod": "infer-0", "fraction": 1.0, "claim": "infer-0-mig-b2c4d"}
    ]
    oversized = by_gi[2]
    assert oversized["status"] == "oversized"
    resize = oversized["claim_resize"]
    assert resize == {
        "claim": "trainer-0-gpu-x7k2q",
        "namespace": "ml",
        "pod": "trainer-0",
        "from_template": True,
        "pod_claim": "gpu",
        "current_profile": "3g.47gb",
        "profile": oversized["suggested_profile"],
        "device_class": "mig.nvidia.com",
        "selector": f"device.attributes['gpu.nvidia.com'].profile == "
        f"'{oversized['suggested_profile']}'",
    }
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for text in (md, html):
        assert "ResourceClaim ml/trainer-0-gpu-x7k2q" in text
        assert "ResourceClaimTemplate" in text
        assert "claim research/shared-mig" in text
    assert resize["selector"] in md
    assert resize["selector"].replace("'", "&#x27;") in html


# ---------------------------------------------------------------------------------------------
# A planted week through every engine and both dialects

CLAIMS: dict[str, tuple[str, bool]] = {
    # pod -> (claim, whether the series name the pod): how each planted pod holds its slice
    "train-0": ("train-0-gpu-4bz9q", True),  # oversized, from a template
    "notebook-0": ("notebook-mig", False),  # idle, claim only (#718)
    "serve-0": ("serve-0-mig-7hkd2", True),  # busy
    "serve-1": ("serve-1-mig-x2c4v", True),  # busy, whole GPU 1
    "idle-dp": ("", True),  # idle, device plugin
}

SCENARIO: dict[str, Any] = {
    "version": 1,
    "seed": 21,
    "start": "2026-03-02T00:00:00Z",
    "nodes": [
        {
            "name": "h200-dra",
            "gpus": [
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "3g.71gb",
                            "start": 4,
                            "pod": {"namespace": "ml", "pod": "train-0"},
                            "workload": {"pattern": "constant", "level": 0.08, "memory": 0.05},
                        },
                        {
                            "profile": "2g.35gb",
                            "start": 0,
                            "pod": {"namespace": "lab", "pod": "notebook-0"},
                            "workload": {"pattern": "idle"},
                        },
                        {
                            "profile": "1g.18gb",
                            "start": 2,
                            "pod": {"namespace": "ml", "pod": "serve-0"},
                            "workload": {"pattern": "constant", "level": 0.6, "memory": 0.5},
                        },
                        {"profile": "1g.18gb", "start": 3, "workload": {"pattern": "idle"}},
                    ],
                },
                {
                    "model": "H200",
                    "mig": True,
                    "instances": [
                        {
                            "profile": "4g.71gb",
                            "start": 0,
                            "pod": {"namespace": "ml", "pod": "serve-1"},
                            "workload": {"pattern": "constant", "level": 0.6, "memory": 0.5},
                        },
                        {
                            "profile": "3g.71gb",
                            "start": 4,
                            "pod": {"namespace": "ml", "pod": "idle-dp"},
                            "workload": {"pattern": "idle"},
                        },
                    ],
                },
            ],
        }
    ],
}
PLANTED = {  # (gpu, profile, start) -> status
    (0, "3g.71gb", 4): "oversized",
    (0, "2g.35gb", 0): "idle",
    (0, "1g.18gb", 2): "healthy",
    (0, "1g.18gb", 3): "unallocated",
    (1, "4g.71gb", 0): "healthy",
    (1, "3g.71gb", 4): "idle",
}


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dra") / "dra-node.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return path


def _as_claims(series: SliceSeries) -> SliceSeries:
    """The simulator's device-plugin holders turned into the DRA holders of :data:`CLAIMS`."""
    holders: dict[Holder, Any] = {}
    for (namespace, pod), stamps in series.holders.items():
        claim, named = CLAIMS[pod]
        holder: Holder = (namespace, pod if named else "", claim) if claim else (namespace, pod)
        holders[holder] = stamps
    return dataclasses.replace(series, holders=holders)


def _slices(scenario_file: Path) -> Iterator[SliceSeries]:
    fleet = load_fleet([scenario_file])
    return (_as_claims(s) for s in simulate_slices(fleet, window_s=WEEK, step_s=STEP))


def _window(scenario_file: Path) -> tuple[float, float]:
    start = load_fleet([scenario_file]).clock.start
    return start, start + WEEK


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


@pytest.fixture(
    scope="module",
    params=[
        "embedded",
        "file-migscope",
        "file-dcgm",
        pytest.param("prometheus-migscope", marks=requires_prometheus),
        pytest.param("prometheus-dcgm", marks=requires_prometheus),
        pytest.param("victoria-migscope", marks=requires_victoria),
        pytest.param("victoria-dcgm", marks=requires_victoria),
    ],
)
def way(request: pytest.FixtureRequest, scenario_file: Path) -> tuple[str, AnalysisResult]:
    name: str = request.param
    window = _window(scenario_file)
    options = AnalyzeOptions(step_s=STEP)
    if name == "embedded":
        stats = local_stats(_slices(scenario_file), window, STEP)
        return name, analyze(stats, window=window, options=options)
    engine, dialect_name = name.split("-")
    dialect = Dialect(dialect_name)
    if engine == "file":
        text = io.StringIO()
        write_openmetrics(_slices(scenario_file), text, dialect=dialect)
        path = Path(str(scenario_file) + f".{dialect_name}.om")
        path.write_text(text.getvalue())
        series = read_exposition(path, keep=DIALECT_METRICS)
        stats = local_stats(iter_slice_series(series), window, STEP)
        return name, analyze(stats, window=window, options=options)
    history = _history(scenario_file, dialect)
    if engine == "prometheus":
        with PrometheusServer(history) as server:
            return name, _through_server(server.url, window)
    with VictoriaServer(history) as vm:
        return name, _through_server(vm.url, window)


def test_the_history_carries_the_dra_labels(scenario_file: Path) -> None:
    """The series written are in each exporter's DRA shape (so the readers read those names)."""
    dcgm = [labels for _, labels, _ in _history(scenario_file, Dialect.DCGM)]
    assert {"dra_claim_name": "notebook-mig", "dra_claim_namespace": "lab"}.items() <= next(
        ls for ls in dcgm if ls.get("dra_claim_name") == "notebook-mig"
    ).items()
    assert not any(ls.get("pod") for ls in dcgm if ls.get("dra_claim_name") == "notebook-mig")
    pod_info = [ls for name, ls, _ in _history(scenario_file, Dialect.MIGSCOPE) if "pod" in name]
    serve = next(ls for ls in pod_info if ls.get("pod") == "serve-0")
    assert (serve["claim"], serve["claim_namespace"], serve["resource"]) == (
        "serve-0-mig-7hkd2",
        "ml",
        "gpu.nvidia.com",
    )
    assert serve["attribution"] == "dra-resourceslice"


def _by_place(result: AnalysisResult) -> dict[tuple[int, str, int], Any]:
    out = {}
    for s in result.slices:
        key, start = s.stats.info.key, s.stats.info.placement_start
        if start is None:  # dcgm-exporter: the planner placed it from the GI id
            start = next(
                i.start
                for p in result.pools
                for g in p.gpus
                if g.index == key.gpu
                for i in g.instances
                if i.profile == s.stats.info.profile
                and (key.gpu, i.profile, i.start) in PLANTED
                and (
                    p.model.memory_slices // p.model.profile(i.profile).memory_slices
                    - 1
                    + i.start // p.model.profile(i.profile).memory_slices
                )
                == key.gpu_instance_id
            )
        out[(key.gpu, s.stats.info.profile, start)] = s
    return out


def test_dra_held_slices_are_held(way: tuple[str, AnalysisResult]) -> None:
    name, result = way
    found = _by_place(result)
    assert {k: s.status.value for k, s in found.items()} == PLANTED, name
    notebook = found[(0, "2g.35gb", 0)]
    assert notebook.held, name
    assert notebook.status.value == "idle", name
    assert notebook.stats.main_owner is not None
    assert notebook.stats.main_owner.who == "claim lab/notebook-mig"
    serve = found[(0, "1g.18gb", 2)]
    assert serve.held, name
    assert serve.in_use, name
    assert serve.demand_profile == "1g.18gb", name
    assert [o.who for o in serve.stats.owners] == ["ml/serve-0 (claim serve-0-mig-7hkd2)"]
    pool = next(iter(result.pools))
    assert pool.demand.busy.get("1g.18gb", 0) >= 1


def test_a_gpu_held_through_a_claim_without_pod_is_never_changed(
    way: tuple[str, AnalysisResult],
) -> None:
    name, result = way
    found = _by_place(result)
    assert found[(0, "2g.35gb", 0)].pin == "held through claim lab/notebook-mig, its pod unknown"
    report = report_json(build_report(result))
    for rec in report["recommendations"]:
        assert 0 not in rec["gpus_recreated"], name
        for entry in rec["slices"]:
            if entry["gpu"] in rec["gpus_recreated"] and entry["pods"]:
                assert rec["disruptive"], name
                assert set(entry["pods"]) <= set(rec["pods_to_move"]), name
    for node in report.get("node_plan", []) or []:
        assert all(g != 0 for g in node.get("gpus_recreated", ())), name


def test_the_oversized_claim_gets_its_selector(way: tuple[str, AnalysisResult]) -> None:
    name, result = way
    train = _by_place(result)[(0, "3g.71gb", 4)]
    resize = train.claim_resize
    assert resize is not None, name
    assert (resize.claim, resize.namespace, resize.pod) == ("train-0-gpu-4bz9q", "ml", "train-0")
    assert resize.from_template
    assert resize.pod_claim == "gpu"
    assert resize.profile == train.verdict.suggested_profile
    assert resize.selector == f"device.attributes['gpu.nvidia.com'].profile == '{resize.profile}'"
    data = report_json(build_report(result))
    validate_report(data)
    report = ReportV1.model_validate(data)
    row = next(s for s in report.slices if s.claim_resize is not None)
    assert row.claim == "train-0-gpu-4bz9q"
    assert resize.selector in render_markdown(report)
    assert "train-0-gpu-4bz9q" in render_html(report)
    # device-plugin slices keep their shape: no claim anywhere on them
    idle_dp = next(s for s in data["slices"] if s["pod"] == "idle-dp")
    assert idle_dp["claim"] is None
    assert "claim" not in idle_dp["owners"][0]
    assert np.isclose(idle_dp["owners"][0]["fraction"], 1.0)
