"""The building blocks of the catalogue's profile tables: NVML indices, engines, geometry.

Most MIG GPUs share one geometry (8 memory slices, 7 compute slices) and differ only in names,
sizes and SM counts, so their profile tables are made by :func:`eight_slice` from those
alone; the NVML profile indices and the engine sets that ``nvidia-smi mig -lgip`` prints per
architecture live here once for every model module.

Geometry shared by all 8-memory-slice parts (confirmed by real ``-lgipp`` on A100, H100 and
H200): 1g {0..6}:1, 1g+me {0..6}:1, 1g double-memory {0,2,4,6}:2, 2g {0,2,4}:2, 3g {0,4}:4,
4g {0}:4, 7g {0}:8. 4-slice parts (A30, RTX PRO 6000): 1g {0..3}:1, 2g {0,2}:2, 4g {0}:4.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from migscope.core._gpu_models.gpu_model import GiProfile, MemoryFact, ProfileName

MIB = 1024 * 1024

# NVML_GPU_INSTANCE_PROFILE_* indices (nvml.h); NVML is queried by index, answers with an id.
IDX_1 = 0x0
IDX_2 = 0x1
IDX_3 = 0x2
IDX_4 = 0x3
IDX_7 = 0x4
IDX_1_ME = 0x7  # 1_SLICE_REV1
IDX_2_ME = 0x8  # 2_SLICE_REV1
IDX_1_DOUBLE = 0x9  # 1_SLICE_REV2
IDX_1_GFX, IDX_2_GFX, IDX_4_GFX = 0xA, 0xB, 0xC
IDX_1_NO_ME, IDX_2_NO_ME = 0xD, 0xE
IDX_1_ALL_ME, IDX_2_ALL_ME = 0xF, 0x10


@dataclass(frozen=True)
class Engines:
    """Copy engines, decoders, encoders, JPEG decoders and optical-flow accelerators."""

    ce: int
    dec: int
    enc: int
    jpeg: int
    ofa: int


# Engine sets as -lgip prints them. Hopper/Blackwell: from the H200, GH200 and H100 PCIe
# samples; Ampere: from the A100-PCIE-40GB sample (1g+me and 1g double-memory inferred).
HOPPER_ENGINES = {
    "1g": Engines(1, 1, 0, 1, 0),
    "1g+me": Engines(1, 1, 0, 1, 1),
    "1g2": Engines(1, 1, 0, 1, 0),
    "2g": Engines(2, 2, 0, 2, 0),
    "3g": Engines(3, 3, 0, 3, 0),
    "4g": Engines(4, 4, 0, 4, 0),
    "7g": Engines(8, 7, 0, 7, 1),
}
AMPERE_ENGINES = {
    "1g": Engines(1, 0, 0, 0, 0),
    "1g+me": Engines(1, 1, 0, 1, 1),
    "1g2": Engines(1, 1, 0, 0, 0),
    "2g": Engines(2, 1, 0, 0, 0),
    "3g": Engines(3, 2, 0, 0, 0),
    "4g": Engines(4, 2, 0, 0, 0),
    "7g": Engines(7, 5, 0, 1, 1),
}
BLACKWELL_ENGINES = {
    "1g": Engines(2, 1, 0, 1, 0),
    "1g+me": Engines(2, 1, 0, 1, 1),
    "1g2": Engines(2, 1, 0, 1, 0),
    "2g": Engines(3, 2, 0, 2, 0),
    "3g": Engines(6, 3, 0, 3, 0),
    "4g": Engines(8, 4, 0, 4, 0),
    "7g": Engines(16, 7, 0, 7, 1),
}

# kind -> (nvml id, nvml index, compute slices, memory slices, max instances, starts, +me)
_EIGHT_SLICE_SHAPES: dict[str, tuple[int, int, int, int, int, tuple[int, ...], bool]] = {
    "1g": (19, IDX_1, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), False),
    "1g+me": (20, IDX_1_ME, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), True),
    "1g2": (15, IDX_1_DOUBLE, 1, 2, 4, (0, 2, 4, 6), False),
    "2g": (14, IDX_2, 2, 2, 3, (0, 2, 4), False),
    "3g": (9, IDX_3, 3, 4, 2, (0, 4), False),
    "4g": (5, IDX_4, 4, 4, 1, (0,), False),
    "7g": (0, IDX_7, 7, 8, 1, (0,), False),
}
# The order NVML lists profiles in (-lgip output order): by profile index.
_EIGHT_SLICE_ORDER = ("1g", "1g+me", "1g2", "2g", "3g", "4g", "7g")


def eight_slice(
    names: dict[str, str],
    mib: dict[str, int],
    sms: dict[str, int],
    engines: dict[str, Engines],
    *,
    min_driver: dict[str, str] | None = None,
    name_facts: Mapping[str, tuple[ProfileName, ...]] | None = None,
    memory_facts: Mapping[str, tuple[MemoryFact, ...]] | None = None,
) -> tuple[GiProfile, ...]:
    """Profiles of an 8-memory-slice, 7-compute-slice GPU from its names, sizes and SMs.

    ``name_facts`` and ``memory_facts`` give, per kind, the names and sizes that only some
    drivers report (see :class:`ProfileName` and :class:`MemoryFact`).
    """
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
                name_facts=(name_facts or {}).get(kind, ()),
                memory_facts=(memory_facts or {}).get(kind, ()),
            )
        )
    return tuple(out)


def gib(value: float) -> int:
    """MiB from the GiB figure -lgip prints, which is a multiple of 1/16 GiB cut to 2 decimals."""
    return round(value * 1024 / 64) * 64


def hopper_names(g1: str, g1_double: str, g2: str, g3: str, g4: str, g7: str) -> dict[str, str]:
    """The names of an 8-slice model's profiles by kind (``1g+me`` is named after ``1g``)."""
    return {
        "1g": g1,
        "1g+me": f"{g1}+me",
        "1g2": g1_double,
        "2g": g2,
        "3g": g3,
        "4g": g4,
        "7g": g7,
    }
