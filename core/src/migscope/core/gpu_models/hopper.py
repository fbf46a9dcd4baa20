"""The catalogue's Hopper models: H100 (SXM, PCIe, NVL, 96GB), H200 and GH200."""

from __future__ import annotations

from migscope.core.catalogue import Evidence, GpuModel
from migscope.core.gpu_models.shapes import (
    HOPPER_ENGINES,
    MIB,
    eight_slice,
    gib,
    hopper_names,
)

__all__ = ["GH200_144GB", "H100_96GB", "H100_NVL", "H100_PCIE", "H100_SXM", "H200"]

H100_SXM = GpuModel(
    key="H100-80GB",
    names=("NVIDIA H100 80GB HBM3", "NVIDIA H800"),
    pci_device_ids=(0x233010DE, 0x232410DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=81559 * MIB,
    profiles=eight_slice(
        hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={
            "1g": gib(9.75),
            "1g+me": gib(9.75),
            "1g2": gib(19.62),
            "2g": gib(19.62),
            "3g": gib(39.5),
            "4g": gib(39.5),
            "7g": gib(79.25),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "NVIDIA MIG user guide H100 SXM5 80GB table (reference/mig-manager.md §4); names "
        "confirmed by real `nvidia-smi -L` (reference/samples/nvidia-smi-h100-80gb-L*.txt); "
        "placements identical to the real H100 PCIe and H200 -lgipp."
    ),
)

H100_PCIE = GpuModel(
    key="H100-PCIE-80GB",
    names=("NVIDIA H100 PCIe", "NVIDIA H800 PCIe"),
    pci_device_ids=(0x233110DE, 0x232210DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=81559 * MIB,
    profiles=eight_slice(
        hopper_names("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        mib={
            "1g": gib(9.62),
            "1g+me": gib(9.62),
            "1g2": gib(19.50),
            "2g": gib(19.50),
            "3g": gib(39.25),
            "4g": gib(39.25),
            "7g": gib(79.00),
        },
        sms={"1g": 14, "1g+me": 14, "1g2": 14, "2g": 30, "3g": 46, "4g": 62, "7g": 114},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real `nvidia-smi mig -lgip`/`-lgipp` of an H100 PCIe on driver 525.125.06 "
        "(reference/samples/nvidia-smi-h100-pcie-80gb-lgip.txt, -lgipp.txt)."
    ),
)

H100_NVL = GpuModel(
    key="H100-NVL-94GB",
    names=("NVIDIA H100 NVL", "NVIDIA H800 NVL"),
    pci_device_ids=(0x232110DE, 0x233A10DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=95830 * MIB,
    profiles=eight_slice(
        hopper_names("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
        mib={
            "1g": gib(10.62),
            "1g+me": gib(10.62),
            "1g2": gib(21.5),
            "2g": gib(21.5),
            "3g": gib(46.12),
            "4g": gib(46.12),
            "7g": gib(92.62),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "NVIDIA MIG user guide H100 NVL table and real -lgip quoted in gpu-operator #900/#903 "
        "(reference/mig-manager.md §4); MiB rounded to the 1/8 GiB the driver reports."
    ),
)

H100_96GB = GpuModel(
    key="GH200-96GB",
    names=("NVIDIA GH200 480GB", "NVIDIA H100 96GB", "NVIDIA PG506-96GB"),
    pci_device_ids=(0x234210DE, 0x233D10DE, 0x20B610DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=97871 * MIB,
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
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real `nvidia-smi mig -lgip` of a GH200 480GB (96GB HBM3) "
        "(reference/samples/nvidia-smi-gh200-lgip.txt); placements as every Hopper -lgipp. "
        "Also H100-96GB and PG506-96GB, which share mig-parted's all-balanced entry."
    ),
    notes="H20 (0x232910DE) shares the profile names but has fewer SMs; it is not catalogued.",
)

H200 = GpuModel(
    key="H200-141GB",
    names=("NVIDIA H200", "NVIDIA H200 NVL"),
    pci_device_ids=(0x233510DE, 0x233B10DE),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=150754820096,
    profiles=eight_slice(
        hopper_names("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
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
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real H200 SXM, driver 580.159.04: `nvidia-smi mig -lgip`/`-lgipp` and an NVML probe "
        "(fixtures/h200/lgip.txt, lgipp.txt, nvml_probe.json: memorySizeMB, SMs, engines)."
    ),
)

GH200_144GB = GpuModel(
    key="GH200-144GB",
    names=("NVIDIA GH200 144G HBM3e",),
    pci_device_ids=(0x234810DE,),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=146 * 1024 * MIB,
    profiles=eight_slice(
        hopper_names("1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
        mib={
            "1g": gib(17.5),
            "1g+me": gib(17.5),
            "1g2": gib(35.25),
            "2g": gib(35.25),
            "3g": gib(70.5),
            "4g": gib(70.5),
            "7g": gib(141.0),
        },
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.DOCUMENTED,
    source=(
        "Profile names: mig-parted all-balanced for 0x234810DE and mig-parted #139; 1g/2g "
        "sizes from gpu-operator #1057's -lgip; 3g/4g/7g sizes inferred (2x, 4x the 2g)."
    ),
)
