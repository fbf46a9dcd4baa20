"""What runs on a simulated GPU or MIG instance: activity and memory as functions of time.

A workload is a *pure function of simulated time*: the same seed and the same ``t`` give the
same answer whatever was asked before, so tests are reproducible and independent of call
order. Each workload exposes its graphics-engine activity ``level(t)`` in [0, 1] and, more
importantly, its exact integral ``cumulative(t)``: real GPM samples are counter snapshots and
metrics are averages over the interval between two of them, and the board's energy counter
integrates power, so both are computed from differences of ``cumulative``. That is why every
pattern here is piecewise constant: its integral is exact and cheap.

The other activity ratios (SM active, occupancy, tensor, DRAM, FP16/32/64, integer) are the
graphics activity times a per-workload :class:`ActivityMix`; the default mix is what the real
H200 reported under a bf16 matmul loop (``fixtures/h200/nvml_probe.json``, ``gpm_load``).
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass

from migscope.sim._traces import TraceSeries

COMPONENTS = ("graphics", "sm", "occupancy", "tensor", "dram", "fp16", "fp32", "fp64", "integer")
"""The activity ratios every workload yields, in this order (index 0 is the level itself)."""


@dataclass(frozen=True)
class ActivityMix:
    """Each activity ratio as a fraction of the graphics-engine activity.

    Defaults: the real H200 under a bf16 8192² matmul (GPM gract 99.5 %, smutil 96.1 %,
    smocc 14.2 %, tensor 93.3 %, DRAM 16.2 %, FP16/FP32 0 %).
    """

    sm: float = 0.9655
    occupancy: float = 0.1427
    tensor: float = 0.9372
    dram: float = 0.1626
    fp16: float = 0.0
    fp32: float = 0.0
    fp64: float = 0.0
    integer: float = 0.0

    def factors(self) -> tuple[float, ...]:
        """Multipliers in :data:`COMPONENTS` order (graphics first, factor 1)."""
        return (
            1.0,
            self.sm,
            self.occupancy,
            self.tensor,
            self.dram,
            self.fp16,
            self.fp32,
            self.fp64,
            self.integer,
        )


@dataclass(frozen=True)
class Size:
    """A memory amount: a fraction of the instance's usable memory, or absolute bytes."""

    fraction: float | None = None
    nbytes: int | None = None

    def resolve(self, capacity: int) -> int:
        """Bytes for an instance with ``capacity`` usable bytes (never more than that)."""
        if self.nbytes is not None:
            return min(self.nbytes, capacity)
        return min(capacity, round((self.fraction or 0.0) * capacity))


class MemoryModel(ABC):
    """Memory a workload holds at time ``t`` on an instance of ``capacity`` usable bytes."""

    @abstractmethod
    def at(self, t: float, level: float, capacity: int) -> int:
        """Bytes used at ``t`` given the activity ``level`` then; ``<= capacity``."""


@dataclass(frozen=True)
class FixedMemory(MemoryModel):
    """``base`` while idle, rising linearly to ``peak`` at full activity.

    A model plus its activations: inference servers hold their weights all the time.
    """

    base: Size
    peak: Size | None = None

    def at(self, t: float, level: float, capacity: int) -> int:
        """Bytes used; see the class docstring."""
        low = self.base.resolve(capacity)
        if self.peak is None:
            return low
        high = max(low, self.peak.resolve(capacity))
        return min(capacity, low + round((high - low) * level))


@dataclass(frozen=True)
class TraceMemory(MemoryModel):
    """Memory replayed from a trace, scaled from the traced GPU to this instance.

    The traces are whole-GPU pods; ``value / reference_bytes`` is the fraction of the traced
    GPU in use, applied to the instance's capacity so a 1g slice is as full, relatively, as
    the traced GPU was.
    """

    series: TraceSeries
    reference_bytes: int
    offset: float = 0.0

    def at(self, t: float, level: float, capacity: int) -> int:
        """Bytes used; see the class docstring."""
        fraction = self.series.value_at(t + self.offset) / self.reference_bytes
        return min(capacity, max(0, int(fraction * capacity)))


@dataclass(frozen=True)
class WorkloadSample:
    """Ground truth at one instant, for tests and for the analyzer's embedded source."""

    t: float
    activity: dict[str, float]
    memory_bytes: int
    processes: int


