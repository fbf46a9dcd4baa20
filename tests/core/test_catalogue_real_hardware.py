"""The catalogue agrees with every real nvidia-smi / NVML recording in tests/fixtures.

Each fixture is verbatim output of a real GPU (provenance in its header). A failure here means
the catalogue disagrees with hardware: fix the catalogue, never the fixture.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migscope.core._catalogue import find_model, model_for_name, model_for_pci
from migscope.core._layout import is_valid
from migscope.core._nvidia_smi import parse_lgi, parse_lgip, parse_lgipp, parse_list

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMI = FIXTURES / "nvidia-smi"

# (fixture, catalogue key, driver branch the output came from; None when the source omits it)
LGIP_SAMPLES = [
    (FIXTURES / "h200" / "lgip.txt", "H200-141GB", 580),
    (SMI / "nvidia-smi-a100-pcie-40gb-lgip.txt", "A100-40GB", 460),
    (SMI / "nvidia-smi-a30-lgip.txt", "A30-24GB", None),
    (SMI / "nvidia-smi-h100-pcie-80gb-lgip.txt", "H100-PCIE-80GB", 525),
    (SMI / "nvidia-smi-gh200-lgip.txt", "GH200-96GB", None),
]
LGIPP_SAMPLES = [
    (FIXTURES / "h200" / "lgipp.txt", "H200-141GB"),
    (SMI / "nvidia-smi-a30-lgipp.txt", "A30-24GB"),
    (SMI / "nvidia-smi-h100-pcie-80gb-lgipp.txt", "H100-PCIE-80GB"),
]


def _ids(samples: list[tuple[Path, str, int | None]] | list[tuple[Path, str]]) -> list[str]:
    return [sample[0].name for sample in samples]


@pytest.mark.parametrize(("path", "key", "driver"), LGIP_SAMPLES, ids=_ids(LGIP_SAMPLES))
def test_every_lgip_row_matches_the_catalogue(path: Path, key: str, driver: int | None) -> None:
    model = find_model(key)
    rows = parse_lgip(path.read_text())
    assert rows, f"no profile rows parsed from {path.name}"
    for row in rows:
        profile = model.profile(row.name)
        assert profile.name == row.name, "the catalogue must use the driver's own name"
        got = (
            profile.nvml_id,
            profile.max_instances,
            profile.sm_count,
            profile.decoders,
            profile.encoders,
            profile.copy_engines,
            profile.jpegs,
            profile.ofas,
        )
        want = (
            row.profile_id,
            row.total,
            row.sm_count,
            row.decoders,
            row.encoders,
            row.copy_engines,
            row.jpegs,
            row.ofas,
        )
        assert got == want, f"{key} {row.name}"
        # -lgip prints GiB with two decimals, rounded half to even like printf("%.2f").
        assert float(f"{profile.memory_mib / 1024:.2f}") == row.memory_gib, f"{key} {row.name}"


@pytest.mark.parametrize(("path", "key", "driver"), LGIP_SAMPLES, ids=_ids(LGIP_SAMPLES))
def test_catalogue_lists_no_profile_the_driver_lacks(
    path: Path, key: str, driver: int | None
) -> None:
    """Every catalogued profile available on the sample's driver appears in the sample."""
    model = find_model(key)
    listed = {row.name for row in parse_lgip(path.read_text())}
    for profile in model.profiles:
        introduced = int(profile.min_driver) if profile.min_driver else 0
        if driver is None and introduced:
            continue  # unknown driver: only profiles every driver has can be demanded
        if introduced <= (driver or 0) or not introduced:
            assert profile.name in listed, f"{key}: {profile.name} missing from {path.name}"


