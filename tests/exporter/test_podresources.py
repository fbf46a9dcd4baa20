"""Pod attribution against a real gRPC kubelet fake on a unix socket (no mocks of the client).

Timing: nothing asserts how long something took. Tests wait for events (refresh counts, call
counts) with generous timeouts, and staleness runs on a controllable clock.
"""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from support.kubelet import FakeKubelet, make_pod

from migscope.exporter._podresources import (
    LIST_METHOD,
    PodOwner,
    PodResourcesError,
    PodResourcesWatcher,
    api_pb2,
    build_owner_map,
    collect_owners,
    list_pod_resources,
    parse_device_id,
)

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "exporter" / "src" / "migscope" / "exporter" / "_podresources"
LOGGER = "migscope.exporter._podresources.client"
WAIT = 15.0  # generous: only reached when something is broken
SLOW_TIMEOUT = 0.5  # the List deadline in tests of a kubelet that does not answer

MIG_A = "MIG-4f1b6c2e-7a40-5d4c-9b55-0e9c2f7d1a01"
MIG_B = "MIG-4f1b6c2e-7a40-5d4c-9b55-0e9c2f7d1a02"
GPU_0 = "GPU-8f2c9a1e-3b7d-4e6f-a1c2-5d8e9f0a1b2c"
GPU_1 = "GPU-8f2c9a1e-3b7d-4e6f-a1c2-5d8e9f0a1b2d"
LEGACY = "MIG-GPU-8f2c9a1e-3b7d-4e6f-a1c2-5d8e9f0a1b2c/3/0"


def owner(ns: str, pod: str, ctr: str, res: str) -> PodOwner:
    return PodOwner(namespace=ns, pod=pod, container=ctr, resource_name=res)


def pods_v1() -> list[api_pb2.PodResources]:
    return [
        make_pod(
            "train-0",
            namespace="ml",
            containers={
                "main": {"nvidia.com/mig-3g.71gb": [MIG_A], "cpu": ["0", "1"]},
                "sidecar": {},
            },
        ),
        make_pod("infer-0", namespace="serving", containers={"srv": {"nvidia.com/gpu": [GPU_0]}}),
    ]


