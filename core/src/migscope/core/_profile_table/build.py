"""A GPU model built from the GPU's own profile table: the table wins over the catalogue."""

from __future__ import annotations

import dataclasses

from migscope.core._gpu_models.gpu_model import Evidence, GiProfile, GpuModel
from migscope.core._profile_table.compare import ENGINES
from migscope.core._profile_table.table import (
    ObservedProfile,
    ProfileTable,
    ProfileTableError,
    memory_slices_of,
)


def model_from_table(table: ProfileTable, base: GpuModel) -> GpuModel:
    """A :class:`GpuModel` whose profiles are the GPU's own, for checking layouts against it.

    The GPU's table wins over the built-in one: names, ids, sizes, counts and placements
    are the observed ones. ``base`` (the catalogued model of this GPU) gives what a profile
    table does not hold: the key, PCI IDs, architecture, framebuffer size, NVML indices
    (by id, else by name; -1 where unknown) and the placement grid.

    Raises:
        ProfileTableError: the table lacks what a model needs (names and counts from
            ``-lgip``, placements from ``-lgipp``), or is inconsistent.
    """
    where = f"GPU {table.gpu_index}'s table" if table.gpu_index is not None else "the table"
    if not table.profiles:
        raise ProfileTableError(f"{where} has no profiles")
    lacking = [p.label for p in table.profiles if not _complete(p)]
    if lacking:
        raise ProfileTableError(
            f"{where} cannot describe a GPU model: {_which(lacking, table)} no name, size or "
            "counts (add `nvidia-smi mig -lgip` output)"
        )
    unplaced = [p.label for p in table.profiles if p.placements is None]
    if unplaced:
        raise ProfileTableError(
            f"{where} cannot describe a GPU model: {_which(unplaced, table)} no placements "
            "(add `nvidia-smi mig -lgipp` output)"
        )
    off_grid = [
        p.label
        for p in table.profiles
        if memory_slices_of(base, p.placements or (), _int(p.placement_size)) is None
    ]
    if off_grid:
        raise ProfileTableError(
            f"{where} cannot describe a {base.key}: {_which(off_grid, table)} placements off "
            f"its grid of {base.placement_unit} driver units per memory slice"
        )
    profiles = tuple(_observed_profile(p, base) for p in table.profiles)
    names = (table.gpu_name, *base.names) if table.gpu_name else base.names
    try:
        return dataclasses.replace(
            base,
            names=tuple(dict.fromkeys(names)),
            compute_slices=max(p.compute_slices for p in profiles),
            memory_slices=max(s + p.memory_slices for p in profiles for s in p.placements),
            profiles=profiles,
            evidence=Evidence.MEASURED,
            source=f"observed from {table.source}",
            notes=f"the GPU's own profile table; built-in {base.key} entry: {base.source}",
        )
    except ValueError as exc:
        raise ProfileTableError(f"{where} cannot describe a GPU model: {exc}") from exc


def _which(labels: list[str], table: ProfileTable) -> str:
    """``"it has"`` when every profile lacks the thing, else the ones that do."""
    return "it has" if len(labels) == len(table.profiles) else f"{', '.join(labels)} have"


def _complete(observed: ObservedProfile) -> bool:
    needed = (
        observed.name,
        observed.compute_slices,
        observed.memory_mib,
        observed.sm_count,
        observed.max_instances,
        *(getattr(observed, field) for field in ENGINES),
    )
    return all(value is not None for value in needed)


def _observed_profile(observed: ObservedProfile, base: GpuModel) -> GiProfile:
    name = observed.name or ""  # model_from_table checked every field first
    slices = memory_slices_of(base, observed.placements or (), _int(observed.placement_size))
    starts, size = slices or ((), 0)
    twin = base.profile_by_nvml_id(observed.profile_id) or (
        base.profile(name) if base.has_profile(name) else None
    )
    return GiProfile(
        name=name,
        nvml_id=observed.profile_id,
        nvml_index=twin.nvml_index if twin is not None else -1,
        compute_slices=_int(observed.compute_slices),
        memory_slices=size,
        memory_mib=_int(observed.memory_mib),
        sm_count=_int(observed.sm_count),
        max_instances=_int(observed.max_instances),
        placements=starts,
        copy_engines=_int(observed.copy_engines),
        decoders=_int(observed.decoders),
        encoders=_int(observed.encoders),
        jpegs=_int(observed.jpegs),
        ofas=_int(observed.ofas),
        media_extensions=_attribute(name) in ("me", "me.all"),
        takes_all_media=_attribute(name) == "me.all",
    )


def _int(value: int | None) -> int:
    assert value is not None  # _complete checked every field
    return value


def _attribute(name: str) -> str:
    """The ``+attr`` of a profile name (``"me"``, ``"me.all"``, ``"gfx"``), or ``""``.

    ``+me`` and ``+me.all`` take the GPU's one set of media extensions; ``+me.all`` takes
    every media engine (see :class:`~migscope.core._catalogue.GiProfile`).
    """
    return name.partition("+")[2]
