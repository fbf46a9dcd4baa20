"""A node relabelling added mid-window: one slice per GPU UUID and GI, whatever its node label.

Issue 22, item 7: a scrape that gains the ``node`` relabelling (or whose node label changes)
during the window writes each GPU's series under a new node name from then on. Before the
change the node was read from the pod's address (``instance``, or a ``node``/``Hostname``
that held it); after it, the node's name. Grouped by node, the same ``gpu_uuid`` became two
GPUs with half a window each and the fleet doubled, with no note.

Planted history (written here, not recorded): two days at one sample a minute, node
``gpu-a`` (GPU ``GPU-a0``: GI 1 busy and held by ``ml/serve``, GI 2 idle) whose node label
changes at MID, and node ``gpu-b`` whose label never changes. The truth is the same history
with the node's name on every sample ("one series under one name"): every statistic of the
merged slices must equal it exactly, through the file reader and through a real Prometheus
and a real VictoriaMetrics (exact and fast statistics), in migscope's dialect (``node``) and
dcgm-exporter's (``Hostname`` up to 4.8.2, ``hostname`` from 4.8.3), with a note that names
how many slices were merged and the node names.
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
import pytest
from support.prometheus import (
    HistorySeries,
    ManagedServer,
    PrometheusServer,
    requires_prometheus,
    to_openmetrics,
)
from support.victoria import VictoriaServer
from test_uuid_grouping import FIELDS, _close

from migscope.analyzer._intake.dialect import Dialect, indexes, iter_slice_series, keeps
from migscope.analyzer._intake.openmetrics import parse_exposition
from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._intake.stats_local import RangeSemantics, slice_stats
from migscope.analyzer._intake.stats_promql import remote_slice_stats
from migscope.analyzer._model import SliceStats

STEP = 60
END = float((int(time.time()) // 3600 - 3) * 3600)
START = END - 2 * 86_400
MID = START + 86_400 + 17 * STEP
GRID = np.arange(START - 1800, END + 1, STEP, dtype=np.float64)
MIB = 1 << 20
ADDRESS = "10.0.0.5:9400"
Before = Literal["absent", "address"]

_rng = np.random.default_rng(22)
BUSY = np.clip(0.7 + _rng.normal(0, 0.1, GRID.size), 0, 1).round(4)
BUSY_MEM = _rng.integers(20_000, 40_000, GRID.size) * 1.0
IDLE = np.zeros(GRID.size)
# (node, gpu uuid, GI, profile, activity, memory MiB, pod, relabelled)
SLICES = [
    ("gpu-a", "GPU-a0", 1, "1g.18gb", BUSY, np.minimum(BUSY_MEM, 16_000.0), "serve", True),
    ("gpu-a", "GPU-a0", 2, "3g.71gb", IDLE, np.full(GRID.size, 300.0), None, True),
    ("gpu-b", "GPU-b0", 1, "1g.18gb", BUSY[::-1].copy(), np.full(GRID.size, 9_000.0), "x", False),
]


def _node_labels(
    dialect: Dialect, label: str, node: str, before: Before | None, mask: np.ndarray
) -> list[tuple[dict[str, str], np.ndarray]]:
    """The node labels of each part of the window: ``before`` None means never relabelled."""
    after = {label: node, "instance": ADDRESS if node == "gpu-a" else f"{node}:9400"}
    if before is None:
        return [(after, mask)]
    old = {"instance": ADDRESS} if before == "absent" else {label: ADDRESS, "instance": ADDRESS}
    return [(old, mask & (GRID < MID)), (after, mask & (GRID >= MID))]


def _history(dialect: Dialect, label: str, before: Before | None) -> list[HistorySeries]:
    out: list[HistorySeries] = []
    everywhere = np.ones(GRID.size, dtype=bool)

    def points(values: np.ndarray, mask: np.ndarray) -> list[tuple[float, float]]:
        return [(float(t), float(v)) for t, v in zip(GRID[mask], values[mask], strict=True)]

    gpus: list[HistorySeries] = []
    done: set[tuple[str, str]] = set()
    for node, uuid, gi, profile, act, mem, pod, moved in SLICES:
        parts = _node_labels(dialect, label, node, before if moved else None, everywhere)
        for where, mask in parts:
            if dialect is Dialect.MIGSCOPE:
                base = {**where, "gpu": "0", "gpu_uuid": uuid, "gpu_instance_id": str(gi)}
                base["mig_uuid"] = f"MIG-{uuid}-{gi}"
                info = {**where, "gpu": "0", "gpu_uuid": uuid, "model": "H200-141GB"}
                if (uuid, str(sorted(where.items()))) not in done:
                    done.add((uuid, str(sorted(where.items()))))
                    gpus.append(
                        HistorySeries("migscope_gpu_info", info, points(everywhere * 1.0, mask))
                    )
                out += [
                    HistorySeries(
                        "migscope_mig_info",
                        {**base, "profile": profile, "placement_start": str(gi - 1)},
                        points(everywhere * 1.0, mask),
                    ),
                    HistorySeries("migscope_mig_graphics_active_ratio", base, points(act, mask)),
                    HistorySeries("migscope_mig_memory_used_bytes", base, points(mem * MIB, mask)),
                ]
                if pod:
                    held = {**base, "namespace": "ml", "pod": pod, "container": "c"}
                    out.append(
                        HistorySeries("migscope_mig_pod_info", held, points(everywhere * 1.0, mask))
                    )
            else:
                labels = {
                    **where,
                    "gpu": "0",
                    "UUID": uuid,
                    "GPU_I_ID": str(gi),
                    "GPU_I_PROFILE": profile,
                    "modelName": "NVIDIA H200",
                    **({"namespace": "ml", "pod": pod} if pod else {}),
                }
                out += [
                    HistorySeries("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, points(act, mask)),
                    HistorySeries("DCGM_FI_DEV_FB_USED", labels, points(mem, mask)),
                    HistorySeries("DCGM_FI_DEV_FB_FREE", labels, points(30_000.0 - mem, mask)),
                ]
    return gpus + out


CASES = [
    (Dialect.MIGSCOPE, "node", "absent"),
    (Dialect.MIGSCOPE, "node", "address"),
    (Dialect.DCGM, "Hostname", "absent"),
    (Dialect.DCGM, "hostname", "address"),
]
IDS = [f"{d.value}-{label}-{before}" for d, label, before in CASES]


def _embedded(
    history: list[HistorySeries], semantics: RangeSemantics
) -> tuple[list[SliceStats], tuple[str, ...]]:
    series = parse_exposition(
        to_openmetrics(history), keep=keeps, index=indexes, default_timestamp=END
    )
    reader = iter_slice_series(series)
    stats = [slice_stats(s, start=START, end=END, step=STEP, semantics=semantics) for s in reader]
    return stats, reader.notes


def _assert_truth(got: list[SliceStats], truth: list[SliceStats]) -> None:
    assert [(s.key.node, s.key.gpu_uuid, s.key.gpu_instance_id) for s in got] == [
        ("gpu-a", "GPU-a0", 1),
        ("gpu-a", "GPU-a0", 2),
        ("gpu-b", "GPU-b0", 1),
    ]
    assert [s.info for s in got] == [s.info for s in truth]
    for a, b in zip(got, truth, strict=True):
        for name in FIELDS:
            assert _close(getattr(a, name), getattr(b, name)), (
                f"{a.key} {name}: {getattr(a, name)!r} != one name's {getattr(b, name)!r}"
            )
        assert [(o.pod, o.fraction) for o in a.owners] == [(o.pod, o.fraction) for o in b.owners]
        assert a.hourly is not None
        assert b.hourly is not None
        assert a.hourly.allocated == b.hourly.allocated
        assert all(_close(x, y) for x, y in zip(a.hourly.activity, b.hourly.activity, strict=True))
        assert a.last_seen == b.last_seen


def _assert_note(notes: tuple[str, ...] | list[str]) -> None:
    said = [n for n in notes if "node label" in n]
    assert len(said) == 1, notes
    assert "1 GPU(s)" in said[0]
    assert "2 slice(s)" in said[0]
    assert f"{ADDRESS} -> gpu-a" in said[0]


@pytest.mark.parametrize(("dialect", "label", "before"), CASES, ids=IDS)
def test_the_file_reader_merges_a_gpu_seen_under_two_node_names(
    dialect: Dialect, label: str, before: Before
) -> None:
    got, notes = _embedded(_history(dialect, label, before), "prometheus3")
    truth, truth_notes = _embedded(_history(dialect, label, None), "prometheus3")
    _assert_truth(got, truth)
    _assert_note(notes)
    assert not [n for n in truth_notes if "node label" in n]


SERVER_CASES = [
    (engine, dialect, label, before)
    for engine in ("prometheus", "victoriametrics")
    for dialect, label, before in CASES
]


@requires_prometheus
@pytest.mark.parametrize(
    ("engine", "dialect", "label", "before"),
    SERVER_CASES,
    ids=[f"{c[0]}-{c[1].value}-{c[2]}-{c[3]}" for c in SERVER_CASES],
)
def test_the_server_merges_a_gpu_seen_under_two_node_names(
    engine: str, dialect: Dialect, label: str, before: Before
) -> None:
    history = _history(dialect, label, before)
    server: ManagedServer = (
        PrometheusServer(history) if engine == "prometheus" else VictoriaServer(history)
    )
    semantics: RangeSemantics = "prometheus2" if engine == "prometheus" else "victoriametrics"
    truth, _ = _embedded(_history(dialect, label, None), semantics)
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        for mode in ("exact", "fast"):
            for chunk in (1, None):
                run = remote_slice_stats(
                    client, start=START, end=END, step=STEP, stats=mode, chunk_nodes=chunk
                )
                got = list(run)
                assert run.stats == mode
                _assert_truth(got, truth)
                _assert_note(run.notes)
                assert not run.silent_nodes
