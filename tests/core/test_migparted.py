"""mig-parted configs: strict parsing with line numbers, emitting, merging, catalogue checks.

The ground truth is mig-parted's own default config (a verbatim copy in
``tests/fixtures/mig-parted/``): every one of its 81 configs must be read and accepted, and
each must reach the GPU models its comments and device filters name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migscope.core._catalogue import all_models, find_model
from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._layout import Layout, valid_layouts
from migscope.core._migparted import (
    ConfigConflictError,
    ConfigError,
    MigConfigEntry,
    MigPartedConfig,
    check_config,
    emit_config,
    entry_applies_to,
    entry_for_layout,
    merge_configs,
    parse_config,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml"
DEFAULT_TEXT = FIXTURE.read_text(encoding="utf-8")
DEFAULT = parse_config(DEFAULT_TEXT)
H200 = find_model("H200-141GB")
A30 = find_model("A30-24GB")
MODEL_KEYS = [m.key for m in all_models()]


def config_text(entry: str, *, name: str = "custom") -> str:
    """A one-config file whose only entry is ``entry`` (YAML lines at 4-space indent)."""
    return f"version: v1\nmig-configs:\n  {name}:\n{entry}"


def entry_yaml(mig_devices: dict[str, int], *, device_filter: str | None = None) -> str:
    lines = []
    if device_filter is not None:
        lines.append(f'    - device-filter: ["{device_filter}"]\n      devices: all\n')
    else:
        lines.append("    - devices: all\n")
    lines.append("      mig-enabled: true\n      mig-devices:\n")
    lines.extend(f'        "{name}": {count}\n' for name, count in mig_devices.items())
    return "".join(lines)


# ---------------------------------------------------------------------------------------------
# mig-parted's default config


def test_fixture_is_the_verbatim_copy_with_its_provenance_header() -> None:
    lines = DEFAULT_TEXT.splitlines()
    assert all(line.startswith("# ") for line in lines[:4])
    assert "NVIDIA/mig-parted" in lines[0]
    assert lines[4] == "version: v1"


def test_default_config_has_81_configs_in_file_order() -> None:
    names = list(DEFAULT.mig_configs)
    assert len(names) == 81
    assert names[:3] == ["all-disabled", "all-enabled", "all-1g.5gb"]
    assert names[-1] == "all-7g.278gb"


def test_every_default_config_is_valid_against_the_catalogue() -> None:
    report = check_config(DEFAULT)
    assert report.ok, [e for c in report.invalid for e in c.errors]
    assert len(report.configs) == 81
    # Every PCI ID in the default config's filters is catalogued (H20 0x2329 is H20-96GB).
    assert report.warnings == ()


def test_special_entries_are_read_as_written() -> None:
    disabled = DEFAULT.mig_configs["all-disabled"]
    enabled = DEFAULT.mig_configs["all-enabled"]
    assert disabled == (MigConfigEntry(devices="all", mig_enabled=False),)
    assert enabled == (MigConfigEntry(devices="all", mig_enabled=True, mig_devices={}),)
    report = check_config(DEFAULT)
    assert report["all-disabled"].models == tuple(MODEL_KEYS)
    assert report["all-enabled"].models == tuple(MODEL_KEYS)


# all-balanced per model, from mig-manager.md §1's table (largest profile first).
ALL_BALANCED = {
    "A100-40GB": "3g.20gb + 2g.10gb + 1g.5gb×2",
    "A100-80GB": "3g.40gb + 2g.20gb + 1g.10gb×2",
    "H100-80GB": "3g.40gb + 2g.20gb + 1g.10gb×2",
    "H100-PCIE-80GB": "3g.40gb + 2g.20gb + 1g.10gb×2",
    "A30-24GB": "2g.12gb + 1g.6gb×2",
    "H100-NVL-94GB": "3g.47gb + 2g.24gb + 1g.12gb×2",
    "GH200-96GB": "3g.48gb + 2g.24gb + 1g.12gb×2",
    "H200-141GB": "3g.71gb + 2g.35gb + 1g.18gb×2",
    "GH200-144GB": "3g.72gb + 2g.36gb + 1g.18gb×2",
    "B200-180GB": "3g.90gb + 2g.45gb + 1g.23gb×2",
    "GB200-186GB": "3g.93gb + 2g.47gb + 1g.23gb×2",
    "B300-288GB": "3g.135gb + 2g.67gb + 1g.34gb×2",
    "GB300-279GB": "3g.139gb + 2g.70gb + 1g.35gb×2",
    "RTX-PRO-6000-96GB": "2g.48gb + 1g.24gb×2",
}


@pytest.mark.parametrize(("key", "expected"), ALL_BALANCED.items())
def test_all_balanced_gives_each_model_its_documented_layout(key: str, expected: str) -> None:
    model = find_model(key)
    entries = [e for e in DEFAULT.mig_configs["all-balanced"] if entry_applies_to(e, model)]
    assert len(entries) == 1
    assert entries[0].mig_devices is not None
    assert str(Layout.of(model, entries[0].mig_devices)) == expected
    assert key in check_config(DEFAULT)["all-balanced"].models


# Catalogued from NVIDIA's docs and pci.ids, but absent from mig-parted's default filters.
NOT_IN_DEFAULT_CONFIG = {"H100-SXM5-94GB", "H100-SXM5-64GB"}


def test_all_balanced_reaches_every_catalogued_model() -> None:
    reached = set(check_config(DEFAULT)["all-balanced"].models)
    assert reached == set(MODEL_KEYS) - NOT_IN_DEFAULT_CONFIG


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        (
            "all-1g.10gb",
            {"H100-80GB": 7, "H100-PCIE-80GB": 7, "A100-80GB": 7, "A100-40GB": 4},
        ),
        ("all-1g.35gb", {"H200-141GB": 4, "GB300-279GB": 7}),
    ],
)
def test_filtered_all_profile_configs_pick_the_count_per_model(
    name: str, counts: dict[str, int]
) -> None:
    profile = name.removeprefix("all-")
    got = {}
    for model in all_models():
        for entry in DEFAULT.mig_configs[name]:
            if entry.device_filter is not None and entry_applies_to(entry, model):
                assert entry.mig_devices is not None
                got[model.key] = entry.mig_devices[profile]
    assert got == counts
    assert set(check_config(DEFAULT)[name].models) == set(counts)


def profile_of(config_name: str) -> str:
    """mig-parted's naming convention backwards: all-1g.24gb.me.all -> 1g.24gb+me.all."""
    match = re.fullmatch(r"all-(\d+g\.\d+gb)(?:\.(.+)|(-.+))?", config_name)
    assert match, config_name
    base, dotted, dashed = match.groups()
    return base + (f"+{dotted}" if dotted else dashed or "")


