"""Every migscope family names a GPU with the same label, so whole-GPU and per-slice series join.

Until issue 13 the whole-GPU families said ``uuid`` and the per-slice ones ``gpu_uuid``, and
every join between them needed a ``label_replace``. The contract now has one name,
:data:`migscope.core._metrics.GPU_UUID`; this checks the contract, the exporter's real
exposition (the golden file the contract test pins) and, on a real Prometheus serving that
exposition, that PromQL joins ``migscope_mig_*`` with ``migscope_gpu_*`` on ``gpu_uuid`` alone.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.prometheus import HistorySeries, PrometheusServer, requires_prometheus

from migscope.core._metrics import GPU_LABELS, GPU_UUID, METRICS, MIG_LABELS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "exporter-sim-h200.prom"
T0 = 1_700_000_000.0
STEPS = 6  # one sample a minute; instant queries at the last one


def test_every_family_that_names_a_gpu_names_it_gpu_uuid() -> None:
    naming_a_gpu = [spec for spec in METRICS if "gpu" in spec.labels]
    assert len(naming_a_gpu) >= 20
    for spec in naming_a_gpu:
        assert spec.labels[:2] == ("gpu", GPU_UUID), spec.name
        assert not {"uuid", "UUID"} & set(spec.labels), spec.name
    assert GPU_LABELS[1] == MIG_LABELS[1] == GPU_UUID == "gpu_uuid"


def _exposition() -> list[tuple[str, dict[str, str], float]]:
    text = GOLDEN.read_text(encoding="utf-8")
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def test_the_exporters_own_exposition_uses_the_one_label() -> None:
    samples = _exposition()
    gpu_series = [(name, labels) for name, labels, _ in samples if "gpu" in labels]
    assert {name.split("_")[1] for name, _ in gpu_series} == {"gpu", "mig"}
    for name, labels in gpu_series:
        assert labels.get(GPU_UUID, "").startswith("GPU-"), name
        assert "uuid" not in labels, name


@pytest.fixture(scope="module")
def prometheus() -> Any:
    """A real Prometheus holding six minutes of the golden exposition, as one target's scrapes
    (the target labels a ServiceMonitor adds: job, instance, node)."""
    target = {"job": "migscope-exporter", "instance": "10.0.0.1:9400", "node": "gpu-node-a"}
    history = [
        HistorySeries(
            name,
            {**labels, **target},
            [(T0 + 60 * i, value) for i in range(STEPS)],
        )
        for name, labels, value in _exposition()
        if not math.isnan(value)
    ]
    with PrometheusServer(history) as server:
        yield server


def _query(server: Any, promql: str) -> list[dict[str, Any]]:
    reply = httpx.get(
        f"{server.url}/api/v1/query",
        params={"query": promql, "time": T0 + 60 * (STEPS - 1)},
        timeout=30,
    )
    body = reply.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@requires_prometheus
def test_slices_join_their_gpu_on_gpu_uuid_without_relabelling(prometheus: Any) -> None:
    slices = _query(prometheus, "migscope_mig_graphics_active_ratio")
    assert len(slices) == 14
    joined = _query(
        prometheus,
        "migscope_mig_graphics_active_ratio"
        " * on (gpu_uuid) group_left (model, mig_mode) migscope_gpu_info",
    )
    assert len(joined) == len(slices)
    for series in joined:
        assert series["metric"]["model"] == "H200-141GB"
        assert series["metric"]["mig_mode"] == "enabled"
    by_gpu = {s["metric"]["gpu_uuid"] for s in slices}
    assert {s["metric"]["gpu_uuid"] for s in joined} == by_gpu
    # Many slices to one GPU the other way round too: each GPU's compute slices held.
    held = _query(
        prometheus,
        "sum by (gpu_uuid) (group by (gpu_uuid, gpu_instance_id, compute_slices)"
        " (migscope_mig_info) * 0 + 1)"
        " <= on (gpu_uuid) migscope_gpu_compute_slices",
    )
    assert {s["metric"]["gpu_uuid"] for s in held} == by_gpu


@requires_prometheus
def test_the_docs_example_join_works(prometheus: Any) -> None:
    """docs/metrics.md's example: a slice's share of its GPU's power, with the GPU's layout."""
    doc = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    example = doc.split("# each slice's share of its GPU's measured power", 1)[1]
    promql = example.split("\n", 1)[1].split("```", 1)[0].strip()
    assert "on (gpu_uuid)" in promql
    assert "label_replace" not in promql
    shares = _query(prometheus, promql)
    assert len(shares) == 14
    per_gpu: dict[str, float] = {}
    for series in shares:
        assert series["metric"]["layout"]
        uuid = series["metric"]["gpu_uuid"]
        per_gpu[uuid] = per_gpu.get(uuid, 0.0) + float(series["value"][1])
    # the estimated shares of a GPU add up to its measured power (docs/metrics.md)
    assert len(per_gpu) == 4  # the four MIG GPUs of the scenario
    assert all(math.isclose(total, 1.0, rel_tol=1e-6) for total in per_gpu.values())


@requires_prometheus
def test_the_old_label_name_is_gone(prometheus: Any) -> None:
    assert _query(prometheus, '{__name__=~"migscope_.+", uuid!=""}') == []
    assert len(_query(prometheus, 'migscope_gpu_info{gpu_uuid=~"GPU-.+"}')) == 8
