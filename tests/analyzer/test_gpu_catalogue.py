"""The catalogue an analysis plans with: the GPUs' own profile tables, and their drivers.

Real data where it exists: the H100 NVL table is a real ``nvidia-smi mig -lgip``/``-lgipp``
of driver 560.35.03 (``tests/fixtures/real/nvidia-smi/azure-h100-nvl-*``), whose memory sizes
differ from the catalogue's reference; the driver labels come from real dcgm-exporter
captures (``tests/fixtures/real/dcgm-exporter/``). Contradicting tables are made by changing
one field of a real one, since no public capture shows two drivers' tables on one fleet.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support.planted_slices import WEEK, planted_week

from migscope.analyzer._intake.file import FileSource
from migscope.analyzer._intake.gpu_catalogue import BUILT_IN, GpuCatalogue, choose_catalogue
from migscope.analyzer._intake.gpu_facts import GpuFacts
from migscope.analyzer._model import SliceInfo, SliceKey
from migscope.analyzer._pipeline import analyze
from migscope.core._catalogue import find_model
from migscope.core._drivers import DriverVersion
from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._profile_table import ObservedProfile, ProfileTable, tables_from_nvidia_smi

REAL = Path(__file__).parents[1] / "fixtures" / "real"
NVL_560 = (
    (REAL / "nvidia-smi" / "azure-h100-nvl-lgip-driver560.txt").read_text(encoding="utf-8")
    + "\n"
    + (REAL / "nvidia-smi" / "azure-h100-nvl-lgipp-driver560.txt").read_text(encoding="utf-8")
)


def _own_table(model: GpuModel, **changes: object) -> ProfileTable:
    """``model``'s table as its GPU would report it through NVML (the built-in facts)."""
    profiles = tuple(
        ObservedProfile(
            name=p.name,
            profile_id=p.nvml_id if p.nvml_id is not None else p.nvml_index,
            compute_slices=p.compute_slices,
            memory_mib=p.memory_mib,
            sm_count=p.sm_count,
            max_instances=p.max_instances,
            placements=p.placements,
            placement_size=p.memory_slices,
            copy_engines=p.copy_engines,
            decoders=p.decoders,
            encoders=p.encoders,
            jpegs=p.jpegs,
            ofas=p.ofas,
        )
        for p in model.profiles
    )
    table = ProfileTable(
        source="test",
        gpu_name=model.names[0],
        pci_device_id=model.pci_device_ids[0],
        driver=None,
        profiles=profiles,
    )
    return dataclasses.replace(table, **changes) if changes else table  # type: ignore[arg-type]


def _facts(node: str, model: GpuModel, table: ProfileTable | None, gpu: int = 0) -> GpuFacts:
    return GpuFacts(node, f"GPU-{node}-{gpu}", model.key, table.driver if table else None, table)


def test_tables_that_agree_with_the_catalogue_keep_the_built_in_one() -> None:
    h200 = find_model("H200-141GB")
    chosen = choose_catalogue([_facts(n, h200, _own_table(h200)) for n in ("a", "b")])
    assert chosen.observed == {}
    assert chosen.used["H200-141GB"].startswith(BUILT_IN)
    assert chosen.model("H200-141GB") is h200
    assert chosen.notes == ()


def test_a_real_table_that_the_catalogue_knows_for_its_driver_keeps_the_built_in() -> None:
    """The real driver-560 H100 NVL table matches the catalogue's facts for R560."""
    nvl = find_model("H100-NVL-94GB")
    (table,) = tables_from_nvidia_smi(NVL_560, source="azure", driver=DriverVersion.parse("560"))
    chosen = choose_catalogue([_facts("a", nvl, table)])
    assert chosen.model("H100-NVL-94GB") is nvl
    assert chosen.used["H100-NVL-94GB"].startswith(BUILT_IN)


def test_a_real_table_on_an_unknown_driver_wins_and_says_what_differs() -> None:
    """Without the driver, the real sizes are not the catalogue's reference: the table wins."""
    nvl = find_model("H100-NVL-94GB")
    (table,) = tables_from_nvidia_smi(NVL_560, source="azure")
    assert table.driver is None
    chosen = choose_catalogue([_facts("a", nvl, table)])
    used = chosen.model("H100-NVL-94GB")
    assert used is not None
    assert used is not nvl
    assert chosen.used["H100-NVL-94GB"].startswith("observed")
    real_mib = {p.name: p.memory_mib for p in table.profiles}
    assert {p.name: p.memory_mib for p in used.profiles} == real_mib
    assert real_mib != {p.name: p.memory_mib for p in nvl.profiles}
    assert [p.placements for p in used.profiles] == [p.placements for p in nvl.profiles]
    assert any("H100-NVL-94GB: planned with the profile table" in n for n in chosen.notes)


