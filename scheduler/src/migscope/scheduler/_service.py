"""The long-running scheduler (:func:`serve`) and a single run now (:func:`run_once`).

Why these choices (the equivalent Kubernetes CronJob in brackets, so that both behave alike):

* **One run at a time per scheduler.** A job never overlaps itself (``max_instances=1``: a
  firing while the previous run still runs is skipped, like ``concurrencyPolicy: Forbid``),
  and runs of different jobs are serialised by a single worker, so an apply never
  reconfigures nodes while a report is measuring them and two analyses never double the
  memory. A run waiting behind another still starts if it is less than
  ``misfire_grace_seconds`` late, else it is skipped (``startingDeadlineSeconds``).
* **Coalescing.** When the scheduler was not running (suspended, starved, clock jump) and
  several firings of a job were missed, it runs once, not once per missed firing.
* **A clean stop.** On SIGTERM/SIGINT no new run starts and a running child may finish
  within a grace; a second signal terminates it at once (a deleted pod).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from migscope.scheduler._config import ScheduleConfig
from migscope.scheduler._defaults import DEFAULT_SHUTDOWN_GRACE_SECONDS
from migscope.scheduler._joblog import JsonLog, apscheduler_logs_to, iso_utc
from migscope.scheduler._runs import Runner, RunResult, signal_name


class _Signals:
    """SIGTERM/SIGINT counted by flags only (the handler takes no locks), restored on exit.

    The first signal asks for a clean stop; a second one says "now": running children are
    terminated without waiting out the grace.
    """

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.first is None:
            self.first = signal_name(signum)


def _drain(runner: Runner, signals: _Signals, grace_s: float, log: JsonLog) -> None:
    """Let running children finish for up to ``grace_s``, then terminate them."""
    running = runner.running()
    if not running:
        return
    log("waiting_for_runs", jobs=running, grace_s=grace_s)
    deadline = time.monotonic() + grace_s
    while signals.count < 2 and time.monotonic() < deadline:
        if runner.wait_idle(min(0.2, max(0.0, deadline - time.monotonic()))):
            return
    reason = "second signal" if signals.count >= 2 else f"shutdown grace ({grace_s:g} s) over"
    runner.terminate_all(reason)
    runner.wait_idle(None)


def serve(
    config: ScheduleConfig,
    *,
    log: JsonLog,
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_SECONDS,
    runner: Runner | None = None,
) -> int:
    """Run the schedule until SIGTERM or SIGINT; returns the exit status (0: clean stop).

    On the first signal no new run starts, a running child may finish for up to
    ``shutdown_grace_s`` and is then terminated; a second signal terminates it at once.

    Args:
        config: The schedule.
        log: Where every event goes.
        shutdown_grace_s: Seconds a running child may finish after the first signal.
        runner: Runs the jobs (default: a :class:`Runner` of ``config`` and ``log``).
    """
    runner = runner or Runner(config, log)
    scheduler = BackgroundScheduler(
        timezone=config.tz,
        # One worker: runs of different jobs wait for each other (the module docstring).
        executors={"default": ThreadPoolExecutor(max_workers=1)},
        job_defaults={
            "coalesce": True,
            "max_instances": 1,
            "misfire_grace_time": config.misfire_grace_seconds,
        },
    )
    for job in config.jobs:
        scheduler.add_job(
            runner.run, config.trigger(job), args=[job.name], id=job.name, name=job.name
        )
    scheduler.add_listener(
        _scheduler_events(log, config), EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_ERROR
    )
    with _Signals() as signals, apscheduler_logs_to(log):
        scheduler.start()
        log(
            "scheduler_started",
            pid=os.getpid(),
            timezone=config.timezone,
            misfire_grace_seconds=config.misfire_grace_seconds,
            jobs=[
                {"job": j.id, "next": iso_utc(j.next_run_time) if j.next_run_time else None}
                for j in scheduler.get_jobs()
            ],
        )
        while not signals.count:
            time.sleep(0.2)
        log("scheduler_stopping", signal=signals.first, running=runner.running())
        runner.stop_accepting()
        scheduler.shutdown(wait=False)
        _drain(runner, signals, shutdown_grace_s, log)
        log("scheduler_stopped")
    return 0


def _scheduler_events(log: JsonLog, config: ScheduleConfig) -> Any:
    """A listener that logs the runs APScheduler did not start, and why."""

    def listen(event: Any) -> None:
        if event.code == EVENT_JOB_MAX_INSTANCES:
            times = getattr(event, "scheduled_run_times", None) or [None]
            log(
                "run_skipped",
                level="warning",
                job=event.job_id,
                scheduled=iso_utc(times[-1]) if times[-1] else None,
                reason="the previous run of this job has not finished (no overlapping runs)",
            )
        elif event.code == EVENT_JOB_MISSED:
            log(
                "run_skipped",
                level="warning",
                job=event.job_id,
                scheduled=iso_utc(event.scheduled_run_time),
                reason=f"more than misfire_grace_seconds ({config.misfire_grace_seconds}) late",
            )
        elif event.code == EVENT_JOB_ERROR:
            log("run_error", level="error", job=event.job_id, error=repr(event.exception))

    return listen


def run_once(
    config: ScheduleConfig,
    name: str,
    *,
    log: JsonLog,
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_SECONDS,
    runner: Runner | None = None,
) -> RunResult:
    """Run the job ``name`` now, as its scheduled runs do (what a CronJob's pod runs).

    SIGTERM/SIGINT while it runs (a deleted pod) give the child ``shutdown_grace_s`` to
    finish before it is terminated.

    Args:
        config: The schedule.
        name: The job to run.
        log: Where every event goes.
        shutdown_grace_s: Seconds the child may finish after a signal.
        runner: Runs the job (default: a :class:`Runner` of ``config`` and ``log``).

    Raises:
        KeyError: no such job.
    """
    config.job(name)
    runner = runner or Runner(config, log)
    results: list[RunResult] = []
    worker = threading.Thread(target=lambda: results.append(runner.run(name)), name=name)
    with _Signals() as signals:
        worker.start()
        while worker.is_alive() and not signals.count:
            worker.join(0.2)
        if worker.is_alive():
            log("stopping", signal=signals.first, running=runner.running())
            runner.stop_accepting()
            _drain(runner, signals, shutdown_grace_s, log)
        worker.join()
    return results[0]