@pytest.mark.parametrize(("path", "key"), LGIPP_SAMPLES, ids=_ids(LGIPP_SAMPLES))
def test_placements_match_lgipp(path: Path, key: str) -> None:
    model = find_model(key)
    rows = parse_lgipp(path.read_text())
    assert len(rows) >= 4
    for row in rows:
        profile = model.profile_by_nvml_id(row.profile_id)
        assert profile is not None, f"{key}: no profile with NVML id {row.profile_id}"
        assert profile.placements == row.starts, f"{key} {profile.name}"
        assert profile.memory_slices == row.size, f"{key} {profile.name}"
    every_driver = {p.nvml_id for p in model.profiles if p.min_driver is None}
    assert every_driver <= {r.profile_id for r in rows}


def test_h200_matches_the_nvml_probe_field_by_field() -> None:
    """nvmlDeviceGetGpuInstanceProfileInfo answers on a real H200 equal the catalogue."""
    probe = json.loads((FIXTURES / "h200" / "nvml_probe.json").read_text())
    device = probe["devices"][0]
    model = model_for_pci(device["pci_device_id"])
    assert model is not None
    assert model is model_for_name(device["name"])
    assert model.key == "H200-141GB"
    assert model.memory_total_bytes == device["mem_total"]
    answered = 0
    for entry in device["gi_profiles"]:
        profile = model.profile_by_nvml_index(entry["profile"])
        if "error" in entry:
            assert profile is None, f"index {entry['profile']} errors on the H200"
            continue
        answered += 1
        assert profile is not None, f"index {entry['profile']} answers on the H200"
        assert profile.nvml_name == entry["name"]
        assert profile.nvml_id == entry["id"]
        assert profile.compute_slices == entry["sliceCount"]
        assert profile.max_instances == entry["instanceCount"] == entry["remaining"]
        assert profile.sm_count == entry["multiprocessorCount"]
        assert profile.memory_mib == entry["memorySizeMB"]
        assert profile.copy_engines == entry["copyEngineCount"]
        assert profile.decoders == entry["decoderCount"]
        assert profile.encoders == entry["encoderCount"]
        assert profile.jpegs == entry["jpegCount"]
        assert profile.ofas == entry["ofaCount"]
    assert answered == len(model.profiles)


@pytest.mark.parametrize(
    ("path", "key"),
    [
        (SMI / "nvidia-smi-a100-sxm4-40gb-L.txt", "A100-40GB"),
        (SMI / "nvidia-smi-a100-sxm4-40gb-L-mixed.txt", "A100-40GB"),
        (SMI / "nvidia-smi-h100-80gb-L.txt", "H100-80GB"),
        (SMI / "nvidia-smi-h100-80gb-L-mixed.txt", "H100-80GB"),
        (SMI / "nvidia-smi-h100-pcie-80gb-L.txt", "H100-PCIE-80GB"),
        (SMI / "nvidia-smi-gh200-L.txt", "GH200-96GB"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)
def test_real_device_lists_name_catalogued_models_and_valid_layouts(path: Path, key: str) -> None:
    """GPU names resolve to the right model and every real layout is valid for it."""
    (device,) = parse_list(path.read_text())
    model = model_for_name(device.name)
    assert model is not None, device.name
    assert model.key == key
    layout = [name for name, _uuid in device.mig_devices]
    assert layout
    check = is_valid(model, layout)
    assert check.ok, check.reason


@pytest.mark.parametrize(
    ("path", "key"),
    [
        (SMI / "nvidia-smi-a30-lgi.txt", "A30-24GB"),
        (SMI / "nvidia-smi-h100-pcie-80gb-lgi.txt", "H100-PCIE-80GB"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)
def test_real_instances_sit_at_catalogued_placements(path: Path, key: str) -> None:
    """Instances the driver actually created are placeable exactly where it put them."""
    model = find_model(key)
    rows = parse_lgi(path.read_text())
    assert rows
    for row in rows:
        profile = model.profile(row.name)
        assert profile.nvml_id == row.profile_id
        assert row.start in profile.placements
        assert row.size == profile.memory_slices
    check = is_valid(model, [r.name for r in rows], keep=[(r.name, r.start) for r in rows])
    assert check.ok, check.reason
    assert sorted((p.profile.name, p.start) for p in check.placements) == sorted(
        (r.name, r.start) for r in rows
    )