def _contradicting(model: GpuModel) -> ProfileTable:
    """A real-shaped table whose 3g profile may start only at 0 (the built-in says 0 and 4)."""
    own = _own_table(model)
    changed = tuple(
        dataclasses.replace(p, placements=(0,)) if p.compute_slices == 3 else p
        for p in own.profiles
    )
    return dataclasses.replace(own, profiles=changed)


def test_gpus_that_contradict_each_other_leave_their_nodes_unplanned() -> None:
    h200 = find_model("H200-141GB")
    chosen = choose_catalogue(
        [_facts("a", h200, _own_table(h200)), _facts("b", h200, _contradicting(h200))]
    )
    assert chosen.observed == {}
    assert set(chosen.unplanned) == {"b"}
    assert "placements" in chosen.unplanned["b"]


def test_a_node_left_out_keeps_its_layout_through_the_pipeline() -> None:
    """Idle 3g slices on both nodes: the agreeing node is re-planned, the other is not."""
    h200 = find_model("H200-141GB")
    stats = [
        planted_week(h200, node, 0, gi, "3g.71gb", start, "idle")[0]
        for node in ("a", "b")
        for gi, start in ((1, 0), (2, 4))
    ]
    facts = [_facts("a", h200, _own_table(h200)), _facts("b", h200, _contradicting(h200))]
    for f, s in zip(facts, stats[::2], strict=True):
        assert f.gpu_uuid == s.info.key.gpu_uuid
    plain = analyze(stats, window=(0.0, WEEK))
    assert {"a", "b"} <= set(plain.node_configs)
    guarded = analyze(stats, window=(0.0, WEEK), gpus=choose_catalogue(facts))
    assert "a" in guarded.node_configs
    assert "b" not in guarded.node_configs
    assert any(n.startswith("b: not planned") for n in guarded.notes)


@pytest.mark.parametrize(
    ("driver", "status_word"),
    [(None, "exists only on"), ("550.54.15", "does not exist on driver"), ("535.104.05", None)],
)
def test_a_driver_dependent_name_is_said_once_per_profile(
    driver: str | None, status_word: str | None
) -> None:
    a100 = find_model("A100-80GB")
    drivers = {("n", f"GPU-{i}"): DriverVersion.parse(driver) for i in range(3)} if driver else {}
    chosen = GpuCatalogue(drivers=drivers)
    infos = [SliceInfo(SliceKey("n", i, f"GPU-{i}", 0), a100.key, "7g.79gb") for i in range(3)]
    notes = chosen.name_notes(infos)
    if status_word is None:
        assert notes == []
    else:
        assert len(notes) == 1
        assert notes[0].startswith("3 slice(s) of 7g.79gb on A100-80GB")
        assert status_word in notes[0]


def test_real_dcgm_captures_give_each_gpu_its_driver() -> None:
    capture = REAL / "dcgm-exporter" / "johng-a800-sxm4-80gb-3x2g.20gb-excerpt.txt"
    source = FileSource(capture)
    source.window(7 * 86400, None, 60)
    source.slices((0.0, 1.0), 60)
    gpus = source.gpus()
    assert len(gpus) == 8
    assert {g.node for g in gpus} == {"msxf-hpc-64-35-ai"}
    assert {str(g.driver) for g in gpus} == {"535.129.03"}
    assert {g.model for g in gpus} == {"A100-80GB"}
    assert all(g.table is None for g in gpus)


