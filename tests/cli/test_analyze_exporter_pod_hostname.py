"""A dcgm-exporter ``Hostname`` that is the exporter pod's name plans no node (issue 25, item 6).

dcgm-exporter writes ``NODE_NAME`` into ``Hostname`` when the DaemonSet sets it, else the
container's host name: in a pod, the pod's name. The real MIG capture
``tests/fixtures/dcgm/dcgm-mig-a100-40gb-3gi-active.txt`` (run-ai/fake-gpu-operator's
recording of a real A100-SXM4-40GB) says ``Hostname="nvidia-dcgm-exporter-q28k4"``. A week
of it gave a plan for node ``nvidia-dcgm-exporter-q28k4``, which does not exist, and no note.

History: the capture's own label sets (verbatim), repeated every 5 minutes for 8 days with
planted values (idle slices, so that a plan would change the GPU): written here, not
recorded. Read through ``migscope analyze --source FILE`` and through a real Prometheus; with
a ``kubernetes_node`` label (what Prometheus' Kubernetes discovery is commonly relabelled to)
the node is taken from it and planned.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from support.prometheus import HistorySeries, PrometheusServer, requires_prometheus, to_openmetrics

from migscope.analyzer._intake.dialect import keeps
from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.cli.main import cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt"
POD = "nvidia-dcgm-exporter-q28k4"
STEP = 300
END = float((int(time.time()) // 3600 - 3) * 3600)
START = END - 8 * 86_400
GRID = np.arange(START, END + 1, STEP, dtype=np.float64)


def _history(extra: dict[str, str]) -> list[HistorySeries]:
    scrape = parse_exposition(FIXTURE.read_text(), keep=keeps, default_timestamp=END)
    out = []
    for name, items in scrape.series.items():
        for s in items:
            if not s.labels.get("GPU_I_ID"):
                continue
            assert s.labels.get("Hostname") == POD  # the capture's, verbatim
            value = 0.0 if "FB_USED" not in name else 10.0
            if "FB_FREE" in name:
                value = 4_800.0
            points = [(float(t), value) for t in GRID]
            out.append(HistorySeries(name, {**s.labels, **extra}, points))
    assert len({s.labels["GPU_I_ID"] for s in out}) == 3
    return out


def _analyze(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["analyze", *args, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _check(report: dict[str, object], planned: str | None) -> None:
    slices = report["slices"]
    assert isinstance(slices, list)
    assert len(slices) == 3  # still reported, as slices
    notes = [n for n in report["notes"] if POD in n]  # type: ignore[attr-defined]
    node_configs = report["node_configs"]
    assert isinstance(node_configs, dict)
    if planned is None:
        assert {s["node"] for s in slices} == {POD}
        assert all(s["current"] for s in slices)
        assert node_configs == {}
        assert len(notes) == 1, report["notes"]
        assert "dcgm-exporter pod" in notes[0]
    else:
        assert {s["node"] for s in slices} == {planned}
        assert list(node_configs) == [planned]
        assert notes == []


@pytest.mark.parametrize(
    ("extra", "planned"),
    [({}, None), ({"kubernetes_node": "gpu-node-7"}, "gpu-node-7")],
    ids=["pod-only", "kubernetes_node"],
)
def test_source_file(tmp_path: Path, extra: dict[str, str], planned: str | None) -> None:
    path = tmp_path / "week.om"
    path.write_text(to_openmetrics(_history(extra)))
    _check(_analyze("--source", str(path), "--window", "7d"), planned)


@requires_prometheus
@pytest.mark.parametrize(
    ("extra", "planned"),
    [({}, None), ({"kubernetes_node": "gpu-node-7"}, "gpu-node-7")],
    ids=["pod-only", "kubernetes_node"],
)
def test_prometheus(extra: dict[str, str], planned: str | None) -> None:
    with PrometheusServer(_history(extra)) as server:
        report = _analyze("--prometheus", server.url, "--window", "7d", "--end", str(int(END)))
    _check(report, planned)
