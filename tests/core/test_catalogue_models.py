"""The catalogue's models as public sources describe them: PCI IDs, RTX PRO grid and media rules.

Every expectation here cites the public fact it checks (docs/catalogue.md lists the sources).
"""

from __future__ import annotations

import pytest

from migscope.core._catalogue import all_models, find_model, model_for_name, model_for_pci
from migscope.core._drivers import DriverRange, DriverVersion
from migscope.core._gpu_models.gpu_model import CatalogueError, Evidence, MemoryFact
from migscope.core._layout import is_valid, valid_layouts

RTX = find_model("RTX-PRO-6000-96GB")


# --- PCI IDs (NVIDIA/open-gpu-kernel-modules@df1c9a3 README.md, pci.ids@c1c1254) -----------


@pytest.mark.parametrize(
    ("pci", "key"),
    [
        (0x20B610DE, "PG506-96GB"),  # GA100GL [PG506-232]: an Ampere part, not a Hopper one
        (0x20BD10DE, "A100-40GB"),  # A800 SXM4 40GB
        (0x232910DE, "H20-96GB"),
        (0x233910DE, "H100-SXM5-94GB"),
        (0x233710DE, "H100-SXM5-64GB"),
        (0x233810DE, "GH200-96GB"),  # H100 SXM5 96GB
        (0x2BB110DE, "RTX-PRO-6000-96GB"),  # Workstation Edition
        (0x2BB410DE, "RTX-PRO-6000-96GB"),  # Max-Q Workstation Edition
        (0x2BB510DE, "RTX-PRO-6000-96GB"),  # Server Edition
    ],
)
def test_pci_ids_resolve_to_their_model(pci: int, key: str) -> None:
    model = model_for_pci(pci)
    assert model is not None
    assert model.key == key


def test_pg506_is_ampere_and_has_no_gpm() -> None:
    pg506 = find_model("PG506-96GB")
    assert pg506.architecture == "ampere"
    assert not pg506.has_gpm
    assert model_for_name("NVIDIA PG506-232") is pg506
    assert 0x20B610DE not in find_model("GH200-96GB").pci_device_ids


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ],
)
def test_every_rtx_pro_6000_edition_is_one_model(name: str) -> None:
    assert model_for_name(name) is RTX


def test_no_pci_id_belongs_to_two_models() -> None:
    seen: dict[int, str] = {}
    for model in all_models():
        for pci in model.pci_device_ids:
            assert pci not in seen, f"{pci:#010x}: {seen.get(pci)} and {model.key}"
            seen[pci] = model.key


def test_inferred_models_say_so() -> None:
    for key in ("H100-SXM5-94GB", "H100-SXM5-64GB", "PG506-96GB"):
        model = find_model(key)
        assert model.evidence is Evidence.INFERRED
        assert "infer" in model.source


# --- RTX PRO 6000 on driver 610.43.02 (kubesimplify -lgip/-lgipp) ---------------------------


def test_rtx_pro_ids_are_the_drivers() -> None:
    ids = {p.name: p.nvml_id for p in RTX.profiles}
    assert ids == {
        "1g.24gb": 14,
        "1g.24gb+me": 21,
        "1g.24gb+gfx": 47,
        "1g.24gb+me.all": 65,
        "1g.24gb-me": 67,
        "2g.48gb": 5,
        "2g.48gb+gfx": 35,
        "2g.48gb+me.all": 64,
        "2g.48gb-me": 66,
        "4g.96gb": 0,
        "4g.96gb+gfx": 32,
    }


def test_rtx_pro_memory_is_the_610_figure() -> None:
    r610 = DriverVersion.parse("610.43.02")
    gib = {p.name: round(p.memory_mib_on(r610) / 1024, 2) for p in RTX.profiles}
    assert gib["1g.24gb"] == 23.62
    assert gib["2g.48gb"] == 47.38
    assert gib["4g.96gb"] == 95.12
    # cubecos#312 (driver not stated) saw 23.12: variance, never chosen for a driver
    assert RTX.profile("1g.24gb").memory_range_mib() == (23680, 24192)


@pytest.mark.parametrize(
    ("nvml", "slices"),
    [((0, 3), (0, 1)), ((9, 3), (3, 1)), ((6, 6), (2, 2)), ((0, 12), (0, 4))],
)
def test_rtx_pro_driver_grid_converts_to_memory_slices(
    nvml: tuple[int, int], slices: tuple[int, int]
) -> None:
    assert RTX.placement_unit == 3
    assert RTX.slices_from_nvml(*nvml) == slices
    assert RTX.nvml_span(*slices) == nvml


