"""DRA holders on the ``*_pod_info`` series: claim, claim namespace and how each was attributed."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry, generate_latest
from test_collector import GPU, OWNERS, SLICE_A, SLICE_B, SNAP, _parsed, scrape, value

from migscope.core._metrics import HOLDER_LABELS, metric
from migscope.exporter._attribution import DraResolver
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._dra import DraHolder, DraHolders
from migscope.exporter._snapshot import Snapshot

# H200 (test_collector): SLICE_A is 4g.71gb (profile id 5) at 0, SLICE_B 3g.71gb (id 9) at 4.
GPU_M = replace(GPU, minor=3)
SNAP_M = replace(SNAP, gpus=(GPU_M,))
HOLDERS = DraHolders(
    (
        DraHolder(
            "infer",
            "vllm-0",
            "server",
            "vllm-0-gpu",
            "infer",
            "gpu.nvidia.com",
            "node-a",
            "gpu-3-mig-3g71gb-9-4",
        ),
    )
)


def make(snapshot: Snapshot, holders: DraHolders = HOLDERS) -> SnapshotCollector:
    resolver = DraResolver()
    return SnapshotCollector(
        snapshot=lambda: snapshot,
        owners=lambda: OWNERS,
        backend="sim",
        version="0",
        dra=lambda snap, owners: resolver.merged(snap, holders, owners),
    )


def test_the_contract_appends_the_holder_labels_after_resource() -> None:
    for name in ("migscope_mig_pod_info", "migscope_gpu_pod_info"):
        labels = metric(name).labels
        assert labels[labels.index("resource") + 1 :] == HOLDER_LABELS


def test_a_dra_holder_is_labelled_with_its_claim_on_its_slice_only() -> None:
    s = scrape(make(SNAP_M))
    assert (
        value(
            s,
            "migscope_mig_pod_info",
            mig_uuid=SLICE_B.mig_uuid,
            namespace="infer",
            pod="vllm-0",
            container="server",
            resource="gpu.nvidia.com",
            claim="vllm-0-gpu",
            claim_namespace="infer",
            attribution="dra-device-name",
        )
        == 1
    )
    # the device-plugin holder of the other slice keeps its labels, with no claim
    assert (
        value(
            s,
            "migscope_mig_pod_info",
            mig_uuid=SLICE_A.mig_uuid,
            pod="trainer-0",
            claim="",
            claim_namespace="",
            attribution="device-plugin",
        )
        == 1
    )
    assert value(s, "migscope_mig_pod_info", mig_uuid=SLICE_A.mig_uuid, pod="vllm-0") is None


def test_the_holder_is_resolved_against_the_snapshot_being_rendered() -> None:
    current = [SNAP_M]
    resolver = DraResolver()
    collector = SnapshotCollector(
        snapshot=lambda: current[0],
        backend="sim",
        version="0",
        dra=lambda snap, owners: resolver.merged(snap, HOLDERS, owners),
    )
    assert value(scrape(collector), "migscope_mig_pod_info", pod="vllm-0") == 1
    current[0] = replace(SNAP_M, gpus=(replace(GPU_M, instances=(SLICE_A,)),))  # GI destroyed
    assert value(scrape(collector), "migscope_mig_pod_info", pod="vllm-0") is None


def test_a_whole_gpu_held_through_dra() -> None:
    holders = DraHolders(
        (DraHolder("ml", "train", "main", "train-gpu", "ml", "gpu.nvidia.com", "n", "gpu-3"),)
    )
    s = scrape(make(SNAP_M, holders))
    assert value(s, "migscope_gpu_pod_info", gpu_uuid=GPU.uuid, pod="train", claim="train-gpu") == 1


def test_fast_text_equals_the_registry_with_dra_holders() -> None:
    collector = make(SNAP_M)
    registry = CollectorRegistry()
    registry.register(collector)
    assert _parsed(collector.render_text().decode()) == _parsed(generate_latest(registry).decode())
