"""The dashboards prefer the active-seconds counter to the ratio gauge, slice by slice (issue 24).

Planted history (two hours, scraped every 30 s) on a real Prometheus and a real
VictoriaMetrics, and the panels' own queries evaluated at its end:

* ``burst``: a slice that computes 12 s of every 30, always between scrapes. Its gauge (the
  mean of the exporter's last window before each scrape) reads 0 at every scrape, so a gauge
  dashboard calls it idle; its counter grows 12 s per 30 s, and the panels must show 0.4. The
  exporter restarts 40 minutes before the end (the counter starts again from 0).
* ``legacy`` and ``legacy-idle``: slices of an exporter from before the counters (gauge only,
  0.3 and 0.01): they must still show, the second as idle.
* ``young``: a slice created 150 s before the end, computing 90 %, counter and gauge. ``rate()``
  over the hour divides by the whole hour and would make it 0.04, idle; the panels must show
  0.9 (the failure of a first attempt at this change, whose live test runs seconds after the
  exporters start: every slice there is younger than the hour).

No slice may appear twice in any per-slice panel, nor be missing from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.prometheus import HistorySeries, PrometheusServer, requires_prometheus
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.core._dashboards import DASHBOARDS, panel_queries
from migscope.core._dashboards.promql import MIG_ACTIVE_SECONDS, MIG_ACTIVITY
from migscope.core._metrics import metric

END = 1_699_999_980.0
"""The last scrape (a multiple of the scrape interval, long ago: both engines show it)."""
SCRAPE = 30.0
HOURS = 2
RATE_INTERVAL = "2m"
"""What Grafana makes of ``$__rate_interval`` at a 30 s scrape interval (4 x 30 s)."""
SUBSTITUTE = {
    "$cluster": ".*",
    "$node": ".*",
    "$gpu": ".*",
    "$namespace": ".*",
    "$__rate_interval": RATE_INTERVAL,
}
GPU = {
    "0": "GPU-00000000-0000-0000-0000-00000000000a",
    "1": "GPU-00000000-0000-0000-0000-00000000000b",
}

# name: (gpu, gpu_instance_id, profile, compute slices, activity, has counter, has gauge, age s)
SLICES: dict[str, tuple[str, str, str, str, float, bool, bool, float]] = {
    "burst": ("0", "1", "1g.18gb", "1", 0.4, True, True, HOURS * 3600),
    "legacy": ("0", "2", "2g.35gb", "2", 0.3, False, True, HOURS * 3600),
    "legacy-idle": ("0", "3", "3g.71gb", "3", 0.01, False, True, HOURS * 3600),
    "young": ("1", "1", "4g.71gb", "4", 0.9, True, True, 150.0),
}
RESTART = END - 40 * 60
"""The burst slice's exporter restarts here: its counter starts again from 0."""


def _labels(name: str) -> dict[str, str]:
    gpu, gi = SLICES[name][:2]
    return {
        "node": "node-a",
        "job": "migscope-exporter",
        "instance": "10.0.0.1:9400",
        "gpu": gpu,
        "gpu_uuid": GPU[gpu],
        "gpu_instance_id": gi,
        "mig_uuid": f"MIG-{name}",
    }