class Workload(ABC):
    """Base of all patterns: activity level, its integral, memory and process count.

    Args:
        mix: How the other ratios follow the graphics activity.
        memory: The memory model.
        processes: How many processes the workload runs (0: nothing holds the instance).
    """

    pattern = "abstract"

    def __init__(
        self,
        *,
        mix: ActivityMix | None = None,
        memory: MemoryModel | None = None,
        processes: int = 0,
    ) -> None:
        mix = mix or ActivityMix()
        self.mix = mix
        memory = memory or FixedMemory(Size(fraction=0.0))
        self.memory = memory
        self.processes = processes
        self._factors = mix.factors()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(processes={self.processes})"

    @abstractmethod
    def level(self, t: float) -> float:
        """Graphics-engine activity in [0, 1] at ``t`` seconds of simulated time."""

    @abstractmethod
    def cumulative(self, t: float) -> float:
        """``∫ level dt`` from 0 to ``t``: exact, monotonic, a pure function of ``t``."""

    def cumulative_vector(self, t: float) -> tuple[float, ...]:
        """The integral of every ratio in :data:`COMPONENTS` order."""
        base = self.cumulative(t)
        return tuple(base * f for f in self._factors)

    def mean_level(self, t0: float, t1: float) -> float:
        """Average graphics activity over ``[t0, t1]`` (the level at ``t0`` if empty)."""
        if t1 <= t0:
            return self.level(t0)
        return (self.cumulative(t1) - self.cumulative(t0)) / (t1 - t0)

    def memory_at(self, t: float, capacity: int) -> int:
        """Memory used at ``t`` on an instance with ``capacity`` usable bytes."""
        return self.memory.at(t, self.level(t), capacity)

    def sample(self, t: float, capacity: int) -> WorkloadSample:
        """Every ratio, memory and process count at ``t`` (instantaneous values)."""
        level = self.level(t)
        activity = {name: level * f for name, f in zip(COMPONENTS, self._factors, strict=True)}
        return WorkloadSample(t, activity, self.memory_at(t, capacity), self.processes)


class Idle(Workload):
    """No activity at all; may still hold memory (a forgotten notebook kernel)."""

    pattern = "idle"

    def level(self, t: float) -> float:
        """Always 0."""
        return 0.0

    def cumulative(self, t: float) -> float:
        """Always 0."""
        return 0.0


class Constant(Workload):
    """A steady ``value`` of activity, e.g. a training job that never pauses."""

    pattern = "constant"

    def __init__(
        self,
        value: float,
        *,
        mix: ActivityMix | None = None,
        memory: MemoryModel | None = None,
        processes: int = 0,
    ) -> None:
        super().__init__(mix=mix, memory=memory, processes=processes)
        self.value = value

    def level(self, t: float) -> float:
        """``value``."""
        return self.value

    def cumulative(self, t: float) -> float:
        """``value × t``."""
        return self.value * max(t, 0.0)


class Periodic(Workload):
    """A square wave: ``high`` for ``duty × period`` of every period, ``low`` otherwise.

    ``phase`` shifts the wave: at ``t = 0`` the wave is ``phase`` seconds into its period.
    A diurnal inference service is ``period=1d, duty=0.5``.
    """

    pattern = "periodic"

    def __init__(
        self,
        *,
        period: float,
        duty: float,
        high: float = 1.0,
        low: float = 0.0,
        phase: float = 0.0,
        mix: ActivityMix | None = None,
        memory: MemoryModel | None = None,
        processes: int = 0,
    ) -> None:
        super().__init__(mix=mix, memory=memory, processes=processes)
        self.period, self.duty, self.high, self.low, self.phase = period, duty, high, low, phase
        self.on_seconds = duty * period
        """Length of the ``high`` part of each period, seconds."""
        self.per_period = high * self.on_seconds + low * (period - self.on_seconds)
        """Integral of the level over one whole period."""

    def level(self, t: float) -> float:
        """``high`` in the on-part of the period, ``low`` in the rest."""
        return self.high if (t + self.phase) % self.period < self.on_seconds else self.low

    def _from_zero(self, x: float) -> float:
        loops, r = divmod(x, self.period)
        return (
            loops * self.per_period
            + self.high * min(r, self.on_seconds)
            + self.low * max(0.0, r - self.on_seconds)
        )

    def cumulative(self, t: float) -> float:
        """Whole periods plus the partial one, shifted by the phase."""
        if t <= 0:
            return 0.0
        return self._from_zero(t + self.phase) - self._from_zero(self.phase)


