"""The GPU's own MIG profile table, and how it differs from the catalogue's.

The catalogue is what migscope knows offline; the GPU knows better. NVML reports a GPU's
profiles (``nvmlDeviceGetGpuInstanceProfileInfo``) and their placements
(``...PossiblePlacements``) even with MIG disabled, and ``nvidia-smi mig -lgip``/``-lgipp``
print the same. A :class:`ProfileTable` holds one GPU's answers, from either source;
:func:`compare` says where the catalogue disagrees (identity and placements are errors,
memory within a driver's known variance is information), and :func:`model_from_table`
builds a :class:`~migscope.core._catalogue.GpuModel` from the table itself, so that a layout
can be checked against the GPU's own table rather than the built-in one.

Pure: takes text and data, returns data.
"""

from __future__ import annotations

from migscope.core._profile_table.build import model_from_table
from migscope.core._profile_table.compare import compare
from migscope.core._profile_table.identify import identify_model
from migscope.core._profile_table.pasted import driver_in_text, tables_from_nvidia_smi
from migscope.core._profile_table.table import (
    LGIP_TOLERANCE_MIB,
    ObservedProfile,
    ProfileTable,
    ProfileTableError,
)

__all__ = [
    "LGIP_TOLERANCE_MIB",
    "ObservedProfile",
    "ProfileTable",
    "ProfileTableError",
    "compare",
    "driver_in_text",
    "identify_model",
    "model_from_table",
    "tables_from_nvidia_smi",
]
