"""The Grafana dashboards: a valid model, in sync with the code, and every query answered.

The last test is the one that matters: two ``migscope exporter --backend sim`` processes
(the HGX H200 node of ``h200-node`` and an H100 node of ``fleet-mixed``) are scraped every
second by a real Prometheus, next to a static kube-state-metrics exposition of the nodes'
``nvidia.com/mig.config*`` labels, and every panel's query and every variable's
``label_values`` must come back with series. A query that parses but names a series that
does not exist, or a matcher that filters everything out, fails here.
"""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.prometheus import PrometheusServer, free_port, requires_prometheus

from migscope.analyzer._intake.prometheus import PrometheusClient
from migscope.analyzer._judge.policy import default_policy
from migscope.core._dashboards import DASHBOARDS, IDLE_ACTIVITY_BELOW, panel_queries
from migscope.core._metrics import METRICS

ROOT = Path(__file__).resolve().parents[2]
MIGSCOPE = Path(sys.executable).with_name("migscope")
EXTERNAL = {"kube_node_labels"}
"""Series the dashboards use that migscope does not export (kube-state-metrics)."""
SUBSTITUTE = {
    "$cluster": ".*",
    "$node": ".*",
    "$gpu": ".*",
    "$namespace": ".*",
    "$__range": "5m",
    "$__rate_interval": "1m",
    "$__interval": "15s",
}
KSM = """\
# TYPE kube_node_labels gauge
kube_node_labels{node="gpu-node-a",label_nvidia_com_mig_config="all-balanced",\
label_nvidia_com_mig_config_state="success"} 1
kube_node_labels{node="h100-node-1",label_nvidia_com_mig_config="migscope-h100",\
label_nvidia_com_mig_config_state="pending"} 1
"""


def _models() -> dict[str, dict[str, Any]]:
    return {name: build() for name, build in DASHBOARDS.items()}


def test_committed_json_is_what_the_code_builds() -> None:
    for name, model in _models().items():
        committed = json.loads((ROOT / "dashboards" / name).read_text())
        assert committed == model, f"dashboards/{name} is stale: run scripts/gen-dashboards"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_model_is_sound(name: str) -> None:
    model = _models()[name]
    assert model["schemaVersion"] >= 36
    assert 0 < len(model["uid"]) <= 40
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in model["templating"]["list"]}
    assert "datasource" in variables
    cells: set[tuple[int, int]] = set()
    for panel in model["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] < grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$(\w+)", target["expr"])) - {"1"}
            assert used <= variables | {"__range", "__rate_interval", "__interval"}, used


def test_every_metric_is_in_the_contract() -> None:
    known = {m.name for m in METRICS} | EXTERNAL
    for model in _models().values():
        for title, expr in panel_queries(model):
            for name in re.findall(r"\b(migscope_[a-z_]+|kube_[a-z_]+)\b", expr):
                assert name in known, f"{title}: {name} is not exported"


IDLE_TABLE = "Idle-but-held slices (last hour): owner and memory held"


def test_idle_is_about_compute_whatever_memory_is_held() -> None:
    """Memory held is not use: idle reads activity only, at the analyzer's threshold."""
    assert default_policy().idle.activity_p95_below == IDLE_ACTIVITY_BELOW
    fleet = dict(panel_queries(_models()["migscope-fleet.json"]))
    idle = fleet["Idle but held (last hour)"]
    assert "migscope_mig_graphics_active_ratio" in idle
    assert f"< {IDLE_ACTIVITY_BELOW}" in idle
    assert "memory" not in idle, idle
    # every idle panel of every dashboard uses that same test, and none of them adds memory
    for model in _models().values():
        for title, expr in panel_queries(model):
            if "idle" in title.lower() and title != IDLE_TABLE:
                assert "memory" not in expr, title


