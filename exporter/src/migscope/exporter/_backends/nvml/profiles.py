"""The GPU's own GPU-instance profile table, read from NVML (``nvidia-smi mig -lgip/-lgipp``).

The table is what the driver really offers (names, memory sizes and
placements differ by driver branch), so the exporter publishes it and the analyzer prefers it
to migscope's catalogue. Reading it is slow — ``nvmlDeviceGetGpuInstanceProfileInfo`` took
≈500 µs per call on a real H200 (tests/fixtures/h200/nvml_probe_full.json), and a GPU has up
to 18 profile indices — and it does not change while the driver stays loaded, so the
enumeration reads it once per GPU and session, again only when the GPU's MIG mode or layout
changed, and never in a sampling cycle.

NVML semantics followed (H200, driver 580, MIG disabled; tests/fixtures/h200/):

- Profile info is asked for by ``NVML_GPU_INSTANCE_PROFILE_*`` *index* and answers with the
  profile *id*. An index the GPU lacks is NOT_SUPPORTED; an index past the driver's last is
  INVALID_ARGUMENT. Both are skipped. Indices are read up to pynvml's
  ``NVML_GPU_INSTANCE_PROFILE_COUNT`` and beyond it until the driver says INVALID_ARGUMENT,
  so a driver newer than nvidia-ml-py still shows its new profiles.
- Both calls answer with MIG disabled, so a GPU's table is known before MIG is enabled.
- ``nvmlDeviceGetGpuInstancePossiblePlacements`` (the C ``_v2``) writes *every* placement and
  sets ``count``, whatever ``count`` held (a real H200 wrote 7 with count 0 or 2): the array
  handed to it is always large enough for any GPU. It needs privileges: NO_PERMISSION leaves
  the placements unknown (empty), not the profile, and is recorded in ``refused`` (the
  enumeration reports it on MIG-enabled GPUs: :func:`.codes.privilege_message`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from migscope.core import normalise_profile_name
from migscope.exporter._backends.nvml.codes import (
    ABSENT,
    INVALID_ARGUMENT,
    NO_PERMISSION,
    code_of,
    text,
)
from migscope.exporter._snapshot import MigProfileInfo

MAX_PLACEMENTS = 32
"""Entries of the placement array: NVML fills it without looking at ``count``. A GPU has 8
memory slices (so at most 8 starts); the margin costs 256 bytes."""

_MAX_INDEX = 64
"""Stop looking for profile indices here even if a driver never says INVALID_ARGUMENT."""


def read_profile_table(
    nvml: Any, call: Callable[..., Any], handle: Any, refused: set[str] | None = None
) -> tuple[MigProfileInfo, ...]:
    """Every GPU-instance profile ``handle``'s driver offers, in profile-index order.

    Args:
        nvml: The module-like NVML object.
        call: The backend's NVML call wrapper (it counts calls).
        handle: A physical GPU handle.
        refused: Gets the name of every NVML call that answered NO_PERMISSION.

    Raises:
        NVMLError: anything but "this index does not exist here" (a lost GPU, a lost
            session); the enumeration reports the GPU and tries again later.
    """
    seen: dict[int, MigProfileInfo] = {}
    known = int(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT)
    for index in range(_MAX_INDEX):
        try:
            info = call(nvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, index)
        except nvml.NVMLError as exc:
            code = code_of(exc)
            if code == INVALID_ARGUMENT and index >= known:
                break  # past the driver's last index
            if code == NO_PERMISSION and refused is not None:
                refused.add("nvmlDeviceGetGpuInstanceProfileInfo")
            if code == INVALID_ARGUMENT or code in ABSENT:
                continue  # an index this GPU (or driver) does not have
            raise
        profile_id = int(info.id)
        if profile_id in seen:
            continue  # two indices naming one profile: list it once
        placements = _placements(nvml, call, handle, profile_id, refused)
        seen[profile_id] = MigProfileInfo(
            profile=normalise_profile_name(text(info.name)),
            profile_id=profile_id,
            compute_slices=int(info.sliceCount),
            memory_mib=int(info.memorySizeMB),
            sm_count=int(info.multiprocessorCount),
            max_instances=int(info.instanceCount),
            placements=tuple(sorted(start for start, _size in placements)),
            placement_size=placements[0][1] if placements else None,
            copy_engines=int(info.copyEngineCount),
            decoders=int(info.decoderCount),
            encoders=int(info.encoderCount),
            jpegs=int(info.jpegCount),
            ofas=int(info.ofaCount),
        )
    return tuple(seen.values())


def _placements(
    nvml: Any, call: Callable[..., Any], handle: Any, profile_id: int, refused: set[str] | None
) -> list[tuple[int, int]]:
    """``(start, size)`` of every possible placement; empty when NVML will not say."""
    array = (nvml.c_nvmlGpuInstancePlacement_t * MAX_PLACEMENTS)()
    count = ctypes.c_uint(MAX_PLACEMENTS)
    try:
        call(
            nvml.nvmlDeviceGetGpuInstancePossiblePlacements,
            handle,
            profile_id,
            array,
            ctypes.byref(count),
        )
    except nvml.NVMLError as exc:
        code = code_of(exc)
        if code == NO_PERMISSION and refused is not None:
            refused.add("nvmlDeviceGetGpuInstancePossiblePlacements")
        if code in (*ABSENT, INVALID_ARGUMENT):
            return []  # unprivileged, or a profile without placements on this driver
        raise
    found = min(int(count.value), MAX_PLACEMENTS)
    return [(int(array[i].start), int(array[i].size)) for i in range(found)]
