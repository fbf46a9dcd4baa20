"""The GPU's own MIG profile table: read from NVML once, published as migscope_gpu_mig_profile_info.

Real data first: docs/hardware/h200-freshness.json holds what the production reader got from a
real H200 (driver 580.159.04, MIG disabled), call by call. It is checked against that GPU's
``nvidia-smi mig -lgip/-lgipp`` (tests/fixtures/h200/) and the catalogue, and the simulated
NVML must answer the same reader with the same table and the same error codes. The rest runs
the production NVML backend on the simulator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from migscope.core._catalogue import find_model
from migscope.core._nvidia_smi import parse_lgip, parse_lgipp
from migscope.exporter._backends.nvml import NvmlBackend
from migscope.exporter._backends.nvml.codes import code_of
from migscope.exporter._backends.nvml.profiles import read_profile_table
from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._sampler import Sampler
from migscope.exporter._snapshot import MigProfileInfo, Snapshot
from migscope.sim import Simulation

ROOT = Path(__file__).resolve().parents[2]
RECORDED = json.loads((ROOT / "docs" / "hardware" / "h200-freshness.json").read_text())[
    "profile_table"
]
H200_FIXTURES = ROOT / "tests" / "fixtures" / "h200"
INFO_CALL = "nvmlDeviceGetGpuInstanceProfileInfo"
PER_PASS = sum(1 for c in RECORDED["calls"] if c["fn"] == INFO_CALL)
"""Profile-info calls one reading of a table makes (indices 0..18 on driver 580: 19)."""
A100 = find_model("A100-40GB")
A100_PROFILES = [p.name for p in sorted(A100.profiles, key=lambda p: p.nvml_index)]

SCENARIO: dict[str, Any] = {
    "seed": 5,
    "nodes": [
        {
            "name": "n",
            "gpus": [
                {"model": "H200", "mig": True, "instances": [{"profile": "3g.71gb"}]},
                {"model": "H200", "mig": False},
                {"model": "A100-40GB", "mig": True, "instances": [{"profile": "3g.20gb"}]},
            ],
        }
    ],
}


def recorded_table() -> list[MigProfileInfo]:
    return [
        MigProfileInfo(**{**p, "placements": tuple(p["placements"])}) for p in RECORDED["profiles"]
    ]


def make(**node: Any) -> tuple[Simulation, NvmlBackend, Sampler]:
    scenario = {**SCENARIO, "nodes": [{**SCENARIO["nodes"][0], **node}]}
    sim = Simulation.from_scenario(scenario)
    backend = NvmlBackend(sim.node("n").nvml, name="sim", clock=sim.clock.elapsed)
    return sim, backend, Sampler(backend, interval=1.0, clock=sim.clock.elapsed)


def cycles(sim: Simulation, sampler: Sampler, n: int) -> Snapshot:
    snap = sampler.run_once()
    for _ in range(n - 1):
        sim.clock.advance(1.0)
        snap = sampler.run_once()
    return snap


def test_the_real_h200_table_is_what_nvidia_smi_listed_for_it() -> None:
    """The reader saw on the H200 exactly the profiles, ids, memory, SMs, engines and placements
    that ``nvidia-smi mig -lgip/-lgipp`` printed there, with MIG disabled."""
    assert RECORDED["mig_mode"] == [0, 0]
    table = {p.profile_id: p for p in recorded_table()}
    listed = parse_lgip((H200_FIXTURES / "lgip.txt").read_text())
    placements = {p.profile_id: p for p in parse_lgipp((H200_FIXTURES / "lgipp.txt").read_text())}
    assert sorted(table) == sorted(p.profile_id for p in listed)
    for row in listed:
        mine = table[row.profile_id]
        assert mine.profile == row.name
        assert mine.memory_mib == round(row.memory_gib * 1024)
        assert (mine.sm_count, mine.max_instances) == (row.sm_count, row.total)
        assert (mine.copy_engines, mine.decoders, mine.encoders) == (
            row.copy_engines,
            row.decoders,
            row.encoders,
        )
        assert (mine.jpegs, mine.ofas) == (row.jpegs, row.ofas)
        assert mine.placements == placements[row.profile_id].starts
        assert mine.placement_size == placements[row.profile_id].size


def test_the_real_h200_table_agrees_with_the_catalogue() -> None:
    model = find_model("NVIDIA H200", pci_device_id=0x2335)
    assert len(recorded_table()) == len(model.profiles)
    for mine in recorded_table():
        known = model.profile_by_nvml_id(mine.profile_id)
        assert known is not None, mine.profile
        assert known.name == mine.profile
        assert known.memory_mib == mine.memory_mib
        assert (known.compute_slices, known.sm_count, known.max_instances) == (
            mine.compute_slices,
            mine.sm_count,
            mine.max_instances,
        )
        assert (known.placements, known.memory_slices) == (mine.placements, mine.placement_size)
        assert (known.copy_engines, known.decoders, known.encoders, known.jpegs, known.ofas) == (
            mine.copy_engines,
            mine.decoders,
            mine.encoders,
            mine.jpegs,
            mine.ofas,
        )


def test_the_simulator_answers_the_reader_as_the_real_h200_did() -> None:
    """Same table, and the same call sequence with the same error codes: NOT_SUPPORTED for
    indices the H200 lacks, INVALID_ARGUMENT past the driver's last index."""
    sim = Simulation.from_scenario(
        {"nodes": [{"name": "n", "gpus": [{"model": "H200", "mig": False}]}]}
    )
    nvml = sim.node("n").nvml
    nvml.nvmlInit()
    calls: list[tuple[str, Any, int | None]] = []

    def call(fn: Any, *args: Any) -> Any:
        try:
            result = fn(*args)
        except nvml.NVMLError as exc:
            calls.append((fn.__name__, args[1], code_of(exc)))
            raise
        calls.append((fn.__name__, args[1], None))
        return result

    table = read_profile_table(nvml, call, nvml.nvmlDeviceGetHandleByIndex(0))
    assert list(table) == recorded_table()
    assert calls == [(c["fn"], c["arg"], c.get("code")) for c in RECORDED["calls"]]