class _Ksm(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = KSM.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _ScrapingPrometheus(PrometheusServer):
    def __init__(self, targets: dict[str, str], ksm: str) -> None:
        super().__init__()
        self.targets, self.ksm = targets, ksm

    def config_lines(self) -> list[str]:
        lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s", "scrape_configs:"]
        lines += ["  - job_name: migscope-exporter", "    static_configs:"]
        for node, target in self.targets.items():
            lines += [f"      - targets: ['{target}']", f"        labels: {{node: '{node}'}}"]
        lines += [
            "  - job_name: kube-state-metrics",
            "    honor_labels: true",
            "    static_configs:",
            f"      - targets: ['{self.ksm}']",
        ]
        return lines


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusClient]:
    exporters: list[subprocess.Popen[bytes]] = []
    targets: dict[str, str] = {}
    ksm = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ksm)
    thread = threading.Thread(target=ksm.serve_forever, daemon=True)
    thread.start()
    try:
        for scenario, node in (("h200-node", "gpu-node-a"), ("fleet-mixed", "h100-node-1")):
            port = free_port()
            exporters.append(
                subprocess.Popen(
                    [
                        str(MIGSCOPE),
                        "exporter",
                        "--backend",
                        "sim",
                        "--scenario",
                        scenario,
                        "--node",
                        node,
                        "--listen",
                        f"127.0.0.1:{port}",
                        "--interval",
                        "0.5",
                        "--gpm-interval",
                        "1",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            targets[node] = f"127.0.0.1:{port}"
        ksm_target = f"127.0.0.1:{ksm.server_address[1]}"
        with _ScrapingPrometheus(targets, ksm_target) as prom:
            client = PrometheusClient(prom.url, retries=0, trust_env=False)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                up = client.query(
                    "count(up == 1) and count(migscope_mig_graphics_active_ratio) > 0"
                )
                if up and up[0].value >= 3:
                    break
                time.sleep(0.5)
            else:
                pytest.fail("Prometheus did not scrape the exporters within 60 s")
            time.sleep(4)  # a few scrapes, so that *_over_time ranges hold several samples
            yield client
            client.close()
    finally:
        for proc in exporters:
            proc.terminate()
            proc.wait(timeout=10)
        ksm.shutdown()
        ksm.server_close()


def _bind(expr: str) -> str:
    for var, value in SUBSTITUTE.items():
        expr = expr.replace(var, value)
    return expr


QUERIES = [
    pytest.param(expr, id=f"{name.removesuffix('.json')}:{title}:{k}")
    for name, model in _models().items()
    for k, (title, expr) in enumerate(panel_queries(model))
]


@requires_prometheus
@pytest.mark.parametrize("expr", QUERIES)
def test_every_panel_query_returns_series(prometheus: PrometheusClient, expr: str) -> None:
    result = prometheus.query(_bind(expr))
    assert len(result) > 0, f"no series for {expr}"
    assert all(s.value == s.value for s in result)  # no NaN answers


@requires_prometheus
def test_every_variable_has_values(prometheus: PrometheusClient) -> None:
    for model in _models().values():
        for var in model["templating"]["list"]:
            if var["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((?:(.+), )?(\w+)\)", var["definition"])
            assert match, var["definition"]
            selector, label = match.groups()
            if label == "cluster":
                continue  # an external label a single-cluster Prometheus does not set
            values = prometheus.label_values(label, match=[_bind(selector)] if selector else None)
            assert values, f"variable {var['name']}: no values for {var['definition']}"


@requires_prometheus
def test_idle_and_power_panels_mean_what_they_say(prometheus: PrometheusClient) -> None:
    """Spot checks of numbers: power counted once per GPU, idle-but-held slices found."""
    boards = prometheus.query("count(migscope_gpu_power_watts)")[0].value
    gpus = prometheus.query("count(migscope_gpu_info)")[0].value
    assert boards == gpus  # never once per slice, as dcgm-exporter's dashboard does
    fleet = _models()["migscope-fleet.json"]
    idle = dict(panel_queries(fleet))["Idle but held (last hour)"]
    assert prometheus.query(_bind(idle))[0].value >= 1  # h200-node plants idle held slices


@requires_prometheus
def test_a_slice_holding_memory_but_not_computing_is_idle(prometheus: PrometheusClient) -> None:
    """notebook-alice's 2g holds 12 GiB of 32 and never runs: idle, its memory shown with it."""
    fleet = _models()["migscope-fleet.json"]
    (table,) = [p for p in fleet["panels"] if p["title"] == IDLE_TABLE]
    owners, activity, held, share = (_bind(t["expr"]) for t in table["targets"])
    pods = {s.labels.get("pod") for s in prometheus.query(owners)}
    assert {"notebook-alice", "forgotten-job"} <= pods, pods
    assert "trainer-small-0" not in pods  # computes (0.97), whatever it holds
    assert all(s.value < IDLE_ACTIVITY_BELOW for s in prometheus.query(activity))
    assert max(s.value for s in prometheus.query(share)) > default_policy().idle.memory_p95_below
    assert max(s.value for s in prometheus.query(held)) >= 11 * 2**30  # ~12 GiB, not nothing


def test_a_fresh_install_is_analysed_as_a_snapshot(prometheus: PrometheusClient) -> None:
    """Issue 10 item 6, live: seconds after the first scrapes, ``analyze --prometheus``.

    The same real Prometheus scraping two simulated exporters as the dashboards use. The
    window used to end on the last full hour, before the first scrape, so a brand-new
    install was told "no MIG series found"; it must find every slice, classify it, and
    recommend nothing from seconds of history.
    """
    url = prometheus.base_url.rstrip("/")
    # Credentials in the URL (Prometheus ignores them) must not be written into the report.
    with_secret = url.replace("://", "://migscope:s3cret@", 1)
    args = ["analyze", "--prometheus", with_secret, "--pending-pods", "off", "-o", "json"]
    proc = subprocess.run(
        [str(MIGSCOPE), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    current = [s for s in data["slices"] if s["current"]]
    assert len(current) >= 14  # the h200-node alone has 14 slices
    assert data["recommendations"] == []
    assert data["evidence"]["enough_for_a_plan"] is False
    assert data["evidence"]["history_hours"] < 0.5
    assert data["provenance"]["source"] == {"kind": "prometheus", "url": url}
    assert "s3cret" not in proc.stdout
    assert "notebook-alice" in {s["pod"] for s in current}
