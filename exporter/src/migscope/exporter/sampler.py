"""The sampler: read the hardware at a fixed pace, publish immutable snapshots.

One daemon thread calls the backend every ``interval`` seconds (the NVML backend recomputes
GPM activity each cycle over a window of its own, ``gpm_interval``, that ends at the cycle:
the interval is how stale a value can be, the window what it averages), adds what the
backend cannot know — each slice's estimated power share and its integral, the estimated
energy — and swaps the new :class:`Snapshot` in with a single reference assignment. Scrapes
read that reference and nothing else.

If the backend fails entirely (NVML gone), the snapshot keeps no GPUs and marks the collector
failed; the next cycle tries to reopen the backend. The thread never dies of an exception.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from migscope.exporter.backends.base import Backend, BackendError, BackendReading
from migscope.exporter.model import CollectorStatus, GpuReading, MigReading, Snapshot
from migscope.exporter.power import SliceLoad, split_power

__all__ = ["Sampler"]

log = logging.getLogger(__name__)


class Sampler:
    """Drive a backend on a schedule and keep the latest snapshot.

    Args:
        backend: The hardware backend.
        interval: Seconds between samples; also how often GPM activity is refreshed (NVML
            needs ≥ 0.1 s between two GPM samples).
        energy_interval: Seconds between reads of the energy counter (≈3 ms per GPU).
        idle_watts: Idle board power per GPU for the power split; by default the lowest
            power seen on that GPU since start (see :mod:`migscope.exporter.power`).
        clock: Monotonic seconds (injectable).
        wall: Unix seconds for snapshot timestamps (injectable).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        interval: float = 1.0,
        energy_interval: float = 30.0,
        idle_watts: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if interval < 0.1:
            raise ValueError(f"interval must be >= 0.1 s (GPM needs it), got {interval}")
        self._backend = backend
        self._interval = interval
        self._energy_interval = energy_interval
        self._idle_watts = idle_watts
        self._clock = clock
        self._wall = wall
        self._latest: Snapshot | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._energy_due = 0.0
        self._min_power: dict[str, float] = {}
        self._slice_energy: dict[tuple[str, int, str], float] = {}
        self._last_cycle: float | None = None
        self._last_error: str | None = None
        self._backend_down_since: float | None = None
        self.cycles = 0

    # -- public ------------------------------------------------------------------------------

    def latest(self) -> Snapshot | None:
        """The newest snapshot (None before the first cycle). Never blocks."""
        return self._latest

    def run_once(self) -> Snapshot:
        """Sample once, publish and return the snapshot (also used by ``--once``)."""
        now = self._clock()
        with_energy = now >= self._energy_due
        started = self._clock()
        try:
            reading = self._backend.read(with_energy=with_energy)
        except BackendError as exc:
            snapshot = self._failed(str(exc), self._clock() - started)
        else:
            if with_energy:
                self._energy_due = now + self._energy_interval
            snapshot = self._finish(reading, now)
            self._note_recovered()
        self._latest = snapshot
        self.cycles += 1
        return snapshot

    def start(self) -> None:
        """Start the sampling thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="migscope-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread, wait for it, and close the backend."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._backend.close()

    # -- internals ---------------------------------------------------------------------------

    def _loop(self) -> None:
        next_at = self._clock()
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # a bug must not silently end sampling
                log.exception("sampling cycle failed")
            next_at += self._interval
            delay = next_at - self._clock()
            if delay < 0:  # fell behind (slow NVML): restart the grid, never burst
                next_at = self._clock()
                delay = 0.0
            self._stop.wait(delay)

    def _failed(self, error: str, duration: float) -> Snapshot:
        if error != self._last_error:
            log.error("backend %s: %s", self._backend.name, error)
            self._last_error = error
        previous = self._latest
        last = None
        if previous is not None:
            name = self._backend.name
            last = next((c.last_success for c in previous.collectors if c.name == name), None)
        status = CollectorStatus(self._backend.name, False, duration, last, error)
        return Snapshot(taken_at=self._wall(), collectors=(status,))

    def _note_recovered(self) -> None:
        if self._last_error is not None:
            log.info("backend %s recovered", self._backend.name)
            self._last_error = None

    def _finish(self, reading: BackendReading, now: float) -> Snapshot:
        """Add power shares and estimated energy to the backend's readings."""
        dt = 0.0 if self._last_cycle is None else max(now - self._last_cycle, 0.0)
        self._last_cycle = now
        seen: set[tuple[str, int, str]] = set()
        gpus = tuple(self._with_power(gpu, dt, seen) for gpu in reading.gpus)
        for key in list(self._slice_energy):
            if key not in seen:  # slice destroyed: its estimate starts again if it returns
                del self._slice_energy[key]
        return Snapshot(
            taken_at=self._wall(),
            driver_version=reading.driver_version,
            gpus=gpus,
            collectors=reading.statuses,
        )

    def _with_power(
        self, gpu: GpuReading, dt: float, seen: set[tuple[str, int, str]]
    ) -> GpuReading:
        if not gpu.instances:
            return gpu
        if gpu.power_watts is None:
            for inst in gpu.instances:
                seen.add((gpu.uuid, inst.gpu_instance_id, inst.mig_uuid))
            return gpu
        idle = self._idle_watts
        if idle is None:
            idle = min(self._min_power.get(gpu.uuid, gpu.power_watts), gpu.power_watts)
            self._min_power[gpu.uuid] = idle
        loads = [
            SliceLoad(
                i.memory_slices,
                i.sm_count,
                None if i.activity is None else i.activity.graphics,
            )
            for i in gpu.instances
        ]
        shares = split_power(gpu.power_watts, idle, loads)
        instances: list[MigReading] = []
        for inst, watts in zip(gpu.instances, shares, strict=True):
            key = (gpu.uuid, inst.gpu_instance_id, inst.mig_uuid)
            seen.add(key)
            energy = self._slice_energy.get(key, 0.0) + watts * dt
            self._slice_energy[key] = energy
            instances.append(inst.with_estimates(watts, energy))
        return replace(gpu, instances=tuple(instances))
