"""Issue 21 end to end: a pod holding a MIG slice through DRA is seen, attributed, protected
and right-sized, through every real component in turn.

One H200 node ``gpu-a`` with two MIG GPUs in MIG Manager's ``all-balanced`` layout
(3g.71gb, 2g.35gb, 1g.18gb x2). Every slice of GPU 0 is busy, each held by a pod through a
ResourceClaim; on GPU 1 the 2g.35gb is held by ``ml/infer-0`` through the claim
``ml/infer-0-gpu-abcde`` and never used, the other three are held by nobody.

1. **Seen and attributed.** The exporter's production runtime (``build(settings,
   realtime=False)``: the NVML backend over the simulated node, the sampler, the collector)
   with a real gRPC kubelet fake serving ``dynamic_resources`` whose device names are the
   driver's canonical ``gpu-<minor>-mig-<profile>-<id>-<start>``, read from the simulated GI.
   It samples every 60 s of simulated time; each /metrics text exposition is stamped with the
   simulated time and given the target labels the chart's ServiceMonitor adds (a Prometheus
   scrape), and the whole history is backfilled into a real Prometheus with promtool
   (:class:`support.prometheus.PrometheusServer`).
2. **Classified and protected.** ``migscope analyze --prometheus URL -o json`` on that
   Prometheus: the slice is ``idle`` (not ``unallocated``), held by ``ml/infer-0`` with its
   claim; the plan frees GPU 1 (right-sizing: the pod holds a slice it never uses), and the
   recommendation says that is disruptive, naming the pod.
3. **Guarded live.** ``migscope apply --plan report.json`` (dry run) through a kubeconfig
   against the API test server, where the same pod and claim exist (the claim allocated by
   the scheduler from a template, named in the pod's ``status.resourceClaimStatuses``; the
   node's devices published by the simulated DRA kubelet plugin, no device plugin): without
   ``--drain`` the node is skipped naming ``ml/infer-0``; with ``--drain`` it would evict that
   pod and no other (GPU 0's holders sit on a GPU the change keeps: the applier tells a
   claimed device's GPU by the slice's ``parentUUID``, the plan's by the report's
   ``gpu_uuid``); neither run writes anything.

The window is 25 h: the shortest over the default policy's ``evidence.min_history_hours``
(24 h) with margin, so the plan is allowed at all (a week of 60 s cycles takes ~7x longer).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from applier.cluster import BALANCED, CONFIGMAP, EXISTING, NAMESPACE, cluster_policy
from applier.test_apply_cli import TOKEN, _kubeconfig
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from support.kubeapi import KubeApiServer, config_map, node, pod
from support.kubeapi.dra_plugin import DRIVER, DraPluginSim
from support.kubeapi.mig_manager import CONFIG_LABEL, STATE_LABEL, Knobs, MigManagerSim, SimGpu
from support.kubelet import FakeKubelet, make_claim, make_pod
from support.prometheus import HistorySeries, PrometheusServer, requires_prometheus

from migscope.cli.main import cli
from migscope.core._spec.v1 import validate_report
from migscope.exporter._runtime import Exporter, build
from migscope.exporter._settings import load_settings

pytestmark = requires_prometheus

NODE = "gpu-a"
INTERVAL = 60.0  # the exporter's cycle and the scrape interval, simulated seconds
WINDOW_H = 25
HOLDER = ("ml", "infer-0")
CLAIM = "infer-0-gpu-abcde"  # made from the pod's claim template: status.resourceClaimStatuses
IDLE_GPU, IDLE_PROFILE = 1, "2g.35gb"
BUSY = {"level": 0.6, "memory": 0.5}
#: GPU 0's slices: (profile, start, pod), each busy and held through its own claim.
SERVING = (
    ("3g.71gb", 4, "serve-0"),
    ("2g.35gb", 0, "serve-1"),
    ("1g.18gb", 2, "serve-2"),
    ("1g.18gb", 3, "serve-3"),
)


def _scenario(start: float) -> dict[str, Any]:
    """The node, its GPUs and workloads; no pods (the kubelet fake says who holds what)."""
    busy = [
        {"profile": p, "start": s, "workload": {"pattern": "constant", **BUSY}}
        for p, s, _ in SERVING
    ]
    idle = [
        {"profile": p, "start": s, "workload": {"pattern": "idle", **extra}}
        for p, s, extra in (
            ("3g.71gb", 4, {}),
            # a pod that loaded something and never ran it: memory held is not use
            (IDLE_PROFILE, 0, {"memory": "8GiB"}),
            ("1g.18gb", 2, {}),
            ("1g.18gb", 3, {}),
        )
    ]
    stamp = datetime.fromtimestamp(start, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "version": 1,
        "seed": 21,
        "start": stamp,
        "nodes": [
            {
                "name": NODE,
                "gpus": [
                    {"model": "H200", "mig": True, "instances": busy},
                    {"model": "H200", "mig": True, "instances": idle},
                ],
            }
        ],
    }


def _gi(exporter: Exporter, gpu: int, start: int) -> Any:
    sim = exporter.simulation.node(NODE)
    return next(i for i in sim.gpus[gpu].instances_at(sim.nvml.clock.elapsed()) if i.start == start)


@dataclass(frozen=True)
class Held:
    """A pod holding a slice through a claim: who, the claim, the driver's device name, the
    simulated GI it names."""

    namespace: str
    pod: str
    claim: str
    device: str
    gi: Any

    @property
    def who(self) -> str:
        return f"{self.namespace}/{self.pod}"


def _held(exporter: Exporter) -> list[Held]:
    """Every holder of the node; device names as the simulated GIs give them."""
    out = [
        Held("ml", name, f"{name}-gpu-x7k2p", gi.dra_device_name, gi)
        for _, start, name in SERVING
        for gi in [_gi(exporter, 0, start)]
    ]
    gi = _gi(exporter, IDLE_GPU, 0)
    return [*out, Held(*HOLDER, CLAIM, gi.dra_device_name, gi)]


#: A scrape's target labels: ``node`` as the chart's ServiceMonitor sets it, Prometheus' own.
TARGET = {"node": NODE, "job": "migscope-exporter", "instance": "10.0.0.7:9400"}


class Scrapes:
    """What a Prometheus scraping the exporter after every cycle stores.

    Each series line is parsed once by prometheus_client's parser (its identity text repeats
    from scrape to scrape; only the value changes), then only its value is read.
    """

    def __init__(self) -> None:
        self.points: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
        self.text = ""
        self._keys: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {}

    def scrape(self, text: str, at: float) -> None:
        self.text = text
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            series, value = line.rsplit(" ", 1)  # no timestamps: the value is the last field
            key = self._keys.get(series)
            if key is None:
                (family,) = text_string_to_metric_families(line + "\n")
                (sample,) = family.samples
                labels = {**TARGET, **sample.labels}  # honor_labels: the exporter's win
                key = self._keys[series] = (sample.name, tuple(sorted(labels.items())))
            self.points.setdefault(key, []).append((at, float(value)))

    def last(self) -> dict[str, list[Any]]:
        """The last scrape, parsed whole: ``{sample name: [samples]}``."""
        out: dict[str, list[Any]] = {}
        for family in text_string_to_metric_families(self.text):
            for sample in family.samples:
                out.setdefault(sample.name, []).append(sample)
        return out

    def history(self) -> list[HistorySeries]:
        return [HistorySeries(n, dict(ls), pts) for (n, ls), pts in self.points.items()]


def _run_exporter(scenario: Path, cycles: int) -> tuple[Scrapes, list[Held], list[str]]:
    """The production runtime for ``cycles`` cycles of simulated time, scraped after each;
    with the holders and the node's GPU UUIDs by minor (what NVML reports, and so what the
    DRA driver publishes as ``parentUUID``)."""
    with FakeKubelet([]) as kubelet:
        settings = load_settings(
            overrides={
                "backend": "sim",
                "scenario": str(scenario),
                "pod_source": "kubelet",
                "kubelet_socket": kubelet.socket_path,
                "interval": INTERVAL,
                "gpm_interval": INTERVAL,
            }
        )
        exporter = build(settings, realtime=False)
        try:
            held = _held(exporter)
            uuids = [g.uuid for g in exporter.simulation.node(NODE).gpus]
            kubelet.set_pods(
                make_pod(
                    h.pod,
                    namespace=h.namespace,
                    claims={
                        "main": [
                            make_claim(h.claim, [h.device], claim_namespace=h.namespace, pool=NODE)
                        ]
                    },
                )
                for h in held
            )
            scrapes = Scrapes()
            assert exporter.advance is not None
            assert exporter.watcher is not None
            for _ in range(cycles):
                exporter.watcher.refresh()
                exporter.advance(INTERVAL)
                exporter.sampler.run_once()
                text = exporter.collector.render_text().decode()
                scrapes.scrape(text, exporter.simulation.clock.now())
            return scrapes, held, uuids
        finally:
            exporter.stop()


# -- the cluster ---------------------------------------------------------------------------------


@contextmanager
def _cluster(
    held: Sequence[Held], gpu_uuids: Sequence[str]
) -> Iterator[tuple[KubeApiServer, DraPluginSim]]:
    """The API test server: the node as MIG Manager left it (``all-balanced``), its devices
    published by NVIDIA's DRA kubelet plugin (no device plugin), and every holder's pod and
    claim as the scheduler and the kubelet leave them."""
    with KubeApiServer(token=TOKEN) as api:
        api.create(cluster_policy(CONFIGMAP))
        api.create(config_map(CONFIGMAP, NAMESPACE, {"config.yaml": EXISTING}))
        api.create(
            node(
                NODE,
                labels={CONFIG_LABEL: "all-balanced", STATE_LABEL: "success"},
                allocatable={"cpu": "64"},
            )
        )
        with (
            MigManagerSim(
                api,
                {NODE: [SimGpu(mig_enabled=True, instances=BALANCED)] * 2},
                config_namespace=NAMESPACE,
                config_name=CONFIGMAP,
                knobs={NODE: Knobs(device_plugin=False)},
            ) as mig,
            DraPluginSim(api, mig, [NODE], gpu_uuids={NODE: gpu_uuids}) as plugin,
        ):
            mig.wait_until_seen(NODE, api.get("v1", "Node", NODE)["metadata"]["resourceVersion"])
            for h in held:
                _claim_and_pod(api, h)
            api.clear_requests()
            yield api, plugin


def _claim_and_pod(api: KubeApiServer, h: Held) -> None:
    api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": h.claim, "namespace": h.namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {}}]}},
        }
    )
    api.patch(
        "resource.k8s.io/v1",
        "ResourceClaim",
        h.claim,
        {
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": h.device}
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": h.pod, "uid": f"uid-{h.pod}"}],
            }
        },
        namespace=h.namespace,
        subresource="status",
    )
    holder = pod(h.pod, h.namespace, node_name=NODE)
    holder["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "mig"}]
    api.create(holder)
    api.patch(
        "v1",
        "Pod",
        h.pod,
        {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": h.claim}]}},
        namespace=h.namespace,
        subresource="status",
    )


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


# -- the chain -----------------------------------------------------------------------------------


def test_a_slice_held_through_dra_is_seen_attributed_protected_and_right_sized(
    tmp_path: Path,
) -> None:
    # Simulated time ends on the last full hour before now, as a live Prometheus' history
    # would (an analysis window of whole hours is put on the hour grid: ending elsewhere, up
    # to an hour of it would hold no samples). Two cycles before the window: GPM's first
    # sample is only a baseline.
    end = math.floor(time.time() / 3600.0) * 3600.0
    cycles = WINDOW_H * 3600 // int(INTERVAL) + 2
    start = end - cycles * INTERVAL
    scenario = tmp_path / "dra-node.yaml"
    scenario.write_text(yaml.safe_dump(_scenario(start)))

    # 1. the exporter: the holder seen on the right GI, with its claim
    scrapes, held, gpu_uuids = _run_exporter(scenario, cycles)
    infer = held[-1]
    assert infer.device == f"gpu-{IDLE_GPU}-mig-2g35gb-14-0"  # the driver's canonical form
    last = scrapes.last()
    holders = {s.labels["pod"]: s.labels for s in last["migscope_mig_pod_info"]}
    assert set(holders) == {h.pod for h in held}
    got = holders[infer.pod]
    assert (got["gpu"], got["mig_uuid"]) == (str(IDLE_GPU), infer.gi.uuid)
    assert (got["namespace"], got["claim"], got["claim_namespace"]) == ("ml", CLAIM, "ml")
    assert (got["resource"], got["attribution"]) == (DRIVER, "dra-device-name")
    activity = {s.labels["mig_uuid"]: s.value for s in last["migscope_mig_graphics_active_ratio"]}
    assert activity[infer.gi.uuid] == 0.0
    assert max(t for pts in scrapes.points.values() for t, _ in pts) == end

    # 2. the analyzer on a real Prometheus holding that history
    with PrometheusServer(scrapes.history()) as prom:
        code, out, err = _cli(
            "analyze",
            "--prometheus",
            prom.url,
            "--window",
            f"{WINDOW_H}h",
            "--end",
            str(int(end)),
            "--step",
            f"{int(INTERVAL)}s",
            "--pending-pods",
            "off",
            "-q",
            "-o",
            "json",
        )
    assert code == 0, err
    report = json.loads(out)
    validate_report(report)
    assert report["evidence"]["enough_for_a_plan"], report["evidence"]
    (row,) = [s for s in report["slices"] if s["pod"] == infer.pod]
    assert (row["gpu"], row["profile"], row["status"]) == (IDLE_GPU, IDLE_PROFILE, "idle")
    assert (row["namespace"], row["claim"]) == ("ml", CLAIM)
    assert row["evidence"]["coverage"] == 1.0  # every scrape of the window was there
    assert row["pin"] is None  # enough history, activity seen: the plan may act on it
    assert [(o["namespace"], o["pod"], o["claim"]) for o in row["owners"]] == [
        ("ml", "infer-0", CLAIM)
    ]
    statuses = sorted((s["gpu"], s["pod"] or "", s["status"]) for s in report["slices"])
    assert statuses == sorted(
        [
            *[(0, p, "healthy") for _, _, p in SERVING],
            (IDLE_GPU, infer.pod, "idle"),
            *[(IDLE_GPU, "", "unallocated")] * 3,
        ]
    )
    (rec,) = report["recommendations"]
    assert rec["node"] == NODE
    # right-sized: GPU 1 is freed (nothing on it is used) and GPU 0 is left as it is ...
    assert rec["gpus_recreated"] == [IDLE_GPU]
    # ... and that is not planned as a harmless change: the holder is named
    assert rec["disruptive"] is True
    assert rec["pods_to_move"] == [infer.who]
    plan = tmp_path / "report.json"
    plan.write_text(out)

    # 3. the applier, dry run, against the cluster where the pod and its claim live
    with _cluster(held, gpu_uuids) as (api, plugin):
        published = {d["name"] for d in plugin.devices(NODE)}
        assert {h.device for h in held} <= published  # the exporter's names are the driver's
        kubeconfig = _kubeconfig(tmp_path, api.url)
        code, out, err = _cli(
            "apply", "--plan", str(plan), "--kubeconfig", kubeconfig, "-o", "json"
        )
        assert code == 0, err
        result = json.loads(out)
        assert result["dry_run"] is True
        assert not [n for n in result["notes"] if "refuse" in n]  # a fresh plan from real data
        (node_out,) = result["nodes"]
        assert node_out["result"] == "skipped", node_out
        # The applier tells each claimed device's GPU by the ResourceSlice's parentUUID and
        # the plan's GPU UUIDs: GPU 0's holders, on the GPU the change keeps, are not named.
        named = {h.who for h in held if h.who in node_out["reason"]}
        assert named == {infer.who}
        code, out, err = _cli(
            "apply", "--plan", str(plan), "--kubeconfig", kubeconfig, "--drain", "-o", "json"
        )
        assert code == 0, err
        (node_out,) = json.loads(out)["nodes"]
        assert node_out["result"] == "would-apply", node_out
        evictions = {a for a in node_out["actions"] if a.startswith("evict ")}
        assert f"evict {infer.who} (holds a device the change destroys)" in evictions
        assert evictions == {f"evict {infer.who} (holds a device the change destroys)"}
        writes = [r for r in api.requests if r.method not in ("GET", "HEAD", "OPTIONS")]
        assert writes == []
        labels = api.get("v1", "Node", NODE)["metadata"]["labels"]
        assert labels[CONFIG_LABEL] == "all-balanced"
