"""The catalogue's Ampere models: A100 40GB and 80GB, and the 4-slice A30."""

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
    AMPERE_ENGINES,
    IDX_1,
    IDX_1_ME,
    IDX_2,
    IDX_2_ME,
    IDX_4,
    MIB,
    eight_slice,
    gib,
    hopper_names,
)

_A100_40_R460 = (
    "real -lgip of an A100-PCIE-40GB on 460.32.03 "
    "(reference/samples/nvidia-smi-a100-pcie-40gb-lgip.txt)"
)
_A100_40_R580 = (
    "real -lgip of an A100-SXM4-40GB on 580.126.09 "
    "(tests/fixtures/real/nvidia-smi/ssup2-a100-sxm4-40gb-lgip-driver580.txt, "
    "ssup2/blog-software@9284619)"
)
_A100_40_GUIDE = (
    "NVIDIA MIG user guide, 'List GPU Instance Profiles' example on an A100-SXM4-40GB "
    "(driver not stated; figures as quoted in issue 25)"
)


def _a100_40gb_memory() -> dict[str, tuple[MemoryFact, ...]]:
    """The sizes each driver's -lgip prints for an A100 40GB, the reference (R460) first.

    1g, 1g+me and 2g/1g double-memory agree on R460 and R580 (4.75 and 9.75 GiB); the
    7g.40gb instance shrank from 39.50 GiB (R460) to 39.38 GiB (R580). The user guide's
    example (9.62 / 19.50 / 39.25 GiB) states no driver, so it only widens the known range.
    """
    r460, r580 = DriverRange(460, 460), DriverRange(580, 580)
    seen = {
        "1g": (4.75, 4.75, None),
        "1g+me": (None, 4.75, None),
        "1g2": (None, 9.75, None),
        "2g": (9.75, 9.75, 9.62),
        "3g": (19.62, 19.62, 19.50),
        "4g": (19.62, 19.62, 19.50),
        "7g": (39.50, 39.38, 39.25),
    }
    out: dict[str, tuple[MemoryFact, ...]] = {}
    for kind, (on_460, on_580, guide) in seen.items():
        facts: list[MemoryFact] = []
        if on_460 is not None:
            facts.append(MemoryFact(gib(on_460), r460, _A100_40_R460))
        if on_580 is not None:
            facts.append(MemoryFact(gib(on_580), r580, _A100_40_R580))
        if guide is not None:
            facts.append(MemoryFact(gib(guide), None, _A100_40_GUIDE))
        out[kind] = tuple(facts)
    return out


_MIG_PARTED_31 = (
    "mig-parted#31 (https://github.com/NVIDIA/mig-parted/issues/31): an A100 80GB's 3g "
    "instance is named 3g.39gb instead of 3g.40gb on drivers 535.x and 545.x"
)
_DCGM_713 = (
    "gpu-operator#687 / dcgm-exporter#713 (https://github.com/NVIDIA/dcgm-exporter/issues/"
    "713): an A100 80GB PCIe on 535.154.05 reports GPU_I_PROFILE 7g.79gb for the instance "
    "MIG Manager created from all-7g.80gb"
)
_R535 = DriverRange(535, 545)
_ACCEPTED = "MIG Manager still accepted the 80gb/40gb name in its config on these drivers"
A100_80GB_NAMES = {
    "3g": (ProfileName("3g.39gb", _R535, _MIG_PARTED_31, _ACCEPTED),),
    "4g": (
        ProfileName(
            "4g.39gb",
            _R535,
            _MIG_PARTED_31,
            "by analogy with 3g.39gb (same 4 memory slices); not seen",
            strength=Evidence.INFERRED,
        ),
    ),
    "7g": (
        ProfileName(
            "7g.79gb",
            _R535,
            _DCGM_713,
            "seen on 535.154.05; R545 by analogy with mig-parted#31. " + _ACCEPTED,
        ),
    ),
}

