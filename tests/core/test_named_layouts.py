"""Named configs per GPU, and MIG Manager's generated configs, against mig-parted's own file."""

from __future__ import annotations

from pathlib import Path

import pytest

from migscope.core._catalogue import all_models, find_model
from migscope.core._migparted import check_config, parse_config
from migscope.core._named_layouts import (
    UnknownConfigError,
    balanced_layout,
    generated_configs,
    layout_for_gpu,
)

DEFAULT = parse_config(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml"
    ).read_text()
)


def _covered_by_default_balanced() -> list[str]:
    return [m.key for m in all_models() if layout_for_gpu(DEFAULT, "all-balanced", m, 0)]


@pytest.mark.parametrize("key", _covered_by_default_balanced())
def test_all_balanced_equals_mig_parteds_default_file(key: str) -> None:
    model = find_model(key)
    assert balanced_layout(model) == layout_for_gpu(DEFAULT, "all-balanced", model, 0)


def test_the_default_file_covers_the_main_models() -> None:
    covered = set(_covered_by_default_balanced())
    assert {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "A30-24GB"} <= covered


def test_generated_configs_are_valid_for_every_model() -> None:
    config = generated_configs(all_models())
    assert check_config(config).ok
    h200 = find_model("H200")
    assert layout_for_gpu(config, "all-1g.18gb", h200, 5) == {"1g.18gb": 7}
    assert layout_for_gpu(config, "all-3g.71gb", h200, 0) == {"3g.71gb": 2}
    assert layout_for_gpu(config, "all-disabled", h200, 0) == {}
    assert layout_for_gpu(config, "all-enabled", h200, 0) == {}
    assert not any("+me" in name or ".me" in name for name in config.mig_configs)


def test_a_config_for_other_gpus_leaves_this_one_alone() -> None:
    config = generated_configs([find_model("A30")])
    assert layout_for_gpu(config, "all-balanced", find_model("H200"), 0) is None


def test_devices_select_by_index() -> None:
    config = parse_config(
        "version: v1\nmig-configs:\n  split:\n"
        "    - devices: [0, 1]\n      mig-enabled: true\n      mig-devices: {3g.71gb: 2}\n"
        "    - devices: all\n      mig-enabled: false\n"
    )
    h200 = find_model("H200")
    # GPU 1 is selected by both entries: mig-parted applies them in order, the last wins.
    assert layout_for_gpu(config, "split", h200, 1) == {}
    assert layout_for_gpu(config, "split", h200, 2) == {}
    reordered = parse_config(
        "version: v1\nmig-configs:\n  split:\n"
        "    - devices: all\n      mig-enabled: false\n"
        "    - devices: [0, 1]\n      mig-enabled: true\n      mig-devices: {3g.71gb: 2}\n"
    )
    assert layout_for_gpu(reordered, "split", h200, 1) == {"3g.71gb": 2}
    assert layout_for_gpu(reordered, "split", h200, 2) == {}


def test_unknown_name_says_which_exist() -> None:
    with pytest.raises(UnknownConfigError, match=r"no config named .nope. \(known: all-1g"):
        layout_for_gpu(generated_configs([find_model("H200")]), "nope", find_model("H200"), 0)


def test_compute_instance_profiles_count_gpu_instances_as_mig_parted_builds_them() -> None:
    """``"1c.7g.40gb": 7`` is one 7g GPU instance with seven compute instances; ``3g.20gb``
    beside ``1c.3g.20gb`` is two 3g GPU instances (mig-parted's SetMigConfig, see
    docs/mig-parted-config.md). The what-if replays these layouts, so they must count so."""

    config = parse_config(
        "version: v1\n"
        "mig-configs:\n"
        "  ci:\n"
        "    - devices: all\n"
        "      mig-enabled: true\n"
        '      mig-devices: {"1c.7g.40gb": 7}\n'
        "  mixed:\n"
        "    - devices: all\n"
        "      mig-enabled: true\n"
        '      mig-devices: {"3g.20gb": 1, "1c.3g.20gb": 1}\n'
    )
    a100 = find_model("A100-40GB")
    assert layout_for_gpu(config, "ci", a100, 0) == {"7g.40gb": 1}
    assert layout_for_gpu(config, "mixed", a100, 0) == {"3g.20gb": 2}
