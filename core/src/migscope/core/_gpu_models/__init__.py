"""The catalogue's data: every MIG-capable GPU model migscope knows, with sources.

Each model records where its numbers come from (``evidence`` and ``source``). Models marked
``MEASURED`` are compared field by field with real ``nvidia-smi mig -lgip``/``-lgipp`` output or
an NVML probe kept in the repository; the test suite fails if they drift. ``DOCUMENTED``
models follow NVIDIA's MIG user guide and mig-parted's configs; ``INFERRED`` numbers (mostly
SM counts and exact MiB on Blackwell parts) fill gaps by analogy and are said to be so.

One module per architecture (:mod:`.ampere`, :mod:`.hopper`, :mod:`.blackwell`), built from
the shared geometry, NVML indices and engine sets of :mod:`.shapes` and the types of
:mod:`.gpu_model`. To add a model, add it to its architecture's module and to :data:`MODELS`;
:mod:`migscope.core._catalogue` finds models among these.
"""

from __future__ import annotations

from migscope.core._gpu_models.ampere import A30, A100_40GB, A100_80GB, PG506_96GB
from migscope.core._gpu_models.blackwell import (
    B200,
    B300,
    GB200,
    GB300,
    RTX_PRO_6000,
)
from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._gpu_models.hopper import (
    GH200_144GB,
    H20,
    H100_64GB,
    H100_96GB,
    H100_NVL,
    H100_PCIE,
    H100_SXM,
    H100_SXM_94GB,
    H200,
)

__all__ = ["MODELS"]

MODELS: tuple[GpuModel, ...] = (
    A30,
    A100_40GB,
    A100_80GB,
    PG506_96GB,
    H100_SXM,
    H100_PCIE,
    H100_NVL,
    H100_SXM_94GB,
    H100_64GB,
    H100_96GB,
    H20,
    H200,
    GH200_144GB,
    B200,
    GB200,
    B300,
    GB300,
    RTX_PRO_6000,
)
"""Every catalogued model, in catalogue order (the order :func:`all_models` returns)."""