A100_40GB = GpuModel(
    key="A100-40GB",
    names=(
        "NVIDIA A100-SXM4-40GB",
        "A100-SXM4-40GB",
        "NVIDIA A100-PCIE-40GB",
        "A100-PCIE-40GB",
        "NVIDIA A800-SXM4-40GB",
        "NVIDIA A800 40GB PCIe",
        "NVIDIA A800 40GB Active",
    ),
    pci_device_ids=(0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE, 0x20BD10DE),
    architecture="ampere",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=40536 * MIB,
    profiles=eight_slice(
        hopper_names("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
        mib={
            "1g": gib(4.75),
            "1g+me": gib(4.75),
            "1g2": gib(9.75),
            "2g": gib(9.75),
            "3g": gib(19.62),
            "4g": gib(19.62),
            "7g": gib(39.50),
        },
        sms={"1g": 14, "1g+me": 14, "1g2": 14, "2g": 28, "3g": 42, "4g": 56, "7g": 98},
        engines=AMPERE_ENGINES,
        min_driver={"1g+me": "470", "1g2": "525"},
        memory_facts=_a100_40gb_memory(),
    ),
    evidence=Evidence.MEASURED,
    source=(
        "1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb: real `nvidia-smi mig -lgip` of an "
        "A100-PCIE-40GB on driver 460.32.03 "
        "(reference/samples/nvidia-smi-a100-pcie-40gb-lgip.txt); all seven, 1g.5gb+me and "
        "1g.10gb included, on an A100-SXM4-40GB on 580.126.09 (7g.40gb 39.38 GiB; "
        "ssup2/blog-software@9284619); "
        "placements: NVIDIA MIG user guide A100-40GB -lgipp; 1g.5gb+me (R470+) and 1g.10gb "
        "(R525+): MIG user guide, engines inferred; PCI IDs: mig-parted all-balanced filters, "
        "plus A800-SXM4-40GB 0x20BD (NVIDIA/open-gpu-kernel-modules@df1c9a3 README.md, "
        "pci.ids@c1c1254), which mig-parted's filters miss."
    ),
)

A100_80GB = GpuModel(
    key="A100-80GB",
    names=(
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA A100 80GB PCIe",
        "NVIDIA A800-SXM4-80GB",
        "NVIDIA A800 80GB PCIe",
        "NVIDIA A800 80GB PCIe LC",
    ),
    pci_device_ids=(0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE),
    architecture="ampere",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=81920 * MIB,
    profiles=eight_slice(
        hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={
            "1g": gib(9.5),
            "1g+me": gib(9.5),
            "1g2": gib(19.5),
            "2g": gib(19.5),
            "3g": gib(39.25),
            "4g": gib(39.25),
            "7g": gib(79.0),
        },
        sms={"1g": 14, "1g+me": 14, "1g2": 14, "2g": 28, "3g": 42, "4g": 56, "7g": 98},
        engines=AMPERE_ENGINES,
        min_driver={"1g+me": "470", "1g2": "525"},
        name_facts=A100_80GB_NAMES,
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "NVIDIA MIG user guide A100-80GB profile table (reference/mig-manager.md §4); "
        "R535/R545 names 3g.39gb (mig-parted#31) and 7g.79gb (gpu-operator#687 / "
        "dcgm-exporter#713, 535.154.05); PCI IDs: mig-parted all-balanced."
    ),
)

A30 = GpuModel(
    key="A30-24GB",
    names=("NVIDIA A30",),
    pci_device_ids=(0x20B710DE,),
    architecture="ampere",
    compute_slices=4,
    memory_slices=4,
    memory_total_bytes=24576 * MIB,
    profiles=(
        GiProfile("1g.6gb", 14, IDX_1, 1, 1, gib(5.81), 14, 4, (0, 1, 2, 3), 1, 1, 0, 0, 0),
        GiProfile(
            "1g.6gb+me",
            21,
            IDX_1_ME,
            1,
            1,
            gib(5.81),
            14,
            1,
            (0, 1, 2, 3),
            1,
            1,
            0,
            1,
            1,
            media_extensions=True,
        ),
        GiProfile("2g.12gb", 5, IDX_2, 2, 2, gib(11.69), 28, 2, (0, 2), 2, 2, 0, 0, 0),
        GiProfile(
            "2g.12gb+me",
            6,
            IDX_2_ME,
            2,
            2,
            gib(11.69),
            28,
            1,
            (0, 2),
            2,
            2,
            0,
            1,
            1,
            media_extensions=True,
            min_driver="525",
        ),
        GiProfile("4g.24gb", 0, IDX_4, 4, 4, gib(23.50), 56, 1, (0,), 4, 4, 0, 1, 1),
    ),
    evidence=Evidence.MEASURED,
    source=(
        "1g.6gb, 1g.6gb+me, 2g.12gb, 4g.24gb with placements: real `-lgip`/`-lgipp` of an A30 "
        "(reference/samples/nvidia-smi-a30-lgip.txt, -lgipp.txt); 2g.12gb+me: MIG user guide "
        "and mig-parted's all-2g.12gb.me, its NVML id (6) inferred."
    ),
)


PG506_96GB = GpuModel(
    key="PG506-96GB",
    names=("NVIDIA PG506-232", "NVIDIA PG506-230"),
    pci_device_ids=(0x20B610DE,),
    architecture="ampere",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=98304 * MIB,
    profiles=eight_slice(
        hopper_names("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
        mib={
            "1g": gib(11.0),
            "1g+me": gib(11.0),
            "1g2": gib(23.0),
            "2g": gib(23.0),
            "3g": gib(46.5),
            "4g": gib(46.5),
            "7g": gib(93.0),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 16, "2g": 32, "3g": 48, "4g": 64, "7g": 112},
        engines=AMPERE_ENGINES,
        min_driver={"1g+me": "470", "1g2": "525"},
    ),
    evidence=Evidence.INFERRED,
    source=(
        "A GA100 (Ampere) board with 96 GB: PCI 0x20B6 'GA100GL [PG506-232]' (pci.ids@c1c1254) "
        "and 'NVIDIA PG506-232' (NVIDIA/open-gpu-kernel-modules@df1c9a3 README.md); 124 SMs, "
        "compute capability 8.0 and 98304 MiB in public run logs. mig-parted's config-default "
        "files it with the 96GB Hopper parts (all-balanced: 1g.12gb x2, 2g.24gb, 3g.48gb; "
        "all-3g.48gb, all-4g.48gb, all-7g.96gb), which names its profiles; SMs, sizes and the "
        "1g.24gb/+me profiles are inferred from the A100 and the H100 96GB."
    ),
    notes="Ampere: no GPM, so per-instance activity needs DCGM profiling fields.",
)
