"""``migscope schedule``: runs migscope jobs (analyze, apply) on cron schedules.

A schedule file names jobs (``report``: ``migscope analyze ... --out DIR``; ``apply``:
``migscope apply ...``; ``command``: any program, e.g. a script that uploads the latest
report) and a crontab line for each. ``docs/schedule.md`` is the reference and shows the
equivalent Kubernetes CronJobs; every choice is made so that both behave alike. Each run is
a child process (``migscope analyze ...``), so a job that crashes, leaks or hangs cannot take
the service with it, and a run on a schedule is exactly the command a person would type.

One module per job:

* :mod:`~migscope.scheduler.cron`: crontab lines with crontab's meaning (Sunday = 0, the
  two day fields ORed), not APScheduler's, and time zones.
* :mod:`~migscope.scheduler.config`: the schedule file, read strictly, and its errors.
* :mod:`~migscope.scheduler.joblog`: everything is one JSON object per line on stderr.
* :mod:`~migscope.scheduler.runs`: one run as a child process with a time limit.
* :mod:`~migscope.scheduler.rundirs`: a run directory per report; only good reports become
  ``latest``.
* :mod:`~migscope.scheduler.webhook`: a POST after each run, which never fails the run.
* :mod:`~migscope.scheduler.service`: the scheduler itself (one run at a time, coalescing,
  misfire grace, a clean stop on SIGTERM) and ``--once``.
"""

from migscope.scheduler.config import (
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
from migscope.scheduler.cron import cron_trigger, zone
from migscope.scheduler.joblog import JsonLog
from migscope.scheduler.rundirs import update_latest
from migscope.scheduler.runs import DEFAULT_KILL_AFTER_SECONDS, Runner, RunResult, child_argv
from migscope.scheduler.service import DEFAULT_SHUTDOWN_GRACE_SECONDS, run_once, serve
from migscope.scheduler.webhook import send_webhook

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