@pytest.mark.parametrize("nvml", [(1, 3), (0, 2), (-3, 3), (0, 0)])
def test_a_span_off_the_grid_is_refused_in_one_line(nvml: tuple[int, int]) -> None:
    with pytest.raises(CatalogueError, match="not on RTX-PRO-6000-96GB's grid of 3"):
        RTX.slices_from_nvml(*nvml)


def test_eight_slice_models_use_memory_slices_as_placement_units() -> None:
    h200 = find_model("H200-141GB")
    assert h200.placement_unit == 1
    assert h200.slices_from_nvml(6, 1) == (6, 1)


# --- media engines (MIG user guide, RTX PRO 6000 profile references) ------------------------


@pytest.mark.parametrize(
    ("layout", "ok"),
    [
        (["1g.24gb+me.all", "1g.24gb-me", "1g.24gb-me", "1g.24gb-me"], True),
        (["2g.48gb+me.all", "2g.48gb-me"], True),
        (["1g.24gb+me.all", "1g.24gb"], False),  # a 1g.24gb holds a decoder and encoder
        (["2g.48gb+me.all", "2g.48gb+gfx"], False),
        (["1g.24gb+me.all", "1g.24gb+me"], False),  # two media-extension instances
        (["1g.24gb+me", "1g.24gb", "1g.24gb", "1g.24gb"], True),
        (["1g.24gb+me", "2g.48gb", "1g.24gb-me"], True),
    ],
)
def test_me_all_leaves_no_media_engine_to_the_others(layout: list[str], ok: bool) -> None:
    check = is_valid(RTX, layout)
    assert check.ok is ok, check.reason
    if not ok and "+me.all" in " ".join(layout) and "1g.24gb+me" not in layout:
        assert check.reason is not None
        assert "takes every media engine" in check.reason


def test_enumerated_layouts_obey_the_media_rule() -> None:
    for layout in valid_layouts(RTX):
        names = layout.names()
        if any(n.endswith("+me.all") for n in names):
            others = [RTX.profile(n) for n in names if not n.endswith("+me.all")]
            assert all(not p.has_media_engines for p in others), str(layout)


def test_real_rtx_pro_layouts_are_valid() -> None:
    """-lgi on 610.43.02: 2g.48gb at 0:6 with 1g.24gb at 6:3 and 9:3; 4x 1g.24gb."""
    keep = [("2g.48gb", 0), ("1g.24gb", 2), ("1g.24gb", 3)]
    assert is_valid(RTX, ["2g.48gb", "1g.24gb", "1g.24gb"], keep=keep).ok
    assert is_valid(RTX, ["1g.24gb"] * 4).ok


# --- H20, on a real node (johng-h20-L-3gpus-mig.txt, 570.158.01) ---------------------------


def test_the_real_h20_layout_is_valid() -> None:
    h20 = find_model("H20-96GB")
    assert model_for_name("NVIDIA H20") is h20
    assert is_valid(h20, ["3g.48gb", "1g.24gb", "1g.12gb", "1g.12gb"]).ok


def test_facts_without_a_driver_widen_the_range_but_are_never_chosen() -> None:
    b200 = find_model("B200-180GB").profile("1g.23gb")
    unstated = [f for f in b200.memory_facts if f.drivers is None]
    assert unstated
    assert b200.memory_mib_on(DriverVersion.parse("570.133.20")) == b200.memory_mib
    low, high = b200.memory_range_mib()
    assert low < high
    assert MemoryFact(1, None, "x").where() == "an unstated driver"
    assert MemoryFact(1, DriverRange(560, 560), "x").where() == "R560"


def test_docs_list_every_model_with_its_pci_ids() -> None:
    """docs/catalogue.md's model table names every model and every PCI ID it answers to."""
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "catalogue.md").read_text("utf-8")
    section = docs.split("## Models, evidence and sources", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.count("|") > 5]
    rows = {line.split("|")[1].strip(): line for line in lines}
    for model in all_models():
        assert model.key in rows, f"docs/catalogue.md has no row for {model.key}"
        for pci in model.pci_device_ids:
            assert f"0x{pci >> 16:04X}" in rows[model.key], (model.key, hex(pci))
        assert model.evidence.value in rows[model.key]