def _history() -> list[HistorySeries]:
    history: list[HistorySeries] = []
    for name, (_, _, profile, size, level, counter, gauge, age) in SLICES.items():
        times = [END - k * SCRAPE for k in range(int(age // SCRAPE), -1, -1)]
        labels = _labels(name)
        # The gauge is the mean of the exporter's last window before the scrape; the burst
        # slice computes only between scrapes, so its gauge never sees it.
        seen = 0.0 if name == "burst" else level
        if gauge:
            history.append(HistorySeries(MIG_ACTIVITY, labels, [(t, seen) for t in times]))
        if counter:
            start = times[0]
            points = []
            for t in times:
                since = t - (RESTART if name == "burst" and t >= RESTART else start)
                points.append((t, level * since))
            history.append(HistorySeries(MIG_ACTIVE_SECONDS, labels, points))
        ones = [(t, 1.0) for t in times]
        info = {**labels, "profile": profile, "compute_slices": size}
        history.append(HistorySeries(metric("mig_info").name, info, ones))
        pod = {**labels, "namespace": name, "pod": f"{name}-0", "resource": "nvidia.com/mig"}
        history.append(HistorySeries(metric("mig_pod_info").name, pod, ones))
        used = [(t, 2.0**30) for t in times]
        history.append(HistorySeries(metric("mig_memory_used_bytes").name, labels, used))
        total = [(t, 16 * 2.0**30) for t in times]
        history.append(HistorySeries(metric("mig_memory_total_bytes").name, labels, total))
    return history


ENGINES = [
    pytest.param("prometheus", marks=requires_prometheus, id="prometheus"),
    pytest.param("victoria", marks=requires_victoria, id="victoria"),
]


@pytest.fixture(scope="module", params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[PrometheusClient]:
    history = _history()
    server = PrometheusServer(history) if request.param == "prometheus" else VictoriaServer(history)
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        yield client


def _targets(dashboard: str, title: str) -> list[str]:
    model = DASHBOARDS[dashboard]()
    (panel,) = [p for p in model["panels"] if p["title"] == title]
    exprs = [str(t["expr"]) for t in panel["targets"]]
    for var, value in SUBSTITUTE.items():
        exprs = [e.replace(var, value) for e in exprs]
    return exprs


def _activity_target(dashboard: str, title: str) -> str:
    (expr,) = [e for e in _targets(dashboard, title) if MIG_ACTIVITY in e]
    return expr


PER_SLICE = {
    "node activity per slice": _activity_target("migscope-node.json", "Activity per slice"),
    "node slice map": _activity_target(
        "migscope-node.json",
        "Slice map (placement, profile, pod, activity, memory, estimated power)",
    ),
    "namespaces table (1h)": _activity_target(
        "migscope-namespaces.json", "Held slices and their owners"
    ),
}
"""The panels that show one activity per slice: each must show every slice once."""
BY_PROFILE = _activity_target("migscope-fleet.json", "Mean activity of held slices, by profile")
BY_NAMESPACE = _activity_target(
    "migscope-namespaces.json", "Mean activity of held slices per namespace"
)
IDLE_COUNT = _activity_target("migscope-fleet.json", "Idle but held (last hour)")
IDLE_OWNERS = _targets(
    "migscope-fleet.json", "Idle-but-held slices (last hour): owner and memory held"
)[0]
IDLE_PER_NAMESPACE = _activity_target(
    "migscope-namespaces.json", "Idle-but-held slices per namespace (last hour)"
)


def _slice_of(labels: dict[str, Any]) -> str:
    (name,) = [n for n in SLICES if SLICES[n][:2] == (labels["gpu"], labels["gpu_instance_id"])]
    assert labels["gpu_uuid"] == GPU[labels["gpu"]]
    return name


def _per_slice(client: PrometheusClient, expr: str) -> dict[str, float]:
    """The query's value per planted slice; fails when a slice comes back twice."""
    out: dict[str, float] = {}
    for sample in client.query(expr, at=END):
        name = _slice_of(dict(sample.labels))
        assert name not in out, f"{name} appears twice in {expr}"
        out[name] = sample.value
    return out


def test_the_planted_gauge_misses_the_burst(engine: PrometheusClient) -> None:
    """The data disagree on purpose: the burst slice's gauge is 0, its counter's mean 0.4."""
    gauge = _per_slice(engine, f"avg_over_time({MIG_ACTIVITY}[1h])")
    assert gauge["burst"] == 0.0
    counter = _per_slice(engine, f"rate({MIG_ACTIVE_SECONDS}[1h])")
    assert counter["burst"] == pytest.approx(0.4, abs=0.01)


@pytest.mark.parametrize("panel", sorted(PER_SLICE))
def test_each_slice_shows_once_with_its_counters_mean(engine: PrometheusClient, panel: str) -> None:
    """(a) the counter's value where a slice has one, (b) the gauge's where it has only that,
    (c) every slice exactly once."""
    values = _per_slice(engine, PER_SLICE[panel])
    assert set(values) == set(SLICES), values
    for name, value in values.items():
        assert value == pytest.approx(SLICES[name][4], abs=0.01), (name, value)


def test_a_range_of_the_time_series_panel_shows_each_slice_once(engine: PrometheusClient) -> None:
    """The range query Grafana sends: one series per slice, the burst at 0.4 at every step,
    the young slice from its first minutes on."""
    result = engine.query_range(
        PER_SLICE["node activity per slice"], start=END - 1800, end=END, step=60
    )
    names = [_slice_of(dict(series.labels)) for series in result]
    assert sorted(names) == sorted(SLICES), names
    for series in result:
        name = _slice_of(dict(series.labels))
        values = series.values.tolist()
        if name == "young":
            assert 1 <= len(values) <= 3
        else:
            assert len(values) == 31, (name, len(values))
        # The step just after the restart may read a little low on Prometheus (its rate()
        # extrapolates only half an interval into the window); never near the gauge's 0.
        assert all(abs(v - SLICES[name][4]) < 0.05 for v in values), (name, values)


def test_aggregated_panels_average_the_counters_means(engine: PrometheusClient) -> None:
    by_profile = {s.labels["profile"]: s.value for s in engine.query(BY_PROFILE, at=END)}
    by_namespace = {s.labels["namespace"]: s.value for s in engine.query(BY_NAMESPACE, at=END)}
    for name, (_, _, profile, _, level, _, _, _) in SLICES.items():
        assert by_profile[profile] == pytest.approx(level, abs=0.01), profile
        assert by_namespace[name] == pytest.approx(level, abs=0.01), name


def test_idle_reads_the_counter_and_a_young_slice_is_not_idle(engine: PrometheusClient) -> None:
    """Only legacy-idle idles: not the burst (its gauge says 0), not the young slice (rate()
    over the hour of 150 s of history says 0.04)."""
    owners = {s.labels["pod"] for s in engine.query(IDLE_OWNERS, at=END)}
    assert owners == {"legacy-idle-0"}
    (count,) = engine.query(IDLE_COUNT, at=END)
    assert count.value == 1
    per_namespace = {
        s.labels["namespace"]: s.value for s in engine.query(IDLE_PER_NAMESPACE, at=END)
    }
    assert per_namespace == {"legacy-idle": 1}


def test_every_activity_query_prefers_the_counter() -> None:
    """No panel reads the gauge alone: wherever it appears, the counter comes first."""
    for model in (build() for build in DASHBOARDS.values()):
        for title, expr in panel_queries(model):
            if MIG_ACTIVITY in expr:
                assert MIG_ACTIVE_SECONDS in expr, title
                assert expr.index(MIG_ACTIVE_SECONDS) < expr.index(MIG_ACTIVITY), title
