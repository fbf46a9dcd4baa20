"""DRA device names, the kubelet's ``dynamic_resources`` and their resolution to GPU instances.

Names come from ``tests/fixtures/real/dra/device-names.tsv`` (every NVIDIA DRA device name
found in public sources, with provenance); the PodResources shape is the kubelet's proto,
served by the fake kubelet's ``make_claim``.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import pytest
from support.kubelet import make_claim, make_pod

from migscope.core import parse_device_name
from migscope.exporter._attribution import DraOwner, DraResolver, resolve
from migscope.exporter._dra import DraHolder, DraHolders, collect_dra_holders, parse_cdi_device
from migscope.exporter._snapshot import GpuReading, MigReading, Snapshot

NAMES = Path(__file__).parents[1] / "fixtures" / "real" / "dra" / "device-names.tsv"


def _rows() -> list[dict[str, str]]:
    lines = [line for line in NAMES.read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["name"])
def test_every_public_name_parses_as_its_format_says(row: dict[str, str]) -> None:
    parsed = parse_device_name(row["name"])
    fmt = row["format"]
    if fmt in ("dev", "illustrative", "vfio"):
        assert parsed is None  # no released driver emits them: never guessed at
        return
    assert parsed is not None
    assert parsed.minor == int(row["minor"])
    if fmt == "full":
        assert (parsed.kind, parsed.profile_id, parsed.placement_start) == ("gpu", None, None)
        return
    assert parsed.kind == "mig"
    assert parsed.form == fmt
    assert parsed.profile_id == int(row["gi_profile_id"])
    assert parsed.placement_start == int(row["placement_start"])
    if fmt == "legacy":
        assert parsed.placement_size == int(row["placement_size"])
        assert parsed.profile is None
    else:
        assert parsed.profile == row["profile_part"]


def test_the_legacy_name_is_never_read_as_a_profile_called_19() -> None:
    # The driver's regex ^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$ reads gpu-1-mig-19-4-1 as profile
    # "19", id 4, start 1; it is GI profile 19 at start 4, size 1.
    parsed = parse_device_name("gpu-1-mig-19-4-1")
    assert parsed is not None
    assert (parsed.form, parsed.profile_id, parsed.placement_start) == ("legacy", 19, 4)


@pytest.mark.parametrize(
    ("name", "profile", "pid", "start"),
    [
        ("gpu-0-mig-1g10gb-me-20-0", "1g10gb-me", 20, 0),  # 1g.10gb+me: '+' became '-'
        ("gpu-3-mig-1g24gb-meall-65-2", "1g24gb-meall", 65, 2),  # 1g.24gb+me.all
        ("gpu-12-mig-7g141gb-0-0", "7g141gb", 0, 0),
    ],
)
def test_derived_canonical_names(name: str, profile: str, pid: int, start: int) -> None:
    parsed = parse_device_name(name)
    assert parsed is not None
    assert (parsed.form, parsed.profile, parsed.profile_id, parsed.placement_start) == (
        "canonical",
        profile,
        pid,
        start,
    )


@pytest.mark.parametrize(
    "name", ["", "gpu-vfio-0", "gpu-x", "gpu-0-mig-1g.5gb-0-1", "gpu-0-mig--19-0", "GPU-0"]
)
def test_names_in_no_form_do_not_parse(name: str) -> None:
    assert parse_device_name(name) is None


def test_cdi_ids() -> None:
    uid = "dab5ab50-1c4e-4b7e-9a43-5d1f0c2b7e11"
    assert parse_cdi_device(f"k8s.gpu.nvidia.com/claim={uid}-gpu-0-mig-1g12gb-19-0") == (
        uid,
        "gpu-0-mig-1g12gb-19-0",
    )
    assert parse_cdi_device("nvidia.com/gpu=0") is None
    assert parse_cdi_device("k8s.gpu.nvidia.com/claim=not-a-uid-gpu-0") is None


def test_holders_from_the_kubelet_shape() -> None:
    pods = [
        make_pod(
            "infer-0",
            namespace="ml",
            claims={
                "main": [make_claim("infer-0-mig", ["gpu-0-mig-1g12gb-19-0"], claim_namespace="ml")]
            },
        ),
        make_pod(
            "other",
            claims={"c": [make_claim("nic", ["eth1"], driver="dra.example.com")]},
        ),
        make_pod("plugin", containers={"c": {"nvidia.com/gpu": ["GPU-x"]}}),
    ]
    got = collect_dra_holders(pods)
    assert not got.cut
    [holder] = got.holders
    assert holder.claim == "infer-0-mig"
    assert holder.claim_namespace == "ml"
    assert holder.driver == "gpu.nvidia.com"
    assert holder.pool == "node-a"
    assert holder.device == "gpu-0-mig-1g12gb-19-0"
    assert holder.cdi_devices == (
        "k8s.gpu.nvidia.com/claim=dab5ab50-1c4e-4b7e-9a43-5d1f0c2b7e11-gpu-0-mig-1g12gb-19-0",
    )


def test_holders_are_capped_first_in_order() -> None:
    pods = [
        make_pod(f"p{i:03d}", claims={"c": [make_claim(f"c{i}", ["gpu-0"])]}) for i in range(50)
    ]
    got = collect_dra_holders(reversed(pods), max_holders=7)
    assert got.cut
    assert [h.pod for h in got.holders] == [f"p{i:03d}" for i in range(7)]


# -- resolution ---------------------------------------------------------------------------------


def _slice(gi: int, pid: int | None, start: int | None, uuid: str) -> MigReading:
    return MigReading(
        gpu_instance_id=gi,
        mig_uuid=uuid,
        profile="1g.12gb",
        profile_id=pid,
        placement_start=start,
        placement_size=1,
        compute_slices=1,
        memory_slices=1,
        sm_count=16,
    )


def _gpu(index: int, minor: int, *instances: MigReading, model: str = "GH200-96GB") -> GpuReading:
    return GpuReading(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA GH200 96GB HBM3",
        model=model,
        pci_bus_id="",
        pci_device_id="",
        mig_enabled=bool(instances),
        instances=instances,
        minor=minor,
    )


SNAP = Snapshot(
    taken_at=1.0,
    gpus=(
        # NVML index 0 is minor 1 and index 1 is minor 0: the name's number is the minor.
        _gpu(0, 1, _slice(7, 19, 0, "MIG-a"), _slice(11, 19, 4, "MIG-b")),
        _gpu(1, 0),
    ),
)


def _holder(device: str, **kw: object) -> DraHolder:
    base: dict[str, object] = {
        "namespace": "ml",
        "pod": "p",
        "container": "c",
        "claim": "cl",
        "claim_namespace": "ml",
        "driver": "gpu.nvidia.com",
        "pool": "node-a",
        "device": device,
    }
    base.update(kw)
    return DraHolder(**base)  # type: ignore[arg-type]


def test_resolves_by_minor_profile_id_and_start_not_by_index_or_profile_alone() -> None:
    got = resolve(SNAP, [_holder("gpu-1-mig-1g12gb-19-4"), _holder("gpu-0", pod="w")])
    assert not got.unresolved
    assert set(got.owners) == {"MIG-b", "GPU-1"}
    [owner] = got.owners["MIG-b"]
    assert owner == DraOwner("ml", "p", "c", "gpu.nvidia.com", "cl", "ml", "dra-device-name")
    assert "MIG-a" not in got.owners  # same profile, another placement


def test_legacy_name_resolves_by_id_and_start() -> None:
    got = resolve(SNAP, [_holder("gpu-1-mig-19-4-1")])
    assert set(got.owners) == {"MIG-b"}


def test_unparsable_name_falls_back_to_the_cdi_id() -> None:
    uid = "dab5ab50-1c4e-4b7e-9a43-5d1f0c2b7e11"
    holder = _holder("", cdi_devices=(f"k8s.gpu.nvidia.com/claim={uid}-gpu-1-mig-1g12gb-19-0",))
    got = resolve(SNAP, [holder])
    [owner] = got.owners["MIG-a"]
    assert owner.attribution == "dra-cdi"


@pytest.mark.parametrize(
    ("device", "why"),
    [
        ("gpu-0-mig-1g24gb-0", "no form"),
        ("gpu-5-mig-1g12gb-19-0", "no GPU with minor number 5"),
        ("gpu-1-mig-1g12gb-19-2", "no GPU instance of profile id 19 at placement start 2"),
        ("gpu-1-mig-1g24gb-15-0", "no GPU instance of profile id 15 at placement start 0"),
    ],
)
def test_unresolvable(device: str, why: str) -> None:
    got = resolve(SNAP, [_holder(device)])
    assert not got.owners
    [(_, reason)] = got.unresolved
    assert why in reason


def test_placement_in_driver_units_on_rtx_pro_6000() -> None:
    # NVML counts thirds of a memory slice there: start 3 is memory slice 1.
    snap = Snapshot(
        taken_at=1.0,
        gpus=(_gpu(0, 0, _slice(3, 14, 1, "MIG-r"), model="RTX-PRO-6000-96GB"),),
    )
    assert set(resolve(snap, [_holder("gpu-0-mig-1g24gb-14-3")]).owners) == {"MIG-r"}
    assert not resolve(snap, [_holder("gpu-0-mig-1g24gb-14-1")]).owners


def test_resolver_merges_caches_and_logs_each_unresolved_device_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    resolver = DraResolver()
    base = {"MIG-a": ("plugin-owner",)}
    holders = DraHolders((_holder("gpu-1-mig-1g12gb-19-0"), _holder("gpu-9", pod="lost")))
    with caplog.at_level(logging.WARNING, logger="migscope.exporter._attribution"):
        first = resolver.merged(SNAP, holders, base)
        assert resolver.merged(SNAP, holders, base) is first  # cached
        assert first["MIG-a"][0] == "plugin-owner"
        assert isinstance(first["MIG-a"][1], DraOwner)
        assert not caplog.records  # a device may show from the sampler's next cycle
        later = Snapshot(taken_at=2.0, gpus=SNAP.gpus)
        resolver.merged(later, holders, base)
        resolver.merged(Snapshot(taken_at=3.0, gpus=SNAP.gpus), holders, base)
    [record] = caplog.records
    assert "gpu.nvidia.com/node-a/gpu-9" in record.getMessage()
    assert "no GPU with minor number 9" in record.getMessage()
    assert "pod ml/lost" in record.getMessage()
