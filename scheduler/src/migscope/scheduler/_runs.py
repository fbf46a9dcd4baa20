"""Running one job as a child process: time limits, termination, and what the run did.

Why a child process (the same interpreter running the ``migscope`` CLI): a scheduler that
lives for months never accumulates the analyzer's memory, and a crash or a hang in a run
cannot take the scheduler down. A run has a time limit, after which its whole process group
gets SIGTERM and, if still alive, SIGKILL. :class:`Runner` also tracks the running children
so that a shutdown can wait for them or stop them, and publishes each finished run: a good
report becomes ``latest`` (:mod:`migscope.scheduler._rundirs`), one ``run_finished`` log line,
the webhook (:mod:`migscope.scheduler._webhook`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

from migscope.core import redact_argv, redact_text
from migscope.scheduler._config import JobConfig, JobKind, ScheduleConfig
from migscope.scheduler._defaults import DEFAULT_KILL_AFTER_SECONDS
from migscope.scheduler._joblog import JsonLog, iso_utc, utc_now
from migscope.scheduler._rundirs import new_run_dir, update_latest
from migscope.scheduler._webhook import send_webhook

SUMMARY_LINES = 20
"""At most this many of the child's last stdout lines go into the webhook's ``summary``."""

_MAX_LOGGED_LINE = 4000

RunStatus = Literal["succeeded", "failed", "timeout", "terminated", "skipped", "error"]


@dataclass(frozen=True)
class RunResult:
    """What one run of a job did."""

    job: str
    kind: JobKind
    status: RunStatus
    started: datetime
    finished: datetime
    exit_code: int | None
    """The child's exit status; negative: the signal that ended it; None: it never ran."""
    run_dir: Path | None = None
    latest: Path | None = None
    summary: tuple[str, ...] = ()
    error: str | None = None
    savings: Mapping[str, Any] | None = None

    @property
    def duration_s(self) -> float:
        """Seconds from start to finish."""
        return round((self.finished - self.started).total_seconds(), 3)

    def exit_status(self) -> int:
        """The status ``migscope schedule --once`` exits with.

        0 only for a success; a timeout is 124 (as ``timeout(1)``), a child ended by signal N
        is 128+N (as a shell reports it), a run that never started is 1.
        """
        if self.status == "succeeded":
            return 0
        if self.status == "timeout":
            return 124
        if self.exit_code is None:
            return 1
        if self.exit_code < 0:
            return 128 - self.exit_code
        return self.exit_code or 1

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON body."""
        return {
            "job": self.job,
            "kind": self.kind,
            "status": self.status,
            "started": iso_utc(self.started),
            "finished": iso_utc(self.finished),
            "duration_s": self.duration_s,
            "exit_code": self.exit_code,
            "out_dir": str(self.run_dir) if self.run_dir is not None else None,
            "latest": str(self.latest) if self.latest is not None else None,
            "summary": list(self.summary),
            "savings": dict(self.savings) if self.savings is not None else None,
            "error": self.error,
        }


def child_argv(args: Sequence[str], python: str | None = None) -> list[str]:
    """The command line that runs ``migscope ARGS`` with this very interpreter and install.

    ``python -c`` rather than the ``migscope`` script on the PATH: the child then runs the
    same code as the scheduler whatever the PATH says, and ``python -m migscope.cli.main``
    would need a ``__main__`` guard that module does not have.

    Args:
        args: The ``migscope`` arguments (``analyze ...``, ``apply ...``).
        python: The interpreter (default: this one).
    """
    return [python or sys.executable, "-c", "from migscope.cli.main import main; main()", *args]


class Runner:
    """Runs jobs as child processes and tracks them so that a shutdown can stop them.

    Args:
        config: The schedule.
        log: Where every event goes.
        kill_after_s: Seconds between SIGTERM and SIGKILL when a run is terminated.
        webhook_backoff_s: Wait before the first webhook retry (doubles each retry).
        python: Interpreter for ``migscope`` children (default: this one).
    """

    def __init__(
        self,
        config: ScheduleConfig,
        log: JsonLog,
        *,
        kill_after_s: float = DEFAULT_KILL_AFTER_SECONDS,
        webhook_backoff_s: float = 0.5,
        python: str | None = None,
    ) -> None:
        self.config = config
        self.log = log
        self.kill_after_s = kill_after_s
        self.webhook_backoff_s = webhook_backoff_s
        self.python = python
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._running: dict[str, subprocess.Popen[str] | None] = {}
        self._stopping = False
        self._terminated: set[int] = set()
        self._terminate_reason: str | None = None

    # -- shutdown side (called from the main thread) --

    def stop_accepting(self) -> None:
        """Refuse every run that has not started yet (queued ones are skipped, logged)."""
        with self._lock:
            self._stopping = True

    def running(self) -> list[str]:
        """Names of the jobs running now."""
        with self._lock:
            return sorted(self._running)

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no run is active; False if ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._running, timeout)

    def terminate_all(self, reason: str) -> None:
        """Terminate every running child (SIGTERM, SIGKILL after ``kill_after_s``)."""
        with self._lock:
            self._terminate_reason = reason
            procs = [(name, p) for name, p in self._running.items() if p is not None]
            self._terminated.update(p.pid for _, p in procs)
        for name, proc in procs:
            self._terminate(proc, name, reason)

    # -- the run --

    def run(self, name: str) -> RunResult:
        """Run the job called ``name`` now and return what happened; never raises.

        APScheduler calls this from its single worker thread; ``--once`` from a thread of its
        own. A run that arrives after :meth:`stop_accepting` is skipped.
        """
        job = self.config.job(name)
        started = utc_now()
        with self._lock:
            if self._stopping:
                skipped = True
            else:
                skipped = False
                self._running[name] = None
        if skipped:
            self.log("run_skipped", level="warning", job=name, reason="shutting down")
            return RunResult(name, job.kind, "skipped", started, started, None)
        try:
            return self._run(job, started)
        except Exception as exc:  # a bug here must not end the scheduler's worker
            error = redact_text(str(exc))
            self.log("run_error", level="error", job=name, error=f"{type(exc).__name__}: {error}")
            return RunResult(name, job.kind, "error", started, utc_now(), None, error=error)
        finally:
            with self._changed:
                self._running.pop(name, None)
                self._changed.notify_all()

    def _run(self, job: JobConfig, started: datetime) -> RunResult:
        run_dir: Path | None = None
        if job.kind == "report":
            assert job.out_dir is not None
            assert job.args is not None
            try:
                run_dir = new_run_dir(Path(job.out_dir), started)
            except OSError as exc:
                error = f"cannot create a run directory in {job.out_dir}: {exc.strerror or exc}"
                return self._finish(job, started, "error", None, error=error)
            # The earlier runs beside this one are the report's waste trend (its own args
            # come after, so that a --previous-reports there wins).
            previous = ["--previous-reports", str(job.out_dir)]
            argv = child_argv(["analyze", *previous, *job.args, "--out", str(run_dir)], self.python)
        elif job.kind == "apply":
            assert job.args is not None
            argv = child_argv(["apply", *job.args], self.python)
        else:
            assert job.command is not None
            argv = list(job.command)
        self.log(
            "run_started",
            job=job.name,
            kind=job.kind,
            # A job's arguments may hold credentials (a URL with a password, a header): the
            # log shows what ran, never them (migscope.core._redaction).
            argv=redact_argv(argv),
            run_dir=str(run_dir) if run_dir else None,
        )
        stdout: deque[str] = deque(maxlen=SUMMARY_LINES * 5)
        stderr: deque[str] = deque(maxlen=SUMMARY_LINES)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                # Its own process group: a Ctrl-C in the terminal reaches the scheduler only
                # (which decides when the child stops), and a termination reaches whatever
                # the child started (an embedded Prometheus, a script's own children).
                start_new_session=True,
            )
        except OSError as exc:
            error = redact_text(f"cannot start {argv[0]}: {exc.strerror or exc}")
            return self._finish(job, started, "error", None, run_dir=run_dir, error=error)
        with self._lock:
            self._running[job.name] = proc
            # terminate_all() ran between our start and the spawn: it could not see this child.
            late = self._terminate_reason
            if late is not None:
                self._terminated.add(proc.pid)
        pumps = [
            threading.Thread(target=self._pump, args=(proc.stdout, "stdout", job.name, stdout)),
            threading.Thread(target=self._pump, args=(proc.stderr, "stderr", job.name, stderr)),
        ]
        for pump in pumps:
            pump.daemon = True
            pump.start()
        if late is not None:
            self._terminate(proc, job.name, late)
        timed_out = False
        try:
            code = proc.wait(timeout=job.timeout_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.log(
                "run_timeout", level="warning", job=job.name, timeout_seconds=job.timeout_seconds
            )
            self._terminate(proc, job.name, f"ran past timeout_seconds ({job.timeout_seconds})")
            code = proc.wait()
        for pump in pumps:
            pump.join(timeout=5.0)  # a grandchild may hold the pipes open; do not hang on it
        with self._lock:
            terminated = proc.pid in self._terminated
            self._terminated.discard(proc.pid)
        status: RunStatus = "succeeded" if code == 0 else "failed"
        if timed_out:
            status = "timeout"
        elif terminated and code != 0:
            status = "terminated"
        last_error = stderr[-1] if code != 0 and stderr else None
        summary = tuple(line for line in stdout if line.strip() and not line[0].isspace())
        return self._finish(
            job,
            started,
            status,
            code,
            run_dir=run_dir,
            error=last_error,
            summary=summary[-SUMMARY_LINES:],
        )

    def _finish(
        self,
        job: JobConfig,
        started: datetime,
        status: RunStatus,
        code: int | None,
        *,
        run_dir: Path | None = None,
        error: str | None = None,
        summary: tuple[str, ...] = (),
    ) -> RunResult:
        """Publish a finished run: latest (a good report), the log line, the webhook."""
        savings: Mapping[str, Any] | None = None
        latest: Path | None = None
        if job.kind == "report" and status == "succeeded" and run_dir is not None:
            try:
                report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
                found = report.get("savings") if isinstance(report, dict) else None
                savings = found if isinstance(found, dict) else None
                method = update_latest(run_dir.parent, run_dir)
                latest = run_dir.parent / "latest"
                self.log("latest_updated", job=job.name, latest=str(latest), how=method)
            except (OSError, ValueError) as exc:
                status = "failed"
                error = f"report not published: {getattr(exc, 'strerror', None) or exc}"
        result = RunResult(
            job=job.name,
            kind=job.kind,
            status=status,
            started=started,
            finished=utc_now(),
            exit_code=code,
            run_dir=run_dir,
            latest=latest,
            summary=summary,
            error=error,
            savings=savings,
        )
        fields: dict[str, object] = {"status": status, "exit_code": code}
        if code is not None and code < 0:
            fields["signal"] = signal_name(-code)
        if error is not None:
            fields["error"] = error
        self.log(
            "run_finished",
            level="info" if status == "succeeded" else "error",
            job=job.name,
            duration_s=result.duration_s,
            **fields,
        )
        if job.webhook is not None:
            send_webhook(
                job.webhook,
                result.payload(),
                log=self.log,
                job=job.name,
                token_file=job.webhook_bearer_token_file,
                backoff_s=self.webhook_backoff_s,
            )
        return result

    def _pump(self, stream: IO[str] | None, name: str, job: str, tail: deque[str]) -> None:
        """Log each line the child prints as it comes (a long run shows progress).

        Redacted as it is read: the same line becomes the run's ``error`` and ``summary``
        (the webhook's body), so neither can hold what the log does not.
        """
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError), stream:
            for raw in stream:
                line = redact_text(raw.rstrip("\r\n"))
                tail.append(line)
                self.log("output", job=job, stream=name, line=line[:_MAX_LOGGED_LINE])

    def _terminate(self, proc: subprocess.Popen[str], job: str, reason: str) -> None:
        """SIGTERM to the child's process group; SIGKILL if it outlives ``kill_after_s``."""
        self.log("run_terminating", level="warning", job=job, signal="SIGTERM", reason=reason)
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=self.kill_after_s)
        except subprocess.TimeoutExpired:
            self.log("run_killing", level="warning", job=job, signal="SIGKILL")
            _signal_group(proc, signal.SIGKILL)
            proc.wait()


def _signal_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    """Signal the child's whole group, but only while the child is unreaped.

    Once reaped its pid (= the group id) may be reused by an unrelated process.
    """
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; the number itself for one this platform has no name for."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
