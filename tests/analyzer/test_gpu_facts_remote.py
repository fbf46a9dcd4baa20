"""What a real Prometheus and a real VictoriaMetrics say of each GPU: driver and own table.

The same label sets the file readers take (``test_gpu_catalogue.py``), stored in and read
back from both engines, in both dialects: the facts must come out the same as from a file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.prometheus import HistorySeries, PrometheusServer, requires_prometheus
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.gpu_catalogue import choose_catalogue
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.prometheus_source import PrometheusSource
from migscope.core._catalogue import find_model

STEP = 60
# Half past an hour, two hours ago (VictoriaMetrics 1.x misses a lone sample on the hour).
END = float((int(time.time()) // 3600 - 2) * 3600 + 1800)
START = END - 3600
H200 = find_model("H200-141GB")


def _grid(value: float = 1.0) -> list[tuple[float, float]]:
    return [(float(t), value) for t in range(int(START), int(END) + 1, STEP)]


def _profile_rows(node: str, uuid: str, *, contradict: bool) -> list[HistorySeries]:
    rows = []
    for p in H200.profiles:
        starts = (0,) if contradict and p.compute_slices == 3 else p.placements
        labels = {
            "node": node,
            "gpu": "0",
            "gpu_uuid": uuid,
            "profile": p.name,
            "profile_id": str(p.nvml_id),
            "compute_slices": str(p.compute_slices),
            "memory_mib": str(p.memory_mib),
            "sm_count": str(p.sm_count),
            "max_instances": str(p.max_instances),
            "placements": ",".join(map(str, starts)),
            "placement_size": str(p.memory_slices),
        }
        rows.append(HistorySeries("migscope_gpu_mig_profile_info", labels, _grid()))
    return rows


def _migscope_history() -> list[HistorySeries]:
    out: list[HistorySeries] = []
    for node, contradict in (("a", False), ("b", True)):
        uuid = f"GPU-{node}"
        gpu = {"node": node, "gpu": "0", "gpu_uuid": uuid}
        info = {**gpu, "model": H200.key, "name": "NVIDIA H200", "driver_version": "580.159.04"}
        out.append(HistorySeries("migscope_gpu_info", info, _grid()))
        out += _profile_rows(node, uuid, contradict=contradict)
        mig = {**gpu, "gpu_instance_id": "1", "mig_uuid": f"MIG-{node}"}
        out.append(HistorySeries("migscope_mig_info", {**mig, "profile": "7g.141gb"}, _grid()))
        out.append(HistorySeries("migscope_mig_graphics_active_ratio", mig, _grid(0.5)))
    return out


def _dcgm_history() -> list[HistorySeries]:
    labels = {
        "gpu": "0",
        "UUID": "GPU-d",
        "modelName": "NVIDIA A100 80GB PCIe",
        "GPU_I_PROFILE": "7g.79gb",
        "GPU_I_ID": "0",
        "Hostname": "della",
        "DCGM_FI_DRIVER_VERSION": "535.104.05",
    }
    return [
        HistorySeries("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, _grid(0.5)),
        HistorySeries("DCGM_FI_DEV_FB_USED", labels, _grid(100.0)),
    ]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("prometheus", marks=requires_prometheus),
        pytest.param("victoria-metrics", marks=requires_victoria),
    ],
)
def engine(request: pytest.FixtureRequest) -> Iterator[tuple[PrometheusClient, PrometheusClient]]:
    """Two servers of one engine: migscope's dialect in one, dcgm-exporter's in the other."""
    kind = PrometheusServer if request.param == "prometheus" else VictoriaServer
    with (
        kind(_migscope_history()) as mine,
        kind(_dcgm_history()) as theirs,
        PrometheusClient(mine.url, retries=0, trust_env=False) as a,
        PrometheusClient(theirs.url, retries=0, trust_env=False) as b,
    ):
        yield a, b


def test_migscope_series_give_each_gpu_its_driver_and_own_table(
    engine: tuple[PrometheusClient, PrometheusClient],
) -> None:
    source = PrometheusSource(engine[0])
    source.slices((START, END), STEP)
    gpus = {g.node: g for g in source.gpus()}
    assert set(gpus) == {"a", "b"}
    for fact in gpus.values():
        assert str(fact.driver) == "580.159.04"
        assert fact.model == H200.key
        assert fact.table is not None
        assert len(fact.table.profiles) == len(H200.profiles)
    chosen = choose_catalogue(list(gpus.values()))
    assert set(chosen.unplanned) == {"b"}


def test_dcgm_series_give_each_gpu_its_driver(
    engine: tuple[PrometheusClient, PrometheusClient],
) -> None:
    source = PrometheusSource(engine[1])
    source.slices((START, END), STEP)
    (fact,) = source.gpus()
    assert (fact.node, fact.gpu_uuid, fact.model) == ("della", "GPU-d", "A100-80GB")
    assert str(fact.driver) == "535.104.05"
    assert fact.table is None
