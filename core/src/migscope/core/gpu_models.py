"""The catalogue's data: every MIG-capable GPU model migscope knows, with sources.

Each model records where its numbers come from (``evidence`` and ``source``). Models marked
``MEASURED`` are compared field by field with real ``nvidia-smi mig -lgip``/``-lgipp`` output or
an NVML probe kept in the repository; the test suite fails if they drift. ``DOCUMENTED``
models follow NVIDIA's MIG user guide and mig-parted's configs; ``INFERRED`` numbers (mostly
SM counts and exact MiB on Blackwell parts) fill gaps by analogy and are said to be so.

Geometry shared by all 8-memory-slice parts (confirmed by real ``-lgipp`` on A100, H100 and
H200): 1g {0..6}:1, 1g+me {0..6}:1, 1g double-memory {0,2,4,6}:2, 2g {0,2,4}:2, 3g {0,4}:4,
4g {0}:4, 7g {0}:8. 4-slice parts (A30, RTX PRO 6000): 1g {0..3}:1, 2g {0,2}:2, 4g {0}:4.
"""

from __future__ import annotations

from dataclasses import dataclass

from migscope.core.catalogue import Evidence, GiProfile, GpuModel

__all__ = ["MODELS"]

MIB = 1024 * 1024

# NVML_GPU_INSTANCE_PROFILE_* indices (nvml.h); NVML is queried by index, answers with an id.
_IDX_1 = 0x0
_IDX_2 = 0x1
_IDX_3 = 0x2
_IDX_4 = 0x3
_IDX_7 = 0x4
_IDX_1_ME = 0x7  # 1_SLICE_REV1
_IDX_2_ME = 0x8  # 2_SLICE_REV1
_IDX_1_DOUBLE = 0x9  # 1_SLICE_REV2
_IDX_1_GFX, _IDX_2_GFX, _IDX_4_GFX = 0xA, 0xB, 0xC
_IDX_1_NO_ME, _IDX_2_NO_ME = 0xD, 0xE
_IDX_1_ALL_ME, _IDX_2_ALL_ME = 0xF, 0x10


@dataclass(frozen=True)
class _Engines:
    """Copy engines, decoders, encoders, JPEG decoders and optical-flow accelerators."""

    ce: int
    dec: int
    enc: int
    jpeg: int
    ofa: int


# Engine sets as -lgip prints them. Hopper/Blackwell: from the H200, GH200 and H100 PCIe
# samples; Ampere: from the A100-PCIE-40GB sample (1g+me and 1g double-memory inferred).
_HOPPER_ENGINES = {
    "1g": _Engines(1, 1, 0, 1, 0),
    "1g+me": _Engines(1, 1, 0, 1, 1),
    "1g2": _Engines(1, 1, 0, 1, 0),
    "2g": _Engines(2, 2, 0, 2, 0),
    "3g": _Engines(3, 3, 0, 3, 0),
    "4g": _Engines(4, 4, 0, 4, 0),
    "7g": _Engines(8, 7, 0, 7, 1),
}
_AMPERE_ENGINES = {
    "1g": _Engines(1, 0, 0, 0, 0),
    "1g+me": _Engines(1, 1, 0, 1, 1),
    "1g2": _Engines(1, 1, 0, 0, 0),
    "2g": _Engines(2, 1, 0, 0, 0),
    "3g": _Engines(3, 2, 0, 0, 0),
    "4g": _Engines(4, 2, 0, 0, 0),
    "7g": _Engines(7, 5, 0, 1, 1),
}
_BLACKWELL_ENGINES = {
    "1g": _Engines(2, 1, 0, 1, 0),
    "1g+me": _Engines(2, 1, 0, 1, 1),
    "1g2": _Engines(2, 1, 0, 1, 0),
    "2g": _Engines(3, 2, 0, 2, 0),
    "3g": _Engines(6, 3, 0, 3, 0),
    "4g": _Engines(8, 4, 0, 4, 0),
    "7g": _Engines(16, 7, 0, 7, 1),
}

