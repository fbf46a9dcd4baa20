"""The simulator's sense of time: fast-forwarded in tests, or following the wall clock in demos.

Every value the simulated NVML returns is a function of *simulated* time, so a test can
replay a week of telemetry in seconds by calling :meth:`SimClock.advance`, and the same code
serves a live demo when the clock follows ``time.monotonic()`` (optionally sped up). Slow-call
faults are the one thing that must cost *real* time, so the clock also owns the real sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

DEFAULT_START = 1767571200.0
"""2026-01-05T00:00:00Z, a Monday: the epoch second simulated time starts at by default, so
that weekly reports of a simulated week line up with calendar weeks."""


class SimClock:
    """Simulated time in epoch seconds, manual (test) or real-time (demo).

    In manual mode time stands still until :meth:`advance` moves it, which makes every
    reading reproducible. In real-time mode it follows ``monotonic`` (times ``speed``), and
    :meth:`advance` still jumps ahead, so a demo can skip a quiet night.

    Args:
        start: Epoch seconds at simulated time zero; :data:`DEFAULT_START` in manual mode and
            the current wall-clock time in real-time mode when omitted.
        realtime: Follow the monotonic clock instead of standing still.
        speed: Simulated seconds per real second in real-time mode.
        monotonic: The real clock to follow (injectable for tests of the clock itself).
        sleeper: The real sleep (injectable likewise).
    """

    def __init__(
        self,
        start: float | None = None,
        *,
        realtime: bool = False,
        speed: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleeper: Callable[[float], None] = time.sleep,
    ) -> None:
        if speed <= 0:
            raise ValueError(f"clock speed must be > 0, got {speed}")
        if start is None:
            start = time.time() if realtime else DEFAULT_START
        self.start = float(start)
        self.realtime = realtime
        self.speed = float(speed)
        self._monotonic = monotonic
        self._sleeper = sleeper
        self._origin = monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        mode = f"realtime x{self.speed:g}" if self.realtime else "manual"
        return f"SimClock({mode}, elapsed={self.elapsed():.3f}s)"

    def elapsed(self) -> float:
        """Simulated seconds since the start; the argument of every workload function."""
        with self._lock:
            offset = self._offset
        if not self.realtime:
            return offset
        return (self._monotonic() - self._origin) * self.speed + offset

    def now(self) -> float:
        """Simulated time as epoch seconds (what a timestamp in a demo should carry)."""
        return self.start + self.elapsed()

    def advance(self, seconds: float) -> None:
        """Jump ``seconds`` of simulated time ahead, in either mode.

        Raises:
            ValueError: ``seconds`` is negative: simulated time never runs backwards, which
                keeps energy counters monotonic and scheduled faults in order.
        """
        if seconds < 0:
            raise ValueError(f"cannot move simulated time backwards ({seconds} s)")
        with self._lock:
            self._offset += seconds

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of *simulated* time.

        An advance in manual mode, a real sleep of ``seconds / speed`` in real-time mode:
        code that paces itself through this method (the GPM double sample) runs unchanged
        against both.
        """
        if seconds <= 0:
            return
        if self.realtime:
            self._sleeper(seconds / self.speed)
        else:
            self.advance(seconds)

    def real_sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of wall time, whatever the mode.

        A slow NVML call costs the caller real latency even when simulated time stands still.
        """
        if seconds > 0:
            self._sleeper(seconds)