def test_every_gpu_publishes_its_table_mig_on_or_off_and_reads_it_once() -> None:
    sim, _backend, sampler = make()
    nvml = sim.node("n").nvml
    snap = cycles(sim, sampler, 35)  # three periodic re-enumerations (every 10 s)
    h200_mig, h200, a100 = snap.gpus
    assert list(h200.mig_profiles) == recorded_table(), "MIG off: the same table as MIG on"
    assert h200_mig.mig_profiles == h200.mig_profiles
    assert [p.profile for p in a100.mig_profiles] == A100_PROFILES
    # One pass per GPU, and one placement query per profile found.
    assert nvml.calls[INFO_CALL] == 3 * PER_PASS
    placements = nvml.calls["nvmlDeviceGetGpuInstancePossiblePlacements"]
    assert placements == 7 + 7 + len(A100_PROFILES)


def test_a_layout_change_reads_the_table_of_that_gpu_again() -> None:
    sim, _backend, sampler = make()
    nvml = sim.node("n").nvml
    cycles(sim, sampler, 2)
    before = nvml.calls[INFO_CALL]
    nvml.faults.change_layout(0, [{"profile": "4g.71gb"}])
    sim.clock.advance(1.0)
    snap = sampler.run_once()
    assert snap.gpus[0].layout_label == "4g.71gb"
    assert nvml.calls[INFO_CALL] - before == PER_PASS
    assert list(snap.gpus[0].mig_profiles) == recorded_table()


def test_a_gpu_that_is_not_mig_capable_has_no_table_and_costs_no_call() -> None:
    sim = Simulation.from_scenario(SCENARIO)
    nvml = sim.node("n").nvml
    nvml.faults.inject_error("nvmlDeviceGetMigMode", "NOT_SUPPORTED", gpu=1)
    backend = NvmlBackend(nvml, name="sim", clock=sim.clock.elapsed)
    snap = Sampler(backend, interval=1.0, clock=sim.clock.elapsed).run_once()
    assert snap.gpus[1].mig_profiles == ()
    assert nvml.calls[INFO_CALL] == 2 * PER_PASS, "GPUs 0 and 2 only"


def test_without_privileges_the_placements_are_unknown_not_the_profiles() -> None:
    sim, _backend, sampler = make(privileged=False)
    snap = cycles(sim, sampler, 2)
    table = snap.gpus[1].mig_profiles
    assert [p.profile for p in table] == [p.profile for p in recorded_table()]
    assert all(p.placements == () and p.placement_size is None for p in table)
    text = SnapshotCollector(snapshot=lambda: snap, backend="sim", version="t").render_text()
    line = next(
        x for x in text.decode().splitlines() if x.startswith("migscope_gpu_mig_profile_info{")
    )
    assert 'placements="",placement_size=""' in line


def test_a_failing_table_read_keeps_the_gpu_and_is_tried_again() -> None:
    """The table is metadata: an NVML error while reading it fails the collector and leaves the
    table out, but the GPU's readings stay; the next enumeration reads it again."""
    sim = Simulation.from_scenario(SCENARIO)
    nvml = sim.node("n").nvml
    nvml.faults.inject_error(INFO_CALL, "UNKNOWN", gpu=1, count=1)
    backend = NvmlBackend(nvml, name="sim", clock=sim.clock.elapsed, enumerate_interval=10.0)
    sampler = Sampler(backend, interval=1.0, clock=sim.clock.elapsed)
    snap = sampler.run_once()
    assert [g.index for g in snap.gpus] == [0, 1, 2]
    assert snap.gpus[1].mig_profiles == ()
    assert snap.gpus[1].power_watts is not None
    status = next(c for c in snap.collectors if c.name == "sim")
    assert not status.success
    assert status.error is not None
    assert status.error.startswith("GPU 1: MIG profile table:")
    snap = cycles(sim, sampler, 11)
    assert list(snap.gpus[1].mig_profiles) == recorded_table()
    assert next(c for c in snap.collectors if c.name == "sim").success


def test_the_rendered_series_is_the_contract_the_analyzer_parses() -> None:
    sim, _backend, sampler = make()
    snap = cycles(sim, sampler, 2)
    text = SnapshotCollector(snapshot=lambda: snap, backend="sim", version="t").render_text()
    uuid = snap.gpus[1].uuid
    expected = (
        f'migscope_gpu_mig_profile_info{{gpu="1",gpu_uuid="{uuid}",profile="3g.71gb",'
        'profile_id="9",compute_slices="3",memory_mib="71424",sm_count="60",max_instances="2",'
        'placements="0,4",placement_size="4",copy_engines="3",decoders="3",encoders="0",'
        'jpegs="3",ofas="0"} 1.0'
    )
    assert expected in text.decode().splitlines()


@pytest.mark.parametrize("registry_api", [True, False])
def test_both_renderings_carry_one_series_per_profile_and_gpu(registry_api: bool) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    sim, _backend, sampler = make()
    snap = cycles(sim, sampler, 2)
    collector = SnapshotCollector(snapshot=lambda: snap, backend="sim", version="t")
    if registry_api:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        text = generate_latest(registry).decode()
    else:
        text = collector.render_text().decode()
    lines = [x for x in text.splitlines() if x.startswith("migscope_gpu_mig_profile_info{")]
    assert len(lines) == 7 + 7 + len(A100_PROFILES)
