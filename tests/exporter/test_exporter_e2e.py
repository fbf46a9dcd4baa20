"""The assembled exporter over real HTTP, with pods from a real gRPC kubelet fake.

Real components: the production runtime (backend, sampler, collector, HTTP server), a real
``grpc.server`` speaking kubelet PodResources v1 on a unix socket, real HTTP on loopback, and
``promtool`` from Debian's prometheus package. Only NVML is simulated.
"""

from __future__ import annotations

import http.client
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from support.kubelet import FakeKubelet, make_pod

from migscope.exporter._http import ExporterApp, ExporterServer
from migscope.exporter._runtime import Exporter, build, render_once
from migscope.exporter._settings import load_settings

MIGSCOPE = str(Path(sys.executable).with_name("migscope"))


def h100_node_scenario(tmp_path: Path) -> Path:
    """8 x H100-80GB, 7 x 1g.10gb each, every slice held by a pod (the benchmark's node)."""
    gpus = []
    for g in range(8):
        instances = [
            {
                "profile": "1g.10gb",
                "workload": {"pattern": "constant", "level": round(0.1 * (i + 1), 2)},
                "pod": {"namespace": f"team-{g}", "pod": f"job-{g}-{i}", "container": "main"},
            }
            for i in range(7)
        ]
        gpus.append({"model": "H100-80GB", "mig": True, "instances": instances})
    path = tmp_path / "h100-node.yaml"
    path.write_text(yaml.safe_dump({"seed": 5, "nodes": [{"name": "h100-node", "gpus": gpus}]}))
    return path


def kubelet_pods(exporter: Exporter) -> list[Any]:
    """What the device plugin would have told the kubelet: the scenario's assignments."""
    node = next(iter(exporter.simulation))
    pods: dict[tuple[str, str], dict[str, dict[str, list[str]]]] = {}
    for a in node.pod_assignments():
        containers = pods.setdefault((a.namespace, a.pod), {})
        containers.setdefault(a.container, {}).setdefault(a.resource_name, []).append(a.device_id)
    return [make_pod(pod, namespace=ns, containers=c) for (ns, pod), c in pods.items()]