class Bursty(Workload):
    """Bursts of activity ``value`` at Poisson arrival times, ``low`` in between.

    Arrivals come at ``rate`` per hour; each burst lasts ``burst`` seconds and overlapping
    bursts merge. The arrivals of hour ``k`` are drawn from an RNG seeded with
    ``(seed, k)``, so the pattern is a pure function of time: asking about hour 100 first
    gives the same bursts as walking there hour by hour.
    """

    pattern = "bursty"
    _BUCKET = 3600.0

    def __init__(
        self,
        *,
        rate: float,
        burst: float,
        value: float = 1.0,
        low: float = 0.0,
        seed: int = 0,
        mix: ActivityMix | None = None,
        memory: MemoryModel | None = None,
        processes: int = 0,
    ) -> None:
        super().__init__(mix=mix, memory=memory, processes=processes)
        self.rate, self.burst, self.value, self.low, self.seed = rate, burst, value, low, seed
        self._starts: dict[int, tuple[float, ...]] = {}
        self._covered_prefix: list[float] = [0.0]
        self._lookback = math.ceil(burst / self._BUCKET)

    def _bucket_starts(self, k: int) -> tuple[float, ...]:
        found = self._starts.get(k)
        if found is None:
            rng = random.Random(self.seed * 1_000_003 + k)
            per_second = self.rate / 3600.0
            starts: list[float] = []
            t = k * self._BUCKET
            end = t + self._BUCKET
            while per_second > 0:
                t += rng.expovariate(per_second)
                if t >= end:
                    break
                starts.append(t)
            found = self._starts[k] = tuple(starts)
            if len(self._starts) > 4096:  # bound memory on long runs; recomputed on demand
                self._starts.pop(next(iter(self._starts)))
        return found

    def _intervals(self, a: float, b: float) -> list[tuple[float, float]]:
        """Merged burst intervals intersecting ``[a, b]``, clipped to it."""
        first = max(0, int(a // self._BUCKET) - self._lookback)
        last = int(b // self._BUCKET)
        merged: list[tuple[float, float]] = []
        for k in range(first, last + 1):
            for s in self._bucket_starts(k):
                lo, hi = max(s, a), min(s + self.burst, b)
                if lo >= hi:
                    continue
                if merged and lo <= merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
                else:
                    merged.append((lo, hi))
        return merged

    def bursts(self, until: float) -> list[tuple[float, float]]:
        """Every burst that starts before ``until``, as ``[start, end)``, overlaps merged.

        The level is ``value`` exactly on these intervals; the analyzer evaluates a whole
        window at once from them instead of asking :meth:`level` sample by sample.
        """
        merged: list[tuple[float, float]] = []
        if until <= 0:
            return merged
        for k in range(int(until // self._BUCKET) + 1):
            for s in self._bucket_starts(k):
                if s >= until:
                    break
                end = s + self.burst
                if merged and s <= merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], end))
                else:
                    merged.append((s, end))
        return merged

    def _covered(self, a: float, b: float) -> float:
        return sum(hi - lo for lo, hi in self._intervals(a, b))

    def level(self, t: float) -> float:
        """``value`` inside a burst, ``low`` outside."""
        if t < 0:
            return self.low
        inside = any(lo <= t < hi for lo, hi in self._intervals(t, t + 1e-9))
        return self.value if inside else self.low

    def cumulative(self, t: float) -> float:
        """``low × t`` plus the burst excess over the time covered by bursts."""
        if t <= 0:
            return 0.0
        k = int(t // self._BUCKET)
        prefix = self._covered_prefix
        while len(prefix) <= k:
            j = len(prefix) - 1
            prefix.append(prefix[-1] + self._covered(j * self._BUCKET, (j + 1) * self._BUCKET))
        covered = prefix[k] + self._covered(k * self._BUCKET, t)
        return self.low * t + (self.value - self.low) * covered


class Trace(Workload):
    """Replays a duty-cycle trace: the traced duty % becomes the activity ratio (/100).

    ``offset`` starts the replay that many seconds into the trace, so several instances can
    replay the same container out of step.
    """

    pattern = "trace"

    def __init__(
        self,
        *,
        series: TraceSeries,
        offset: float = 0.0,
        mix: ActivityMix | None = None,
        memory: MemoryModel | None = None,
        processes: int = 0,
    ) -> None:
        super().__init__(mix=mix, memory=memory, processes=processes)
        if min(series.values) < 0 or max(series.values) > 100:
            raise ValueError(
                f"container {series.container}: values outside 0..100, not a duty cycle in %"
            )
        self.series, self.offset = series, offset
        self._base = series.integral(offset)

    def level(self, t: float) -> float:
        """The traced duty cycle at ``t`` as a ratio, clamped to [0, 1]."""
        return min(1.0, max(0.0, self.series.value_at(t + self.offset) / 100.0))

    def cumulative(self, t: float) -> float:
        """The trace's exact integral (percent-seconds) divided by 100."""
        if t <= 0:
            return 0.0
        return (self.series.integral(t + self.offset) - self._base) / 100.0
