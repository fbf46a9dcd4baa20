"""The catalogue's Hopper models: H100 (SXM, PCIe, NVL, 96GB), H200 and GH200."""

from __future__ import annotations

from migscope.core._drivers import DriverRange
from migscope.core._gpu_models.gpu_model import Evidence, GpuModel, MemoryFact
from migscope.core._gpu_models.shapes import (
    HOPPER_ENGINES,
    MIB,
    eight_slice,
    gib,
    hopper_names,
)

_KINDS = ("1g", "1g+me", "1g2", "2g", "3g", "4g", "7g")


def _measured(
    gib_by_kind: dict[str, float], drivers: DriverRange | None, evidence: str
) -> dict[str, tuple[MemoryFact, ...]]:
    """One :class:`MemoryFact` per profile kind from the GiB figures a -lgip printed."""
    return {kind: (MemoryFact(gib(v), drivers, evidence),) for kind, v in gib_by_kind.items()}


def _same_for_pairs(g1: float, g1_double: float, g3: float, g7: float) -> dict[str, float]:
    """GiB per kind where 1g+me = 1g, 2g = 1g double-memory and 4g = 3g, as on every -lgip."""
    return {
        "1g": g1,
        "1g+me": g1,
        "1g2": g1_double,
        "2g": g1_double,
        "3g": g3,
        "4g": g3,
        "7g": g7,
    }


def _in_mib(g1: float, g1_double: float, g3: float, g7: float) -> dict[str, int]:
    """MiB per kind from the four GiB figures -lgip prints (see :func:`_same_for_pairs`)."""
    return {kind: gib(v) for kind, v in _same_for_pairs(g1, g1_double, g3, g7).items()}


_VGPU_HOPPER = (
    "NVIDIA AI Enterprise docs, NVIDIA vGPU Types by Hardware > Hopper Architecture vGPU "
    "Types, MIG-backed tables (https://docs.nvidia.com/ai-enterprise/release-9/latest/"
    "infra-software/vgpu/ ; the page's own URL not verified, read from a public snapshot)"
)
_README_595 = "NVIDIA/open-gpu-kernel-modules@df1c9a3 README.md (595.45.04) supported-GPU list"

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
        memory_facts=_measured(
            _same_for_pairs(9.62, 19.50, 39.25, 79.00),
            DriverRange(525, 525),
            "real -lgip of an H100 PCIe on 525.125.06 "
            "(tests/fixtures/nvidia-smi/nvidia-smi-h100-pcie-80gb-lgip.txt)",
        ),
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real `nvidia-smi mig -lgip`/`-lgipp` of an H100 PCIe on driver 525.125.06 "
        "(reference/samples/nvidia-smi-h100-pcie-80gb-lgip.txt, -lgipp.txt)."
    ),
)

_NVL_560 = _same_for_pairs(10.75, 21.62, 46.38, 93.12)
_NVL_560_SOURCE = (
    "real -lgip of an H100 NVL on 560.35.03, AlizeeChen11/mig-and-mps@2f33226 "
    "(tests/fixtures/real/nvidia-smi/azure-h100-nvl-lgip-driver560.txt)"
)
_NVL_903 = (
    "gpu-operator#900/#903 and mig-parted#101 (https://github.com/NVIDIA/gpu-operator/pull/903, "
    "2024-08): H100 NVL -lgip with 10.75/21.62/46.38 GiB; driver not stated"
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
        memory_facts={
            kind: (
                *_measured(_NVL_560, DriverRange(560, 560), _NVL_560_SOURCE)[kind],
                *_measured(_NVL_560, None, _NVL_903)[kind],
            )
            for kind in _KINDS
        },
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real -lgip of an H100 NVL, driver not stated (OpenNebula docs, "
        "tests/fixtures/real/nvidia-smi/opennebula-h100-nvl-lgip.txt): the reference sizes "
        "10.62/21.50/46.12/92.62 GiB, ids, SMs, engines; on driver 560.35.03 (Azure, "
        "azure-h100-nvl-lgip-driver560.txt) and in gpu-operator#900/#903 the sizes are "
        "10.75/21.62/46.38/93.12 GiB; placements: the Azure -lgipp."
    ),
)

H100_96GB = GpuModel(
    key="GH200-96GB",
    names=(
        "NVIDIA GH200 480GB",
        "NVIDIA GH200 96GB HBM3",
        "NVIDIA GH200 120GB",
        "NVIDIA H100 96GB",
    ),
    pci_device_ids=(0x234210DE, 0x233D10DE, 0x233810DE),
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
        "Also H100 96GB (0x233D), which shares mig-parted's all-balanced entry, and H100 SXM5 "
        "96GB (0x2338, pci.ids@c1c1254): profiles assumed identical (not measured). "
        "NVML name 'NVIDIA GH200 96GB HBM3' (recent drivers): nvidia-smi -L in "
        "kubernetes-sigs/dra-driver-nvidia-gpu@9593204 demo/specs/extended-resources/"
        "mig-1g-12gb.yaml and NVIDIA/dcgm-exporter#532's modelName, on PCI 0x2342 "
        "('GH100 [GH200 480GB]', pci.ids@c1c1254; the GH200 480GB module carries 96GB HBM3)."
    ),
    notes=(
        "PG506-96GB (0x20B6), filed here before, is an Ampere GA100 part: see PG506-96GB. "
        "H20 (0x2329) shares the profile names but has fewer SMs: see H20-96GB."
    ),
)

