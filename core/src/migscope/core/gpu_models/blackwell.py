"""The catalogue's Blackwell models: B200, GB200, B300, GB300 and the 4-slice RTX PRO 6000."""

from __future__ import annotations

from migscope.core.catalogue import Evidence, GiProfile, GpuModel, ProfileName
from migscope.core.drivers import DriverRange
from migscope.core.gpu_models.shapes import (
    BLACKWELL_ENGINES,
    IDX_1,
    IDX_1_ALL_ME,
    IDX_1_GFX,
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

__all__ = ["B200", "B300", "GB200", "GB300", "RTX_PRO_6000"]

_GB200_EARLY = (
    "gpu-operator#1303 (https://github.com/NVIDIA/gpu-operator/pull/1303) lists 1g.24gb on an "
    "early HGX GB200; mig-parted#227/#228 (https://github.com/NVIDIA/mig-parted/issues/227) "
    "say production boards print 1g.23gb and refuse the early names"
)
_EARLY_BOARDS = "early (pre-production) GB200 boards"

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
            "1g": gib(21.75),
            "1g+me": gib(21.75),
            "1g2": gib(44.25),
            "2g": gib(44.25),
            "3g": gib(89.5),
            "4g": gib(89.5),
            "7g": gib(178.5),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 30, "2g": 36, "3g": 60, "4g": 72, "7g": 148},
        engines=BLACKWELL_ENGINES,
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: mig-parted config-default (all-balanced for 0x290110DE, all-*); "
        "1g/2g sizes and SMs: NVIDIA MIG user guide B200 table; 3g/4g/7g MiB and SMs "
        "inferred; placements assumed identical to Hopper (same GI ids)."
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
            "1g": gib(22.5),
            "1g+me": gib(22.5),
            "1g2": gib(45.5),
            "2g": gib(45.5),
            "3g": gib(91.5),
            "4g": gib(91.5),
            "7g": gib(184.0),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 32, "2g": 38, "3g": 60, "4g": 76, "7g": 152},
        engines=BLACKWELL_ENGINES,
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
        "Names: mig-parted config-default and #227/#228 (1g.23gb, early drivers 1g.24gb; "
        "3g.93gb/3g.95gb and 7g.186gb/7g.189gb by SKU); sizes and SMs inferred."
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
    pci_device_ids=(0x31C210DE,),
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
        "SMs inferred."
    ),
)


def _rtx_pro_profiles() -> tuple[GiProfile, ...]:
    """RTX PRO 6000 Blackwell: 4 slices, graphics (+gfx) and media-engine variants."""
    e1, e2, e4 = Engines(1, 1, 1, 1, 0), Engines(2, 2, 2, 2, 0), Engines(4, 4, 4, 4, 1)
    rows = [
        # name, index, g, mem slices, max, starts, engines, +me
        ("1g.24gb", IDX_1, 1, 1, 4, (0, 1, 2, 3), e1, False),
        ("1g.24gb+gfx", IDX_1_GFX, 1, 1, 4, (0, 1, 2, 3), e1, False),
        ("1g.24gb-me", IDX_1_NO_ME, 1, 1, 4, (0, 1, 2, 3), Engines(1, 0, 0, 0, 0), False),
        ("1g.24gb+me.all", IDX_1_ALL_ME, 1, 1, 1, (0, 1, 2, 3), Engines(1, 4, 4, 4, 1), True),
        ("2g.48gb", IDX_2, 2, 2, 2, (0, 2), e2, False),
        ("2g.48gb+gfx", IDX_2_GFX, 2, 2, 2, (0, 2), e2, False),
        ("2g.48gb-me", IDX_2_NO_ME, 2, 2, 2, (0, 2), Engines(2, 0, 0, 0, 0), False),
        ("2g.48gb+me.all", IDX_2_ALL_ME, 2, 2, 1, (0, 2), Engines(2, 4, 4, 4, 1), True),
        ("4g.96gb", IDX_4, 4, 4, 1, (0,), e4, False),
        ("4g.96gb+gfx", IDX_4_GFX, 4, 4, 1, (0,), e4, False),
    ]
    mib = {1: gib(23.5), 2: gib(47.25), 4: gib(94.75)}
    sms = {1: 46, 2: 94, 4: 188}
    return tuple(
        GiProfile(
            name,
            None,
            index,
            g,
            mem,
            mib[g],
            sms[g],
            max_n,
            starts,
            e.ce,
            e.dec,
            e.enc,
            e.jpeg,
            e.ofa,
            media_extensions=me,
        )
        for name, index, g, mem, max_n, starts, e, me in rows
    )


RTX_PRO_6000 = GpuModel(
    key="RTX-PRO-6000-96GB",
    names=("NVIDIA RTX PRO 6000 Blackwell Server Edition",),
    pci_device_ids=(0x2BB510DE,),
    architecture="blackwell",
    compute_slices=4,
    memory_slices=4,
    memory_total_bytes=97887 * MIB,
    profiles=_rtx_pro_profiles(),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: mig-parted config-default (all-1g.24gb.gfx, -me, +me.all, 2g.48gb, "
        "4g.96gb); 4-slice geometry as the A30; NVML ids unknown (None), sizes and SMs inferred."
    ),
    notes="+gfx, -me and +me.all exist on RTX PRO Blackwell only.",
)
