"""Per-driver facts of the catalogue: which names and memory sizes each driver reports.

A synthetic model (built from the same :func:`eight_slice` the catalogue uses) pins down the
semantics; the real models' records are checked where the public evidence is unambiguous.
"""

from __future__ import annotations

import pytest

from migscope.core._catalogue import find_model
from migscope.core._drivers import DriverRange, DriverVersion
from migscope.core._gpu_models.gpu_model import (
    Evidence,
    GpuModel,
    MemoryFact,
    NameStatus,
    ProfileName,
)
from migscope.core._gpu_models.shapes import HOPPER_ENGINES, eight_slice, gib, hopper_names

SMS = {"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132}
MIB = {"1g": 10000, "1g+me": 10000, "1g2": 20000, "2g": 20000, "3g": 40000, "4g": 40000}


def _v(text: str) -> DriverVersion:
    return DriverVersion.parse(text)


def _model() -> GpuModel:
    """An 8-slice model whose 7g is renamed on R535-R545 and whose 1g2 needs R525."""
    profiles = eight_slice(
        hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={**MIB, "7g": 80000},
        sms=SMS,
        engines=HOPPER_ENGINES,
        min_driver={"1g2": "525"},
        name_facts={
            "7g": (
                ProfileName("7g.80gb", DriverRange(last=530), "old drivers"),
                ProfileName("7g.80gb", DriverRange(550), "new drivers"),
                ProfileName("7g.79gb", DriverRange(535, 545), "issue #1", "renamed"),
            ),
            "3g": (ProfileName("3g.41gb", DriverRange(), "issue #2", boards="early boards"),),
        },
        memory_facts={
            "1g": (
                MemoryFact(9984, DriverRange(last=525), "R525 capture"),
                MemoryFact(10112, DriverRange(560, 560), "R560 capture"),
            ),
        },
    )
    return GpuModel(
        key="TEST-80GB",
        names=("Test GPU",),
        pci_device_ids=(0x00010DE,),
        architecture="hopper",
        compute_slices=7,
        memory_slices=8,
        memory_total_bytes=80 * 1024**3,
        profiles=profiles,
        evidence=Evidence.INFERRED,
        source="test",
    )


def test_a_name_on_every_driver_is_available_with_or_without_a_driver() -> None:
    model = _model()
    for driver in (None, _v("450"), _v("610.43.02")):
        check = model.check_profile_name("MIG 2g.20gb", driver)
        assert check.status is NameStatus.AVAILABLE
        assert check.ok
        assert check.profile is model.profile("2g.20gb")
        assert check.message == ""


def test_a_renamed_profile_is_available_under_the_name_its_driver_prints() -> None:
    model = _model()
    assert model.check_profile_name("7g.79gb", _v("535.129.03")).status is NameStatus.AVAILABLE
    assert model.check_profile_name("7g.80gb", _v("550.54.15")).status is NameStatus.AVAILABLE
    assert model.check_profile_name("7g.80gb", _v("470")).status is NameStatus.AVAILABLE


def test_a_name_other_drivers_print_is_not_on_this_driver_and_says_which_name_is() -> None:
    model = _model()
    check = model.check_profile_name("7g.79gb", _v("550.54.15"))
    assert check.status is NameStatus.NOT_ON_DRIVER
    assert check.profile is model.profile("7g.80gb")
    assert "does not exist on driver 550.54.15" in check.message
    assert "R535-R545 (issue #1)" in check.message
    assert "calls it 7g.80gb" in check.message
    back = model.check_profile_name("7g.80gb", _v("545"))
    assert back.status is NameStatus.NOT_ON_DRIVER
    assert "calls it 7g.79gb" in back.message
    assert "up to R530 (old drivers); R550+ (new drivers)" in back.message


def test_without_a_driver_a_driver_dependent_name_says_where_it_exists() -> None:
    model = _model()
    check = model.check_profile_name("7g.79gb")
    assert check.status is NameStatus.DRIVER_DEPENDENT
    assert check.profile is model.profile("7g.80gb")
    assert "exists only on R535-R545 (issue #1)" in check.message
    assert "elsewhere: 7g.80gb on up to R530, 7g.80gb on R550+" in check.message
    assert "\n" not in check.message
    canonical = model.check_profile_name("7g.80gb")
    assert canonical.status is NameStatus.DRIVER_DEPENDENT


def test_a_board_dependent_name_stays_dependent_even_on_a_known_driver() -> None:
    model = _model()
    for driver in (None, _v("570.86.10")):
        check = model.check_profile_name("3g.41gb", driver)
        assert check.status is NameStatus.DRIVER_DEPENDENT
        assert "early boards" in check.message
        assert "issue #2" in check.message
    assert model.check_profile_name("3g.40gb", _v("570")).ok


def test_a_profile_newer_than_the_driver_is_not_on_it() -> None:
    model = _model()
    check = model.check_profile_name("1g.20gb", _v("470.57.02"))
    assert check.status is NameStatus.NOT_ON_DRIVER
    assert "it needs R525+" in check.message
    assert model.check_profile_name("1g.20gb", _v("525")).ok
    assert model.check_profile_name("1g.20gb").status is NameStatus.DRIVER_DEPENDENT


def test_an_unknown_name_lists_the_known_ones() -> None:
    check = _model().check_profile_name("5g.50gb", _v("535"))
    assert check.status is NameStatus.UNKNOWN
    assert check.profile is None
    assert "TEST-80GB has no MIG profile '5g.50gb'" in check.message
    assert "7g.80gb" in check.message


def test_compute_instance_names_check_their_gpu_instance() -> None:
    model = _model()
    assert model.check_profile_name("1c.7g.79gb", _v("535")).ok
    assert model.check_profile_name("1c.7g.79gb", _v("550")).status is NameStatus.NOT_ON_DRIVER


def test_lookups_by_any_name_keep_resolving_whatever_the_driver() -> None:
    model = _model()
    seven = model.profile("7g.80gb")
    assert model.profile("7g.79gb") is seven
    assert model.profile("3g.41gb") is model.profile("3g.40gb")
    assert model.has_profile("MIG 7g.79gb")
    assert seven.aliases == ("7g.79gb",)
    assert model.profile("3g.40gb").aliases == ("3g.41gb",)


def test_names_on_a_driver() -> None:
    model = _model()
    seven = model.profile("7g.80gb")
    assert seven.names_on(_v("535.129.03")) == ("7g.79gb",)
    assert seven.names_on(_v("550")) == ("7g.80gb",)
    assert model.profile("1g.20gb").names_on(_v("470")) == ()
    assert model.profile("3g.40gb").names_on(_v("570")) == ("3g.40gb", "3g.41gb")


def test_memory_is_the_figure_of_the_driver_else_the_reference() -> None:
    one = _model().profile("1g.10gb")
    assert one.memory_mib == 10000
    assert one.memory_mib_on(None) == 10000
    assert one.memory_mib_on(_v("525.125.06")) == 9984
    assert one.memory_mib_on(_v("560.35.03")) == 10112
    assert one.memory_mib_on(_v("580")) == 10000  # no fact for R580: the reference
    assert one.memory_range_mib() == (9984, 10112)
    assert _model().profile("2g.20gb").memory_range_mib() == (20000, 20000)


def test_two_profiles_cannot_share_a_name() -> None:
    clash = eight_slice(
        hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={**MIB, "7g": 80000},
        sms=SMS,
        engines=HOPPER_ENGINES,
        name_facts={"4g": (ProfileName("3g.40gb", DriverRange(), "wrong"),)},
    )
    with pytest.raises(ValueError, match=r"3g\.40gb names"):
        GpuModel("X", (), (), "hopper", 7, 8, 1, clash, Evidence.INFERRED, "test")


# --- the real catalogue's records --------------------------------------------------------


def test_a100_80gb_r535_names_are_known_and_driver_dependent() -> None:
    """mig-parted#31 (3g.39gb on 535.x/545.x), dcgm-exporter#713/#544 (7g.79gb on R535)."""
    a100 = find_model("A100-80GB")
    for name, canonical in (("3g.39gb", "3g.40gb"), ("7g.79gb", "7g.80gb")):
        assert a100.profile(name).name == canonical
        assert a100.check_profile_name(name, _v("535.129.03")).ok
        assert a100.check_profile_name(name).status is NameStatus.DRIVER_DEPENDENT
        later = a100.check_profile_name(name, _v("550.54.15"))
        assert later.status is NameStatus.NOT_ON_DRIVER, later.message
        assert canonical in later.message


def test_gb200_early_names_are_board_dependent() -> None:
    """gpu-operator#1303 printed 1g.24gb on an early HGX GB200; mig-parted#227: production
    boards print 1g.23gb."""
    gb200 = find_model("GB200")
    check = gb200.check_profile_name("1g.24gb", _v("570"))
    assert check.status is NameStatus.DRIVER_DEPENDENT
    assert "mig-parted#227" in check.message
    assert gb200.check_profile_name("1g.23gb", _v("570")).ok


def test_every_record_cites_its_evidence() -> None:
    from migscope.core._catalogue import all_models

    for model in all_models():
        for profile in model.profiles:
            records: list[ProfileName | MemoryFact] = [*profile.name_facts]
            records += profile.memory_facts
            for fact in records:
                assert fact.evidence.strip(), (model.key, profile.name, fact)
            low, high = profile.memory_range_mib()
            assert low <= profile.memory_mib <= high
            assert high - low <= gib(2.0), (model.key, profile.name)
