"""Raising NVML errors exactly as pynvml does, and naming them in scenario files."""

from __future__ import annotations

import re
from typing import NoReturn

import pynvml


def fail(code: int) -> NoReturn:
    """Raise what pynvml raises for return code ``code``.

    ``pynvml.NVMLError(code)`` instantiates the matching subclass (``NVMLError_NotFound``
    for 6 ...), so callers' ``except pynvml.NVMLError_NotFound`` clauses work unchanged.
    """
    raise pynvml.NVMLError(code)


def _class_suffixes() -> dict[str, int]:
    mapping: dict[str, int] = {}
    for code, cls in pynvml.NVMLError._valClassMapping.items():
        mapping[cls.__name__.removeprefix("NVMLError_").lower()] = int(code)
    return mapping


def error_code(value: int | str) -> int:
    """An NVML return code from a number or a name.

    ``6``, ``"NOT_FOUND"``, ``"NVML_ERROR_NOT_FOUND"``, ``"NotFound"`` and
    ``"NVMLError_NotFound"`` all give 6.

    Raises:
        ValueError: no such error.
    """
    if isinstance(value, bool):
        raise ValueError(f"not an NVML error: {value!r}")
    if isinstance(value, int):
        if value in pynvml.NVMLError._valClassMapping:
            return value
        raise ValueError(f"not an NVML error code: {value}")
    text = value.strip()
    constant = getattr(pynvml, "NVML_ERROR_" + text.upper().removeprefix("NVML_ERROR_"), None)
    if isinstance(constant, int) and text.upper() != "NVML_ERROR_":
        return constant
    suffix = re.sub(r"^nvmlerror_", "", text.lower()).replace("_", "")
    found = _class_suffixes().get(suffix)
    if found is None:
        raise ValueError(f"not an NVML error: {value!r} (use e.g. GPU_IS_LOST, NOT_FOUND, 15)")
    return found


def error_name(code: int) -> str:
    """``"NVML_ERROR_NOT_FOUND"`` for 6: the constant's name, for messages."""
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and getattr(pynvml, name) == code:
            return name
    return f"NVML error {code}"
