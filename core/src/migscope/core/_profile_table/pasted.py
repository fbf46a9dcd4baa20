"""Profile tables from pasted ``nvidia-smi mig -lgip`` and ``-lgipp`` output, one per GPU."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from migscope.core._drivers import DriverVersion, DriverVersionError
from migscope.core._nvidia_smi import (
    ListedPlacements,
    ListedProfile,
    parse_lgip,
    parse_lgipp,
    parse_list,
)
from migscope.core._profile_table.table import (
    LGIP_TOLERANCE_MIB,
    ObservedProfile,
    ProfileTable,
    ProfileTableError,
)

_DRIVER = re.compile(r"Driver Version\s*:\s*(\d+(?:\.\d+){0,3})")


def driver_in_text(text: str) -> DriverVersion | None:
    """The driver version ``text`` states, if it states exactly one.

    Read from ``nvidia-smi``'s banner (``Driver Version: 560.35.03``) or from ``nvidia-smi
    -q`` (``Driver Version   : 560.35.03``).
    """
    found = {m.group(1) for m in _DRIVER.finditer(text)}
    if len(found) != 1:
        return None
    try:
        return DriverVersion.parse(found.pop())
    except DriverVersionError:
        return None


def _name_slices(name: str) -> int | None:
    match = re.match(r"^(\d+)g\.", name)
    return int(match.group(1)) if match else None


def _from_lgip(row: ListedProfile) -> ObservedProfile:
    return ObservedProfile(
        name=row.name,
        profile_id=row.profile_id,
        compute_slices=_name_slices(row.name),
        memory_mib=round(row.memory_gib * 1024),
        sm_count=row.sm_count,
        max_instances=row.total,
        copy_engines=row.copy_engines,
        decoders=row.decoders,
        encoders=row.encoders,
        jpegs=row.jpegs,
        ofas=row.ofas,
        memory_tolerance_mib=LGIP_TOLERANCE_MIB,
    )


def _merge(
    gpu: int, listed: Sequence[ListedProfile], placed: Sequence[ListedPlacements]
) -> tuple[ObservedProfile, ...]:
    """One GPU's ``-lgip`` and ``-lgipp`` rows joined on the profile id."""
    by_id: dict[int, ObservedProfile] = {}
    for row in listed:
        profile = _from_lgip(row)
        if by_id.get(row.profile_id, profile) != profile:
            raise ProfileTableError(
                f"GPU {gpu} lists profile id {row.profile_id} twice with different values; "
                "paste one GPU's output at a time"
            )
        by_id[row.profile_id] = profile
    for place in placed:
        known = by_id.get(place.profile_id) or ObservedProfile(None, place.profile_id)
        if known.placements is not None and (known.placements, known.placement_size) != (
            place.starts,
            place.size,
        ):
            raise ProfileTableError(
                f"GPU {gpu} lists the placements of profile id {place.profile_id} twice with "
                "different values; paste one GPU's output at a time"
            )
        by_id[place.profile_id] = dataclasses.replace(
            known, placements=place.starts, placement_size=place.size
        )
    return tuple(by_id.values())


def tables_from_nvidia_smi(
    text: str, *, source: str, driver: DriverVersion | None = None
) -> list[ProfileTable]:
    """The profile tables in a paste of ``nvidia-smi mig -lgip`` and/or ``-lgipp`` output.

    One table per GPU index, in index order. ``nvidia-smi -L`` lines in the same paste give
    the GPUs' names, and an ``nvidia-smi`` banner (``Driver Version: 560.35.03``) the driver
    when ``driver`` is not given.

    Returns:
        The tables; empty when the text holds no ``-lgip`` or ``-lgipp`` row.

    Raises:
        ProfileTableError: one GPU lists a profile twice with different values (two nodes'
            outputs pasted together).
    """
    listed = parse_lgip(text)
    placed = parse_lgipp(text)
    names = {device.index: device.name for device in parse_list(text)}
    found_driver = driver or driver_in_text(text)
    tables = []
    for gpu in sorted({r.gpu for r in listed} | {r.gpu for r in placed}):
        profiles = _merge(
            gpu, [r for r in listed if r.gpu == gpu], [r for r in placed if r.gpu == gpu]
        )
        tables.append(
            ProfileTable(
                source=source,
                gpu_name=names.get(gpu),
                pci_device_id=None,
                driver=found_driver,
                profiles=profiles,
                gpu_index=gpu,
            )
        )
    return tables
