"""``migscope schedule``: runs migscope jobs (analyze, apply) on cron schedules.

A schedule file names jobs (``report``: ``migscope analyze ... --out DIR``; ``apply``:
``migscope apply ...``; ``command``: any program, e.g. a script that uploads the latest
report) and a crontab line for each. ``docs/schedule.md`` is the reference and shows the
equivalent Kubernetes CronJobs; every choice is made so that both behave alike. Each run is
a child process (``migscope analyze ...``), so a job that crashes, leaks or hangs cannot take
the service with it, and a run on a schedule is exactly the command a person would type.

One module per job:

* :mod:`~migscope.scheduler._cron`: crontab lines with crontab's meaning (Sunday = 0, the
  two day fields ORed), not APScheduler's, and time zones.
* :mod:`~migscope.scheduler._config`: the schedule file, read strictly, and its errors.
* :mod:`~migscope.scheduler._joblog`: everything is one JSON object per line on stderr.
* :mod:`~migscope.scheduler._runs`: one run as a child process with a time limit.
* :mod:`~migscope.scheduler._rundirs`: a run directory per report; only good reports become
  ``latest``.
* :mod:`~migscope.scheduler._webhook`: a POST after each run, which never fails the run.
* :mod:`~migscope.scheduler._service`: the scheduler itself (one run at a time, coalescing,
  misfire grace, a clean stop on SIGTERM) and ``--once``.
* :mod:`~migscope.scheduler._defaults`: the numbers ``migscope schedule --help`` shows.

The names below are this distribution's front door. They load on first use (PEP 562): the
CLI imports this package to print ``--help``, which must not load APScheduler, pydantic or
YAML (``tests/cli/test_lazy_commands.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migscope.core import lazy_exports

if TYPE_CHECKING:
    from migscope.scheduler._config import (
        ArgsCheck,
        JobArgsError,
        JobConfig,
        JobKind,
        ScheduleConfig,
        ScheduleError,
        load_schedule,
        next_fire_times,
        parse_schedule,
    )
    from migscope.scheduler._cron import cron_trigger, zone
    from migscope.scheduler._defaults import (
        DEFAULT_KILL_AFTER_SECONDS,
        DEFAULT_SHUTDOWN_GRACE_SECONDS,
    )
    from migscope.scheduler._joblog import JsonLog
    from migscope.scheduler._rundirs import update_latest
    from migscope.scheduler._runs import Runner, RunResult, child_argv
    from migscope.scheduler._service import run_once, serve
    from migscope.scheduler._webhook import send_webhook

_HOME = {
    "ArgsCheck": "_config",
    "JobArgsError": "_config",
    "JobConfig": "_config",
    "JobKind": "_config",
    "ScheduleConfig": "_config",
    "ScheduleError": "_config",
    "load_schedule": "_config",
    "next_fire_times": "_config",
    "parse_schedule": "_config",
    "cron_trigger": "_cron",
    "zone": "_cron",
    "DEFAULT_KILL_AFTER_SECONDS": "_defaults",
    "DEFAULT_SHUTDOWN_GRACE_SECONDS": "_defaults",
    "JsonLog": "_joblog",
    "update_latest": "_rundirs",
    "RunResult": "_runs",
    "Runner": "_runs",
    "child_argv": "_runs",
    "run_once": "_service",
    "serve": "_service",
    "send_webhook": "_webhook",
}
"""Each exported name's module (under ``migscope.scheduler``)."""

__all__ = [
    "DEFAULT_KILL_AFTER_SECONDS",
    "DEFAULT_SHUTDOWN_GRACE_SECONDS",
    "ArgsCheck",
    "JobArgsError",
    "JobConfig",
    "JobKind",
    "JsonLog",
    "RunResult",
    "Runner",
    "ScheduleConfig",
    "ScheduleError",
    "child_argv",
    "cron_trigger",
    "load_schedule",
    "next_fire_times",
    "parse_schedule",
    "run_once",
    "send_webhook",
    "serve",
    "update_latest",
    "zone",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
