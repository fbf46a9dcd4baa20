"""FAKE of DCGM's ``dcgmvalue`` module: the blank sentinels and their tests.

Values from NVIDIA/DCGM ``testing/python3/dcgmvalue.py`` (same numbers as ``dcgm_structs.h``):
a blank is a value at or above a per-type base (``DCGM_INT64_BLANK``, ``DCGM_FP64_BLANK`` =
2**47); base+1/+2/+3 mean not found / not supported / not permissioned. Strings are blank
when they look like ``<<<...>>>``. The real ``dcgm_structs`` imports this module by name.
"""

DCGM_INT8_BLANK = 0x70
DCGM_INT32_BLANK = 0x7FFFFFF0
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0
DCGM_STR_BLANK = "<<<NULL>>>"

DCGM_INT32_NOT_FOUND = DCGM_INT32_BLANK + 1
DCGM_INT64_NOT_FOUND = DCGM_INT64_BLANK + 1
DCGM_FP64_NOT_FOUND = DCGM_FP64_BLANK + 1.0
DCGM_STR_NOT_FOUND = "<<<NOT_FOUND>>>"

DCGM_INT32_NOT_SUPPORTED = DCGM_INT32_BLANK + 2
DCGM_INT64_NOT_SUPPORTED = DCGM_INT64_BLANK + 2
DCGM_FP64_NOT_SUPPORTED = DCGM_FP64_BLANK + 2.0
DCGM_STR_NOT_SUPPORTED = "<<<NOT_SUPPORTED>>>"

DCGM_INT32_NOT_PERMISSIONED = DCGM_INT32_BLANK + 3
DCGM_INT64_NOT_PERMISSIONED = DCGM_INT64_BLANK + 3
DCGM_FP64_NOT_PERMISSIONED = DCGM_FP64_BLANK + 3.0
DCGM_STR_NOT_PERMISSIONED = "<<<NOT_PERM>>>"


def DCGM_INT32_IS_BLANK(val):
    return val >= DCGM_INT32_BLANK


def DCGM_INT64_IS_BLANK(val):
    return val >= DCGM_INT64_BLANK


def DCGM_FP64_IS_BLANK(val):
    return val >= DCGM_FP64_BLANK


def DCGM_STR_IS_BLANK(val):
    return val.startswith("<<<") and ">>>" in val
