"""The GPU's own profile table: read from real nvidia-smi output, compared, made into a model.

Real captures come from tests/fixtures (provenance in their headers). Where a case needs a
table that no capture shows (a wrong SM count, a missing profile, a size between two
drivers' figures), it changes one field of a real table and says so.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from migscope.core._catalogue import find_model
from migscope.core._drivers import DriverRange, DriverVersion
from migscope.core._gpu_models.gpu_model import GpuModel, MemoryFact
from migscope.core._layout import is_valid, valid_layouts
from migscope.core._profile_table import (
    LGIP_TOLERANCE_MIB,
    ObservedProfile,
    ProfileTable,
    ProfileTableError,
    compare,
    driver_in_text,
    identify_model,
    model_from_table,
    tables_from_nvidia_smi,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL_SMI = FIXTURES / "real" / "nvidia-smi"
H200_TEXT = (FIXTURES / "h200" / "lgip.txt").read_text(encoding="utf-8") + (
    FIXTURES / "h200" / "lgipp.txt"
).read_text(encoding="utf-8")
H200 = find_model("H200-141GB")
R580 = DriverVersion.parse("580")


def h200_table() -> ProfileTable:
    (table,) = tables_from_nvidia_smi(H200_TEXT, source="h200 fixture")
    return table


def with_profile(table: ProfileTable, which: str, **changes: object) -> ProfileTable:
    """``table`` with one field of one profile changed (a case no capture shows)."""
    profiles = tuple(
        dataclasses.replace(p, **changes) if p.name == which else p  # type: ignore[arg-type]
        for p in table.profiles
    )
    return dataclasses.replace(table, profiles=profiles)


def without_profile(table: ProfileTable, name: str) -> ProfileTable:
    return dataclasses.replace(table, profiles=tuple(p for p in table.profiles if p.name != name))


# ---------------------------------------------------------------------------------------------
# Reading


def test_lgip_and_lgipp_join_into_one_table_per_gpu() -> None:
    table = h200_table()
    assert table.gpu_index == 0
    assert table.has_details
    assert table.has_placements
    by_name = {p.name: p for p in table.profiles}
    three = by_name["3g.71gb"]
    assert (three.profile_id, three.compute_slices, three.sm_count, three.max_instances) == (
        9,
        3,
        60,
        2,
    )
    assert (three.placements, three.placement_size) == ((0, 4), 4)
    assert three.memory_mib == round(69.75 * 1024)
    assert three.memory_tolerance_mib == LGIP_TOLERANCE_MIB


def test_several_gpus_names_and_driver_from_the_same_paste() -> None:
    gpu1 = H200_TEXT.replace("|   0  MIG", "|   1  MIG").replace("GPU  0 ", "GPU  1 ")
    paste = (
        "| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06    CUDA Version: 13.0 |\n"
        "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n" + H200_TEXT + gpu1
    )
    tables = tables_from_nvidia_smi(paste, source="paste")
    assert [t.gpu_index for t in tables] == [0, 1]
    assert tables[0].same_profiles(tables[1])
    assert {t.gpu_name for t in tables} == {"NVIDIA H200"}
    assert tables[0].driver == DriverVersion.parse("580.65.06")
    assert identify_model(tables[1]).basis == "device name"


def test_a_given_driver_wins_over_the_banner() -> None:
    banner = "Driver Version: 560.35.03\n" + H200_TEXT
    (table,) = tables_from_nvidia_smi(banner, source="x", driver=R580)
    assert table.driver == R580
    assert driver_in_text("Driver Version: 535.1\nDriver Version: 550.2") is None
    assert driver_in_text("    Driver Version                    : 570.158.01\n") == (
        DriverVersion.parse("570.158.01")
    )


def test_two_nodes_pasted_together_are_refused() -> None:
    other = H200_TEXT.replace("69.75", "70.00")
    with pytest.raises(ProfileTableError, match="GPU 0 lists profile id 9 twice"):
        tables_from_nvidia_smi(H200_TEXT + other, source="x")


def test_no_table_in_the_text_gives_no_table() -> None:
    assert tables_from_nvidia_smi("No MIG-enabled devices found.\n", source="x") == []


# ---------------------------------------------------------------------------------------------
# Which model


def test_a_full_table_identifies_its_model() -> None:
    found = identify_model(h200_table())
    assert found.model is H200
    assert found.agreeing == 7


def test_placements_alone_cannot_tell_8_slice_models_apart() -> None:
    (table,) = tables_from_nvidia_smi(
        (FIXTURES / "h200" / "lgipp.txt").read_text(encoding="utf-8"), source="x"
    )
    found = identify_model(table)
    assert found.model is None
    assert H200 in found.candidates
    assert "matches several catalogued models equally" in found.describe(table)


def test_same_names_different_sms_is_no_match() -> None:
    """H20 has GH200-96GB's profile names but fewer SMs: names alone must not identify."""
    text = (FIXTURES / "nvidia-smi" / "nvidia-smi-gh200-lgip.txt").read_text(encoding="utf-8")
    (table,) = tables_from_nvidia_smi(text, source="x")
    assert identify_model(table).model is find_model("GH200-96GB")
    other_sms = dataclasses.replace(
        table,
        profiles=tuple(
            dataclasses.replace(p, sm_count=(p.sm_count or 0) + 1000) for p in table.profiles
        ),
    )
    found = identify_model(other_sms)
    assert found.model is None
    assert found.agreeing == 0
    assert find_model("GH200-96GB") in found.candidates
    assert found.describe(other_sms).startswith("matches no catalogued model (closest: ")


