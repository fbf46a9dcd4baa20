"""The small interface every hardware backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from migscope.core import GpuModel, UserError
from migscope.exporter._snapshot import CollectorStatus, GpuReading


class BackendError(UserError):
    """The backend cannot read anything at all (library missing, init failed).

    The message is one line meant for the log and ``/healthz``. Per-GPU and per-value
    failures are not raised: they are reported in :attr:`BackendReading.statuses`.
    """


@dataclass(frozen=True)
class BackendReading:
    """One cycle's readings.

    Attributes:
        gpus: Every GPU that could be read, with its slices. A GPU that failed (lost, or a
            layout change mid-read) is left out of this cycle rather than half-reported.
        driver_version: Driver version string, for ``migscope_gpu_info``.
        statuses: One entry per collector the backend runs (``nvml``, ``gpm``, ``energy``,
            ...): did it work this cycle, how long it took, the first error in one line.
    """

    gpus: tuple[GpuReading, ...]
    driver_version: str
    statuses: tuple[CollectorStatus, ...]


class Backend(Protocol):
    """What the sampler needs from a hardware backend."""

    name: str

    def open(self) -> None:
        """Start the library session; raise :class:`BackendError` if that is impossible."""

    def read(self, *, with_energy: bool) -> BackendReading:
        """Read every GPU and slice once; ``with_energy`` also reads the (slow) energy counter.

        Raises:
            BackendError: nothing could be read (the session is gone); the sampler then
                reopens the backend on a later cycle.
        """
        ...

    def close(self) -> None:
        """End the session and free what it holds; safe to call twice."""


@dataclass
class GpuIdentity:
    """What a backend knows of a GPU between cycles, and how it becomes a reading.

    Backends subclass this for their per-GPU state (handles, entity ids), so the mapping to a
    :class:`GpuReading` — names, catalogue model, slice capacity when MIG is on — is one code.
    """

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    pci_device_id: str
    model: GpuModel | None
    mig_enabled: bool

    def reading(self, **values: Any) -> GpuReading:
        """This GPU's reading with the sampled ``values`` (power, memory, instances, ...)."""
        capacity = self.model if self.mig_enabled else None
        return GpuReading(
            index=self.index,
            uuid=self.uuid,
            name=self.name,
            model=self.model.key if self.model else None,
            pci_bus_id=self.pci_bus_id,
            pci_device_id=self.pci_device_id,
            mig_enabled=self.mig_enabled,
            compute_slices=capacity.compute_slices if capacity else None,
            memory_slices=capacity.memory_slices if capacity else None,
            **values,
        )