SINGLE_PROFILE = [n for n in DEFAULT.mig_configs if n not in ("all-disabled", "all-enabled")]
SINGLE_PROFILE.remove("all-balanced")


@pytest.mark.parametrize("name", SINGLE_PROFILE)
def test_all_profile_configs_fill_every_model_that_offers_the_profile(name: str) -> None:
    """Each all-<profile> asks for the profile's maximum count on every model it reaches."""
    profile = profile_of(name)
    offering = [m for m in all_models() if m.has_profile(profile)]
    assert offering, f"{profile} is in no catalogued model"
    report = check_config(DEFAULT)[name]
    assert report.ok
    reached = [find_model(key) for key in report.models]
    filtered = any(e.device_filter for e in DEFAULT.mig_configs[name])
    if not filtered:
        assert reached == offering
    for model in reached:
        (entry,) = [e for e in DEFAULT.mig_configs[name] if entry_applies_to(e, model)]
        found = model.profile(profile)
        if found.name == profile:  # not a driver alias (GB200 also answers to 1g.24gb)
            assert entry.mig_devices == {profile: found.max_instances}


# ---------------------------------------------------------------------------------------------
# Schema errors, with their line


BAD_SCHEMA = [
    pytest.param(
        config_text("    - devices: all\n      mig-enabled: true\n      mig-devces: {}\n"),
        6,
        "unknown key 'mig-devces' in mig-configs.custom[0] "
        "(allowed: devices, device-filter, mig-enabled, mig-devices)",
        id="unknown-entry-key",
    ),
    pytest.param(
        "version: v1\nmig-config: {}\n",
        2,
        "unknown key 'mig-config' in the top level (allowed: version, mig-configs)",
        id="unknown-top-key",
    ),
    pytest.param(
        config_text("    - devices: 7\n      mig-enabled: false\n"),
        4,
        "write devices: [7]",
        id="bare-int-devices",
    ),
    pytest.param(
        config_text("    - devices: all\n      mig-devices: {}\n"),
        4,
        "missing required key 'mig-enabled' in mig-configs.custom[0]",
        id="missing-mig-enabled",
    ),
    pytest.param(
        config_text(
            '    - devices: all\n      mig-enabled: false\n      mig-devices: {"1g.18gb": 1}\n'
        ),
        6,
        "mig-devices must be absent or empty when mig-enabled is false",
        id="mig-devices-while-disabled",
    ),
    pytest.param(
        config_text("    - devices: all\n      mig-enabled: true\n"),
        5,
        "mig-devices is required when mig-enabled is true",
        id="enabled-without-mig-devices",
    ),
    pytest.param(
        config_text("    - devices: all\n      mig-enabled: false\n")
        + "  custom:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {}\n",
        6,
        "duplicate key 'custom' in mig-configs (first at line 3)",
        id="duplicate-config-name",
    ),
    pytest.param(
        config_text(
            "    - devices: all\n      mig-enabled: true\n      mig-devices:\n"
            '        "1g.18gb": 1\n        "1g.18gb": 2\n'
        ),
        8,
        "duplicate key '1g.18gb' in mig-configs.custom[0].mig-devices (first at line 7)",
        id="duplicate-profile",
    ),
    pytest.param(
        "version: v2\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n",
        1,
        "version: must be \"v1\" (the only version mig-parted reads), got 'v2'",
        id="version-v2",
    ),
    pytest.param(
        "mig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n",
        1,
        "missing required key 'version'",
        id="no-version",
    ),
    pytest.param(
        config_text("    []\n").replace("custom:\n    []", "custom: []"),
        3,
        "mig-configs.custom: needs at least one entry",
        id="empty-entry-list",
    ),
    pytest.param("version: v1\nmig-configs: {}\n", 2, "has no configs", id="no-configs"),
    pytest.param(
        config_text(entry_yaml({"1g.18gb": 0, "2g.35gb": 0})),
        6,
        "every count in mig-devices is 0",
        id="all-zero-counts",
    ),
    pytest.param(
        config_text(entry_yaml({"1g.18gb": -1})),
        7,
        'mig-configs.custom[0].mig-devices["1g.18gb"]: must be >= 0, got -1',
        id="negative-count",
    ),
    pytest.param(
        config_text('    - devices: all\n      mig-enabled: true\n      mig-devices: {"big": 1}\n'),
        6,
        "'big' is not a MIG profile name",
        id="not-a-profile-name",
    ),
    pytest.param(
        config_text("    - devices: all\n      mig-enabled: 'true'\n"),
        5,
        "mig-enabled: must be true or false, got the string 'true'",
        id="quoted-bool",
    ),
    pytest.param(
        config_text("    - devices: all\n      mig_enabled: false\n"),
        5,
        "unknown key 'mig_enabled'",
        id="python-name-is-not-a-yaml-key",
    ),
    pytest.param(
        config_text(
            "    - devices: all\n      device-filter: 0x233510DE\n      mig-enabled: false\n"
        ),
        5,
        'PCI IDs must be quoted strings like "0x233510DE"',
        id="unquoted-pci-id",
    ),
    pytest.param(
        config_text(
            "    - devices: all\n      device-filter: ['0x2335']\n      mig-enabled: false\n"
        ),
        5,
        "'0x2335' is not a PCI ID",
        id="short-pci-id",
    ),
    pytest.param(
        config_text("    - devices: [0, 0]\n      mig-enabled: false\n"),
        4,
        "GPU index 0 is listed more than once",
        id="repeated-gpu-index",
    ),
    pytest.param(
        config_text("    - devices: all\n      mig-enabled: false\n", name="on"),
        3,
        "config name 'on' is read as the boolean true by YAML 1.1 parsers",
        id="yaml11-bool-name",
    ),
    pytest.param(
        config_text("    - devices: all\n      mig-enabled: true\n     mig-devices: {}\n"),
        6,
        "YAML syntax error: expected <block end>",
        id="yaml-syntax-indent",
    ),
    pytest.param(
        config_text(
            '    - devices: all\n      mig-enabled: true\n      mig-devices: {"1g.18gb": 1\n'
        ),
        7,
        "YAML syntax error",
        id="yaml-syntax-unclosed-flow",
    ),
    pytest.param("# only a comment\n", 1, "empty document", id="empty"),
    pytest.param("- version: v1\n", 1, "the top level: must be a mapping", id="list-document"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD_SCHEMA)
def test_schema_errors_name_the_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert caught.value.line == line
    assert message in caught.value.message
    assert str(caught.value).startswith(f"line {line}: ")
    assert "\n" not in str(caught.value)


def test_an_unknown_key_deep_in_the_default_config_names_its_line() -> None:
    text = DEFAULT_TEXT.replace(
        "  all-enabled:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {}\n",
        "  all-enabled:\n    - devices: all\n      mig-enabled: true\n      mig-devces: {}\n",
    )
    assert text != DEFAULT_TEXT
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert str(caught.value) == (
        "line 14: unknown key 'mig-devces' in mig-configs.all-enabled[0] "
        "(allowed: devices, device-filter, mig-enabled, mig-devices)"
    )


def test_every_schema_problem_is_kept_the_misspelling_first() -> None:
    text = (
        "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig_enabled: false\n"
        "  b:\n    - devices: 7\n      mig-enabled: false\n"
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert caught.value.line == 5
    assert caught.value.message.startswith("unknown key 'mig_enabled' in mig-configs.a[0]")
    assert [line for line, _ in caught.value.problems] == [5, 7, 4]
    assert caught.value.problems[2][1] == "missing required key 'mig-enabled' in mig-configs.a[0]"
    assert str(caught.value).endswith("(and 2 more problems)")


def test_yaml_quirks_keep_names_as_written() -> None:
    text = (
        'version: v1\nmig-configs:\n  "on":\n    - devices: all\n      mig-enabled: yes\n'
        "      mig-devices: {}\n  1:\n    - devices: [0, 1]\n      mig-enabled: no\n"
    )
    config = parse_config(text)
    assert list(config.mig_configs) == ["on", "1"]
    assert config.mig_configs["on"][0].mig_enabled is True
    assert config.mig_configs["1"][0].devices == (0, 1)
    assert parse_config(emit_config(config)) == config
    assert '  "on":' in emit_config(config)


def test_merge_keys_and_anchors_are_read_like_mig_parted_reads_them() -> None:
    text = (
        "version: v1\nmig-configs:\n  a:\n    - &base\n      devices: all\n"
        "      mig-enabled: false\n  b:\n    - <<: *base\n      mig-enabled: true\n"
        '      mig-devices: {"3g.71gb": 2}\n'
    )
    config = parse_config(text)
    assert config.mig_configs["b"] == (
        MigConfigEntry(devices="all", mig_enabled=True, mig_devices={"3g.71gb": 2}),
    )


def test_device_filter_may_be_one_string_or_carry_a_subsystem() -> None:
    config = parse_config(
        config_text(
            '    - device-filter: "0x233510de:0x18871028"\n      devices: all\n'
            '      mig-enabled: true\n      mig-devices: {"7g.141gb": 1}\n'
        )
    )
    (entry,) = config.mig_configs["custom"]
    assert entry.device_filter == ("0x233510de:0x18871028",)
    assert entry_applies_to(entry, H200)
    assert not entry_applies_to(entry, A30)
    assert check_config(config)["custom"].models == ("H200-141GB",)


# ---------------------------------------------------------------------------------------------
# Layout errors against the catalogue


def check_one(entry: str, *, gpu: GpuModel | None = None) -> tuple[str, ...]:
    return check_config(parse_config(config_text(entry, name="custom-3")), gpu=gpu)[
        "custom-3"
    ].errors


def test_3g_3g_1g_does_not_fit_an_h200() -> None:
    errors = check_one(entry_yaml({"3g.71gb": 2, "1g.18gb": 1}, device_filter="0x233510DE"))
    assert errors == (
        "custom-3: entry 0 on H200-141GB: 3g.71gb×2 + 1g.18gb: no memory slices left for 1g.18gb",
    )


def test_two_media_extension_instances_are_rejected() -> None:
    errors = check_one(entry_yaml({"1g.6gb+me": 1, "2g.12gb+me": 1}))
    assert errors == (
        "custom-3: entry 0 on A30-24GB: 2g.12gb+me + 1g.6gb+me: at most one media-extension "
        "(+me) instance per GPU, asked for 2",
    )


def test_a_count_above_max_instances_fails_on_every_model_offering_the_profile() -> None:
    errors = check_one(entry_yaml({"1g.18gb": 8}))
    assert errors == (
        "custom-3: entry 0 on H200-141GB: 1g.18gb×8: at most 7 × 1g.18gb per H200-141GB GPU, "
        "asked for 8",
        "custom-3: entry 0 on GH200-144GB: 1g.18gb×8: at most 7 × 1g.18gb per GH200-144GB GPU, "
        "asked for 8",
    )


def test_an_unfiltered_entry_is_valid_where_it_fits_and_not_on_the_others() -> None:
    # 1g.10gb is a 1-slice profile on 80GB parts (7 fit) but the double-memory one on
    # A100-40GB (4 fit): the entry fits the models its name points to except A100-40GB. That
    # is said per model, and is not an error (issue 25, item 3).
    text = config_text(entry_yaml({"1g.10gb": 7}), name="custom-3")
    report = check_config(parse_config(text))["custom-3"]
    assert report.errors == ()
    assert report.not_valid_on == (
        ("A100-40GB", "entry 0: 1g.10gb×7: at most 4 × 1g.10gb per A100-40GB GPU, asked for 7"),
    )
    assert "A100-40GB" not in report.models
    assert {"A100-80GB", "H100-80GB"} <= set(report.models)


def test_an_unfiltered_entry_that_fits_no_model_its_names_point_to_is_an_error() -> None:
    errors = check_one(entry_yaml({"1g.10gb": 8}))
    assert "custom-3: entry 0 on A100-40GB: 1g.10gb×8: at most 4 × 1g.10gb" in errors[0]
    assert all(e.startswith("custom-3: entry 0 on ") for e in errors)
    assert len(errors) > 1


def test_an_unknown_profile_is_offered_by_no_gpu() -> None:
    assert check_one(entry_yaml({"1g.99gb": 1})) == (
        "custom-3: entry 0: no catalogued GPU offers 1g.99gb",
    )
    assert check_one(entry_yaml({"1g.5gb": 1, "1g.18gb": 1})) == (
        "custom-3: entry 0: no catalogued GPU offers 1g.5gb and 1g.18gb together",
    )


def test_a_filtered_entry_with_another_models_profile_fails_on_the_filtered_model() -> None:
    (error,) = check_one(entry_yaml({"1g.10gb": 1}, device_filter="0x233510DE"))
    assert error.startswith(
        "custom-3: entry 0 on H200-141GB: H200-141GB has no MIG profile '1g.10gb'"
    )


def test_uncatalogued_filter_ids_warn_and_are_not_checked() -> None:
    # 0x232C is the H20 141GB ("H20 HBM3e" in pci.ids), which the catalogue does not hold.
    config = parse_config(config_text(entry_yaml({"9g.1gb": 1}, device_filter="0x232C10DE")))
    report = check_config(config)["custom"]
    assert report.ok
    assert report.models == ()
    assert report.warnings == ("custom: entry 0: 0x232C10DE is not in the catalogue; not checked",)


def test_with_gpu_a_config_filtered_to_other_gpus_does_not_apply() -> None:
    config = parse_config(
        config_text(entry_yaml({"3g.40gb": 2}, device_filter="0x233010DE"), name="h100")
    )
    for_h200 = check_config(config, gpu=H200)
    assert for_h200["h100"].applies is False
    assert for_h200["h100"].errors == ()
    assert for_h200.errors == (
        "no config in the file applies to H200-141GB (1 config filters other GPUs only)",
    )
    assert not for_h200.ok
    for_h100 = check_config(config, gpu=find_model("H100-80GB"))
    assert for_h100.ok
    assert for_h100["h100"].applies is True
    assert for_h100["h100"].models == ("H100-80GB",)


def test_with_gpu_an_unfiltered_entry_for_other_models_is_skipped_not_failed() -> None:
    config = parse_config(config_text(entry_yaml({"1g.5gb": 7}), name="a100"))
    report = check_config(config, gpu=H200)
    assert report["a100"].applies is False
    assert report.not_applicable == (report["a100"],)


def test_with_gpu_an_unfiltered_entry_meant_for_it_must_fit() -> None:
    (error,) = check_one(entry_yaml({"1g.18gb": 1, "1g.5gb": 1}), gpu=H200)
    assert "on H200-141GB: H200-141GB has no MIG profile '1g.5gb'" in error
    (typo,) = check_one(entry_yaml({"1g.99gb": 1}), gpu=H200)
    assert "1g.99gb" in typo
    assert check_one(entry_yaml({"1g.18gb": 7}), gpu=H200) == ()
    (too_many,) = check_one(entry_yaml({"1g.18gb": 8}), gpu=H200)
    assert "at most 7 × 1g.18gb" in too_many


def test_with_gpu_the_default_config_passes_and_skips_other_gpus_configs() -> None:
    report = check_config(DEFAULT, gpu=H200)
    assert report.gpu == "H200-141GB"
    assert report.ok
    applicable = {c.name for c in report.configs if c.applies}
    assert applicable == {
        "all-disabled",
        "all-enabled",
        "all-balanced",
        "all-1g.18gb",
        "all-1g.18gb.me",
        "all-1g.35gb",
        "all-2g.35gb",
        "all-3g.71gb",
        "all-4g.71gb",
        "all-7g.141gb",
    }
    assert all(c.models == ("H200-141GB",) for c in report.configs if c.applies)
    assert len(report.not_applicable) == 81 - len(applicable)


def test_a_name_no_label_can_carry_is_a_warning() -> None:
    config = parse_config(config_text("    - devices: all\n      mig-enabled: false\n", name="a b"))
    report = check_config(config)["a b"]
    assert report.ok
    assert report.warnings == (
        "a b: not a valid Kubernetes label value, so nvidia.com/mig.config cannot select it",
    )


# ---------------------------------------------------------------------------------------------
# Emitting, building and merging


def test_the_default_config_round_trips() -> None:
    emitted = emit_config(DEFAULT)
    assert parse_config(emitted) == DEFAULT
    assert emit_config(parse_config(emitted)) == emitted
    assert '        "1g.18gb": 2\n' in emitted
    assert '    - device-filter: ["0x20B710DE"]\n' in emitted


def test_emit_writes_mig_parted_keys_and_a_header() -> None:
    config = MigPartedConfig.of(
        {"h200-mixed": [entry_for_layout(Layout.of(H200, {"3g.71gb": 2}), device_filter=H200)]}
    )
    assert emit_config(config, header="generated by migscope\nsecond line") == (
        "# generated by migscope\n"
        "# second line\n"
        "version: v1\n"
        "mig-configs:\n"
        "  h200-mixed:\n"
        '    - device-filter: ["0x233510DE", "0x233B10DE"]\n'
        "      devices: all\n"
        "      mig-enabled: true\n"
        "      mig-devices:\n"
        '        "3g.71gb": 2\n'
    )


def test_entry_for_layout_options() -> None:
    layout = Layout.of(H200, {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})
    entry = entry_for_layout(layout, device_filter="0x233510DE", devices=[0, 3])
    assert entry.devices == (0, 3)
    assert entry.device_filter == ("0x233510DE",)
    assert entry.mig_devices == {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}
    assert entry_for_layout(Layout(())).mig_devices == {}
    with pytest.raises(ValueError, match="not a PCI ID"):
        entry_for_layout(layout, device_filter=["H200"])


ENTRY_A = MigConfigEntry(devices="all", mig_enabled=False)
ENTRY_B = MigConfigEntry(devices="all", mig_enabled=True, mig_devices={"7g.141gb": 1})


def test_merge_adds_configs_and_keeps_the_others_in_place() -> None:
    base = MigPartedConfig.of({"a": [ENTRY_A], "b": [ENTRY_A]})
    merged = merge_configs(base, {"c": [ENTRY_B], "a": [ENTRY_A]})
    assert list(merged.mig_configs) == ["a", "b", "c"]
    assert merged.mig_configs["c"] == (ENTRY_B,)


def test_merge_refuses_to_replace_silently() -> None:
    base = MigPartedConfig.of({"a": [ENTRY_A], "b": [ENTRY_A]})
    with pytest.raises(ConfigConflictError, match="config b already exists"):
        merge_configs(base, MigPartedConfig.of({"b": [ENTRY_B]}))
    replaced = merge_configs(base, MigPartedConfig.of({"b": [ENTRY_B]}), replace=True)
    assert list(replaced.mig_configs) == ["a", "b"]
    assert replaced.mig_configs["b"] == (ENTRY_B,)
    assert base.mig_configs["b"] == (ENTRY_A,)


@st.composite
def layout_configs(draw: st.DrawFn) -> tuple[GpuModel, MigPartedConfig, bool]:
    """A config of 1-3 names, each one entry built from a valid layout of one model."""
    model = draw(st.sampled_from(all_models()))
    filtered = draw(st.booleans())
    configs = {}
    for name in draw(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=3)):
        layout = draw(st.sampled_from(valid_layouts(model)))
        indices = st.lists(st.integers(0, 7), min_size=1, max_size=8, unique=True)
        devices: Literal["all"] | list[int] = "all" if draw(st.booleans()) else draw(indices)
        configs[name] = [
            entry_for_layout(layout, device_filter=model if filtered else None, devices=devices)
        ]
    return model, MigPartedConfig.of(configs), filtered


@settings(max_examples=150, deadline=None)
@given(layout_configs())
def test_configs_built_from_valid_layouts_round_trip_and_check(
    case: tuple[GpuModel, MigPartedConfig, bool],
) -> None:
    model, config, filtered = case
    assert parse_config(emit_config(config)) == config
    report = check_config(config)
    for name in config.mig_configs:
        if filtered:
            assert report[name].errors == ()
            assert report[name].models == (model.key,)
        else:
            # Unfiltered, it may not fit another model with the same names, but never its own.
            assert not any(f" on {model.key}: " in e for e in report[name].errors)
        assert check_config(config, gpu=model)[name].errors == ()


def test_a_config_name_ending_in_a_newline_is_quoted_on_emit() -> None:
    """Regression (found by hypothesis): ``$`` in the plain-name regex also matched before a
    trailing newline, so ``"A\\n"`` was written unquoted and the YAML broke."""
    entry = entry_for_layout(Layout.of(H200, {"1g.18gb": 1}))
    config = MigPartedConfig.of({"A\n": [entry]})
    assert parse_config(emit_config(config)) == config
