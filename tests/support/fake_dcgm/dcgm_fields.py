"""FAKE of DCGM's ``dcgm_fields`` binding module (tests only; not NVIDIA's code).

Names and values from NVIDIA/DCGM ``testing/python3/dcgm_fields.py``: field types are one
ASCII character (``DCGM_FT_DOUBLE = 'd'``; a field value's ``fieldType`` holds ``ord()`` of
it), entity groups are small integers (``DCGM_FE_GPU = 1``, ``DCGM_FE_GPU_I = 4``), and field
ids are stable integers. DCGM 4.6 renamed many field constants (``PROF_GR_ENGINE_ACTIVE`` ->
``PROF_GR_ENGINE_UTIL_RATIO``; reference/nvml-dcgm.md §4); both spellings are defined here
for the fields the backend uses, which is why the backend itself uses the numbers.
"""

import ctypes

import dcgm_structs

dcgmFP = dcgm_structs._dcgmGetFunctionPointer

DCGM_FT_BINARY = "b"
DCGM_FT_DOUBLE = "d"
DCGM_FT_INT64 = "i"
DCGM_FT_STRING = "s"
DCGM_FT_TIMESTAMP = "t"

DCGM_FE_NONE = 0
DCGM_FE_GPU = 1
DCGM_FE_VGPU = 2
DCGM_FE_SWITCH = 3
DCGM_FE_GPU_I = 4
DCGM_FE_GPU_CI = 5
DCGM_FE_LINK = 6

c_dcgm_field_eid_t = ctypes.c_uint32

DCGM_FI_DRIVER_VERSION = 1
DCGM_FI_DEV_NAME = 50
DCGM_FI_DEV_NVML_INDEX = 52
DCGM_FI_DEV_UUID = 54
DCGM_FI_DEV_GPU_TEMP = 150
DCGM_FI_DEV_POWER_USAGE = 155
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 156
DCGM_FI_DEV_POWER_USAGE_INSTANT = 157
DCGM_FI_DEV_GPU_UTIL = 203
DCGM_FI_DEV_FB_TOTAL = 250
DCGM_FI_DEV_FB_FREE = 251
DCGM_FI_DEV_FB_USED = 252
DCGM_FI_DEV_FB_RESERVED = 253
DCGM_FI_PROF_GR_ENGINE_ACTIVE = 1001
DCGM_FI_PROF_SM_ACTIVE = 1002
DCGM_FI_PROF_SM_OCCUPANCY = 1003
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE = 1004
DCGM_FI_PROF_DRAM_ACTIVE = 1005

# DCGM 4.6 names of the same ids.
DCGM_FI_DEV_BOARD_POWER_WATTS = DCGM_FI_DEV_POWER_USAGE
DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO = DCGM_FI_PROF_GR_ENGINE_ACTIVE
DCGM_FI_PROF_SM_UTIL_RATIO = DCGM_FI_PROF_SM_ACTIVE
DCGM_FI_PROF_SM_OCCUPANCY_RATIO = DCGM_FI_PROF_SM_OCCUPANCY
DCGM_FI_PROF_TENSOR_UTIL_RATIO = DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
DCGM_FI_PROF_DRAM_UTIL_RATIO = DCGM_FI_PROF_DRAM_ACTIVE