# kind -> (nvml id, nvml index, compute slices, memory slices, max instances, starts, +me)
_EIGHT_SLICE_SHAPES: dict[str, tuple[int, int, int, int, int, tuple[int, ...], bool]] = {
    "1g": (19, _IDX_1, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), False),
    "1g+me": (20, _IDX_1_ME, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), True),
    "1g2": (15, _IDX_1_DOUBLE, 1, 2, 4, (0, 2, 4, 6), False),
    "2g": (14, _IDX_2, 2, 2, 3, (0, 2, 4), False),
    "3g": (9, _IDX_3, 3, 4, 2, (0, 4), False),
    "4g": (5, _IDX_4, 4, 4, 1, (0,), False),
    "7g": (0, _IDX_7, 7, 8, 1, (0,), False),
}
# The order NVML lists profiles in (-lgip output order): by profile index.
_EIGHT_SLICE_ORDER = ("1g", "1g+me", "1g2", "2g", "3g", "4g", "7g")


def _eight_slice(
    names: dict[str, str],
    mib: dict[str, int],
    sms: dict[str, int],
    engines: dict[str, _Engines],
    *,
    min_driver: dict[str, str] | None = None,
    aliases: dict[str, tuple[str, ...]] | None = None,
) -> tuple[GiProfile, ...]:
    """Profiles of an 8-memory-slice, 7-compute-slice GPU from its names, sizes and SMs."""
    out = []
    for kind in _EIGHT_SLICE_ORDER:
        if kind not in names:
            continue
        nvml_id, index, compute, memory, max_n, starts, me = _EIGHT_SLICE_SHAPES[kind]
        e = engines[kind]
        out.append(
            GiProfile(
                name=names[kind],
                nvml_id=nvml_id,
                nvml_index=index,
                compute_slices=compute,
                memory_slices=memory,
                memory_mib=mib[kind],
                sm_count=sms[kind],
                max_instances=max_n,
                placements=starts,
                copy_engines=e.ce,
                decoders=e.dec,
                encoders=e.enc,
                jpegs=e.jpeg,
                ofas=e.ofa,
                media_extensions=me,
                min_driver=(min_driver or {}).get(kind),
                aliases=(aliases or {}).get(kind, ()),
            )
        )
    return tuple(out)


def _gib(value: float) -> int:
    """MiB from the GiB figure -lgip prints, which is a multiple of 1/16 GiB cut to 2 decimals."""
    return round(value * 1024 / 64) * 64


def _hopper_names(g1: str, g1_double: str, g2: str, g3: str, g4: str, g7: str) -> dict[str, str]:
    return {
        "1g": g1,
        "1g+me": f"{g1}+me",
        "1g2": g1_double,
        "2g": g2,
        "3g": g3,
        "4g": g4,
        "7g": g7,
    }


_A100_40GB = GpuModel(
    key="A100-40GB",
    names=(
        "NVIDIA A100-SXM4-40GB",
        "A100-SXM4-40GB",
        "NVIDIA A100-PCIE-40GB",
        "A100-PCIE-40GB",
        "NVIDIA A800-SXM4-40GB",
        "NVIDIA A800 40GB PCIe",
    ),
    pci_device_ids=(0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE),
    architecture="ampere",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=40536 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
        mib={
            "1g": _gib(4.75),
            "1g+me": _gib(4.75),
            "1g2": _gib(9.75),
            "2g": _gib(9.75),
            "3g": _gib(19.62),
            "4g": _gib(19.62),
            "7g": _gib(39.50),
        },
        sms={"1g": 14, "1g+me": 14, "1g2": 14, "2g": 28, "3g": 42, "4g": 56, "7g": 98},
        engines=_AMPERE_ENGINES,
        min_driver={"1g+me": "470", "1g2": "525"},
    ),
    evidence=Evidence.MEASURED,
    source=(
        "1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb: real `nvidia-smi mig -lgip` of an "
        "A100-PCIE-40GB on driver 460.32.03 "
        "(reference/samples/nvidia-smi-a100-pcie-40gb-lgip.txt); "
        "placements: NVIDIA MIG user guide A100-40GB -lgipp; 1g.5gb+me (R470+) and 1g.10gb "
        "(R525+): MIG user guide, engines inferred; PCI IDs: mig-parted all-balanced filters."
    ),
)