class Running:
    """An exporter serving on a free loopback port, scraped over real HTTP."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter
        app = ExporterApp(
            registry=exporter.registry,
            health=exporter.health,
            name="migscope exporter",
            version="test",
            max_concurrent_scrapes=8,
            render_text=exporter.collector.render_text,
        )
        self.server = ExporterServer(app, listen="127.0.0.1:0", threads=16)

    def __enter__(self) -> Running:
        self.exporter.start()
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.exporter.stop()

    def get(self, path: str) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()

    def samples(self) -> dict[str, list[Any]]:
        status, text = self.get("/metrics")
        assert status == 200
        out: dict[str, list[Any]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out.setdefault(sample.name, []).append(sample)
        return out


@pytest.fixture
def node_with_kubelet(tmp_path: Path) -> Iterator[tuple[Running, FakeKubelet]]:
    with FakeKubelet() as kubelet:
        settings = load_settings(
            overrides={
                "backend": "sim",
                "scenario": str(h100_node_scenario(tmp_path)),
                "pod_source": "kubelet",
                "kubelet_socket": kubelet.socket_path,
                "kubelet_refresh": 0.5,
                "interval": 0.2,
                "gpm_interval": 0.2,
            }
        )
        exporter = build(settings)
        kubelet.set_pods(kubelet_pods(exporter))
        with Running(exporter) as running:
            assert exporter.watcher is not None
            assert exporter.watcher.wait_for_refreshes(1, timeout=10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                snap = exporter.sampler.latest()
                if snap and all(i.activity for g in snap.gpus for i in g.instances):
                    break
                time.sleep(0.05)
            yield running, kubelet


def test_every_slice_is_served_with_its_pod_from_the_kubelet(
    node_with_kubelet: tuple[Running, FakeKubelet],
) -> None:
    running, kubelet = node_with_kubelet
    samples = running.samples()
    assert len(samples["migscope_mig_info"]) == 56
    pods = samples["migscope_mig_pod_info"]
    assert len(pods) == 56
    assert {s.labels["resource"] for s in pods} == {"nvidia.com/mig-1g.10gb"}
    assert {s.labels["pod"] for s in pods} == {f"job-{g}-{i}" for g in range(8) for i in range(7)}
    activity = samples["migscope_mig_graphics_active_ratio"]
    assert len(activity) == 56
    assert {round(s.value, 2) for s in activity} == {round(0.1 * (i + 1), 2) for i in range(7)}
    success = {s.labels["collector"]: s.value for s in samples["migscope_collector_success"]}
    assert success == {"sim": 1.0, "gpm": 1.0, "energy": 1.0, "podresources": 1.0}
    assert kubelet.calls >= 1


def test_kubelet_trouble_marks_the_collector_and_keeps_serving(
    node_with_kubelet: tuple[Running, FakeKubelet],
) -> None:
    running, kubelet = node_with_kubelet
    watcher = running.exporter.watcher
    assert watcher is not None
    kubelet.garbage()
    deadline = time.monotonic() + 10
    while watcher.status().ok and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = running.samples()
    success = {s.labels["collector"]: s.value for s in samples["migscope_collector_success"]}
    assert success["podresources"] == 0.0
    assert len(samples["migscope_mig_info"]) == 56, "GPU metrics keep flowing"
    assert len(samples["migscope_mig_pod_info"]) == 56, "the last good owners are kept"
    assert running.get("/healthz")[0] == 200


def test_one_device_listed_by_100k_containers_keeps_the_exposition_small(
    node_with_kubelet: tuple[Running, FakeKubelet], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="migscope.exporter._podresources.client")
    running, kubelet = node_with_kubelet
    watcher = running.exporter.watcher
    assert watcher is not None
    status, before = running.get("/metrics")
    assert status == 200
    snap = running.exporter.sampler.latest()
    assert snap is not None
    gpu = snap.gpus[0].uuid
    # 1,000 pods x 100 containers (6.6 MiB on the wire), every one listing GPU 0.
    crowd = [
        make_pod(
            f"p{p:04d}",
            namespace="n",
            containers={f"c{c:02d}": {"nvidia.com/gpu": [gpu]} for c in range(100)},
        )
        for p in range(1000)
    ]
    refreshes = watcher.status().refreshes
    kubelet.set_pods([*kubelet.pods, *crowd])
    assert watcher.wait_for_refreshes(refreshes + 2, timeout=120)
    status, after = running.get("/metrics")
    assert status == 200
    assert len(after) < len(before) + 128 * 300, len(after)  # 15.7 MB without the cap
    samples = [s for f in text_string_to_metric_families(after) for s in f.samples]
    held = [
        (s.labels["pod"], s.labels["container"])
        for s in samples
        if s.name == "migscope_gpu_pod_info" and s.labels["gpu_uuid"] == gpu
    ]
    assert held == [(f"p{i // 100:04d}", f"c{i % 100:02d}") for i in range(128)]  # the first
    assert after.count("migscope_mig_pod_info{") == 56, "the slices' owners are all there"
    success = {s.labels["collector"]: s.value for s in samples if s.name.endswith("_success")}
    assert success["podresources"] == 0.0, "attribution is incomplete: say so"
    notes = [
        r.getMessage() for r in caplog.records if "over the exporter's limits" in r.getMessage()
    ]
    assert len(notes) == 1
    assert gpu in notes[0]


def test_200_concurrent_scrapes_all_answer_cleanly(
    node_with_kubelet: tuple[Running, FakeKubelet],
) -> None:
    running, _ = node_with_kubelet
    statuses: list[int] = []
    lock = threading.Lock()

    def scrape() -> None:
        status, body = running.get("/metrics")
        if status == 200:
            assert "migscope_mig_info" in body
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=scrape) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(statuses) == 200
    assert set(statuses) <= {200, 503}
    assert statuses.count(200) >= 8
    assert running.get("/metrics")[0] == 200, "still serving afterwards"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ten_thousand_scrapes_leak_neither_memory_nor_threads(
    node_with_kubelet: tuple[Running, FakeKubelet],
) -> None:
    """Scrapes while the sampler and the kubelet watcher run; measured, not timed."""
    running, _ = node_with_kubelet
    conn = http.client.HTTPConnection("127.0.0.1", running.server.port, timeout=10)

    def scrape() -> None:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        response.read()

    for _ in range(500):  # warm-up: caches, allocator arenas
        scrape()
    threads_before = threading.active_count()
    rss_before = _rss_bytes()
    for _ in range(10_000):
        scrape()
    conn.close()
    growth_mib = (_rss_bytes() - rss_before) / 2**20
    assert threading.active_count() == threads_before
    assert growth_mib < 8, f"RSS grew {growth_mib:.1f} MiB over 10,000 scrapes"


requires_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (Debian package 'prometheus'; make test installs it as root)",
)


@requires_promtool
def test_promtool_accepts_the_exposition_of_a_simulated_8xH100_node(tmp_path: Path) -> None:
    settings = load_settings(
        overrides={"backend": "sim", "scenario": str(h100_node_scenario(tmp_path))}
    )
    text = render_once(settings).decode()
    assert text.count("migscope_mig_info{") == 56
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "", result.stdout


@requires_promtool
def test_once_prints_an_exposition_promtool_accepts() -> None:
    result = subprocess.run(
        [MIGSCOPE, "exporter", "--backend", "sim", "--once", "--dcgm-compat"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "migscope_mig_pod_info{" in result.stdout
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE{" in result.stdout
    lint = subprocess.run(
        ["promtool", "check", "metrics"],
        input=result.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    # dcgm-exporter's own names break promtool's naming advice (no unit suffixes, counter
    # without _total); only those may be reported.
    for line in (lint.stdout + lint.stderr).splitlines():
        assert line.startswith("DCGM_FI_"), line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_sigterm_stops_a_serving_exporter_gracefully() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [MIGSCOPE, "exporter", "--backend", "sim", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        status = 0
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/healthz")
                status = conn.getresponse().status
                conn.close()
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        assert status == 200
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        assert conn.getresponse().status == 200
        conn.close()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
        assert proc.returncode == 0, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--backend", "sim", "--scenario", "no-such.yaml"], "no scenario file 'no-such.yaml'"),
        (["--backend", "sim", "--listen", "nowhere"], "listen"),
        (["--backend", "sim", "--interval", "0.01"], "interval"),
        (["--backend", "sim", "--node", "ghost"], "no node 'ghost'"),
        (["--backend", "sim", "--web-config", "/nonexistent.yml"], "/nonexistent.yml"),
    ],
)
def test_bad_settings_are_one_line_and_exit_1(args: list[str], needle: str) -> None:
    result = subprocess.run(
        [MIGSCOPE, "exporter", *args, "--once"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("migscope: error: ")
    assert needle in result.stderr
