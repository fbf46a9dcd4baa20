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
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from migscope.exporter._backends import Backend, BackendError, BackendReading
from migscope.exporter._slice_power import SliceLoad, split_power
from migscope.exporter._snapshot import (
    ActiveSeconds,
    Activity,
    CollectorStatus,
    GpuReading,
    MigReading,
    Snapshot,
)

log = logging.getLogger(__name__)


_INTEGRATED = ("graphics", "sm_active", "tensor", "dram")
"""The :class:`Activity` ratios also published as ``*_active_seconds_total`` counters."""

MATCH_SLACK = 0.05
"""Seconds a window's start may miss a cycle the sampler recorded and still be taken for it
(the GPM reader's SLACK: the backend reads its clock a little after the sampler does)."""

_HISTORY_MAX = 1024
"""Cycles remembered per GPU or slice at most (the window's start must be among them)."""


class ActiveIntegral:
    """One GPU's or slice's activity integrals (seconds of full activity since first seen).

    GPM publishes a mean over a window ``[t - w, t]`` that slides every cycle, not the mean
    since the last cycle; summing ``ratio x cycle`` would integrate a moving average (late and
    smeared by ``w``). Instead the integral at each cycle ``t`` is the integral at the cycle
    the window started from, ``t - w`` (a cycle of this owner, recorded here), plus
    ``ratio x w``: exact, because GPM's ratio over a window is the hardware's own count of
    active time in it. A window whose start is not a recorded cycle (the backend's window
    does not say, as DCGM's; a cycle missed) adds ``ratio x (time since the last refresh)``
    instead. The integral never decreases (a rounding that would lower it is held flat).
    """

    __slots__ = ("_history", "_last", "_seen", "_totals")

    def __init__(self, now: float) -> None:
        self._totals = [0.0] * len(_INTEGRATED)
        self._seen = [False] * len(_INTEGRATED)
        self._history: deque[tuple[float, tuple[float, ...]]] = deque(maxlen=_HISTORY_MAX)
        self._history.append((now, tuple(self._totals)))
        self._last: Activity | None = None

    def update(self, activity: Activity | None, now: float) -> ActiveSeconds | None:
        """Add this cycle's window (if refreshed) and return the integrals (None: never known)."""
        if activity is None:
            # No window this cycle (a new GPM ring's first sample, a failed read): a window
            # may start here next cycle, from what is known now.
            self._last = None
            if self._history[-1][0] != now:
                self._history.append((now, tuple(self._totals)))
        elif activity is not self._last:  # the same object: republished between refreshes
            self._last = activity
            self._add(activity, now)
        if not any(self._seen):
            return None
        return ActiveSeconds(
            *(t if seen else None for t, seen in zip(self._totals, self._seen, strict=True))
        )

    def _add(self, activity: Activity, now: float) -> None:
        history = self._history
        base: tuple[float, ...] | None = None
        span = activity.window_seconds
        if span is not None:
            start = now - span
            for t, totals in reversed(history):
                if abs(t - start) <= MATCH_SLACK:
                    base = totals
                    break
                if t < start - MATCH_SLACK:
                    break
        if base is None:
            t_last, base = history[-1]
            span = max(now - t_last, 0.0)
        assert span is not None
        for i, attr in enumerate(_INTEGRATED):
            ratio = getattr(activity, attr)
            if ratio is None:
                continue
            self._seen[i] = True
            value = base[i] + ratio * span
            if value > self._totals[i]:
                self._totals[i] = value
        history.append((now, tuple(self._totals)))
        horizon = now - 2 * (activity.window_seconds or 0.0) - 2.0
        while len(history) > 1 and history[0][0] < horizon:
            history.popleft()


class Sampler:
    """Drive a backend on a schedule and keep the latest snapshot.

    Args:
        backend: The hardware backend.
        interval: Seconds between samples; also how often GPM activity is refreshed (NVML
            needs ≥ 0.1 s between two GPM samples).
        energy_interval: Seconds between reads of the energy counter (≈3 ms per GPU).
        idle_watts: Idle board power per GPU for the power split; by default the lowest
            power seen on that GPU since start (see :mod:`migscope.exporter._slice_power`).
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
        self._integrals: dict[tuple[str, int, str], ActiveIntegral] = {}
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
        gpus = self._with_active_seconds(gpus, now)
        return Snapshot(
            taken_at=self._wall(),
            driver_version=reading.driver_version,
            gpus=gpus,
            collectors=reading.statuses,
        )

    def _with_active_seconds(
        self, gpus: tuple[GpuReading, ...], now: float
    ) -> tuple[GpuReading, ...]:
        """Integrate each GPU's (MIG off) and slice's activity; forget what vanished.

        A slice is keyed by its GPU, GI id and MIG UUID, a GPU by its UUID (and MIG off), so
        a re-created GPU instance (new MIG UUID) or a GPU switched to MIG starts again at 0.
        """
        integrals = self._integrals
        seen: set[tuple[str, int, str]] = set()
        out: list[GpuReading] = []
        for gpu in gpus:
            if not gpu.mig_enabled:
                key = (gpu.uuid, -1, "")
                seen.add(key)
                integral = integrals.get(key)
                if integral is None:
                    integral = integrals[key] = ActiveIntegral(now)
                active = integral.update(gpu.activity, now)
                out.append(gpu if active is None else replace(gpu, active_seconds=active))
                continue
            if not gpu.instances:
                out.append(gpu)
                continue
            instances: list[MigReading] = []
            for inst in gpu.instances:
                key = (gpu.uuid, inst.gpu_instance_id, inst.mig_uuid)
                seen.add(key)
                integral = integrals.get(key)
                if integral is None:
                    integral = integrals[key] = ActiveIntegral(now)
                active = integral.update(inst.activity, now)
                instances.append(inst if active is None else inst.with_active_seconds(active))
            out.append(replace(gpu, instances=tuple(instances)))
        for key in list(integrals):
            if key not in seen:  # re-created or gone: a new counter if it comes back
                del integrals[key]
        return tuple(out)

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
