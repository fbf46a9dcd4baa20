"""Faults to inject into a simulated node: lost GPUs, re-partitions, slow calls, NVML errors.

An exporter has to survive what production GPUs do to it. Each fault here reproduces one
failure the exporter must handle, from a scenario file or from a test through
:class:`FaultInjector` (``sim.node("a").nvml.faults``):

- **GPU lost** (:meth:`FaultInjector.lose_gpu`): from a given time every call on the GPU,
  its MIG devices, GPU instances and GPM samples raises ``NVMLError_GpuIsLost``, as NVML does
  for a GPU that fell off the bus (Xid 79). ``nvmlDeviceGetCount`` still counts it.
- **Layout changed underneath** (:meth:`FaultInjector.change_layout`): at time T the GPU's
  instances are replaced (MIG Manager re-partitioned it). Enumeration then shows the new
  instances, with GI ids from their placements and fresh UUIDs; calls on the *old* MIG
  devices and GPU instances fail with ``stale_error``: INVALID_ARGUMENT by default, NVML's
  answer for a handle it no longer knows (measured for handles kept across a shutdown,
  ``tests/sim/recordings/h200_semantics_3.txt``); NOT_FOUND can be chosen instead. An old
  UUID looked up by ``nvmlDeviceGetHandleByUUID`` is NOT_FOUND either way (measured for any
  unknown UUID).
- **Slow calls** (:meth:`FaultInjector.slow`): named functions block for N ms of *real* time
  (the clock's real sleep), to test the sampler's timeouts and cycle budget.
- **Injected errors** (:meth:`FaultInjector.inject_error`): a named function returns an NVML
  error code, optionally for one GPU, with a probability (seeded, so reproducible) and/or a
  count, within a time window.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from migscope.sim._clock import SimClock
from migscope.sim._gpu import SimGpu, SimInstance
from migscope.sim._ids import derive_seed
from migscope.sim._nvml_errors import error_code, fail

InstanceBuilder = Callable[[SimGpu, Sequence[Any], int], list[SimInstance]]
"""Builds the instances of a new layout: ``(gpu, instance specs, generation) -> instances``.

