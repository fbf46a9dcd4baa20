"""What the NVML backend knows of the GPUs between cycles, and how NVML's answers build it.

Enumeration is the slow part of NVML (``GetMigMode`` and
``GetMaxMigDeviceCount`` ≈150 µs each on a real H200, against ≈7 µs for memory), so its
result is cached and rebuilt only every ``enumerate_interval`` or when a MIG handle goes
stale. Rebuilding keeps what must survive it: the GPM samples of slices that remain (same GI
id and MIG UUID), the last energy reading of each GPU and its profile table (read once per GPU
and session, again when its MIG mode or layout changed: :mod:`.profiles`). A slice's profile
and placement come from the GI info (privileged) or else from the MIG device's name, readable
without privileges. On a MIG-enabled GPU every GPU-instance query NVML refuses with
NO_PERMISSION is recorded (:attr:`NvmlGpu.privilege_error`), so that the backend can say which
privilege the container lacks (:func:`.codes.privilege_message`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from migscope.core import (
    CatalogueError,
    GiProfile,
    GpuModel,
    find_model,
    normalise_profile_name,
)
from migscope.exporter._backends.base import GpuIdentity
from migscope.exporter._backends.nvml.codes import (
    ABSENT,
    GPU_IS_LOST,
    NO_PERMISSION,
    NOT_FOUND,
    SESSION_GONE,
    code_of,
    privilege_message,
    text,
)
from migscope.exporter._backends.nvml.gpm import GpmRing
from migscope.exporter._backends.nvml.profiles import read_profile_table
from migscope.exporter._snapshot import MigProfileInfo

_MAX_GPU_INSTANCES = 32
"""Entries of the array handed to ``nvmlDeviceGetGpuInstances``: it must hold every instance
of the profile (nvml.h), at most 7 on any MIG GPU so far."""


@dataclass
class NvmlSlice:
    """One MIG slice (GPU instance) by its MIG device handle, with its GPM samples."""

    gi_id: int
    handle: Any
    uuid: str
    profile: str
    profile_id: int | None
    start: int | None
    size: int | None
    compute_slices: int
    memory_slices: int
    sm_count: int
    gpm: GpmRing | None = None


@dataclass
class NvmlGpu(GpuIdentity):
    """One GPU by its NVML handle, its slices, GPM samples, last energy reading, profiles."""

    handle: Any
    gpm_supported: bool
    slices: list[NvmlSlice] = field(default_factory=list)
    gpm: GpmRing | None = None
    energy_joules: float | None = None
    profiles: tuple[MigProfileInfo, ...] = ()
    profiles_error: str | None = None
    """Why the last read of the profile table failed (it is read again next enumeration)."""
    profiles_refused: frozenset[str] = frozenset()
    """NVML calls that said NO_PERMISSION while the profile table was read (kept with it)."""
    minor: int | None = None
    """``/dev/nvidia<minor>`` (``nvmlDeviceGetMinorNumber``): NVIDIA's DRA driver names GPUs by
    it. None where NVML does not say."""
    minor_error: str | None = None
    """Why the minor number could not be read (an error, not an absence): DRA devices of this
    GPU cannot be attributed until it is read again, next enumeration."""
    slices_refused: frozenset[str] = frozenset()
    """NVML calls that said NO_PERMISSION while this enumeration listed the GPU instances."""

    @property
    def privilege_error(self) -> str | None:
        """Which privilege is missing (one line), on a MIG GPU whose GI queries NVML refused.

        None otherwise. With MIG disabled a refused placement query only leaves the
        placements unknown, which is not a fault.
        """
        refused = self.profiles_refused | self.slices_refused
        if not self.mig_enabled or not refused:
            return None
        return privilege_message(refused)


def free_gpm(gpu: NvmlGpu) -> None:
    """Free the GPM samples of a GPU and of its slices."""
    owners: list[NvmlGpu | NvmlSlice] = [gpu, *gpu.slices]
    for owner in owners:
        if owner.gpm is not None:
            owner.gpm.free()
            owner.gpm = None


class Enumerator:
    """Builds :class:`NvmlGpu` values from NVML.

    Args:
        nvml: The module-like NVML object.
        call: The backend's NVML call wrapper (it counts calls).
    """

    def __init__(self, nvml: Any, call: Callable[..., Any]) -> None:
        self._nvml = nvml
        self._call = call

    def gpu(self, index: int, old: dict[str, NvmlGpu], *, layout_changed: bool = False) -> NvmlGpu:
        """The GPU at NVML ``index``, taking over what ``old`` (by UUID) knew of it.

        Args:
            index: NVML index.
            old: What the last enumeration built, by UUID.
            layout_changed: The GPU is re-enumerated because its layout changed (a stale
                MIG handle): its profile table is read again rather than taken over.

        Raises:
            NVMLError: NVML could not describe the GPU.
        """
        nvml, call = self._nvml, self._call
        handle = call(nvml.nvmlDeviceGetHandleByIndex, index)
        uuid = text(call(nvml.nvmlDeviceGetUUID, handle))
        name = text(call(nvml.nvmlDeviceGetName, handle))
        pci = call(nvml.nvmlDeviceGetPciInfo, handle)
        device_id = int(pci.pciDeviceId)
        try:
            model: GpuModel | None = find_model(name, pci_device_id=device_id)
        except CatalogueError:
            model = None
        mig_mode = self._mig_mode(handle)
        mig_enabled = bool(mig_mode)
        gpm_supported = self._gpm_supported(handle)
        gpu = NvmlGpu(
            index=index,
            handle=handle,
            uuid=uuid,
            name=name,
            pci_bus_id=text(pci.busId),
            pci_device_id=f"0x{device_id:08X}",
            model=model,
            mig_enabled=mig_enabled,
            gpm_supported=gpm_supported,
        )
        gpu.minor, gpu.minor_error = self._minor(handle)
        previous = old.get(uuid)
        same_mode = previous is not None and previous.mig_enabled == mig_enabled
        if previous is not None:
            gpu.energy_joules = previous.energy_joules
            if same_mode:
                gpu.gpm, previous.gpm = previous.gpm, None
        if mig_mode is not None:  # a GPU that is not MIG-capable has no profile to ask for
            reuse = same_mode and not layout_changed
            # A MIG GPU whose table NVML partly refused is read again, so that privileges
            # granted later (or a flaky refusal) clear the fault instead of latching it.
            refused_before = previous is not None and mig_enabled and previous.profiles_refused
            if (
                previous is not None
                and reuse
                and previous.profiles_error is None
                and not refused_before
            ):
                gpu.profiles = previous.profiles
                gpu.profiles_refused = previous.profiles_refused
            else:
                self._read_profiles(gpu, previous)
        if mig_enabled:
            gpu.slices = self._slices(gpu, previous)
        if previous is not None:
            free_gpm(previous)
        return gpu

    def _read_profiles(self, gpu: NvmlGpu, previous: NvmlGpu | None) -> None:
        """Read the GPU's profile table; on a failure keep the last one and say why.

        The table is metadata: a failing read must not cost the GPU its readings, so only a
        lost GPU or session propagates; anything else is noted and read again next time.
        """
        refused: set[str] = set()
        try:
            gpu.profiles = read_profile_table(self._nvml, self._call, gpu.handle, refused)
            gpu.profiles_refused = frozenset(refused)
        except self._nvml.NVMLError as exc:
            if code_of(exc) in (GPU_IS_LOST, *SESSION_GONE):
                raise
            gpu.profiles = previous.profiles if previous is not None else ()
            gpu.profiles_error = f"MIG profile table: {exc}"

    def _minor(self, handle: Any) -> tuple[int | None, str | None]:
        """The GPU's minor number, and why it could not be read (None when it was, or absent)."""
        try:
            return int(self._call(self._nvml.nvmlDeviceGetMinorNumber, handle)), None
        except self._nvml.NVMLError as exc:
            code = code_of(exc)
            if code in (GPU_IS_LOST, *SESSION_GONE):
                raise
            if code in ABSENT:
                return None, None
            return None, f"minor number (for DRA attribution): {exc}"

    def _mig_mode(self, handle: Any) -> bool | None:
        """MIG enabled (True) or disabled (False); None on a GPU that is not MIG-capable."""
        try:
            current, _pending = self._call(self._nvml.nvmlDeviceGetMigMode, handle)
        except self._nvml.NVMLError as exc:
            if code_of(exc) in ABSENT:
                return None
            raise
        return bool(current == self._nvml.NVML_DEVICE_MIG_ENABLE)

    def _gpm_supported(self, handle: Any) -> bool:
        try:
            support = self._call(self._nvml.nvmlGpmQueryDeviceSupport, handle)
        except self._nvml.NVMLError as exc:
            if code_of(exc) in ABSENT:
                return False  # pre-Hopper, or a driver without GPM (FUNCTION_NOT_FOUND)
            raise  # anything else is a real failure: the GPU is reported, retried later
        return bool(support.isSupportedDevice)

    def _slices(self, gpu: NvmlGpu, previous: NvmlGpu | None) -> list[NvmlSlice]:
        nvml, call = self._nvml, self._call
        reuse = {(s.gi_id, s.uuid): s for s in previous.slices} if previous else {}
        slices: dict[int, NvmlSlice] = {}
        refused: set[str] = set()
        for i in range(call(nvml.nvmlDeviceGetMaxMigDeviceCount, gpu.handle)):
            try:
                mig = call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, gpu.handle, i)
            except nvml.NVMLError as exc:
                if code_of(exc) == NOT_FOUND:
                    continue  # an empty MIG device slot
                raise
            gi_id = int(call(nvml.nvmlDeviceGetGpuInstanceId, mig))
            if gi_id in slices:
                continue  # a second compute instance of the same GPU instance
            uuid = text(call(nvml.nvmlDeviceGetUUID, mig))
            s = self._describe_slice(gpu, gi_id, mig, uuid, refused)
            kept = reuse.pop((gi_id, uuid), None)
            if kept is not None:
                s.gpm, kept.gpm = kept.gpm, None
            slices[gi_id] = s
        if not slices:
            self._probe_instances(gpu, refused)
        gpu.slices_refused = frozenset(refused)
        return sorted(
            slices.values(), key=lambda s: (s.start if s.start is not None else 99, s.gi_id)
        )

    def _probe_instances(self, gpu: NvmlGpu, refused: set[str]) -> None:
        """No MIG device on a MIG-enabled GPU: none exist, or NVML hides them from us.

        A caller without the MIG monitor capability may see no MIG device at all (unverified
        on a real node: docs/install.md#privileges), which looks like a GPU with no GPU
        instances. ``nvmlDeviceGetGpuInstances`` (privileged, nvml.h) tells the two apart; it
        is asked only here, so a GPU with slices costs no extra call.
        """
        if not gpu.profiles:
            return  # no profile id to ask with; a failed table read is reported already
        nvml = self._nvml
        array = (nvml.c_nvmlGpuInstance_t * _MAX_GPU_INSTANCES)()
        count = ctypes.c_uint(_MAX_GPU_INSTANCES)
        try:
            self._call(
                nvml.nvmlDeviceGetGpuInstances,
                gpu.handle,
                gpu.profiles[0].profile_id,
                array,
                ctypes.byref(count),
            )
        except nvml.NVMLError as exc:
            code = code_of(exc)
            if code == NO_PERMISSION:
                refused.add("nvmlDeviceGetGpuInstances")
            elif code in (GPU_IS_LOST, *SESSION_GONE):
                raise
            # anything else: this probe only looks for NO_PERMISSION

    def _describe_slice(
        self, gpu: NvmlGpu, gi_id: int, mig: Any, uuid: str, refused: set[str]
    ) -> NvmlSlice:
        """Profile and placement of a GI: from GI info (privileged) or the MIG device name."""
        nvml, call = self._nvml, self._call
        profile_id: int | None = None
        start: int | None = None
        size: int | None = None
        profile: GiProfile | None = None
        name: str | None = None
        try:
            info = call(
                nvml.nvmlGpuInstanceGetInfo,
                call(nvml.nvmlDeviceGetGpuInstanceById, gpu.handle, gi_id),
            )
            profile_id, start, size = (
                int(info.profileId),
                int(info.placement.start),
                int(info.placement.size),
            )
            if gpu.model is not None:
                profile = gpu.model.profile_by_nvml_id(profile_id)
                start, size = _in_memory_slices(gpu.model, start, size)
        except nvml.NVMLError as exc:
            code = code_of(exc)
            if code == NO_PERMISSION:
                refused.add("nvmlDeviceGetGpuInstanceById")
            if code not in (*ABSENT, NOT_FOUND):
                raise
        if profile is None:
            # "NVIDIA H200 MIG 3g.71gb" -> "3g.71gb": readable without privileges.
            device_name = text(call(nvml.nvmlDeviceGetName, mig))
            name = normalise_profile_name(device_name.rsplit(" MIG ", 1)[-1])
            if gpu.model is not None and gpu.model.has_profile(name):
                profile = gpu.model.profile(name)
        if profile is not None:
            return NvmlSlice(
                gi_id,
                mig,
                uuid,
                profile.name,
                profile.nvml_id if profile_id is None else profile_id,
                start,
                size,
                profile.compute_slices,
                profile.memory_slices,
                profile.sm_count,
            )
        compute = int(name.split("g.", 1)[0].split(".")[-1]) if name and "g." in name else 0
        return NvmlSlice(
            gi_id, mig, uuid, name or "unknown", profile_id, start, size, compute, size or 0, 0
        )


def _in_memory_slices(model: GpuModel, start: int, size: int) -> tuple[int | None, int | None]:
    """An NVML placement in memory slices, what ``migscope_mig_info`` and the planner use.

    NVML counts in the driver's units, which are memory slices on most GPUs and thirds of one
    on RTX PRO 6000 (``{0,3,6,9}:3``); a span off the model's grid is unknown, not guessed.
    """
    try:
        return model.slices_from_nvml(start, size)
    except CatalogueError:
        return None, None
