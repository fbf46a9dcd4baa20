"""The catalogue's Blackwell models: B200, GB200, B300, GB300 and the 4-slice RTX PRO 6000."""

from __future__ import annotations

from migscope.core._drivers import DriverRange
from migscope.core._gpu_models.gpu_model import (
    Evidence,
    GiProfile,
    GpuModel,
    MemoryFact,
    ProfileName,
)
from migscope.core._gpu_models.shapes import (
    BLACKWELL_ENGINES,
    IDX_1,
    IDX_1_ALL_ME,
    IDX_1_GFX,
    IDX_1_ME,
    IDX_1_NO_ME,
    IDX_2,
    IDX_2_ALL_ME,
    IDX_2_GFX,
    IDX_2_NO_ME,
    IDX_4,
    IDX_4_GFX,
    MIB,
    Engines,
    eight_slice,
    gib,
    hopper_names,
)

_GB200_EARLY = (
    "gpu-operator#1303 (https://github.com/NVIDIA/gpu-operator/pull/1303, 2025-03-01) lists "
    "1g.24gb at 20.00 GiB on an early HGX GB200 and mig-parted@89dd81a configured 1g.24gb, "
    "3g.95gb, 4g.95gb, 7g.189gb; mig-parted#227/#228 "
    "(https://github.com/NVIDIA/mig-parted/issues/227, 2025-08-07) and mig-parted@ebab1f7: "
    "production boards print 1g.23gb, 3g.93gb, 4g.93gb, 7g.186gb and refuse the early names; "
    "drivers not stated"
)
_EARLY_BOARDS = "early (pre-production) GB200 boards"

_B200_166 = (
    "mig-parted#166 / gpu-operator#1242 (https://github.com/NVIDIA/mig-parted/pull/166, "
    "2025-01-29): B200 -lgip, 1g.23gb at 22.00 GiB; driver not stated"
)
_B200_187 = (
    "mig-parted#187 / gpu-operator#1351 (https://github.com/NVIDIA/mig-parted/pull/187, "
    "2025-03-20): B200 -lgip, 1g.23gb at 20.50 GiB, 1g.45gb/2g.45gb at 44.25; driver not stated"
)

