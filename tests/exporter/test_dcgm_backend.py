"""The DCGM backend against a fake of DCGM's Python bindings (tests/support/fake_dcgm).

The backend code is the production ``dcgm`` path, loading the bindings from a directory exactly
as it loads ``/usr/share/datacenter-gpu-manager-4/bindings/python3``; only the modules in that
directory are a fake, which follows the real bindings' call surface and error semantics (see
its docstrings for the source of each). Numbers for the A100 node come from a real
dcgm-exporter capture (reference/samples/dcgm-mig-a100-40gb-3gi-active.txt); profile ids from
real ``nvidia-smi mig -lgip`` output.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_dcgm import hostengine as he
from support.fake_dcgm.hostengine import GI, FakeHostengine

from migscope.exporter._backends import BackendError, BackendReading
from migscope.exporter._backends.dcgm import DEFAULT_BINDINGS, DcgmBackend
from migscope.exporter._sampler import Sampler
from migscope.exporter._snapshot import GpuReading

FAKE_BINDINGS = Path(__file__).resolve().parents[1] / "support" / "fake_dcgm"
BINDING_MODULES = ("dcgm_structs", "dcgm_fields", "dcgm_agent", "dcgmvalue")

H100 = ("NVIDIA H100 80GB HBM3", 0x233010DE)
A100 = ("NVIDIA A100-SXM4-40GB", 0x20B010DE)
H100_UUID = "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4"
H100_PLAIN_UUID = "GPU-5f6e7d8c-0000-1111-2222-333344445555"
A100_UUID = "GPU-7099682b-a20d-2bcc-74ab-b9060454d81e"
MIG = {  # MIG UUIDs as the device plugin hands them to pods (nvidia-smi -L, H100 mixed)
    ("h100", 2): "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
    ("h100", 3): "MIG-56c30729-347f-5dd6-8da0-c3cc59e969e0",
    ("h100", 9): "MIG-9d14fb21-4ae1-546f-a636-011582899c39",
    ("h100", 10): "MIG-0f709664-740c-52b0-ae79-3e4c9ede6d3b",
    ("a100", 7): "MIG-a1000000-0000-4000-8000-000000000007",
    ("a100", 9): "MIG-a1000000-0000-4000-8000-000000000009",
    ("a100", 5): "MIG-a1000000-0000-4000-8000-000000000005",
}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def fake_machine() -> Iterator[None]:
    he.reset()
    yield
    he.reset()


def node() -> tuple[FakeHostengine, he.FakeGpu, he.FakeGpu, he.FakeGpu]:
    """GPU 0: H100 in MIG mode; GPU 1: H100 without MIG; GPU 2: A100 in MIG mode."""
    engine = FakeHostengine()
    h100 = engine.add_gpu(H100[0], H100_UUID, pci_device_id=H100[1], mig=True)
    h100.partition(
        GI("3g.40gb", 2, 9, 3, MIG["h100", 2]),
        GI("2g.20gb", 3, 14, 2, MIG["h100", 3]),
        GI("1g.10gb", 9, 19, 1, MIG["h100", 9]),
        GI("1g.10gb", 10, 19, 1, MIG["h100", 10]),
    )
    h100.set(f155=412.5, f156=9_876_543, f252=30_000, f251=51_000, f1001=0.33)
    h100.instance(2).set(f1001=0.8, f1002=0.7, f1003=0.3, f1004=0.6, f1005=0.25, f252=20_000)
    h100.instance(2).set(f251=20_448)
    h100.instance(3).set(f1001=0.0, f1002=0.0, f1003=0.0, f1004=0.0, f1005=0.0, f252=0)
    h100.instance(3).set(f251=20_096)
    plain = engine.add_gpu(H100[0], H100_PLAIN_UUID, pci_device_id=H100[1])
    plain.set(f155=180.0, f252=2_000, f251=79_000, f250=81_559)
    plain.set(f1001=0.5, f1002=0.4, f1003=0.2, f1004=0.1, f1005=0.05)
    a100 = engine.add_gpu(A100[0], A100_UUID, pci_device_id=A100[1], mig=True)
    a100.partition(
        GI("1g.5gb", 7, 19, 1, MIG["a100", 7]),
        GI("1g.5gb", 9, 19, 1, MIG["a100", 9]),
        GI("2g.10gb", 5, 14, 2, MIG["a100", 5]),
    )
    a100.set(f155=116.043)
    a100.instance(7).set(f252=98, f251=4766, f1001=0.000062, f1005=0.000053)
    a100.instance(9).set(f252=4384, f251=480, f1001=0.999917, f1005=0.647986)
    a100.instance(5).set(f252=153, f251=9702, f1001=0.00003, f1005=0.000001)
    a100.instance(5).set(f1002=1.0000004)  # ratios can overshoot 1 by rounding
    return engine, h100, plain, a100


def gpu(reading: BackendReading, index: int) -> GpuReading:
    return next(g for g in reading.gpus if g.index == index)


def status(reading: BackendReading, name: str) -> tuple[bool, str | None]:
    found = next(c for c in reading.statuses if c.name == name)
    return found.success, found.error


def embedded(engine: FakeHostengine, **kwargs: Any) -> DcgmBackend:
    he.embed(engine)
    return DcgmBackend(bindings=FAKE_BINDINGS, **kwargs)


# -- readings ----------------------------------------------------------------------------------


def test_reads_a_node_of_mig_h100s_and_an_ampere_a100() -> None:
    engine, *_ = node()
    backend = embedded(engine)
    reading = backend.read(with_energy=False)
    backend.close()

    assert [g.index for g in reading.gpus] == [0, 1, 2]
    assert reading.driver_version == "580.65.06"
    h100 = gpu(reading, 0)
    assert (h100.uuid, h100.model, h100.pci_device_id) == (H100_UUID, "H100-80GB", "0x233010DE")
    assert h100.mig_enabled
    assert (h100.compute_slices, h100.memory_slices) == (7, 8)
    assert h100.power_watts == 412.5
    assert h100.memory_used_bytes == 30_000 * 2**20
    assert h100.memory_total_bytes == 81_000 * 2**20  # FB total blank: used + free
    assert h100.memory_reserved_bytes is None  # ... so the reserved share is unknown
    assert h100.activity is None  # a MIG GPU's activity is its slices'
    assert [(i.gpu_instance_id, i.profile, i.mig_uuid) for i in h100.instances] == [
        (2, "3g.40gb", MIG["h100", 2]),
        (3, "2g.20gb", MIG["h100", 3]),
        (9, "1g.10gb", MIG["h100", 9]),
        (10, "1g.10gb", MIG["h100", 10]),
    ]
    three_g = h100.instances[0]
    assert (three_g.profile_id, three_g.compute_slices, three_g.memory_slices) == (9, 3, 4)
    assert three_g.sm_count == 60
    assert three_g.memory_used_bytes == 20_000 * 2**20
    assert three_g.memory_total_bytes == 40_448 * 2**20
    assert three_g.activity is not None
    assert (three_g.activity.graphics, three_g.activity.tensor) == (0.8, 0.6)
    assert (three_g.activity.sm_active, three_g.activity.dram) == (0.7, 0.25)
    idle = h100.instances[1].activity
    assert idle is not None
    assert idle.graphics == 0.0, "a measured zero stays zero"

    plain = gpu(reading, 1)
    assert not plain.mig_enabled
    assert plain.instances == ()
    assert plain.compute_slices is None
    assert plain.memory_total_bytes == 81_559 * 2**20
    # DCGM's FB fields are nvmlMemory_v2_t in MiB: total = used + free + reserved
    assert plain.memory_reserved_bytes == (81_559 - 2_000 - 79_000) * 2**20
    assert plain.activity is not None
    assert plain.activity.graphics == 0.5
    assert status(reading, "dcgm") == (True, None)


def test_ampere_gets_per_instance_activity_from_dcgm() -> None:
    # NVML has no GPM on Ampere, so this is the reason to run the dcgm backend on A100s.
    engine, *_ = node()
    backend = embedded(engine)
    a100 = gpu(backend.read(with_energy=False), 2)
    backend.close()
    assert a100.model == "A100-40GB"
    by_gi = {i.gpu_instance_id: i for i in a100.instances}
    assert set(by_gi) == {5, 7, 9}
    busy, idle = by_gi[9].activity, by_gi[7].activity
    assert busy is not None
    assert busy.graphics == pytest.approx(0.999917)
    assert busy.dram == pytest.approx(0.647986)
    assert idle is not None
    assert idle.graphics == pytest.approx(0.000062)
    assert by_gi[9].memory_used_bytes == 4384 * 2**20
    assert by_gi[9].memory_total_bytes == 4864 * 2**20  # the 1g.5gb's 4864 MiB
    assert (by_gi[5].profile, by_gi[5].compute_slices, by_gi[5].sm_count) == ("2g.10gb", 2, 28)
    assert by_gi[5].activity is not None
    assert by_gi[5].activity.sm_active == 1.0, "clamped to a ratio"


def test_instance_entity_ids_are_mapped_to_nvml_gi_ids_through_the_hierarchy() -> None:
    engine, h100, _plain, a100 = node()
    # DCGM numbers instances itself: the A100's are entities 16, 17, 18, its GIs 7, 9, 5.
    assert [i.entity_id for i in a100.instances] == [16, 17, 18]
    assert [i.entity_id for i in h100.instances] == [0, 1, 2, 3]
    h100.instance(9).set(f252=111)
    h100.instance(10).set(f252=222)
    backend = embedded(engine)
    reading = backend.read(with_energy=False)
    backend.close()
    used = {
        (g.index, i.gpu_instance_id): i.memory_used_bytes for g in reading.gpus for i in g.instances
    }
    assert used[0, 9] == 111 * 2**20
    assert used[0, 10] == 222 * 2**20
    assert used[2, 7] == 98 * 2**20
    assert used[2, 5] == 153 * 2**20


def test_gpu_index_is_nvml_s_not_dcgm_s() -> None:
    engine = FakeHostengine()
    engine.add_gpu(H100[0], "GPU-x", pci_device_id=H100[1], nvml_index=3).set(f155=100.0)
    backend = embedded(engine)
    reading = backend.read(with_energy=False)
    backend.close()
    assert [g.index for g in reading.gpus] == [3]


def test_blank_values_are_absent_not_zero() -> None:
    engine, h100, plain, _a100 = node()
    h100.set(f155=he.FP64_NOT_SUPPORTED)
    h100.instance(2).set(f1004=he.FP64_BLANK, f252=he.INT64_BLANK)
    h100.instance(3).set(f252=he.INT32_BLANK + 2)  # an int32 "not supported" widened to int64
    plain.set(**{f"f{f}": he.FP64_BLANK for f in (1001, 1002, 1003, 1004, 1005)})
    backend = embedded(engine)
    reading = backend.read(with_energy=False)
    backend.close()
    h = gpu(reading, 0)
    assert h.power_watts is None
    three_g, two_g = h.instances[0], h.instances[1]
    assert three_g.activity is not None
    assert three_g.activity.tensor is None
    assert three_g.activity.graphics == 0.8
    assert three_g.memory_used_bytes is None
    assert three_g.memory_total_bytes is None
    assert two_g.memory_used_bytes is None
    assert gpu(reading, 1).activity is None  # every ratio blank: no activity at all
    one_g = next(i for i in gpu(reading, 2).instances if i.gpu_instance_id == 7)
    assert one_g.activity is not None
    assert one_g.activity.sm_active is None
    assert status(reading, "dcgm") == (True, None), "a blank is not an error"


def test_power_is_read_once_per_gpu_and_never_per_slice() -> None:
    engine, *_ = node()
    backend = embedded(engine)
    sampler = Sampler(backend, interval=1.0, clock=Clock())
    snap = sampler.run_once()
    backend.close()
    asked = {(g, f) for g, _e, f in engine.requests}
    assert (he.FE_GPU_I, 155) not in asked
    assert (he.FE_GPU_I, 156) not in asked
    assert (he.FE_GPU, 155) in asked
    h100 = next(g for g in snap.gpus if g.index == 0)
    assert h100.power_watts == 412.5
    shares = [i.power_estimated_watts for i in h100.instances]
    assert all(s is not None for s in shares)
    assert sum(s for s in shares if s is not None) == pytest.approx(412.5)


def test_a_repartition_is_picked_up_at_once_although_dcgm_reuses_entity_ids() -> None:
    engine, h100, *_ = node()
    backend = embedded(engine)
    before = gpu(backend.read(with_energy=False), 0)
    assert [i.gpu_instance_id for i in before.instances] == [2, 3, 9, 10]
    new = h100.partition(
        GI("4g.40gb", 1, 5, 4, "MIG-44444444-0000-4000-8000-000000000001"),
        GI("3g.40gb", 2, 9, 3, "MIG-33333333-0000-4000-8000-000000000002"),
    )
    assert [i.entity_id for i in new] == [0, 1]  # the old 3g's and 2g's entity ids
    h100.instance(1).set(f1001=0.4, f252=1234)
    reading = backend.read(with_energy=False)  # no clock advance: stale watches tell
    after = gpu(reading, 0)
    backend.close()
    assert [(i.gpu_instance_id, i.profile) for i in after.instances] == [
        (1, "4g.40gb"),
        (2, "3g.40gb"),
    ]
    four_g = after.instances[0]
    assert four_g.mig_uuid == "MIG-44444444-0000-4000-8000-000000000001"
    assert four_g.activity is not None
    assert four_g.activity.graphics == 0.4
    assert four_g.memory_used_bytes == 1234 * 2**20
    assert after.instances[1].mig_uuid != MIG["h100", 2], "a re-created GI has a new UUID"
    assert status(reading, "dcgm") == (True, None)
    assert len(gpu(reading, 2).instances) == 3, "other GPUs are untouched"


def test_new_instances_on_an_empty_mig_gpu_appear_within_the_hierarchy_interval() -> None:
    engine = FakeHostengine()
    a100 = engine.add_gpu(A100[0], A100_UUID, pci_device_id=A100[1], mig=True)
    clock = Clock()
    backend = embedded(engine, clock=clock, hierarchy_interval=10.0)
    first = backend.read(with_energy=False)
    assert gpu(first, 0).mig_enabled
    assert gpu(first, 0).instances == ()
    assert gpu(first, 0).compute_slices == 7
    a100.partition(GI("7g.40gb", 0, 0, 7, "MIG-77777777-0000-4000-8000-000000000000"))
    clock.now += 5.0
    assert gpu(backend.read(with_energy=False), 0).instances == ()  # not due yet
    clock.now += 5.0
    later = gpu(backend.read(with_energy=False), 0)
    backend.close()
    assert [(i.gpu_instance_id, i.profile, i.sm_count) for i in later.instances] == [
        (0, "7g.40gb", 98)
    ]


def test_an_instance_that_keeps_vanishing_leaves_its_gpu_out_of_the_cycle() -> None:
    engine, h100, *_ = node()
    backend = embedded(engine)
    backend.read(with_energy=False)
    h100.instance(9).fail(1001, he.ST_INSTANCE_NOT_FOUND)  # even after a re-enumeration
    reading = backend.read(with_energy=False)
    backend.close()
    assert [g.index for g in reading.gpus] == [1, 2], "left out rather than half-reported"
    assert status(reading, "dcgm") == (False, "GPU 0: MIG layout kept changing during read")
    assert engine.calls["dcgmGetGpuInstanceHierarchy"] == 2, "re-read once before giving up"


def test_when_instances_cannot_be_read_mig_gpus_are_left_out_and_others_read() -> None:
    engine, *_ = node()
    backend = embedded(engine)
    backend.read(with_energy=False)
    engine.fail_values_for(he.FE_GPU_I, he.ST_GENERIC_ERROR, times=10)
    reading = backend.read(with_energy=False)
    assert [g.index for g in reading.gpus] == [1]
    ok, error = status(reading, "dcgm")
    assert not ok
    assert error is not None
    assert error.endswith("Generic unspecified error")
    engine.clear_faults()
    recovered = backend.read(with_energy=False)
    backend.close()
    assert [g.index for g in recovered.gpus] == [0, 1, 2]


# -- errors ------------------------------------------------------------------------------------


def test_per_field_errors_mark_the_collector_and_other_gpus_are_still_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine, h100, *_ = node()
    h100.fail(252, he.ST_NVML_ERROR)
    backend = embedded(engine)
    with caplog.at_level(logging.WARNING):
        first = backend.read(with_energy=False)
        second = backend.read(with_energy=False)
    assert gpu(first, 0).memory_used_bytes is None
    assert gpu(first, 0).power_watts == 412.5, "the other fields of that GPU are read"
    assert gpu(first, 1).memory_used_bytes == 2_000 * 2**20
    assert len(gpu(first, 2).instances) == 3
    ok, error = status(second, "dcgm")
    assert not ok
    assert error == "GPU 0: FB used (252): NVML error"
    failing = [r for r in caplog.records if "collector failing" in r.getMessage()]
    assert len(failing) == 1, "one log line per change of state, not per cycle"
    del h100.faults[252]
    with caplog.at_level(logging.INFO):
        third = backend.read(with_energy=False)
    backend.close()
    assert status(third, "dcgm") == (True, None)
    assert any("dcgm collector recovered" in r.getMessage() for r in caplog.records)


def test_a_lost_gpu_is_left_out_and_named() -> None:
    engine, _h100, _plain, a100 = node()
    a100.lost = True
    backend = embedded(engine)
    reading = backend.read(with_energy=False)
    backend.close()
    assert [g.index for g in reading.gpus] == [0, 1]
    assert status(reading, "dcgm") == (False, "GPU 2: GPU is unreachable")


def test_energy_is_read_when_asked_and_its_errors_stay_in_the_energy_collector() -> None:
    engine, h100, plain, _a100 = node()
    backend = embedded(engine, hierarchy_interval=0.0)  # re-enumerates every cycle
    without = backend.read(with_energy=False)
    assert gpu(without, 0).energy_joules is None
    assert [c.name for c in without.statuses] == ["dcgm"]
    with_energy = backend.read(with_energy=True)
    assert gpu(with_energy, 0).energy_joules == pytest.approx(9876.543)
    assert gpu(with_energy, 1).energy_joules is None  # never set: blank
    assert status(with_energy, "energy") == (True, None)
    plain.fail(156, he.ST_NVML_ERROR)
    h100.set(f156=10_000_000)
    failed = backend.read(with_energy=True)
    assert status(failed, "energy") == (False, "GPU 1: energy (156): NVML error")
    assert status(failed, "dcgm") == (True, None)
    assert gpu(failed, 0).energy_joules == 10_000.0
    kept = backend.read(with_energy=False)
    backend.close()
    assert gpu(kept, 0).energy_joules == 10_000.0, "the last counter value is kept"
    assert status(kept, "energy") == (False, "GPU 1: energy (156): NVML error")


def test_an_unreachable_hostengine_is_one_line_saying_what_to_do() -> None:
    backend = DcgmBackend(host="nvidia-dcgm:5555", bindings=FAKE_BINDINGS)
    with pytest.raises(BackendError) as info:
        backend.read(with_energy=False)
    message = str(info.value)
    assert "\n" not in message
    assert "cannot connect to nv-hostengine at nvidia-dcgm:5555" in message
    assert "connection to the host engine is not valid" in message
    assert "dcgm.enabled=true" in message
    backend.close()


def test_a_remote_hostengine_on_the_default_port() -> None:
    engine, *_ = node()
    he.serve("nvidia-dcgm:5555", engine)
    backend = DcgmBackend(host="nvidia-dcgm", bindings=FAKE_BINDINGS)
    assert backend.address == "nvidia-dcgm:5555"
    reading = backend.read(with_energy=False)
    assert len(reading.gpus) == 3
    assert len(engine.connections) == 1
    backend.close()
    assert engine.connections == set()


def test_a_hostengine_that_goes_away_is_a_lost_session_then_reconnects() -> None:
    engine, *_ = node()
    he.serve("10.0.0.7:5555", engine)
    backend = DcgmBackend(host="10.0.0.7:5555", bindings=FAKE_BINDINGS)
    backend.read(with_energy=False)
    engine.stop()
    with pytest.raises(BackendError, match=r"^DCGM session lost: The connection to the host"):
        backend.read(with_energy=False)
    restarted, *_ = node()
    he.serve("10.0.0.7:5555", restarted)
    reading = backend.read(with_energy=False)
    backend.close()
    assert len(reading.gpus) == 3
    assert restarted.calls["dcgmWatchFields"] == 2, "the new hostengine is watched again"


def test_a_failed_read_call_closes_the_session_and_the_next_cycle_reopens() -> None:
    engine, *_ = node()
    backend = embedded(engine)
    backend.read(with_energy=False)
    engine.fail_next("dcgmEntitiesGetLatestValues", he.ST_GENERIC_ERROR)
    with pytest.raises(BackendError, match=r"^DCGM read failed: Generic unspecified error$"):
        backend.read(with_energy=False)
    assert engine.connections == set()
    assert engine.field_groups == {}
    reading = backend.read(with_energy=False)
    backend.close()
    assert len(reading.gpus) == 3


def test_a_refused_setup_is_one_line_and_disconnects() -> None:
    engine, *_ = node()
    engine.fail_next("dcgmWatchFields", he.ST_NO_PERMISSION)
    backend = embedded(engine)
    with pytest.raises(BackendError, match=r"^DCGM setup failed: Not permissioned$"):
        backend.open()
    assert engine.connections == set()
    assert engine.field_groups == {}
    assert len(backend.read(with_energy=False).gpus) == 3, "the next cycle tries again"
    backend.close()


def test_an_embedded_hostengine_without_gpus_is_one_line() -> None:
    backend = DcgmBackend(bindings=FAKE_BINDINGS)
    with pytest.raises(BackendError) as info:
        backend.open()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cannot start an embedded DCGM hostengine: NVML couldn't be loaded")
    assert "--dcgm-host" in message


def test_missing_libdcgm_says_the_bindings_need_it_even_for_a_remote_hostengine() -> None:
    engine, *_ = node()
    he.serve("nvidia-dcgm:5555", engine)
    he.uninstall_library()
    backend = DcgmBackend(host="nvidia-dcgm:5555", bindings=FAKE_BINDINGS)
    with pytest.raises(BackendError) as info:
        backend.open()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("libdcgm.so.4 not found")
    assert "remote nv-hostengine" in message
    assert "datacenter-gpu-manager-4-core" in message
    assert engine.connections == set()


def test_missing_bindings_name_the_directory_searched(tmp_path: Path) -> None:
    missing = tmp_path / "no-dcgm-here"
    with pytest.raises(BackendError) as info:
        DcgmBackend(bindings=missing).open()
    message = str(info.value)
    assert "\n" not in message
    assert f"not found in {missing}:" in message
    assert "datacenter-gpu-manager-4-core" in message
    assert "not on PyPI" in message


def test_without_a_bindings_directory_the_default_locations_are_searched() -> None:
    if any((d / "dcgm_agent.py").exists() for d in DEFAULT_BINDINGS):
        pytest.skip("DCGM is installed on this machine")
    with pytest.raises(BackendError) as info:
        DcgmBackend().open()
    message = str(info.value)
    assert (
        "/usr/share/datacenter-gpu-manager-4/bindings/python3, "
        "/usr/local/dcgm/bindings/python3:" in message
    )


def test_bindings_that_fail_to_import_are_one_line_and_leave_nothing_behind(
    tmp_path: Path,
) -> None:
    (tmp_path / "dcgm_structs.py").write_text("import ctypes\n")
    (tmp_path / "dcgm_fields.py").write_text("import dcgm_structs\n")
    (tmp_path / "dcgm_agent.py").write_text("import dcgm_structs\nraise OSError('bad\\nbuild')\n")
    path_before = list(sys.path)
    with pytest.raises(BackendError) as info:
        DcgmBackend(bindings=tmp_path).open()
    assert str(info.value) == (
        f"DCGM Python bindings in {tmp_path} failed to import: OSError: bad build"
    )
    assert sys.path == path_before
    assert not {"dcgm_structs", "dcgm_fields", "dcgm_agent"} & set(sys.modules)


# -- lifecycle ---------------------------------------------------------------------------------


def test_the_bindings_leave_no_modules_or_path_entries_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine, *_ = node()
    placeholder = types.ModuleType("dcgm_structs")
    monkeypatch.setitem(sys.modules, "dcgm_structs", placeholder)
    path_before = list(sys.path)
    first, second = embedded(engine), embedded(engine)
    first.open()
    second.open()
    assert sys.path == path_before
    assert sys.modules["dcgm_structs"] is placeholder, "a module of that name is put back"
    assert not {"dcgm_fields", "dcgm_agent", "dcgmvalue"} & set(sys.modules)
    assert first._b is not None
    assert second._b is not None
    assert first._b.structs is not second._b.structs, "each backend has its own modules"
    assert first.read(with_energy=False).gpus == second.read(with_energy=False).gpus
    second.close()
    first.close()


def test_close_is_idempotent_and_frees_everything_on_the_hostengine() -> None:
    engine, *_ = node()
    he.serve("nvidia-dcgm:5555", engine)
    backend = DcgmBackend(host="nvidia-dcgm:5555", bindings=FAKE_BINDINGS)
    backend.read(with_energy=True)
    assert engine.watches
    assert engine.groups
    assert len(engine.field_groups) == 2
    backend.close()
    backend.close()
    assert engine.connections == set()
    assert not he.library().initialized, "dcgmShutdown balances dcgmInit"
    assert engine.groups == {}
    assert engine.field_groups == {}
    assert engine.watches == {}
    reading = backend.read(with_energy=False)  # a closed backend reopens on the next read
    backend.close()
    assert len(reading.gpus) == 3


def test_close_before_open_and_after_a_failed_open_is_harmless() -> None:
    DcgmBackend(bindings=FAKE_BINDINGS).close()
    backend = DcgmBackend(host="nowhere", bindings=FAKE_BINDINGS)
    with pytest.raises(BackendError):
        backend.open()
    assert not he.library().initialized, "a failed connect leaves DCGM shut down"
    backend.close()
    backend.close()


# -- identifiers -------------------------------------------------------------------------------


def test_an_older_dcgm_without_mig_uuids_names_slices_in_the_legacy_form() -> None:
    engine, *_ = node()
    engine.uuid_field = "gpu"  # DCGM_FI_DEV_UUID of a GPU-I answers with the GPU's UUID
    backend = embedded(engine)
    reading = backend.read(with_energy=False)
    backend.close()
    assert [i.mig_uuid for i in gpu(reading, 2).instances] == [
        f"MIG-{A100_UUID}/5/0",
        f"MIG-{A100_UUID}/7/0",
        f"MIG-{A100_UUID}/9/0",
    ]


def test_a_gpu_the_catalogue_does_not_know_uses_dcgm_s_profile_names() -> None:
    engine = FakeHostengine()
    future = engine.add_gpu("NVIDIA Z999", "GPU-z", pci_device_id=0x999910DE, mig=True)
    future.partition(GI("2g.48gb", 4, 33, 2, "MIG-zz"))
    backend = embedded(engine)
    reading = backend.read(with_energy=False)
    backend.close()
    z = gpu(reading, 0)
    assert z.model is None
    assert z.compute_slices is None
    inst = z.instances[0]
    assert (inst.profile, inst.profile_id, inst.compute_slices) == ("2g.48gb", 33, 2)
    assert (inst.memory_slices, inst.sm_count, inst.placement_size) == (0, 0, None)
    assert inst.mig_uuid == "MIG-zz"
