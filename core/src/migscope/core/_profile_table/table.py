"""What a GPU's own profile table holds, and the shape of a difference from the catalogue."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from migscope.core._drivers import DriverVersion
from migscope.core._errors import UserError
from migscope.core._gpu_models.gpu_model import CatalogueError, GpuModel

Severity = Literal["error", "warning", "info"]

LGIP_TOLERANCE_MIB = 6
"""``-lgip`` prints memory in GiB with two decimals: a printed figure is the true size ±5.12
MiB, so sizes read from it compare equal within 6 MiB."""


class ProfileTableError(UserError, ValueError):
    """A profile table that cannot be read or cannot describe a GPU model."""


@dataclass(frozen=True)
class ObservedProfile:
    """One GPU-instance profile as the GPU reports it.

    Every field but the id may be unknown: ``-lgip`` has no placements and ``-lgipp`` has
    only ids and placements. Placements are in the GPU's own units, as ``-lgipp`` and NVML
    print them (RTX PRO 6000 counts on a 12-unit grid); :func:`compare` converts them with
    the model's ``slices_from_nvml``.

    Attributes:
        name: Profile name without ``"MIG "`` (``"3g.71gb"``), or None.
        profile_id: NVML profile id (``-lgip``'s ID column).
        compute_slices: The ``Ng`` of the name (NVML's ``sliceCount``), or None.
        memory_mib: Memory size in MiB, or None; from ``-lgip`` it is the printed GiB in MiB.
        sm_count: SMs of an instance, or None.
        max_instances: ``-lgip``'s Total (NVML's ``instanceCount``), or None.
        placements: Allowed starts, or None when the source had no placements.
        placement_size: The span of each placement, or None.
        copy_engines, decoders, encoders, jpegs, ofas: Engine counts, or None.
        memory_tolerance_mib: How far ``memory_mib`` may be from the true size (0 from NVML,
            :data:`LGIP_TOLERANCE_MIB` from ``-lgip``).
    """

    name: str | None
    profile_id: int
    compute_slices: int | None = None
    memory_mib: int | None = None
    sm_count: int | None = None
    max_instances: int | None = None
    placements: tuple[int, ...] | None = None
    placement_size: int | None = None
    copy_engines: int | None = None
    decoders: int | None = None
    encoders: int | None = None
    jpegs: int | None = None
    ofas: int | None = None
    memory_tolerance_mib: int = 0

    @property
    def label(self) -> str:
        """How messages name the profile: ``"3g.71gb (id 9)"`` or ``"id 9"``."""
        return f"{self.name} (id {self.profile_id})" if self.name else f"id {self.profile_id}"


@dataclass(frozen=True)
class ProfileTable:
    """One GPU's MIG profiles as the GPU itself reports them.

    Attributes:
        source: Where the table comes from, for humans (``"nvidia-smi output in x.txt"``).
        gpu_name: NVML's device name, when the source gives it.
        pci_device_id: Packed ``0xDDDDVVVV``, when the source gives it.
        driver: The driver that reported the table, when known.
        profiles: The profiles, in the order the source lists them.
        gpu_index: The GPU's index on its node, when the source gives it.
    """

    source: str
    gpu_name: str | None
    pci_device_id: int | None
    driver: DriverVersion | None
    profiles: tuple[ObservedProfile, ...]
    gpu_index: int | None = None

    @property
    def has_placements(self) -> bool:
        """Whether every profile has its placements (``-lgipp`` or NVML)."""
        return bool(self.profiles) and all(p.placements is not None for p in self.profiles)

    @property
    def has_details(self) -> bool:
        """Whether every profile has its name, size and counts (``-lgip`` or NVML)."""
        return bool(self.profiles) and all(p.name is not None for p in self.profiles)

    def same_profiles(self, other: ProfileTable) -> bool:
        """Whether ``other`` lists exactly the same profiles (GPUs of one node usually do)."""
        return self.profiles == other.profiles


@dataclass(frozen=True)
class Difference:
    """One way the GPU's table and the catalogue disagree.

    Attributes:
        severity: ``"error"`` for identity or placement (name, id, slices, SMs, instance
            limit, placements, engines); ``"warning"`` for memory outside every known
            driver's size, or a catalogued profile the GPU does not list; ``"info"`` for
            memory within the known variance and names that depend on the driver.
        profile: The profile concerned (``"3g.71gb (id 9)"``).
        field: What differs: ``name``, ``id``, ``compute_slices``, ``sm_count``,
            ``max_instances``, ``placements``, ``memory_mib``, an engine, or ``listed``.
        observed: The GPU's value as text, or None.
        catalogue: The catalogue's value as text, or None.
        message: One line saying all of it.
    """

    severity: Severity
    profile: str
    field: str
    observed: str | None
    catalogue: str | None
    message: str

    def as_dict(self) -> dict[str, str | None]:
        """The JSON shape ``migscope catalog check -o json`` prints."""
        return dataclasses.asdict(self)


def memory_slices_of(
    model: GpuModel, starts: Iterable[int], size: int
) -> tuple[tuple[int, ...], int] | None:
    """Placements in the GPU's units (``-lgipp``, NVML) as ``model``'s memory slices.

    None when a span is off the model's grid (RTX PRO 6000 counts 3 driver units per memory
    slice; see :meth:`~migscope.core._catalogue.GpuModel.slices_from_nvml`).
    """
    try:
        spans = [model.slices_from_nvml(start, size) for start in starts]
        slices = model.slices_from_nvml(0, size)[1]
    except CatalogueError:
        return None
    return tuple(start for start, _ in spans), slices


def placements_text(starts: Iterable[int], size: int) -> str:
    """Placements the way ``-lgipp`` prints them: ``{0,4}:4``."""
    return "{" + ",".join(map(str, starts)) + f"}}:{size}"
