"""Progress lines on stderr: every stage on a terminal; a few timestamped lines in a log.

On a terminal every stage message is printed as it comes, with the seconds since the start
(``[ 12.3s] classified 120 slices``). A CronJob's or the scheduler's log is not a terminal,
and a run of 10,000 slices reports a stage every few slices, so there the lines are
rate-limited and stamped with the UTC time (``2026-06-01T06:00:12Z [ 12.3s] ...``):

- nothing in the first ``interval`` seconds: a quick run (or a quick failure, whose one
  error line is then all there is) stays as quiet as before;
- after that, the first message of a new stage at once (the stage is the message's first
  word: ``classified``, ``planning``), preceded by the last unwritten message of the stage
  before (so a log shows ``classified 10000 slices``, not only ``classified 10 slices``);
- within a stage, at most one line per ``interval``: the newest message, written when the
  interval has passed;
- after ``HEARTBEAT_INTERVALS`` intervals without any line (one long Prometheus query), a
  ``still working`` line with what the run last said and, where known, the requests sent so
  far.

Time comes from injected clocks, so tests drive the rules without sleeping; a
:class:`Heartbeat` thread calls :meth:`ProgressLog.tick` about once a second in a real run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

DEFAULT_PROGRESS_INTERVAL_SECONDS = 5.0
"""At most one progress line per this many seconds in a log (``--progress-interval``)."""

HEARTBEAT_INTERVALS = 3
"""A silent stage gets a ``still working`` line after this many intervals (15 s by default)."""


def stage_of(message: str) -> str:
    """The stage a message belongs to: its first word (``classified 10 slices``: classified)."""
    return message.split(maxsplit=1)[0] if message.strip() else ""


class ProgressLog:
    """Stage messages to ``write``: all of them on a terminal, rate-limited in a log.

    Call it with each message (it is an :data:`~migscope.analyzer._options.Progress`); call
    :meth:`tick` now and then (a :class:`Heartbeat` does) and :meth:`finish` at the end.
    Thread-safe: the analysis reports from the main thread, the heartbeat from its own.

    Args:
        write: Writes one line (no newline), e.g. to stderr.
        terminal: Every message at once with elapsed seconds (the interactive form).
        interval_s: In a log: the least time between lines; 0 writes every message at once
            (timestamped) and never a heartbeat.
        status: What the run is waiting on, for heartbeat lines (``server: 12 requests,
            3.1 MiB received``); None or ``""`` adds nothing. Also an attribute, set once the
            source (and so the server) is known.
        clock: Monotonic seconds (elapsed time, intervals).
        wall: Unix seconds (the timestamp of log lines).
    """

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        terminal: bool,
        interval_s: float = DEFAULT_PROGRESS_INTERVAL_SECONDS,
        status: Callable[[], str | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not interval_s >= 0:
            raise ValueError(f"interval_s must be >= 0, got {interval_s!r}")
        self._write = write
        self._terminal = terminal
        self._interval = interval_s
        self.status = status
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._started = clock()
        self._last_write = self._started  # the grace period is "an interval since a write"
        self._stage: str | None = None
        self._held: str | None = None
        self._last: tuple[str, float] | None = None  # newest message and when it came

    @property
    def terminal(self) -> bool:
        """Whether lines go to a terminal (every stage at once, no timestamps)."""
        return self._terminal

    def __call__(self, message: str) -> None:
        """Report a stage message (written now, later, or replaced by a newer one)."""
        with self._lock:
            now = self._clock()
            stage = stage_of(message)
            new_stage = stage != self._stage
            self._stage = stage
            self._last = (message, now)
            if self._terminal or self._interval == 0:
                self._emit(message, now)
            elif now - self._started < self._interval:
                self._held = message  # the grace period: maybe the run ends before it
            elif new_stage:
                if self._held is not None:
                    self._emit(self._held, now)  # the previous stage's last word
                self._emit(message, now)
            elif now - self._last_write >= self._interval:
                self._emit(message, now)
            else:
                self._held = message

    def tick(self) -> None:
        """Write what is due: a held message once its interval passed, or a heartbeat."""
        with self._lock:
            if self._terminal or self._interval == 0:
                return
            now = self._clock()
            quiet = now - self._last_write
            if quiet < self._interval:
                return
            if self._held is not None:
                self._emit(self._held, now)
            elif quiet >= HEARTBEAT_INTERVALS * self._interval:
                self._emit(self._heartbeat(now), now)

    def finish(self) -> None:
        """At the end of a run that lasted past the grace period: write the last word held."""
        with self._lock:
            now = self._clock()
            if self._held is not None and now - self._started >= self._interval:
                self._emit(self._held, now)
            self._held = None

    def _heartbeat(self, now: float) -> str:
        text = "still working"
        if self._last is not None:
            message, at = self._last
            text += f" since: {message} ({now - at:.0f} s ago)"
        extra = self.status() if self.status is not None else None
        return f"{text}; {extra}" if extra else text

    def _emit(self, message: str, now: float) -> None:
        elapsed = f"[{now - self._started:5.1f}s] {message}"
        if self._terminal:
            self._write(elapsed)
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._wall()))
            self._write(f"{stamp} {elapsed}")
        self._last_write = now
        self._held = None


class Heartbeat:
    """A daemon thread that ticks a :class:`ProgressLog` until the ``with`` block ends.

    Leaving the block stops and joins the thread, then calls :meth:`ProgressLog.finish`, so
    no progress line can follow the command's own last line (the scheduler takes a failed
    run's last stderr line as its error).

    Args:
        log: The log to tick.
        every_s: Seconds between ticks.
    """

    def __init__(self, log: ProgressLog, *, every_s: float = 1.0) -> None:
        self._log = log
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="migscope-progress", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._log.tick()
            except OSError:  # stderr went away (a closed pipe): the analysis goes on silently
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._log.finish()