# ---------------------------------------------------------------------------------------------
# Comparing


def test_the_real_h200_table_agrees_with_the_catalogue() -> None:
    assert compare(h200_table(), H200, R580) == []


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("sm_count", 64, "SMs: GPU 64, catalogue 60"),
        ("max_instances", 1, "instances per GPU: GPU 1, catalogue 2"),
        ("profile_id", 10, "the GPU gives it id 10; the catalogue has id 9"),
        ("decoders", 2, "decoders: GPU 2, catalogue 3"),
        ("placements", (0, 2, 4), "placements: GPU {0,2,4}:4, catalogue {0,4}:4"),
    ],
)
def test_identity_and_placement_differences_are_errors(
    field: str, value: object, words: str
) -> None:
    table = with_profile(h200_table(), "3g.71gb", **{field: value})
    (difference,) = [d for d in compare(table, H200, R580) if d.severity == "error"]
    assert difference.message.endswith(words)
    assert difference.field == ("id" if field == "profile_id" else field)


def test_an_unknown_name_is_an_error_naming_the_catalogues_name_for_its_id() -> None:
    table = with_profile(h200_table(), "3g.71gb", name="3g.72gb")
    errors = [d for d in compare(table, H200, R580) if d.severity == "error"]
    assert [d.field for d in errors] == ["name"]
    assert "the catalogue calls id 9 3g.71gb" in errors[0].message


def _with_memory_facts(model: GpuModel, name: str, *facts: MemoryFact) -> GpuModel:
    """``model`` with exactly these per-driver sizes on one profile (a test catalogue)."""
    profiles = tuple(
        dataclasses.replace(p, memory_facts=facts) if p.name == name else p for p in model.profiles
    )
    return dataclasses.replace(model, profiles=profiles)


def test_memory_within_the_known_variance_is_information() -> None:
    """H200 1g.35gb: 32.50 GiB in the fixture (R580), 32.25 GiB on the driver of mig-parted#120."""
    reference = H200.profile("1g.35gb").memory_mib
    assert reference == 33280  # 32.50 GiB
    catalogue = _with_memory_facts(H200, "1g.35gb", MemoryFact(33024, DriverRange(590), "test"))
    table = with_profile(h200_table(), "1g.35gb", memory_mib=round(32.25 * 1024))
    (note,) = compare(table, catalogue, R580)
    assert (note.severity, note.field) == ("info", "memory_mib")
    assert note.message.endswith(
        "memory 32.25 GiB on driver R580, catalogue 33280 MiB (32.50 GiB): within the known "
        "variance across drivers (33024-33280 MiB)"
    )
    # On the driver that reports 32.25 GiB, the same size is simply right.
    assert compare(table, catalogue, DriverVersion.parse("590")) == []


def test_memory_outside_every_known_size_is_a_warning() -> None:
    table = with_profile(h200_table(), "1g.35gb", memory_mib=30 * 1024)
    (warning,) = compare(table, H200, R580)
    assert (warning.severity, warning.field) == ("warning", "memory_mib")
    assert "memory 30.00 GiB on driver R580" in warning.message
    assert "outside every known driver's size" in warning.message


def test_a_profile_the_gpu_does_not_list() -> None:
    table = without_profile(h200_table(), "1g.35gb")
    (missing,) = compare(table, H200, R580)
    assert (missing.severity, missing.field, missing.catalogue) == ("warning", "listed", "1g.35gb")


def test_a_profile_newer_than_an_unknown_driver_is_only_a_note() -> None:
    """The A100 capture (R460) lacks 1g.5gb+me, which the catalogue has from R470."""
    text = (FIXTURES / "nvidia-smi" / "nvidia-smi-a100-pcie-40gb-lgip.txt").read_text(
        encoding="utf-8"
    )
    (table,) = tables_from_nvidia_smi(text, source="x")
    a100 = find_model("A100-40GB")
    unknown = compare(table, a100, None)
    assert unknown
    assert {d.severity for d in unknown} == {"info"}
    assert "1g.5gb+me (id 20)" in {d.profile for d in unknown}
    assert compare(table, a100, DriverVersion.parse("460.32.03")) == []


