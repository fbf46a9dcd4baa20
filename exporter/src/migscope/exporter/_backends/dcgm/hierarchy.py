"""The GPUs and GPU instances DCGM knows, resolved against the catalogue.

DCGM numbers GPU-instance entities itself (``gpuId * maxGpcs + n``), not
as NVML GI ids, and reuses the numbers after MIG Manager re-partitions a GPU. The mapping to
NVML GI ids and profiles comes from ``dcgmGetGpuInstanceHierarchy``, read here; the backend
re-reads it every ``hierarchy_interval`` seconds and at once when an instance stops answering.

The MIG UUID that pods are attributed by: DCGM 4 answers ``DCGM_FI_DEV_UUID`` (54) of a GPU-I
entity with NVML's UUID of the instance's MIG device (``MIG-<uuid>``). When a DCGM answers
with something else, the slice is named in the pre-R470 form ``MIG-GPU-<uuid>/<gi>/<ci>``
(what DCGM itself writes into CUDA_VISIBLE_DEVICES), which identifies it but will not match
a kubelet's device IDs; docs/dcgm.md explains.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from migscope.exporter._backends.dcgm.bindings import Bindings
from migscope.exporter._backends.dcgm.fields import (
    F_NAME,
    F_NVML_INDEX,
    F_UUID,
    FE_GPU,
    FE_GPU_CI,
    FE_GPU_I,
    LIVE_DATA,
    SESSION_GONE,
    Values,
    error_code,
    text,
)
from migscope.exporter._backends.dcgm.values import latest
from migscope.exporter._backends.status import CycleErrors


@dataclass(frozen=True)
class DcgmInstance:
    """One GPU instance as the hierarchy describes it, resolved against the catalogue."""

    entity_id: int
    gi_id: int
    profile_id: int | None
    mig_uuid: str
    profile: str
    compute_slices: int
    memory_slices: int
    sm_count: int
    placement_size: int | None


@dataclass
class DcgmGpu(GpuIdentity):
    """A GPU by its DCGM id, its instances, and its last energy reading (kept across reads)."""

    gpu_id: int
    instances: list[DcgmInstance] = field(default_factory=list)
    energy_joules: float | None = None


def read_hierarchy(
    b: Bindings,
    handle: Any,
    errors: CycleErrors,
    previous: Sequence[DcgmGpu],
    driver: str,
) -> tuple[list[DcgmGpu], str]:
    """Every supported GPU with its GPU instances, as DCGM reports them now.

    Args:
        b: The loaded bindings.
        handle: The hostengine connection.
        errors: This cycle's error notes (identity fields that cannot be read are noted).
        previous: The GPUs of the last read: their energy readings carry over by UUID.
        driver: The driver version known so far (kept when DCGM reports none).

    Returns:
        The GPUs, and the driver version.

    Raises:
        DCGMError: DCGM refused the hierarchy, or the session is gone.
    """
    agent = b.agent
    gpu_ids = [int(g) for g in agent.dcgmGetAllSupportedDevices(handle)]
    hierarchy = agent.dcgmGetGpuInstanceHierarchy(handle)
    entries = [hierarchy.entityList[i] for i in range(int(hierarchy.count))]
    gis: dict[int, list[Any]] = {}
    cis: dict[int, list[int]] = {}
    for entry in entries:
        group = int(entry.entity.entityGroupId)
        if group == FE_GPU_I and int(entry.parent.entityGroupId) == FE_GPU:
            gis.setdefault(int(entry.parent.entityId), []).append(entry)
        elif group == FE_GPU_CI and int(entry.parent.entityGroupId) == FE_GPU_I:
            ci = int(entry.info.nvmlComputeInstanceId)
            cis.setdefault(int(entry.parent.entityId), []).append(ci)
    identity = _identity(b, handle, errors, gpu_ids, [e for v in gis.values() for e in v])
    old = {g.uuid: g for g in previous}
    gpus = []
    for gpu_id in gpu_ids:
        attrs = agent.dcgmGetDeviceAttributes(handle, gpu_id)
        driver = text(attrs.identifiers.driverVersion) or driver
        gpu = _describe_gpu(gpu_id, attrs, gis.get(gpu_id, []), cis, identity)
        before = old.get(gpu.uuid)
        if before is not None:
            gpu.energy_joules = before.energy_joules
        gpus.append(gpu)
    return gpus, driver


def _identity(
    b: Bindings, handle: Any, errors: CycleErrors, gpu_ids: Sequence[int], gi_entries: list[Any]
) -> Values:
    """Static identity fields read live: NVML index of GPUs, profile name and UUID of GIs."""
    values: Values = {}
    queries = [
        ([(FE_GPU, g) for g in gpu_ids], (F_NVML_INDEX,)),
        ([(FE_GPU_I, int(e.entity.entityId)) for e in gi_entries], (F_NAME, F_UUID)),
    ]
    for entities, fields in queries:
        if not entities:
            continue
        try:
            values.update(latest(b, handle, entities, fields, flags=LIVE_DATA))
        except b.structs.DCGMError as exc:
            if error_code(exc) in SESSION_GONE:
                raise
            errors.note("dcgm", f"identity fields: {exc}")
    return values


def _describe_gpu(
    gpu_id: int, attrs: Any, gi_entries: list[Any], cis: dict[int, list[int]], identity: Values
) -> DcgmGpu:
    ids = attrs.identifiers
    name = text(ids.deviceName)
    device_id = int(ids.pciDeviceId)
    try:
        model: GpuModel | None = find_model(name, pci_device_id=device_id)
    except CatalogueError:
        model = None
    index_value = identity.get((FE_GPU, gpu_id), {}).get(F_NVML_INDEX, (1, None))
    if index_value[0] == 0 and index_value[1] is not None:
        index = int(index_value[1])
    elif gi_entries:
        index = int(gi_entries[0].info.nvmlGpuIndex)
    else:
        index = gpu_id
    gpu = DcgmGpu(
        gpu_id=gpu_id,
        index=index,
        uuid=text(ids.uuid),
        name=name,
        pci_bus_id=text(ids.pciBusId),
        pci_device_id=f"0x{device_id:08X}",
        model=model,
        # ``settings`` came with c_dcgmDeviceAttributes_v3 (DCGM 3); GIs imply MIG anyway.
        mig_enabled=bool(int(getattr(getattr(attrs, "settings", None), "migModeEnabled", 0)))
        or bool(gi_entries),
    )
    for entry in gi_entries:
        eid = int(entry.entity.entityId)
        own = identity.get((FE_GPU_I, eid), {})
        gpu.instances.append(_describe_instance(gpu, entry, cis.get(eid, []), own))
    gpu.instances.sort(key=lambda i: i.gi_id)
    return gpu


def _describe_instance(
    gpu: DcgmGpu, entry: Any, ci_ids: list[int], own: dict[int, tuple[int, Any]]
) -> DcgmInstance:
    info = entry.info
    gi_id = int(info.nvmlInstanceId)
    profile_id = int(info.nvmlMigProfileId)
    slices = int(info.nvmlProfileSlices)
    status, name = own.get(F_NAME, (1, None))
    dcgm_name = normalise_profile_name(name) if status == 0 and name else None
    profile: GiProfile | None = None
    if gpu.model is not None:
        profile = gpu.model.profile_by_nvml_id(profile_id)
        if profile is None and dcgm_name and gpu.model.has_profile(dcgm_name):
            profile = gpu.model.profile(dcgm_name)
    status, uuid = own.get(F_UUID, (1, None))
    if status == 0 and isinstance(uuid, str) and uuid.startswith("MIG-"):
        mig_uuid = uuid
    else:
        # Not a MIG device UUID (an older DCGM, or a GI without compute instances): the
        # pre-R470 name of the slice, which DCGM itself uses for CUDA_VISIBLE_DEVICES.
        ci = f"/{min(ci_ids)}" if ci_ids else ""
        mig_uuid = f"MIG-{gpu.uuid}/{gi_id}{ci}"
    if profile is not None:
        return DcgmInstance(
            entity_id=int(entry.entity.entityId),
            gi_id=gi_id,
            profile_id=profile_id,
            mig_uuid=mig_uuid,
            profile=profile.name,
            compute_slices=profile.compute_slices,
            memory_slices=profile.memory_slices,
            sm_count=profile.sm_count,
            placement_size=profile.memory_slices,
        )
    return DcgmInstance(
        entity_id=int(entry.entity.entityId),
        gi_id=gi_id,
        profile_id=profile_id,
        mig_uuid=mig_uuid,
        profile=dcgm_name or f"profile-{profile_id}",
        compute_slices=slices,
        memory_slices=0,
        sm_count=0,
        placement_size=None,
    )