class FakeClock:
    """Monotonic seconds the test moves by hand, so staleness never depends on machine speed."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT) -> bool:
    event = threading.Event()
    while not predicate():
        if event.wait(0.01) or timeout <= 0:
            return False
        timeout -= 0.01
    return True


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    with FakeKubelet(pods_v1()) as fake:
        yield fake


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# --------------------------------------------------------------------------- device IDs, mapping
@pytest.mark.parametrize(
    ("raw", "key", "kind", "replica"),
    [
        (MIG_A, MIG_A, "mig", None),
        (GPU_0, GPU_0, "gpu", None),
        (f"{GPU_0}::3", GPU_0, "gpu", 3),
        (f"{MIG_A}::0", MIG_A, "mig", 0),
        (LEGACY, LEGACY, "mig", None),
        (f"{LEGACY}::12", LEGACY, "mig", 12),
        ("0", "0", "other", None),
        ("0:1", "0:1", "other", None),
        ("1::2", "1", "other", 2),
        (f" {GPU_1}\n", GPU_1, "gpu", None),
        ("GPU-not-a-uuid", "GPU-not-a-uuid", "other", None),
    ],
)
def test_parse_device_id(raw: str, key: str, kind: str, replica: int | None) -> None:
    parsed = parse_device_id(raw)
    assert (parsed.raw, parsed.key, parsed.kind, parsed.replica) == (raw, key, kind, replica)


def test_legacy_mig_id_names_parent_gpu_and_instances() -> None:
    parsed = parse_device_id(f"{LEGACY}::1")
    assert (parsed.parent_gpu, parsed.gi, parsed.ci) == (GPU_0, 3, 0)
    assert parse_device_id(MIG_A).parent_gpu is None


def test_list_maps_mig_and_gpu_devices_to_owners(kubelet: FakeKubelet) -> None:
    response = list_pod_resources(kubelet.socket_path, timeout=WAIT)
    assert list(response.pod_resources) == pods_v1()  # every field survives the wire
    owners = build_owner_map(response.pod_resources)
    assert dict(owners) == {
        MIG_A: (owner("ml", "train-0", "main", "nvidia.com/mig-3g.71gb"),),
        GPU_0: (owner("serving", "infer-0", "srv", "nvidia.com/gpu"),),
    }


def test_replicas_share_a_device_and_every_owner_is_kept() -> None:
    pods = [
        make_pod("a", namespace="x", containers={"c": {"nvidia.com/gpu.shared": [f"{GPU_0}::0"]}}),
        make_pod("b", namespace="x", containers={"c": {"nvidia.com/gpu.shared": [f"{GPU_0}::1"]}}),
        make_pod(
            "c",
            namespace="y",
            containers={
                "c1": {"nvidia.com/mig-1g.18gb.shared": [f"{MIG_B}::0"]},
                "c2": {"nvidia.com/mig-1g.18gb.shared": [f"{MIG_B}::1"]},
            },
        ),
        # one container holding two replicas of the same GPU: still one owner entry
        make_pod(
            "d", namespace="x", containers={"c": {"nvidia.com/gpu": [f"{GPU_1}::0", f"{GPU_1}::1"]}}
        ),
    ]
    owners = build_owner_map(pods)
    assert owners[GPU_0] == (
        owner("x", "a", "c", "nvidia.com/gpu.shared"),
        owner("x", "b", "c", "nvidia.com/gpu.shared"),
    )
    assert owners[MIG_B] == (
        owner("y", "c", "c1", "nvidia.com/mig-1g.18gb.shared"),
        owner("y", "c", "c2", "nvidia.com/mig-1g.18gb.shared"),
    )
    assert owners[GPU_1] == (owner("x", "d", "c", "nvidia.com/gpu"),)
    assert set(owners) == {GPU_0, GPU_1, MIG_B}


def test_owner_order_does_not_depend_on_the_kubelets_order() -> None:
    pods = [
        make_pod(name, namespace="x", containers={"c": {"nvidia.com/gpu": [f"{GPU_0}::{i}"]}})
        for i, name in enumerate(["b", "a", "c"])
    ]
    assert build_owner_map(pods) == build_owner_map(reversed(pods))
    assert [o.pod for o in build_owner_map(pods)[GPU_0]] == ["a", "b", "c"]


def test_non_nvidia_and_other_nvidia_resources_are_ignored() -> None:
    pods = [
        make_pod(
            "p",
            containers={
                "c": {
                    "example.com/fpga": ["0", GPU_1],
                    "nvidia.com/GA100_A100_PCIE_40GB": ["0000:3b:00.0"],  # VFIO passthrough
                    "intel.com/sriov": ["0000:5e:00.1"],
                    "nvidia.com/gpu": ["0"],
                }
            },
        )
    ]
    assert dict(build_owner_map(pods)) == {"0": (owner("default", "p", "c", "nvidia.com/gpu"),)}
    custom = build_owner_map(pods, resource_prefixes=("example.com/",))
    assert set(custom) == {"0", GPU_1}
    assert custom["0"][0].resource_name == "example.com/fpga"


def test_owner_map_is_read_only() -> None:
    owners = build_owner_map(pods_v1())
    with pytest.raises(TypeError):
        owners[GPU_1] = ()  # type: ignore[index]


def test_list_method_is_the_kubelets_path() -> None:
    assert LIST_METHOD == "/v1.PodResourcesLister/List"


# Field numbers of k8s.io/kubelet/pkg/apis/podresources/v1/api.proto (Kubernetes 1.31+). The
# wire format carries only these numbers: a wrong one decodes as an empty field, silently.
KUBELET_FIELDS = {
    "ListPodResourcesResponse": {"pod_resources": 1},
    "PodResources": {"name": 1, "namespace": 2, "containers": 3},
    "ContainerResources": {
        "name": 1,
        "devices": 2,
        "cpu_ids": 3,
        "memory": 4,
        "dynamic_resources": 5,
    },
    "ContainerDevices": {"resource_name": 1, "device_ids": 2, "topology": 3},
    "ContainerMemory": {"memory_type": 1, "size": 2, "topology": 3},
    "TopologyInfo": {"nodes": 1},
    "NUMANode": {"ID": 1},
    "DynamicResource": {"claim_name": 2, "claim_namespace": 3, "claim_resources": 4},
    "ClaimResource": {"cdi_devices": 1, "driver_name": 2, "pool_name": 3, "device_name": 4},
    "CDIDevice": {"name": 1},
    "AllocatableResourcesResponse": {"devices": 1, "cpu_ids": 2, "memory": 3},
    "GetPodResourcesRequest": {"pod_name": 1, "pod_namespace": 2},
    "GetPodResourcesResponse": {"pod_resources": 1},
}


def test_field_numbers_match_the_kubelet() -> None:
    found = {
        name: {f.name: f.number for f in api_pb2.DESCRIPTOR.message_types_by_name[name].fields}
        for name in KUBELET_FIELDS
    }
    assert found == KUBELET_FIELDS


def test_decodes_bytes_encoded_by_field_number() -> None:
    # Hand-encoded ListPodResourcesResponse, as a kubelet would send it: pod{name, namespace,
    # container{name, devices{resource_name, device_ids}}}.
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    devices = field(1, b"nvidia.com/gpu") + field(2, GPU_0.encode())
    container = field(1, b"ctr") + field(2, devices)
    pod = field(1, b"pod") + field(2, b"ns") + field(3, container)
    decoded = api_pb2.ListPodResourcesResponse.FromString(field(1, pod))
    assert dict(build_owner_map(decoded.pod_resources)) == {
        GPU_0: (owner("ns", "pod", "ctr", "nvidia.com/gpu"),)
    }


# ----------------------------------------------------------------------------------- watcher
def test_watcher_refreshes_in_background_and_sees_pod_changes(kubelet: FakeKubelet) -> None:
    with PodResourcesWatcher(kubelet.socket_path, interval=0.02, timeout=WAIT) as watcher:
        assert watcher.wait_for_refreshes(1, timeout=WAIT)
        assert set(watcher.owners()) == {MIG_A, GPU_0}
        status = watcher.status()
        assert (status.ok, status.last_error, status.failures) == (True, None, 0)
        assert (status.devices, status.stale) == (2, False)
        assert status.last_success is not None

        kubelet.set_pods(
            [make_pod("new", namespace="ml", containers={"c": {"nvidia.com/mig-1g.18gb": [MIG_B]}})]
        )
        assert wait_until(lambda: set(watcher.owners()) == {MIG_B})
        assert watcher.owners()[MIG_B] == (owner("ml", "new", "c", "nvidia.com/mig-1g.18gb"),)
    assert watcher.status().refreshes >= 2


def test_refresh_runs_once_without_a_thread(kubelet: FakeKubelet) -> None:
    watcher = PodResourcesWatcher(kubelet.socket_path, timeout=WAIT)
    assert watcher.owners() == {}  # nothing known yet
    assert not watcher.status().ok
    status = watcher.refresh()
    assert (status.ok, status.refreshes, status.devices) == (True, 1, 2)
    assert not any(t.name == "migscope-podresources" for t in threading.enumerate())


def _fault_slow(k: FakeKubelet) -> None:
    k.slow(60)


def _fault_error(k: FakeKubelet) -> None:
    k.error(grpc.StatusCode.PERMISSION_DENIED, "no\npod-resources for you")


FAULTS: dict[str, tuple[Callable[[FakeKubelet], None], Callable[[str], str]]] = {
    # name: (switch the fake into it, expected error line for a socket path)
    "missing": (FakeKubelet.stop, lambda p: f"kubelet pod-resources socket {p} not found"),
    "refused": (
        FakeKubelet.stale,
        lambda p: f"kubelet pod-resources socket {p}: UNAVAILABLE: ",
    ),
    "slow": (
        _fault_slow,
        lambda p: (
            f"kubelet pod-resources socket {p}: no answer within {SLOW_TIMEOUT:g} s "
            "(DEADLINE_EXCEEDED)"
        ),
    ),
    "error": (
        _fault_error,
        lambda p: f"kubelet pod-resources socket {p}: PERMISSION_DENIED: no pod-resources for you",
    ),
    "garbage": (FakeKubelet.garbage, lambda p: f"kubelet pod-resources socket {p}: UNAVAILABLE: "),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_list_fails_with_one_clear_line(kubelet: FakeKubelet, fault: str) -> None:
    switch, expected = FAULTS[fault]
    switch(kubelet)
    with pytest.raises(PodResourcesError) as caught:
        list_pod_resources(kubelet.socket_path, timeout=SLOW_TIMEOUT)
    message = str(caught.value)
    assert message.startswith(expected(kubelet.socket_path))
    assert "\n" not in message
    assert len(message) < 400
    assert message.count(kubelet.socket_path) == 1  # gRPC's repeated addresses are tidied


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_keeps_last_mapping_then_drops_it_then_recovers(
    kubelet: FakeKubelet, clock: FakeClock, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    switch, expected = FAULTS[fault]
    # Only the slow fault needs a short deadline; the others answer (or fail) at once, and a
    # long deadline keeps the healthy refreshes safe on a loaded machine.
    timeout = SLOW_TIMEOUT if fault == "slow" else WAIT
    watcher = PodResourcesWatcher(
        kubelet.socket_path, interval=0.02, timeout=timeout, stale_after=60, clock=clock
    )
    with watcher:
        assert watcher.wait_for_refreshes(1, timeout=WAIT)
        good = watcher.owners()
        assert set(good) == {MIG_A, GPU_0}

        switch(kubelet)
        assert wait_until(lambda: watcher.status().failures >= 2)
        status = watcher.status()
        assert (status.ok, status.stale) == (False, False)
        assert status.last_error is not None
        assert status.last_error.startswith(expected(kubelet.socket_path))
        assert "\n" not in status.last_error
        assert watcher.owners() == good  # a kubelet restart must not blank pod labels
        assert status.devices == 2

        failures = watcher.status().failures
        clock.now += 61  # past stale_after without a success
        assert watcher.owners() == {}  # unknown, not wrong: at once, not at the next refresh
        assert (watcher.status().stale, watcher.status().devices) == (True, 0)
        assert wait_until(lambda: watcher.status().failures > failures)  # the thread drops it
        assert watcher.owners() == {}
        assert watcher.status().stale

        n = watcher.status().refreshes
        kubelet.serve()
        assert wait_until(lambda: watcher.status().ok)
        assert watcher.status().refreshes > n
        assert watcher.owners() == good
        assert (watcher.status().stale, watcher.status().last_error) == (False, None)

    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]
    failing = [m for level, m in messages if "pod attribution failing" in m]
    assert len(failing) == 1  # one line per state change, however many attempts failed
    assert "keeping the last pod mapping (2 devices)" in failing[0]
    assert expected(kubelet.socket_path) in failing[0]
    assert sum("dropped the pod mapping" in m for _, m in messages) == 1
    assert sum("answering again" in m for _, m in messages) == 1
    assert all(level <= logging.WARNING for level, _ in messages)


def test_no_kubelet_at_start_leaves_owners_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    path = tmp_path / "absent.sock"  # a Path works as well as a str
    with PodResourcesWatcher(path, interval=0.02, timeout=0.3) as watcher:
        assert watcher.wait_for_refreshes(3, timeout=WAIT)
        status = watcher.status()
    assert watcher.owners() == {}
    assert (status.ok, status.stale, status.last_success) == (False, False, None)
    assert status.last_error == f"kubelet pod-resources socket {path} not found"
    assert status.failures == status.refreshes >= 3
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines == [
        f"pod attribution failing: kubelet pod-resources socket {path} not found; "
        "pod labels stay empty until it answers"
    ]


def test_socket_path_that_is_not_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.sock"
    path.write_text("not a socket")
    with pytest.raises(PodResourcesError, match=r"kubelet.sock is not a socket$"):
        list_pod_resources(str(path), timeout=1)


def test_stop_interrupts_a_slow_call_and_does_not_count_it(kubelet: FakeKubelet) -> None:
    kubelet.slow(120)
    calls = kubelet.calls
    watcher = PodResourcesWatcher(kubelet.socket_path, interval=60, timeout=60)
    watcher.start()
    assert kubelet.wait_for_calls(calls + 1, timeout=WAIT)  # the call is in flight
    stopper = threading.Thread(target=watcher.stop)
    stopper.start()
    stopper.join(timeout=WAIT)  # far below the call's own 60 s deadline
    assert not stopper.is_alive(), "stop() waited for the kubelet instead of cancelling"
    status = watcher.status()
    assert (status.refreshes, status.failures) == (0, 0)  # cancelled, not a kubelet failure


def test_stop_between_refreshes_does_not_wait_for_the_interval(kubelet: FakeKubelet) -> None:
    watcher = PodResourcesWatcher(kubelet.socket_path, interval=3600, timeout=WAIT)
    watcher.start()
    assert watcher.wait_for_refreshes(1, timeout=WAIT)
    stopper = threading.Thread(target=watcher.stop)
    stopper.start()
    stopper.join(timeout=WAIT)
    assert not stopper.is_alive(), "stop() slept out the interval"
    assert watcher.status().ok  # readable after stop


def test_start_and_stop_leak_no_threads() -> None:
    # gRPC may set up per-process state on first use; do that before counting.
    with FakeKubelet(pods_v1()) as warm:
        list_pod_resources(warm.socket_path, timeout=WAIT)
    before = set(threading.enumerate())

    with FakeKubelet(pods_v1()) as kubelet:
        for switch in (FakeKubelet.serve, FakeKubelet.garbage, FakeKubelet.stop, _fault_slow):
            switch(kubelet)
            watcher = PodResourcesWatcher(kubelet.socket_path, interval=0.01, timeout=0.2)
            watcher.start()
            watcher.start()  # idempotent: no second thread
            running = [t for t in threading.enumerate() if t.name == "migscope-podresources"]
            assert len(running) == 1
            assert watcher.wait_for_refreshes(3, timeout=WAIT)
            watcher.stop()
            watcher.stop()  # idempotent

    # The fake's gRPC server thread ends shortly after its shutdown; ours must be gone already.
    assert not any(t.name == "migscope-podresources" for t in threading.enumerate())
    assert wait_until(lambda: set(threading.enumerate()) <= before), [
        t.name for t in set(threading.enumerate()) - before
    ]


@pytest.mark.parametrize(
    "kwargs", [{"interval": 0}, {"timeout": -1.0}, {"stale_after": 0}, {"interval": float("nan")}]
)
def test_rejects_nonsense_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        PodResourcesWatcher("/nonexistent.sock", **kwargs)


def test_default_stale_after_is_five_intervals(tmp_path: Path, clock: FakeClock) -> None:
    with FakeKubelet(pods_v1(), socket_path=tmp_path / "k.sock") as kubelet:
        watcher = PodResourcesWatcher(kubelet.socket_path, interval=2.0, timeout=WAIT, clock=clock)
        assert watcher.refresh().ok
    clock.now += 9.9
    assert len(watcher.owners()) == 2
    clock.now += 0.2  # 10.1 s > 5 × 2 s
    assert watcher.owners() == {}


# ------------------------------------------------------------------- what one answer may cost
def replica_holders(count: int, device: str = GPU_0) -> list[api_pb2.PodResources]:
    """``count`` pods, one container each, every one holding a replica of ``device``."""
    return [
        make_pod(
            f"p{i:06d}", namespace="x", containers={"c": {"nvidia.com/gpu": [f"{device}::{i}"]}}
        )
        for i in range(count)
    ]


def test_a_device_held_by_more_containers_than_the_cap_keeps_the_first_128() -> None:
    pods = replica_holders(1000)
    random.Random(7).shuffle(pods)
    owners = build_owner_map(pods)
    assert [o.pod for o in owners[GPU_0]] == [f"p{i:06d}" for i in range(128)]
    assert build_owner_map(reversed(pods)) == owners  # the same 128 whatever the order


def test_an_answer_with_more_devices_than_the_cap_keeps_the_first_256() -> None:
    ids = [f"GPU-8f2c9a1e-3b7d-4e6f-a1c2-{i:012x}" for i in range(1000)]
    random.Random(7).shuffle(ids)
    pods = [make_pod("hog", containers={"c": {"nvidia.com/gpu": ids}})]
    owners = build_owner_map(pods)
    assert list(owners) == sorted(ids)[:256]


@pytest.mark.parametrize("seed", range(20))
def test_capped_owners_are_the_first_in_order_of_the_whole_answer(seed: int) -> None:
    # Small caps, random answers: what is kept must be what sorting the whole answer and
    # cutting it would keep (the first devices by ID, the first owners of each).
    rng = random.Random(seed)
    pods = []
    for p in range(rng.randrange(1, 40)):
        containers = {
            f"c{c}": {"nvidia.com/gpu": [f"dev-{rng.randrange(12):02d}::{c}" for _ in range(3)]}
            for c in range(rng.randrange(0, 4))
        }
        pods.append(make_pod(f"p{rng.randrange(30):02d}-{p}", containers=containers))
    full = build_owner_map(pods, max_devices=10**6, max_owners=10**6)
    cut = collect_owners(pods, max_devices=3, max_owners=2)
    expected = {key: full[key][:2] for key in sorted(full)[:3]}
    assert dict(cut.owners) == expected
    assert cut.devices_cut == (len(full) > 3)
    assert cut.crowded == tuple(key for key in expected if len(full[key]) > 2)


def test_a_capped_answer_is_noted_once_and_the_note_clears(
    kubelet: FakeKubelet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    watcher = PodResourcesWatcher(kubelet.socket_path, timeout=WAIT)
    kubelet.set_pods([*pods_v1(), *replica_holders(200, GPU_1)])
    for _ in range(3):
        status = watcher.refresh()
        assert status.ok  # the map is fresh, only incomplete
        assert status.truncated is not None
        assert f"1 device held by more than 128 containers ({GPU_1})" in status.truncated
        assert len(watcher.owners()[GPU_1]) == 128
        assert watcher.owners()[MIG_A] == (
            owner("ml", "train-0", "main", "nvidia.com/mig-3g.71gb"),
        )
    kubelet.set_pods(pods_v1())
    assert watcher.refresh().truncated is None
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    noted = [line for line in lines if "over the exporter's limits" in line]
    assert len(noted) == 1, lines
    assert GPU_1 in noted[0]
    assert sum("within the exporter's limits again" in line for line in lines) == 1


def test_an_answer_over_the_size_cap_is_refused_in_one_line_and_attribution_recovers(
    kubelet: FakeKubelet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    # 9 MiB: under gRPC's 16 MiB the exporter used to accept, over the 8 MiB it accepts now.
    bulk = make_pod("bulk", containers={"c": {"example.com/blob": ["x" * 1024] * (9 * 1024)}})
    with PodResourcesWatcher(
        kubelet.socket_path, interval=0.02, timeout=WAIT, stale_after=3600
    ) as watcher:
        assert watcher.wait_for_refreshes(1, timeout=WAIT)
        good = watcher.owners()
        assert set(good) == {MIG_A, GPU_0}
        kubelet.set_pods([*pods_v1(), bulk])
        assert wait_until(lambda: watcher.status().failures >= 3)
        status = watcher.status()
        assert not status.ok
        assert status.last_error is not None
        assert status.last_error.startswith(
            f"kubelet pod-resources socket {kubelet.socket_path}: answer of 9.0 MiB"
        )
        assert "larger than the 8 MiB the exporter accepts" in status.last_error
        assert watcher.owners() == good  # kept for stale_after, as for any failure
        kubelet.set_pods(pods_v1())
        assert wait_until(lambda: watcher.status().ok)
        assert watcher.owners() == good
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    refused = [line for line in lines if "larger than the 8 MiB" in line]
    assert len(refused) == 1, lines
    assert sum("answering again" in line for line in lines) == 1


# ---------------------------------------------------------------------------- generated code
def test_generated_stubs_are_up_to_date(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gen-podresources"), str(tmp_path)],
        env=env,
        check=True,
        capture_output=True,
    )
    for name in ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py"):
        assert (tmp_path / name).read_bytes() == (PKG / name).read_bytes(), (
            f"{name} is out of date with api.proto (or grpcio-tools changed): "
            "run scripts/gen-podresources and commit the result"
        )


def test_generated_grpc_stub_uses_a_package_relative_import() -> None:
    text = (PKG / "api_pb2_grpc.py").read_text()
    assert "from . import api_pb2 as" in text
    assert "from migscope" not in text
    assert "\nimport api_pb2" not in text
