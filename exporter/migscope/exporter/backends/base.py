"""The small interface every hardware backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from migscope.exporter.model import CollectorStatus, GpuReading

__all__ = ["Backend", "BackendError", "BackendReading"]


class BackendError(RuntimeError):
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