Provided by :mod:`migscope.sim._build`, which owns the scenario schema; kept as a callable so
that this module does not depend on it."""


@dataclass
class InjectedError:
    """One error rule. ``remaining`` counts down when set; ``hits`` counts injections."""

    function: str
    code: int
    gpu: int | None
    probability: float
    remaining: int | None
    start: float
    until: float | None
    rng: random.Random = field(repr=False)
    hits: int = 0

    def applies(self, function: str, gpu: int | None, t: float) -> bool:
        """Whether this rule fires for this call (consumes randomness and count)."""
        if function != self.function or (self.gpu is not None and gpu != self.gpu):
            return False
        if t < self.start or (self.until is not None and t >= self.until):
            return False
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.probability < 1.0 and self.rng.random() >= self.probability:
            return False
        if self.remaining is not None:
            self.remaining -= 1
        self.hits += 1
        return True


@dataclass(frozen=True)
class SlowCall:
    """Calls to ``functions`` (on ``gpu``, or any) take ``delay_s`` more real seconds."""

    functions: frozenset[str]
    delay_s: float
    gpu: int | None = None


class FaultInjector:
    """The faults of one simulated node; the NVML facade consults it on every call.

    Args:
        clock: Simulated time (for windows and "now").
        gpus: The node's GPUs, by NVML index.
        seed: Scenario seed (probabilistic errors draw from RNGs derived from it).
        node: Node name (part of the derived seeds).
        builder: Builds instances for :meth:`change_layout`.
    """

    def __init__(
        self,
        clock: SimClock,
        gpus: Sequence[SimGpu],
        seed: int,
        node: str,
        builder: InstanceBuilder,
    ) -> None:
        self._clock = clock
        self._gpus = gpus
        self._seed = seed
        self._node = node
        self._builder = builder
        self.errors: list[InjectedError] = []
        self.slow_calls: list[SlowCall] = []

    def _gpu(self, index: int) -> SimGpu:
        if not 0 <= index < len(self._gpus):
            raise ValueError(f"node {self._node} has no GPU {index} (it has {len(self._gpus)})")
        return self._gpus[index]

    def _when(self, at: float | None) -> float:
        return self._clock.elapsed() if at is None else at

    def lose_gpu(self, gpu: int, at: float | None = None) -> None:
        """GPU ``gpu`` falls off the bus at ``at`` seconds of simulated time (default now)."""
        self._gpu(gpu).lose(self._when(at))

    def change_layout(
        self,
        gpu: int,
        instances: Sequence[Any],
        at: float | None = None,
        stale_error: int | str = "INVALID_ARGUMENT",
    ) -> list[SimInstance]:
        """Re-partition GPU ``gpu`` at ``at`` (default: now) into ``instances``.

        Args:
            gpu: NVML index of a MIG-enabled GPU.
            instances: Instance specs as in a scenario file (dicts or
                :class:`migscope.sim._scenario.InstanceSpec`).
            at: Seconds of simulated time; must be after the last layout change.
            stale_error: The error calls on the replaced MIG devices get.

        Returns:
            The new instances (GI ids, UUIDs), for tests to compare against.

        Raises:
            ValueError: invalid layout, MIG disabled, or ``at`` out of order.
        """
        target = self._gpu(gpu)
        built = self._builder(target, instances, target.next_generation())
        target.schedule_layout(self._when(at), built, error_code(stale_error))
        return built

    def slow(
        self, functions: str | Iterable[str], delay_ms: float, *, gpu: int | None = None
    ) -> SlowCall:
        """Make ``functions`` take ``delay_ms`` more milliseconds of real time."""
        names = frozenset([functions] if isinstance(functions, str) else functions)
        rule = SlowCall(names, delay_ms / 1000.0, gpu)
        self.slow_calls.append(rule)
        return rule

    def inject_error(
        self,
        function: str,
        error: int | str,
        *,
        gpu: int | None = None,
        probability: float = 1.0,
        count: int | None = None,
        start: float = 0.0,
        until: float | None = None,
    ) -> InjectedError:
        """Make ``function`` fail with ``error``.

        Args:
            function: pynvml function name, e.g. ``"nvmlDeviceGetMemoryInfo"``.
            error: NVML error code or name (``"GPU_IS_LOST"``, ``15``, ``"NotFound"``).
            gpu: Only calls concerning this GPU index (None: every call).
            probability: Chance per eligible call, drawn from a seeded RNG.
            count: Fail at most this many times (None: unlimited).
            start: From this simulated time (seconds).
            until: Until this simulated time (None: forever).

        Returns:
            The rule; its ``hits`` says how often it fired.
        """
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be within 0..1, got {probability}")
        index = len(self.errors)
        rng = random.Random(derive_seed(self._seed, self._node, "fault", index, function))
        rule = InjectedError(
            function, error_code(error), gpu, probability, count, start, until, rng
        )
        self.errors.append(rule)
        return rule

    def clear(self) -> None:
        """Remove slow calls and injected errors (lost GPUs and layouts stay: they are state)."""
        self.errors.clear()
        self.slow_calls.clear()

    def active(self) -> bool:
        """Whether any slow call or error rule exists (lets the hot path skip the rest)."""
        return bool(self.errors or self.slow_calls)

    def before_call(self, function: str, gpu: int | None) -> None:
        """Apply slow calls, then injected errors, to a call of ``function`` on ``gpu``.

        Raises:
            pynvml.NVMLError: an injected error fired.
        """
        for rule in self.slow_calls:
            if function in rule.functions and (rule.gpu is None or rule.gpu == gpu):
                self._clock.real_sleep(rule.delay_s)
        if not self.errors:
            return
        t = self._clock.elapsed()
        for err in self.errors:
            if err.applies(function, gpu, t):
                fail(err.code)