def test_dcgm_exporters_7g_79gb_on_r535_is_an_a100_80gb_slice(tmp_path: Path) -> None:
    """dcgm-exporter#713 (and gpu-operator#687): an A100 80GB PCIe on driver 535.154.05,
    partitioned with mig-parted's ``all-7g.80gb``, is labelled ``GPU_I_PROFILE="7g.79gb"``.

    The labels are the issue's (its scrape excerpt, restated here, not copied); the slice
    must be read as the A100 80GB's 7g profile, not dropped as unknown, and its driver known.
    """
    from click.testing import CliRunner

    from migscope.cli.main import cli

    labels = (
        'gpu="0",UUID="GPU-06357e72-c3ee-614b-775f-a89e18e8cc08",device="nvidia0",'
        'modelName="NVIDIA A100 80GB PCIe",GPU_I_PROFILE="7g.79gb",GPU_I_ID="0",'
        'Hostname="metal-gpu-08",DCGM_FI_DRIVER_VERSION="535.154.05"'
    )
    scrape = tmp_path / "713.prom"
    scrape.write_text(
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} 0.25\nDCGM_FI_DEV_FB_USED{{{labels}}} 1024\n",
        encoding="utf-8",
    )
    source = FileSource(scrape)
    source.window(3600, None, 60)
    source.slices((0.0, 1.0), 60)
    (gpu,) = source.gpus()
    assert (gpu.model, str(gpu.driver)) == ("A100-80GB", "535.154.05")
    result = CliRunner().invoke(cli, ["analyze", "--source", str(scrape), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    import json

    report = json.loads(result.stdout)
    (one,) = report["slices"]
    assert (one["model"], one["profile"]) == ("A100-80GB", "7g.79gb")
    assert not [n for n in report["notes"] if "not in the catalogue" in n]
    assert not [n for n in report["notes"] if "7g.79gb" in n]  # R535 does print it


def test_a_pool_plans_only_with_profiles_every_driver_in_it_has() -> None:
    """A100 40GB: ``1g.10gb`` came with R525 (MIG user guide); an R515 node cannot build it."""
    a100 = find_model("A100-40GB")
    facts = [
        GpuFacts("old", "GPU-old", a100.key, DriverVersion.parse("515.65.01")),
        GpuFacts("new", "GPU-new", a100.key, DriverVersion.parse("535.129.03")),
    ]
    chosen = choose_catalogue(facts)
    used = chosen.model(a100.key)
    assert used is not None
    assert not used.has_profile("1g.10gb")
    assert used.has_profile("1g.5gb")
    assert len(used.profiles) == len(a100.profiles) - 1
    assert "without 1g.10gb" in chosen.used[a100.key]
    assert any("1g.10gb not on driver 515.65.01" in n for n in chosen.notes)
    only_new = choose_catalogue(facts[1:])
    assert only_new.model(a100.key) is a100


@pytest.mark.parametrize(
    ("capture", "key"),
    [("h200-profile-info.prom", "H200-141GB"), ("h100-profile-info.prom", "H100-80GB")],
)
def test_a_real_gpus_own_table_agrees_with_the_catalogue(capture: str, key: str) -> None:
    """What the exporter published on a real H200 and a real H100 80GB HBM3 (driver
    580.159.04, MIG disabled; docs/hardware/README.md), read back as the analyzer reads a
    scrape."""
    from migscope.analyzer._intake.dialect import GPU_INFO, node_of
    from migscope.analyzer._intake.dialect.names import GPU_PROFILE_INFO
    from migscope.analyzer._intake.gpu_facts import migscope_gpu_facts
    from migscope.analyzer._intake.openmetrics import read_exposition
    from migscope.core._profile_table import compare

    real = Path(__file__).parents[2] / "docs" / "hardware" / capture
    found = read_exposition(real, keep={GPU_INFO, GPU_PROFILE_INFO}.__contains__)
    (gpu,) = migscope_gpu_facts(
        (s.labels for s in found.get(GPU_INFO)),
        (s.labels for s in found.get(GPU_PROFILE_INFO)),
        node_of=node_of,
    )
    assert (gpu.model, str(gpu.driver)) == (key, "580.159.04")
    assert gpu.table is not None
    model = find_model(key)
    assert {p.name for p in gpu.table.profiles} == {p.name for p in model.profiles}
    assert compare(gpu.table, model, gpu.driver) == []
    chosen = choose_catalogue([gpu])
    assert chosen.model(key) is model


def test_gpus_without_a_table_are_not_planned_with_a_contradicting_one() -> None:
    """One node reports a table that contradicts the catalogue; another reports none: the
    first is planned with its own table, the second (whose table is unknown) is left out."""
    h200 = find_model("H200-141GB")
    facts = [_facts("a", h200, _contradicting(h200)), _facts("b", h200, None)]
    chosen = choose_catalogue(facts)
    assert chosen.used["H200-141GB"].startswith("observed")
    assert set(chosen.unplanned) == {"b"}
    same = choose_catalogue([_facts("a", h200, _own_table(h200)), _facts("b", h200, None)])
    assert same.unplanned == {}
