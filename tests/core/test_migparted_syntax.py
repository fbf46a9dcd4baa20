"""mig-parted syntax migscope used to reject: compute-instance profiles and base-0 device filters.

What mig-parted does, read from its source (NVIDIA/mig-parted@bd7160f):

- ``pkg/mig/config/config.go`` ``SetMigConfig``: the flattened devices (largest G, then C,
  first) reuse the previous GPU instance when their GI profile is the same and the compute
  instance still fits, and every distinct ordering is tried. ``"1c.7g.40gb": 7`` is seven
  compute instances in one 7g.40gb GPU instance.
- ``pkg/types/device.go`` ``NewDeviceIDFromString``: each part of a filter is read with
  ``strconv.ParseUint(part, 0, 32)``, so ``"548409566"`` is ``"0x20B010DE"``.

No public config using either form was found (searched: the code index for ``"1c.7g.``,
``"1c.3g.``, ``"2c.3g.``, ``"4c.7g.``, ``"1c.4g.``, ``"1c.2g.``, ``"1c.1g.``, and the decimal
values of the A100/H100 PCI IDs; NVIDIA/mig-parted, NVIDIA/gpu-operator and
NVIDIA/cloud-native-docs at their mirrored heads), so the configs here are written for the
test, each one a case the source above decides.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migscope.core._catalogue import find_model
from migscope.core._migparted import (
    ConfigError,
    DeviceFilterError,
    check_config,
    emit_config,
    entry_applies_to,
    gpu_instances,
    parse_config,
    parse_device_filter,
)
from migscope.core._migparted.filters import parse_go_uint32
from migscope.core._migparted.instances import compute_instance_problem, split_device_profile

A100_40 = find_model("A100-40GB")
A100_80 = find_model("A100-80GB")
H200 = find_model("H200-141GB")


def config(mig_devices: dict[str, int], *, device_filter: str | None = None) -> str:
    lines = ["version: v1", "mig-configs:", "  custom:", "    - devices: all"]
    if device_filter is not None:
        lines.append(f'      device-filter: "{device_filter}"')
    lines += ["      mig-enabled: true", "      mig-devices:"]
    lines += [f'        "{name}": {count}' for name, count in mig_devices.items()]
    return "\n".join(lines) + "\n"


def errors_on(model_key: str, mig_devices: dict[str, int]) -> list[str]:
    check = check_config(parse_config(config(mig_devices)), gpu=find_model(model_key))
    return [e for report in check.configs for e in report.errors]


# ---------------------------------------------------------------------------------------------
# Compute-instance profiles


@pytest.mark.parametrize(
    ("mig_devices", "instances"),
    [
        ({"1c.7g.40gb": 7}, {"7g.40gb": 1}),
        ({"1c.7g.40gb": 8}, {"7g.40gb": 2}),
        ({"3g.20gb": 1, "1c.3g.20gb": 1}, {"3g.20gb": 2}),  # the 3c fills its GI
        ({"1c.3g.20gb": 3}, {"3g.20gb": 1}),
        ({"2c.3g.20gb": 2, "1c.3g.20gb": 2}, {"3g.20gb": 2}),
        ({"4c.7g.40gb": 2, "3c.7g.40gb": 2}, {"7g.40gb": 2}),  # first-fit by size makes 3
        ({"1c.1g.5gb": 3}, {"1g.5gb": 3}),  # "1c.1g" is the 1g written out
        ({"1g.5gb": 2, "2g.10gb": 1, "1c.3g.20gb": 0}, {"1g.5gb": 2, "2g.10gb": 1}),
    ],
)
def test_compute_instances_share_gpu_instances(
    mig_devices: dict[str, int], instances: dict[str, int]
) -> None:
    assert gpu_instances(mig_devices) == instances


def test_seven_1c_compute_instances_fit_one_7g_gpu_instance() -> None:
    assert errors_on("A100-40GB", {"1c.7g.40gb": 7}) == []


def test_an_eighth_compute_instance_needs_a_second_7g_and_says_so() -> None:
    (error,) = errors_on("A100-40GB", {"1c.7g.40gb": 8})
    assert error == (
        "custom: entry 0 on A100-40GB: 7g.40gb×2: at most 1 × 7g.40gb per A100-40GB GPU, "
        "asked for 2 (mig-devices 1c.7g.40gb×8 make GPU instances 7g.40gb×2)"
    )


def test_a_full_3g_and_a_1c_of_3g_take_two_gpu_instances() -> None:
    assert errors_on("A100-40GB", {"3g.20gb": 1, "1c.3g.20gb": 1}) == []
    (error,) = errors_on("A100-40GB", {"3g.20gb": 2, "1c.3g.20gb": 1})
    assert "3g.20gb×3: at most 2 × 3g.20gb" in error


def test_compute_instances_with_whole_instances_of_other_profiles() -> None:
    # 4g.71gb as 4 x 1c (one GI) next to a 3g.71gb: the usual 4g+3g split of an H200.
    assert errors_on("H200-141GB", {"1c.4g.71gb": 4, "3g.71gb": 1}) == []
    (error,) = errors_on("H200-141GB", {"1c.4g.71gb": 5, "3g.71gb": 1})
    assert "4g.71gb×2" in error


def test_compute_instances_in_a_driver_alias_share_the_gpu_instance() -> None:
    # 3g.39gb is A100-80GB's R535 name for 3g.40gb: one GI profile under two names.
    assert A100_80.has_profile("3g.39gb")
    assert errors_on("A100-80GB", {"1c.3g.39gb": 2, "1c.3g.40gb": 1, "4g.40gb": 1}) == []


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        (
            "4c.3g.20gb",
            "4c.3g.20gb: a 4-slice compute instance does not fit a 3-slice GPU instance",
        ),
        (
            "5c.7g.40gb",
            "5c.7g.40gb: NVML has no 5-slice compute instance (sizes: 1, 2, 3, 4, 6, 7, 8)",
        ),
        ("1c.3g.20gb", None),
        ("3c.3g.20gb", None),
        ("3g.20gb", None),
    ],
)
def test_impossible_compute_instances_are_named(name: str, problem: str | None) -> None:
    assert compute_instance_problem(name) == problem


def test_an_impossible_compute_instance_is_an_error_in_the_check() -> None:
    (error,) = errors_on("A100-40GB", {"5c.7g.40gb": 1})
    assert error.endswith("NVML has no 5-slice compute instance (sizes: 1, 2, 3, 4, 6, 7, 8)")


def test_split_keeps_attributes_on_the_gpu_instance() -> None:
    split = split_device_profile("1c.1g.10gb+me")
    assert split is not None
    assert (split.gpu_instance, split.gi_slices, split.ci_slices) == ("1g.10gb+me", 1, 1)
    assert not split.is_compute_instance
    assert split_device_profile("MIG-3g") is None


def test_a_hostile_count_is_answered_without_packing_it() -> None:
    assert gpu_instances({"1c.3g.20gb": 10**30}) == {"3g.20gb": -(-(10**30) // 3)}
    assert errors_on("A100-40GB", {"1c.3g.20gb": 10**30})


def _fits(items: list[int], bins: int, capacity: int) -> bool:
    """Brute force: can ``items`` go into ``bins`` bins of ``capacity``?"""
    loads = [0] * bins

    def place(i: int) -> bool:
        if i == len(items):
            return True
        tried = set()
        for b in range(bins):
            if loads[b] + items[i] <= capacity and loads[b] not in tried:
                tried.add(loads[b])
                loads[b] += items[i]
                if place(i + 1):
                    return True
                loads[b] -= items[i]
        return False

    return place(0)


@settings(max_examples=150, deadline=None)
@given(
    g=st.sampled_from([2, 3, 4, 7]),
    counts=st.dictionaries(st.integers(1, 7), st.integers(0, 4), max_size=4),
)
def test_gpu_instance_count_is_the_fewest_that_holds_the_compute_instances(
    g: int, counts: dict[int, int]
) -> None:
    mig_devices = {f"{c}c.{g}g.40gb": n for c, n in counts.items() if c <= g}
    items = sorted((c for c, n in counts.items() if c <= g for _ in range(n)), reverse=True)
    got = gpu_instances(mig_devices).get(f"{g}g.40gb", 0)
    fewest = next(k for k in itertools.count() if _fits(items, k, g))
    assert got == fewest


# ---------------------------------------------------------------------------------------------
# device-filter: Go's ParseUint with base 0


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0x20B010DE", 0x20B010DE),
        ("0X20b010de", 0x20B010DE),
        ("548409566", 0x20B010DE),
        ("0o4054010336", 0x20B010DE),
        ("04054010336", 0x20B010DE),  # a leading 0 is octal to Go
        ("0b100000101100000001000011011110", 0x20B010DE),
        ("0x20B0_10DE", 0x20B010DE),
        ("548_409_566", 0x20B010DE),
        ("0x_20B010DE", 0x20B010DE),
        ("0", 0),
        ("4294967295", 0xFFFFFFFF),
    ],
)
def test_filter_numbers_read_as_go_reads_them(text: str, value: int) -> None:
    assert parse_go_uint32(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "+548409566", " 548409566", "0x", "08", "1__0", "_1", "1_", "0x1_", "4294967296", "1e9"],
)
def test_filter_numbers_go_rejects_are_rejected(text: str) -> None:
    with pytest.raises(DeviceFilterError):
        parse_go_uint32(text)


def test_decimal_and_hex_filters_are_the_same_filter() -> None:
    decimal = parse_device_filter("548409566")
    assert decimal.device_vendor == parse_device_filter("0x20B010DE").device_vendor
    assert decimal.canonical == "0x20B010DE"
    with_subsystem = parse_device_filter("548409566:0x134F10DE")
    assert (with_subsystem.subsystem, with_subsystem.canonical) == (
        0x134F10DE,
        "0x20B010DE:0x134F10DE",
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0x2335", "it reads as device 0x0000 of vendor 0x2335, and no NVIDIA GPU has that vendor"),
        ("8374", "it reads as device 0x0000 of vendor 0x20B6"),
        ("0x233510DE:0x1:0x2", "it has 2 ':', mig-parted allows one"),
        ("0x233510DG", "'0x233510DG' is not a number"),
    ],
)
def test_filters_that_match_nothing_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(DeviceFilterError, match=reason):
        parse_device_filter(text)


def test_a_decimal_filter_selects_its_model_and_is_checked_on_it() -> None:
    text = config({"1c.7g.40gb": 7}, device_filter="548409566")
    parsed = parse_config(text)
    (entry,) = parsed.mig_configs["custom"]
    assert entry.device_filter == ("548409566",)
    assert entry_applies_to(entry, A100_40)
    assert not entry_applies_to(entry, H200)
    report = check_config(parsed)
    assert report.ok
    assert report["custom"].models == ("A100-40GB",)
    assert report.warnings == ()
    assert parse_config(emit_config(parsed)) == parsed  # written back as written


def test_a_decimal_filter_with_a_layout_that_does_not_fit_is_an_error_on_its_model() -> None:
    report = check_config(parse_config(config({"3g.20gb": 3}, device_filter="548409566")))
    assert [e for r in report.configs for e in r.errors] == [
        "custom: entry 0 on A100-40GB: 3g.20gb×3: at most 2 × 3g.20gb per A100-40GB GPU, "
        "asked for 3"
    ]


def test_a_filter_without_the_vendor_is_a_schema_error_with_its_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config({"3g.20gb": 1}, device_filter="0x20B0"))
    assert caught.value.line == 5
    assert caught.value.message.startswith(
        "mig-configs.custom[0].device-filter: '0x20B0' is not a PCI ID mig-parted can match: "
        "it reads as device 0x0000 of vendor 0x20B0"
    )
