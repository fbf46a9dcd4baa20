"""The applier's one seam for time: the wall clock, deadlines and waits between polls.

The applier reads time for three things: records and limits (Unix seconds: when a node was
relabelled, a plan's age, maintenance windows, a Lease's expiry), deadlines (monotonic: the
drain, MIG Manager's answer, the device plugin catching up) and waits between polls. They
come from one :class:`Clock` so that a test can run the applier in simulated time, where a
timeout fires exactly when simulated time passes it however loaded the machine is. Anything
else uses :data:`SYSTEM_CLOCK`, which is the ``time`` module's functions.

The Lease's renewal thread is the exception: it keeps real time, because other appliers
judge its expiry by their own clocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Where the applier gets the time from."""

    def now(self) -> float:
        """Wall clock, Unix seconds (records, plan age, windows, the Lease's expiry)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go back (deadlines)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (between polls and retries)."""
        ...


class SystemClock:
    """The real time: :func:`time.time`, :func:`time.monotonic`, :func:`time.sleep`."""

    def now(self) -> float:
        """See :meth:`Clock.now`."""
        return time.time()

    def monotonic(self) -> float:
        """See :meth:`Clock.monotonic`."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """See :meth:`Clock.sleep`."""
        time.sleep(seconds)


SYSTEM_CLOCK: Clock = SystemClock()
"""The clock of every applier not given another."""


@dataclass(frozen=True)
class _Parts:
    """A clock put together from functions (:func:`as_clock`)."""

    wall: Callable[[], float]
    mono: Callable[[], float]
    wait: Callable[[float], None]

    def now(self) -> float:
        return self.wall()

    def monotonic(self) -> float:
        return self.mono()

    def sleep(self, seconds: float) -> None:
        self.wait(seconds)


def as_clock(
    clock: Clock | Callable[[], float], sleep: Callable[[float], None] | None = None
) -> Clock:
    """A :class:`Clock` from either a clock or a bare wall-clock function, and a sleep.

    The bare function is the older form of the seam (a wall clock, with real deadlines);
    ``sleep``, when given, replaces the clock's own.

    Args:
        clock: A clock, or a function giving Unix seconds.
        sleep: How to wait instead of the clock's ``sleep``.

    Returns:
        ``clock`` itself when there is nothing to replace, else a clock of the parts.
    """
    if isinstance(clock, Clock):
        if sleep is None:
            return clock
        return _Parts(clock.now, clock.monotonic, sleep)
    return _Parts(clock, time.monotonic, sleep or time.sleep)
