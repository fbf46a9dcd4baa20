"""Per-cycle error notes and the collector statuses built from them, shared by the backends.

A backend notes the first error of each of its collectors during one cycle and how long each
took; :class:`StatusBook` turns that into ``CollectorStatus`` values, remembers the last
success of each collector, carries the energy status between the cycles that do not read
energy, and logs one line per change of state (failing, recovered) rather than one per cycle
of a lasting fault.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from migscope.exporter._snapshot import CollectorStatus


@dataclass
class CycleErrors:
    """First error of each collector in this cycle, and the seconds each one took."""

    first: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def note(self, collector: str, message: str) -> None:
        """Keep the first error of ``collector``; later ones add nothing a reader needs.

        The message is text, not an exception (those go through
        :func:`migscope.core._errors.one_line`), and is folded onto one line here: the NVML
        and DCGM errors quoted in it sometimes carry newlines.
        """
        self.first.setdefault(collector, " ".join(message.split()))

    def add_time(self, collector: str, seconds: float) -> None:
        """Add ``seconds`` to the time spent in ``collector`` this cycle."""
        self.seconds[collector] = self.seconds.get(collector, 0.0) + seconds


class StatusBook:
    """Collector statuses across cycles for one backend.

    Args:
        log: Where state changes are logged.
        wall: Unix time for ``last_success`` (injectable).
    """

    def __init__(self, log: logging.Logger, *, wall: Callable[[], float] = time.time) -> None:
        self._log = log
        self._wall = wall
        self._last_success: dict[str, float] = {}
        self._last_error: dict[str, str | None] = {}
        self._energy: CollectorStatus | None = None

    def statuses(
        self,
        errors: CycleErrors,
        collectors: Sequence[tuple[str, str]],
        *,
        energy: str | None,
    ) -> tuple[CollectorStatus, ...]:
        """Statuses of this cycle.

        Args:
            errors: What the cycle noted.
            collectors: ``(key used in errors, name published)`` pairs read this cycle.
            energy: The key of the energy collector when it was read this cycle; otherwise
                None, and the last energy status is repeated.
        """
        now = self._wall()
        out: list[CollectorStatus] = []
        pairs = [*collectors, *([(energy, "energy")] if energy is not None else [])]
        for key, name in pairs:
            error = errors.first.get(key)
            if error is None:
                self._last_success[name] = now
            if error != self._last_error.get(name):
                if error is None:
                    self._log.info("%s collector recovered", name)
                else:
                    self._log.warning("%s collector failing: %s", name, error)
                self._last_error[name] = error
            out.append(
                CollectorStatus(
                    name=name,
                    success=error is None,
                    duration_seconds=errors.seconds.get(key, 0.0),
                    last_success=self._last_success.get(name),
                    error=error,
                )
            )
        if energy is not None:
            self._energy = out[-1]
        elif self._energy is not None:
            out.append(self._energy)
        return tuple(out)