B200 = GpuModel(
    key="B200-180GB",
    names=("NVIDIA B200",),
    pci_device_ids=(0x290110DE,),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=183359 * MIB,
    profiles=eight_slice(
        hopper_names("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
        mib={
            "1g": gib(20.5),
            "1g+me": gib(20.5),
            "1g2": gib(44.25),
            "2g": gib(44.25),
            "3g": gib(89.5),
            "4g": gib(89.5),
            "7g": gib(178.5),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 30, "2g": 36, "3g": 60, "4g": 72, "7g": 148},
        engines=BLACKWELL_ENGINES,
        memory_facts={
            "1g": (MemoryFact(gib(22.0), None, _B200_166),),
            "1g+me": (MemoryFact(gib(22.0), None, _B200_166),),
        },
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: mig-parted config-default (all-balanced for 0x290110DE, all-*); "
        "1g/1g+me/1g.45gb/2g.45gb ids, SMs, engines and sizes: the real -lgip in "
        "mig-parted#187 (20.50 GiB) and #166 (22.00 GiB, earlier); 3g/4g/7g MiB and SMs "
        "inferred; placements assumed identical to Hopper (same GI ids)."
    ),
    notes=(
        "PCI 0x2909 is also named 'NVIDIA B200' by the driver (NVIDIA/open-gpu-kernel-modules"
        "@df1c9a3 README.md) but is the 'HGX B200 168GB' (pci.ids@c1c1254), whose profile "
        "sizes are unknown: it is not catalogued, and matching it by name gives this model."
    ),
)

GB200 = GpuModel(
    key="GB200-186GB",
    names=("NVIDIA GB200",),
    pci_device_ids=(0x294110DE,),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=189471 * MIB,
    profiles=eight_slice(
        hopper_names("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
        mib={
            "1g": gib(22.0),
            "1g+me": gib(22.0),
            "1g2": gib(45.5),
            "2g": gib(45.5),
            "3g": gib(91.5),
            "4g": gib(91.5),
            "7g": gib(184.0),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 32, "2g": 38, "3g": 60, "4g": 76, "7g": 152},
        engines=BLACKWELL_ENGINES,
        memory_facts={
            "1g": (MemoryFact(gib(20.0), None, _GB200_EARLY),),
            "1g+me": (MemoryFact(gib(20.0), None, _GB200_EARLY),),
        },
        name_facts={
            kind: (ProfileName(name, DriverRange(), _GB200_EARLY, boards=_EARLY_BOARDS),)
            for kind, name in (
                ("1g", "1g.24gb"),
                ("1g+me", "1g.24gb+me"),
                ("3g", "3g.95gb"),
                ("4g", "4g.95gb"),
                ("7g", "7g.189gb"),
            )
        },
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Production boards: the real -lgip in mig-parted#227 (1g.23gb/1g.23gb+me 22.00 GiB, "
        "1g.47gb/2g.47gb 45.50, ids, SMs, engines) and mig-parted@ebab1f7 (3g.93gb, 4g.93gb, "
        "7g.186gb 'from the production boards'); early boards: gpu-operator#1303's -lgip "
        "(1g.24gb at 20.00 GiB) and mig-parted@89dd81a (1g.24gb, 3g.95gb, 4g.95gb, 7g.189gb). "
        "3g/4g/7g sizes and SMs inferred."
    ),
)

B300 = GpuModel(
    key="B300-288GB",
    names=("NVIDIA B300 SXM6 AC", "NVIDIA B300"),
    pci_device_ids=(0x318210DE,),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=275040 * MIB,
    profiles=eight_slice(
        hopper_names("1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
        mib={
            "1g": gib(33.5),
            "1g+me": gib(33.5),
            "1g2": gib(66.5),
            "2g": gib(66.5),
            "3g": gib(133.0),
            "4g": gib(133.0),
            "7g": gib(268.0),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 30, "2g": 36, "3g": 60, "4g": 72, "7g": 148},
        engines=BLACKWELL_ENGINES,
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: mig-parted config-default (all-balanced 0x318210DE, all-*); "
        "sizes and SMs inferred."
    ),
)

GB300 = GpuModel(
    key="GB300-279GB",
    names=("NVIDIA GB300",),
    pci_device_ids=(0x31C210DE, 0x31C310DE),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=284208 * MIB,
    profiles=eight_slice(
        hopper_names("1g.35gb", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"),
        mib={
            "1g": gib(34.75),
            "1g+me": gib(34.75),
            "1g2": gib(69.5),
            "2g": gib(69.5),
            "3g": gib(138.0),
            "4g": gib(138.0),
            "7g": gib(277.0),
        },
        sms={"1g": 20, "1g+me": 20, "1g2": 32, "2g": 40, "3g": 64, "4g": 80, "7g": 152},
        engines=BLACKWELL_ENGINES,
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: mig-parted config-default (all-balanced and all-1g.35gb for "
        "0x31C210DE, whose 1g.35gb is a 1-memory-slice profile unlike the H200's); sizes and "
        "SMs inferred. PCI 0x31C3 ('GB110 [GB300]' in pci.ids@c1c1254, absent from the R595 "
        "driver README) assumed to have the same profiles."
    ),
)


_RTX_PRO_610 = (
    "real `nvidia-smi mig -lgip`/`-lgipp`/`-lgi` of an RTX PRO 6000 Blackwell Server Edition on "
    "driver 610.43.02 (tests/fixtures/real/nvidia-smi/kubesimplify-rtx-pro-6000-*.txt)"
)
_CUBECOS_312 = (
    "bigstack-oss/cubecos#312 (https://github.com/bigstack-oss/cubecos/issues/312): -lgip of "
    "an RTX PRO 6000 Blackwell Server Edition, driver not stated in the thread excerpt"
)


def _media_row(
    name: str,
    nvml_id: int | None,
    index: int,
    g: int,
    max_n: int,
    starts: tuple[int, ...],
    e: Engines,
    mib: int,
    sms: int,
    *,
    memory_facts: tuple[MemoryFact, ...] = (),
) -> GiProfile:
    """One profile of a 4-slice RTX PRO Blackwell part (memory slices equal compute slices)."""
    return GiProfile(
        name,
        nvml_id,
        index,
        g,
        g,
        mib,
        sms,
        max_n,
        starts,
        e.ce,
        e.dec,
        e.enc,
        e.jpeg,
        e.ofa,
        media_extensions=name.endswith(("+me", "+me.all")),
        memory_facts=memory_facts,
        takes_all_media=name.endswith("+me.all"),
    )


def _rtx_pro_6000_profiles() -> tuple[GiProfile, ...]:
    """RTX PRO 6000 Blackwell: the 11 profiles driver 610.43.02 lists, ids and all."""
    e1, e2, e4 = Engines(1, 1, 1, 1, 0), Engines(2, 2, 2, 2, 0), Engines(4, 4, 4, 4, 1)
    rows = [
        # name, nvml id, index, g, max, starts (memory slices), engines
        ("1g.24gb", 14, IDX_1, 1, 4, (0, 1, 2, 3), e1),
        ("1g.24gb+me", 21, IDX_1_ME, 1, 1, (0, 1, 2, 3), Engines(1, 1, 1, 1, 1)),
        ("1g.24gb+gfx", 47, IDX_1_GFX, 1, 4, (0, 1, 2, 3), e1),
        ("1g.24gb+me.all", 65, IDX_1_ALL_ME, 1, 1, (0, 1, 2, 3), Engines(1, 4, 4, 4, 1)),
        ("1g.24gb-me", 67, IDX_1_NO_ME, 1, 4, (0, 1, 2, 3), Engines(1, 0, 0, 0, 0)),
        ("2g.48gb", 5, IDX_2, 2, 2, (0, 2), e2),
        ("2g.48gb+gfx", 35, IDX_2_GFX, 2, 2, (0, 2), e2),
        ("2g.48gb+me.all", 64, IDX_2_ALL_ME, 2, 1, (0, 2), Engines(2, 4, 4, 4, 1)),
        ("2g.48gb-me", 66, IDX_2_NO_ME, 2, 2, (0, 2), Engines(2, 0, 0, 0, 0)),
        ("4g.96gb", 0, IDX_4, 4, 1, (0,), e4),
        ("4g.96gb+gfx", 32, IDX_4_GFX, 4, 1, (0,), e4),
    ]
    mib = {1: gib(23.62), 2: gib(47.38), 4: gib(95.12)}
    older = {1: gib(23.12), 2: gib(46.50)}
    sms = {1: 46, 2: 94, 4: 188}

    def facts(g: int) -> tuple[MemoryFact, ...]:
        seen: tuple[MemoryFact, ...] = (MemoryFact(mib[g], DriverRange(610, 610), _RTX_PRO_610),)
        if g in older:
            seen += (MemoryFact(older[g], None, _CUBECOS_312),)
        return seen

    return tuple(
        _media_row(name, i, index, g, n, starts, e, mib[g], sms[g], memory_facts=facts(g))
        for name, i, index, g, n, starts, e in rows
    )


RTX_PRO_6000 = GpuModel(
    key="RTX-PRO-6000-96GB",
    names=(
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ),
    pci_device_ids=(0x2BB510DE, 0x2BB110DE, 0x2BB410DE),
    architecture="blackwell",
    compute_slices=4,
    memory_slices=4,
    memory_total_bytes=97887 * MIB,
    profiles=_rtx_pro_6000_profiles(),
    evidence=Evidence.MEASURED,
    source=(
        "Server Edition on driver 610.43.02: every profile's name, NVML id, count, SMs, "
        "engines, memory and placements from real -lgip/-lgipp/-lgi "
        "(tests/fixtures/real/nvidia-smi/kubesimplify-rtx-pro-6000-*.txt); 23.12/46.50 GiB "
        "on another driver: bigstack-oss/cubecos#312. Workstation (0x2BB1) and Max-Q (0x2BB4) "
        "editions: names and PCI IDs from the driver README's supported-GPU list "
        "(NVIDIA/open-gpu-kernel-modules@df1c9a3 README.md, 595.45.04); the MIG user guide "
        "lists all three editions with 4 instances and one profile table (documented, not "
        "measured on those editions)."
    ),
    notes=(
        "+gfx, -me and +me.all exist on RTX PRO Blackwell only; +me.all takes every media "
        "engine, so only -me instances fit beside it. The driver counts placements in thirds "
        "of a memory slice (placement_unit 3)."
    ),
    placement_unit=3,
)