_A100_80GB = GpuModel(
    key="A100-80GB",
    names=(
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA A100 80GB PCIe",
        "NVIDIA A800-SXM4-80GB",
        "NVIDIA A800 80GB PCIe",
    ),
    pci_device_ids=(0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE),
    architecture="ampere",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=81920 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={
            "1g": _gib(9.5),
            "1g+me": _gib(9.5),
            "1g2": _gib(19.5),
            "2g": _gib(19.5),
            "3g": _gib(39.25),
            "4g": _gib(39.25),
            "7g": _gib(79.0),
        },
        sms={"1g": 14, "1g+me": 14, "1g2": 14, "2g": 28, "3g": 42, "4g": 56, "7g": 98},
        engines=_AMPERE_ENGINES,
        min_driver={"1g+me": "470", "1g2": "525"},
        aliases={"3g": ("3g.39gb",), "4g": ("4g.39gb",)},
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "NVIDIA MIG user guide A100-80GB profile table (reference/mig-manager.md §4); "
        "3g.39gb alias: drivers 535/545 (mig-parted #31); PCI IDs: mig-parted all-balanced."
    ),
)

_A30 = GpuModel(
    key="A30-24GB",
    names=("NVIDIA A30",),
    pci_device_ids=(0x20B710DE,),
    architecture="ampere",
    compute_slices=4,
    memory_slices=4,
    memory_total_bytes=24576 * MIB,
    profiles=(
        GiProfile("1g.6gb", 14, _IDX_1, 1, 1, _gib(5.81), 14, 4, (0, 1, 2, 3), 1, 1, 0, 0, 0),
        GiProfile(
            "1g.6gb+me",
            21,
            _IDX_1_ME,
            1,
            1,
            _gib(5.81),
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
        GiProfile("2g.12gb", 5, _IDX_2, 2, 2, _gib(11.69), 28, 2, (0, 2), 2, 2, 0, 0, 0),
        GiProfile(
            "2g.12gb+me",
            6,
            _IDX_2_ME,
            2,
            2,
            _gib(11.69),
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
        GiProfile("4g.24gb", 0, _IDX_4, 4, 4, _gib(23.50), 56, 1, (0,), 4, 4, 0, 1, 1),
    ),
    evidence=Evidence.MEASURED,
    source=(
        "1g.6gb, 1g.6gb+me, 2g.12gb, 4g.24gb with placements: real `-lgip`/`-lgipp` of an A30 "
        "(reference/samples/nvidia-smi-a30-lgip.txt, -lgipp.txt); 2g.12gb+me: MIG user guide "
        "and mig-parted's all-2g.12gb.me, its NVML id (6) inferred."
    ),
)

_H100_SXM = GpuModel(
    key="H100-80GB",
    names=("NVIDIA H100 80GB HBM3", "NVIDIA H800"),
    pci_device_ids=(0x233010DE, 0x232410DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=81559 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={
            "1g": _gib(9.75),
            "1g+me": _gib(9.75),
            "1g2": _gib(19.62),
            "2g": _gib(19.62),
            "3g": _gib(39.5),
            "4g": _gib(39.5),
            "7g": _gib(79.25),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=_HOPPER_ENGINES,
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "NVIDIA MIG user guide H100 SXM5 80GB table (reference/mig-manager.md §4); names "
        "confirmed by real `nvidia-smi -L` (reference/samples/nvidia-smi-h100-80gb-L*.txt); "
        "placements identical to the real H100 PCIe and H200 -lgipp."
    ),
)

_H100_PCIE = GpuModel(
    key="H100-PCIE-80GB",
    names=("NVIDIA H100 PCIe", "NVIDIA H800 PCIe"),
    pci_device_ids=(0x233110DE, 0x232210DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=81559 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={
            "1g": _gib(9.62),
            "1g+me": _gib(9.62),
            "1g2": _gib(19.50),
            "2g": _gib(19.50),
            "3g": _gib(39.25),
            "4g": _gib(39.25),
            "7g": _gib(79.00),
        },
        sms={"1g": 14, "1g+me": 14, "1g2": 14, "2g": 30, "3g": 46, "4g": 62, "7g": 114},
        engines=_HOPPER_ENGINES,
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real `nvidia-smi mig -lgip`/`-lgipp` of an H100 PCIe on driver 525.125.06 "
        "(reference/samples/nvidia-smi-h100-pcie-80gb-lgip.txt, -lgipp.txt)."
    ),
)

_H100_NVL = GpuModel(
    key="H100-NVL-94GB",
    names=("NVIDIA H100 NVL", "NVIDIA H800 NVL"),
    pci_device_ids=(0x232110DE, 0x233A10DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=95830 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
        mib={
            "1g": _gib(10.62),
            "1g+me": _gib(10.62),
            "1g2": _gib(21.5),
            "2g": _gib(21.5),
            "3g": _gib(46.12),
            "4g": _gib(46.12),
            "7g": _gib(92.62),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=_HOPPER_ENGINES,
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "NVIDIA MIG user guide H100 NVL table and real -lgip quoted in gpu-operator #900/#903 "
        "(reference/mig-manager.md §4); MiB rounded to the 1/8 GiB the driver reports."
    ),
)

_H100_96GB = GpuModel(
    key="GH200-96GB",
    names=("NVIDIA GH200 480GB", "NVIDIA H100 96GB", "NVIDIA PG506-96GB"),
    pci_device_ids=(0x234210DE, 0x233D10DE, 0x20B610DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=97871 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
        mib={
            "1g": _gib(11.0),
            "1g+me": _gib(11.0),
            "1g2": _gib(23.0),
            "2g": _gib(23.0),
            "3g": _gib(46.5),
            "4g": _gib(46.5),
            "7g": _gib(93.0),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=_HOPPER_ENGINES,
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real `nvidia-smi mig -lgip` of a GH200 480GB (96GB HBM3) "
        "(reference/samples/nvidia-smi-gh200-lgip.txt); placements as every Hopper -lgipp. "
        "Also H100-96GB and PG506-96GB, which share mig-parted's all-balanced entry."
    ),
    notes="H20 (0x232910DE) shares the profile names but has fewer SMs; it is not catalogued.",
)

_H200 = GpuModel(
    key="H200-141GB",
    names=("NVIDIA H200", "NVIDIA H200 NVL"),
    pci_device_ids=(0x233510DE, 0x233B10DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=150754820096,
    profiles=_eight_slice(
        _hopper_names("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
        mib={
            "1g": 16384,
            "1g+me": 16384,
            "1g2": 33280,
            "2g": 33280,
            "3g": 71424,
            "4g": 71424,
            "7g": 143360,
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=_HOPPER_ENGINES,
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real H200 SXM, driver 580.159.04: `nvidia-smi mig -lgip`/`-lgipp` and an NVML probe "
        "(fixtures/h200/lgip.txt, lgipp.txt, nvml_probe.json: memorySizeMB, SMs, engines)."
    ),
)

_GH200_144GB = GpuModel(
    key="GH200-144GB",
    names=("NVIDIA GH200 144G HBM3e",),
    pci_device_ids=(0x234810DE,),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=146 * 1024 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
        mib={
            "1g": _gib(17.5),
            "1g+me": _gib(17.5),
            "1g2": _gib(35.25),
            "2g": _gib(35.25),
            "3g": _gib(70.5),
            "4g": _gib(70.5),
            "7g": _gib(141.0),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=_HOPPER_ENGINES,
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "Profile names: mig-parted all-balanced for 0x234810DE and mig-parted #139; 1g/2g "
        "sizes from gpu-operator #1057's -lgip; 3g/4g/7g sizes inferred (2x, 4x the 2g)."
    ),
)

_B200 = GpuModel(
    key="B200-180GB",
    names=("NVIDIA B200",),
    pci_device_ids=(0x290110DE,),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=183359 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
        mib={
            "1g": _gib(21.75),
            "1g+me": _gib(21.75),
            "1g2": _gib(44.25),
            "2g": _gib(44.25),
            "3g": _gib(89.5),
            "4g": _gib(89.5),
            "7g": _gib(178.5),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 30, "2g": 36, "3g": 60, "4g": 72, "7g": 148},
        engines=_BLACKWELL_ENGINES,
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: mig-parted config-default (all-balanced for 0x290110DE, all-*); "
        "1g/2g sizes and SMs: NVIDIA MIG user guide B200 table; 3g/4g/7g MiB and SMs "
        "inferred; placements assumed identical to Hopper (same GI ids)."
    ),
)

_GB200 = GpuModel(
    key="GB200-186GB",
    names=("NVIDIA GB200",),
    pci_device_ids=(0x294110DE,),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=189471 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
        mib={
            "1g": _gib(22.5),
            "1g+me": _gib(22.5),
            "1g2": _gib(45.5),
            "2g": _gib(45.5),
            "3g": _gib(91.5),
            "4g": _gib(91.5),
            "7g": _gib(184.0),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 32, "2g": 38, "3g": 60, "4g": 76, "7g": 152},
        engines=_BLACKWELL_ENGINES,
        aliases={
            "1g": ("1g.24gb",),
            "1g+me": ("1g.24gb+me",),
            "3g": ("3g.95gb",),
            "4g": ("4g.95gb",),
            "7g": ("7g.189gb",),
        },
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names: mig-parted config-default and #227/#228 (1g.23gb, early drivers 1g.24gb; "
        "3g.93gb/3g.95gb and 7g.186gb/7g.189gb by SKU); sizes and SMs inferred."
    ),
)

_B300 = GpuModel(
    key="B300-288GB",
    names=("NVIDIA B300 SXM6 AC", "NVIDIA B300"),
    pci_device_ids=(0x318210DE,),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=275040 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
        mib={
            "1g": _gib(33.5),
            "1g+me": _gib(33.5),
            "1g2": _gib(66.5),
            "2g": _gib(66.5),
            "3g": _gib(133.0),
            "4g": _gib(133.0),
            "7g": _gib(268.0),
        },
        sms={"1g": 18, "1g+me": 18, "1g2": 30, "2g": 36, "3g": 60, "4g": 72, "7g": 148},
        engines=_BLACKWELL_ENGINES,
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: mig-parted config-default (all-balanced 0x318210DE, all-*); "
        "sizes and SMs inferred."
    ),
)

_GB300 = GpuModel(
    key="GB300-279GB",
    names=("NVIDIA GB300",),
    pci_device_ids=(0x31C210DE,),
    architecture="blackwell",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=284208 * MIB,
    profiles=_eight_slice(
        _hopper_names("1g.35gb", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"),
        mib={
            "1g": _gib(34.75),
            "1g+me": _gib(34.75),
            "1g2": _gib(69.5),
            "2g": _gib(69.5),
            "3g": _gib(138.0),
            "4g": _gib(138.0),
            "7g": _gib(277.0),
        },
        sms={"1g": 20, "1g+me": 20, "1g2": 32, "2g": 40, "3g": 64, "4g": 80, "7g": 152},
        engines=_BLACKWELL_ENGINES,
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
    e1, e2, e4 = _Engines(1, 1, 1, 1, 0), _Engines(2, 2, 2, 2, 0), _Engines(4, 4, 4, 4, 1)
    rows = [
        # name, index, g, mem slices, max, starts, engines, +me
        ("1g.24gb", _IDX_1, 1, 1, 4, (0, 1, 2, 3), e1, False),
        ("1g.24gb+gfx", _IDX_1_GFX, 1, 1, 4, (0, 1, 2, 3), e1, False),
        ("1g.24gb-me", _IDX_1_NO_ME, 1, 1, 4, (0, 1, 2, 3), _Engines(1, 0, 0, 0, 0), False),
        ("1g.24gb+me.all", _IDX_1_ALL_ME, 1, 1, 1, (0, 1, 2, 3), _Engines(1, 4, 4, 4, 1), True),
        ("2g.48gb", _IDX_2, 2, 2, 2, (0, 2), e2, False),
        ("2g.48gb+gfx", _IDX_2_GFX, 2, 2, 2, (0, 2), e2, False),
        ("2g.48gb-me", _IDX_2_NO_ME, 2, 2, 2, (0, 2), _Engines(2, 0, 0, 0, 0), False),
        ("2g.48gb+me.all", _IDX_2_ALL_ME, 2, 2, 1, (0, 2), _Engines(2, 4, 4, 4, 1), True),
        ("4g.96gb", _IDX_4, 4, 4, 1, (0,), e4, False),
        ("4g.96gb+gfx", _IDX_4_GFX, 4, 4, 1, (0,), e4, False),
    ]
    mib = {1: _gib(23.5), 2: _gib(47.25), 4: _gib(94.75)}
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


_RTX_PRO_6000 = GpuModel(
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

MODELS: tuple[GpuModel, ...] = (
    _A30,
    _A100_40GB,
    _A100_80GB,
    _H100_SXM,
    _H100_PCIE,
    _H100_NVL,
    _H100_96GB,
    _H200,
    _GH200_144GB,
    _B200,
    _GB200,
    _B300,
    _GB300,
    _RTX_PRO_6000,
)