def test_a_driver_dependent_name_is_judged_by_the_driver() -> None:
    """A100 80GB calls its 7-slice profile 7g.79gb on R535-R545 (catalogue name facts)."""
    a100 = find_model("A100-80GB")
    seven = a100.profile("7g.80gb")
    observed = ObservedProfile(
        "7g.79gb",
        seven.nvml_id or 0,
        compute_slices=7,
        sm_count=seven.sm_count,
        max_instances=1,
    )
    table = ProfileTable("x", None, None, None, (observed,))
    name_notes = [d for d in compare(table, a100, None) if d.field == "name"]
    assert [(d.severity, d.observed) for d in name_notes] == [("info", "7g.79gb")]
    assert not [d for d in compare(table, a100, DriverVersion.parse("535")) if d.field == "name"]
    wrong = [d for d in compare(table, a100, DriverVersion.parse("550")) if d.field == "name"]
    assert [d.severity for d in wrong] == ["error"]
    assert "calls it 7g.80gb" in wrong[0].message


# ---------------------------------------------------------------------------------------------
# A model from the table


def test_the_gpus_own_table_makes_the_same_model_as_the_catalogue() -> None:
    own = model_from_table(h200_table(), H200)
    assert own.key == H200.key
    assert own.source == "observed from h200 fixture"
    assert [(p.name, p.nvml_id, p.placements, p.memory_slices) for p in own.profiles] == [
        (p.name, p.nvml_id, p.placements, p.memory_slices) for p in H200.profiles
    ]
    assert [p.nvml_index for p in own.profiles] == [p.nvml_index for p in H200.profiles]
    assert [p.media_extensions for p in own.profiles] == [p.media_extensions for p in H200.profiles]
    assert len(valid_layouts(own)) == len(valid_layouts(H200))


def test_the_table_wins_where_it_differs() -> None:
    table = with_profile(h200_table(), "3g.71gb", max_instances=1)
    own = model_from_table(table, H200)
    assert is_valid(H200, {"3g.71gb": 2}).ok
    check = is_valid(own, {"3g.71gb": 2})
    assert check.reason == "3g.71gb×2: at most 1 × 3g.71gb per H200-141GB GPU, asked for 2"


def test_a_table_without_placements_cannot_make_a_model() -> None:
    text = (FIXTURES / "h200" / "lgip.txt").read_text(encoding="utf-8")
    (table,) = tables_from_nvidia_smi(text, source="x")
    with pytest.raises(
        ProfileTableError, match=r"it has no placements \(add `nvidia-smi mig -lgipp`"
    ):
        model_from_table(table, H200)


def test_a_table_without_names_cannot_make_a_model() -> None:
    text = (FIXTURES / "h200" / "lgipp.txt").read_text(encoding="utf-8")
    (table,) = tables_from_nvidia_smi(text, source="x")
    with pytest.raises(ProfileTableError, match=r"add `nvidia-smi mig -lgip` output"):
        model_from_table(table, H200)


# ---------------------------------------------------------------------------------------------
# RTX PRO 6000 Blackwell: placements on the driver's 12-unit grid, +me.all

RTX_TEXT = "".join(
    (REAL_SMI / f"kubesimplify-rtx-pro-6000-{kind}.txt").read_text(encoding="utf-8")
    for kind in ("lgip", "lgipp")
)
RTX = find_model("RTX-PRO-6000-96GB")


def rtx_table() -> ProfileTable:
    (table,) = tables_from_nvidia_smi(RTX_TEXT, source="kubesimplify")
    return table


def test_the_rtx_grid_is_compared_in_memory_slices() -> None:
    table = rtx_table()
    one = next(p for p in table.profiles if p.name == "1g.24gb")
    assert (one.placements, one.placement_size) == ((0, 3, 6, 9), 3)  # as the driver prints
    assert compare(table, RTX, DriverVersion.parse("610.43.02")) == []
    moved = with_profile(table, "2g.48gb", placements=(0, 4))
    (error,) = [d for d in compare(moved, RTX, None) if d.severity == "error"]
    assert error.message.endswith(
        "placements: GPU {0,4}:6 are not on RTX-PRO-6000-96GB's grid of 3 driver units per "
        "memory slice"
    )
    shifted = with_profile(table, "2g.48gb", placements=(0, 3, 6))
    (error,) = [d for d in compare(shifted, RTX, None) if d.severity == "error"]
    assert error.message.endswith(
        "placements: GPU {0,3,6}:6 ({0,1,2}:2 in memory slices), catalogue {0,2}:2"
    )


def test_the_rtx_table_makes_the_same_model_with_its_media_engine_rule() -> None:
    own = model_from_table(rtx_table(), RTX)
    assert [(p.name, p.placements, p.memory_slices) for p in own.profiles] == [
        (p.name, p.placements, p.memory_slices) for p in RTX.profiles
    ]
    assert [p.takes_all_media for p in own.profiles] == [p.takes_all_media for p in RTX.profiles]
    assert len(valid_layouts(own)) == len(valid_layouts(RTX))
    off = with_profile(rtx_table(), "4g.96gb", placements=(1,))
    with pytest.raises(ProfileTableError, match=r"4g.96gb \(id 0\) have placements off its grid"):
        model_from_table(off, RTX)
