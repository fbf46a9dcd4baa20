"""A pod holding MIG slices and GPUs through ResourceClaims, end to end through the exporter.

Real components: the production runtime (NVML backend, sampler, collector), a real gRPC kubelet
fake serving ``dynamic_resources`` in the kubelet's proto shape with device names NVIDIA's
driver emits (``tests/fixtures/real/dra/device-names.tsv``). NVML is simulated, with GPU
instances the test creates and destroys mid-run as the DRA driver does under DynamicMIG.
Time is simulated (``realtime=False``) and cycles are driven by hand, so "within one cycle"
is exact.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from support.kubelet import FakeKubelet, make_claim, make_pod

from migscope.exporter._runtime import Exporter, build
from migscope.exporter._settings import load_settings

INTERVAL = 1.0

# Three GPUs whose NVML index is not their minor number (set below): the driver names GPUs by
# minor. GPU index 0 (minor 1) and index 1 (minor 0) are GH200 96GB with MIG, two 1g.12gb each at
# placements 0 and 4: the same profile at two places. Index 2 (minor 2) is a whole GPU.
SCENARIO: dict[str, Any] = {
    "seed": 3,
    "nodes": [
        {
            "name": "node-a",
            "gpus": [
                {
                    "model": "GH200-96GB",
                    "mig": True,
                    "instances": [
                        {"profile": "1g.12gb", "start": 0},
                        {"profile": "1g.12gb", "start": 4},
                    ],
                },
                {
                    "model": "GH200-96GB",
                    "mig": True,
                    "instances": [
                        {"profile": "1g.12gb", "start": 0},
                        {"profile": "1g.12gb", "start": 4},
                    ],
                },
                {"model": "GH200-96GB"},
            ],
        }
    ],
}
MINORS = (1, 0, 2)


def _pods(*extra: Any) -> list[Any]:
    return [
        # canonical (v25.12+): minor 0 = GPU index 1, 1g.12gb (id 19) at start 0
        make_pod(
            "infer-0",
            namespace="ml",
            claims={
                "main": [make_claim("infer-0-mig", ["gpu-0-mig-1g12gb-19-0"], claim_namespace="ml")]
            },
        ),
        # pre-v25.12 (GH200 demo claim): minor 1 = GPU index 0, id 19 at start 4, size 1
        make_pod(
            "legacy-0",
            namespace="ml",
            claims={
                "main": [make_claim("legacy-0-mig", ["gpu-1-mig-19-4-1"], claim_namespace="ml")]
            },
        ),
        # a whole GPU
        make_pod(
            "train-0",
            namespace="ml",
            claims={"main": [make_claim("train-0-gpu", ["gpu-2"], claim_namespace="ml")]},
        ),
        # a development-era name no released driver emits: not attributed, logged once
        make_pod(
            "odd-0",
            namespace="ml",
            claims={
                "main": [
                    make_claim("odd-0-mig", ["gpu-0-mig-1g24gb-0"], claim_namespace="ml", cdi=False)
                ]
            },
        ),
        *extra,
    ]


class Node:
    def __init__(self, exporter: Exporter, kubelet: FakeKubelet) -> None:
        self.exporter, self.kubelet = exporter, kubelet
        self.sim = exporter.simulation.node("node-a")

    def cycle(self) -> dict[str, list[Any]]:
        """One sampler cycle after one interval, with a fresh kubelet answer; the scrape."""
        assert self.exporter.advance is not None
        assert self.exporter.watcher is not None
        self.exporter.watcher.refresh()
        self.exporter.advance(INTERVAL)
        self.exporter.sampler.run_once()
        out: dict[str, list[Any]] = {}
        text = self.exporter.collector.render_text().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out.setdefault(sample.name, []).append(sample)
        return out

    def gi(self, gpu: int, start: int) -> Any:
        return next(
            i
            for i in self.sim.gpus[gpu].instances_at(self.sim.nvml.clock.elapsed())
            if i.start == start
        )


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    scenario = tmp_path / "dra.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    with FakeKubelet(_pods()) as kubelet:
        settings = load_settings(
            overrides={
                "backend": "sim",
                "scenario": str(scenario),
                "pod_source": "kubelet",
                "kubelet_socket": kubelet.socket_path,
                "interval": INTERVAL,
                "gpm_interval": INTERVAL,
                # Far longer than the test: a GI must show through the per-cycle check alone.
                "enumerate_interval": 3600,
            }
        )
        exporter = build(settings, realtime=False)
        for gpu, minor in zip(exporter.simulation.node("node-a").gpus, MINORS, strict=True):
            gpu.minor = minor
        try:
            yield Node(exporter, kubelet)
        finally:
            exporter.stop()


def _holders(samples: dict[str, list[Any]], family: str) -> dict[str, dict[str, str]]:
    """Holder labels by pod."""
    return {s.labels["pod"]: s.labels for s in samples.get(family, [])}


def test_dra_holders_land_on_the_right_gi_and_gpu(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="migscope.exporter._attribution"):
        node.cycle()
        samples = node.cycle()
        node.cycle()
    mig = _holders(samples, "migscope_mig_pod_info")
    assert set(mig) == {"infer-0", "legacy-0"}
    infer = mig["infer-0"]
    target = node.gi(1, 0)  # minor 0 is NVML index 1; placement 0, not 4
    assert (infer["gpu"], infer["mig_uuid"]) == ("1", target.uuid)
    assert infer["claim"] == "infer-0-mig"
    assert infer["claim_namespace"] == "ml"
    assert infer["resource"] == "gpu.nvidia.com"
    assert infer["attribution"] == "dra-device-name"
    legacy = mig["legacy-0"]
    assert (legacy["gpu"], legacy["mig_uuid"]) == ("0", node.gi(0, 4).uuid)
    whole = _holders(samples, "migscope_gpu_pod_info")
    assert set(whole) == {"train-0"}
    assert whole["train-0"]["gpu"] == "2"
    assert whole["train-0"]["claim"] == "train-0-gpu"
    # the unresolvable device: no holder, one log line over three cycles, the rest served
    assert not any(s["pod"] == "odd-0" for s in (*mig.values(), *whole.values()))
    lines = [r.getMessage() for r in caplog.records if "gpu-0-mig-1g24gb-0" in r.getMessage()]
    assert len(lines) == 1
    assert "no form" in lines[0]
    success = {s.labels["collector"]: s.value for s in samples["migscope_collector_success"]}
    assert success["podresources"] == 1.0
    assert len(samples["migscope_mig_info"]) == 4


def test_a_gi_created_mid_run_is_attributed_from_the_next_cycle_and_gone_at_once(
    node: Node,
) -> None:
    node.cycle()
    node.cycle()
    created = node.sim.create_instance(1, "1g.12gb", start=2)  # the driver's prepare
    name = created.dra_device_name
    assert name == "gpu-0-mig-1g12gb-19-2"
    node.kubelet.set_pods(
        _pods(
            make_pod(
                "dyn-0",
                namespace="dyn",
                claims={"main": [make_claim("dyn-0-mig", [name], claim_namespace="dyn")]},
            )
        )
    )
    samples = node.cycle()  # the next cycle: measured and attributed
    assert created.uuid in {s.labels["mig_uuid"] for s in samples["migscope_mig_info"]}
    dyn = _holders(samples, "migscope_mig_pod_info")["dyn-0"]
    assert dyn["mig_uuid"] == created.uuid
    assert dyn["claim"] == "dyn-0-mig"
    assert created.uuid in {s.labels["mig_uuid"] for s in samples["migscope_mig_memory_used_bytes"]}

    node.sim.destroy_instance(1, created.gi_id)  # the driver's unprepare
    samples = node.cycle()  # gone in the same cycle, though the kubelet still lists the claim
    assert created.uuid not in {
        s.labels["mig_uuid"] for f in samples.values() for s in f if "mig_uuid" in s.labels
    }
    assert "dyn-0" not in _holders(samples, "migscope_mig_pod_info")
    assert len(samples["migscope_mig_info"]) == 4
