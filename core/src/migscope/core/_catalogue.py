"""The MIG catalogue: which GPU models exist, and which GPU-instance profiles each one offers.

Everything the analyzer recommends and the applier writes must be a layout the hardware can
actually build, so the catalogue is the single source of truth for profile names, slice
counts, memory sizes and — most importantly — *placements*: the start positions a profile may
take in the GPU's row of memory slices. NVML reports the same facts at run time; the catalogue
exists so that planning works offline (no GPU on the analyzer's machine) and is tested against
real ``nvidia-smi mig -lgip``/``-lgipp`` output (``tests/core/test_catalogue_real_hardware.py``).

GPU models are matched by PCI device ID first and by name second, because NVML names vary by
driver ("A100-SXM4-40GB" on R450, "NVIDIA A100-SXM4-40GB" later) while device IDs do not.

This module finds models; what a model is (:class:`GpuModel`, :class:`GiProfile` and their
parts) is defined in :mod:`migscope.core._gpu_models.gpu_model` and the models themselves in
:mod:`migscope.core._gpu_models`, which both come before the lookup. The rest of migscope
imports all of these names from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from migscope.core._gpu_models import MODELS
from migscope.core._gpu_models.gpu_model import (
    CatalogueError,
    GiProfile,
    GpuModel,
    UnknownGpuError,
    format_pci_device_id,
    parse_pci_device_id,
)


def all_models() -> tuple[GpuModel, ...]:
    """Every catalogued GPU model, in catalogue order."""
    return MODELS


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def model_for_pci(device_id: int | str) -> GpuModel | None:
    """The model with this PCI device ID, or None."""
    try:
        wanted = parse_pci_device_id(device_id)
    except CatalogueError:
        return None
    return next((m for m in all_models() if wanted in m.pci_device_ids), None)


def model_for_name(name: str) -> GpuModel | None:
    """The model NVML calls ``name`` (exact match, ignoring case and punctuation), or None."""
    wanted = _squash(name)
    return next((m for m in all_models() if wanted in {_squash(n) for n in m.names}), None)


def find_model(query: str | int, *, pci_device_id: int | str | None = None) -> GpuModel:
    """Find a model by catalogue key, NVML name or PCI device ID.

    With ``pci_device_id`` given (as the exporter has it from NVML), the device ID wins and
    ``query`` is only the fallback, because names vary by driver and device IDs do not.
    Keys match case-insensitively and without punctuation, and a unique prefix is enough:
    ``h200`` finds ``H200-141GB``.

    Raises:
        UnknownGpuError: nothing matches, or a prefix matches several models.
    """
    if pci_device_id is not None:
        by_pci = model_for_pci(pci_device_id)
        if by_pci is not None:
            return by_pci
    if isinstance(query, int):
        by_int = model_for_pci(query)
        if by_int is None:
            raise UnknownGpuError(
                f"no catalogued GPU has PCI device ID {format_pci_device_id(query)}"
            )
        return by_int
    wanted = _squash(query)
    if not wanted:
        raise UnknownGpuError("empty GPU model name")
    for model in all_models():
        if wanted == _squash(model.key):
            return model
    by_name = model_for_name(query)
    if by_name is not None:
        return by_name
    if re.fullmatch(r"(0x)?[0-9a-fA-F]{4}([0-9a-fA-F]{4})?", query.strip()):
        by_pci = model_for_pci(query)
        if by_pci is not None:
            return by_pci
    prefixed = [m for m in all_models() if _squash(m.key).startswith(wanted)]
    if len(prefixed) == 1:
        return prefixed[0]
    keys = ", ".join(m.key for m in (prefixed or all_models()))
    if prefixed:
        raise UnknownGpuError(f"GPU model {query!r} is ambiguous: {keys}")
    raise UnknownGpuError(f"unknown GPU model {query!r} (known: {keys})")


def iter_profiles(model: GpuModel) -> Iterator[GiProfile]:
    """Profiles of ``model`` from the largest to the smallest, the order planners want."""
    yield from sorted(
        model.profiles, key=lambda p: (-p.memory_slices, -p.compute_slices, p.media_extensions)
    )