H20 = GpuModel(
    key="H20-96GB",
    names=("NVIDIA H20",),
    pci_device_ids=(0x232910DE,),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=97871 * MIB,
    profiles=eight_slice(
        hopper_names("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
        mib=_in_mib(11.75, 23.62, 47.38, 95.12),
        sms={"1g": 8, "1g+me": 8, "1g2": 12, "2g": 16, "3g": 32, "4g": 34, "7g": 78},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Real `nvidia-smi mig -lgip` of an 8x H20 node (gqcn/johns-blog@e35b9cc, "
        "tests/fixtures/real/nvidia-smi/johng-h20-lgip-8gpus.txt; driver not stated): names, "
        "ids, counts, SMs (8/12/16/32/34/78), engines, 11.75/23.62/47.38/95.12 GiB; 97871 MiB "
        "and NVIDIA-H20 from the same post's node labels. 3g.48gb + 1g.24gb + 2x 1g.12gb on "
        "real H20s (johng-h20-L-3gpus-mig.txt, 570.158.01). PCI 0x2329 and the NVML name: "
        + _README_595
        + "; the vGPU docs' H20 SXM5 96GB table ("
        + _VGPU_HOPPER
        + ") lists the same profiles. Placements assumed as on every Hopper part (no -lgipp "
        "found)."
    ),
    notes=(
        "The H20 SXM5 141GB (pci.ids 0x232C 'H20 HBM3e') uses the H200's names (vGPU docs) "
        "and is not catalogued; its NVML name is not verified, so name matching may pick this "
        "96GB model: pass the PCI ID."
    ),
)

H100_SXM_94GB = GpuModel(
    key="H100-SXM5-94GB",
    names=("NVIDIA H100",),
    pci_device_ids=(0x233910DE,),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=95830 * MIB,
    profiles=eight_slice(
        hopper_names("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
        mib=_in_mib(10.62, 21.50, 46.12, 92.62),
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: "
        + _VGPU_HOPPER
        + " (H100 SXM5 94GB) and the MIG user guide's Supported GPUs (H100-SXM5 94GB); PCI "
        "0x2339: pci.ids@c1c1254 'H100 SXM5 94GB' and "
        + _README_595
        + " ('NVIDIA H100'). Sizes, SMs and placements are inferred: equal to the H100 NVL's (same "
        "memory and names); not measured."
    ),
)

H100_64GB = GpuModel(
    key="H100-SXM5-64GB",
    names=("NVIDIA H100 SXM5 64GB",),
    pci_device_ids=(0x233710DE,),
    architecture="hopper",
    compute_slices=7,
    memory_slices=8,
    memory_total_bytes=65 * 1024 * MIB,
    profiles=eight_slice(
        hopper_names("1g.8gb", "1g.16gb", "2g.16gb", "3g.32gb", "4g.32gb", "7g.64gb"),
        mib=_in_mib(7.75, 15.75, 31.62, 63.38),
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=HOPPER_ENGINES,
    ),
    evidence=Evidence.INFERRED,
    source=(
        "Names and counts: "
        + _VGPU_HOPPER
        + " (H100 SXM5 64GB: 1g.8gb x7, 1g.8gb+me, 1g.16gb x4, 2g.16gb x3, 3g.32gb x2, "
        "4g.32gb, 7g.64gb); PCI 0x2337: pci.ids@c1c1254 'H100 SXM5 64GB'. The NVML name is "
        "the pci.ids name (not verified); sizes (0.8x the H100 80GB's), SMs and placements "
        "inferred from the H100 SXM."
    ),
)

# memorySizeMB per kind, NVML probe of the real H200 (fixtures/h200/nvml_probe.json)
_H200_580 = {
    "1g": 16384,
    "1g+me": 16384,
    "1g2": 33280,
    "2g": 33280,
    "3g": 71424,
    "4g": 71424,
    "7g": 143360,
}
_H200_120 = (
    "mig-parted#120 (https://github.com/NVIDIA/mig-parted/issues/120, 2024): H200 -lgip "
    "with 1g.35gb/2g.35gb 32.25, 3g/4g 69.50, 7g 139.75 GiB; driver not stated"
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
        mib=_H200_580,
        sms={"1g": 16, "1g+me": 16, "1g2": 26, "2g": 32, "3g": 60, "4g": 64, "7g": 132},
        engines=HOPPER_ENGINES,
        memory_facts={
            kind: (
                MemoryFact(
                    _H200_580[kind],
                    DriverRange(580, 580),
                    "NVML probe of a real H200 on 580.159.04 (fixtures/h200/nvml_probe.json)",
                ),
                *_measured(_same_for_pairs(16.00, 32.25, 69.50, 139.75), None, _H200_120)[kind],
            )
            for kind in _KINDS
        },
    ),
    evidence=Evidence.MEASURED,
    source=(
        "Earlier driver (not stated): mig-parted#120's -lgip, 32.25/69.50/139.75 GiB. "
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
