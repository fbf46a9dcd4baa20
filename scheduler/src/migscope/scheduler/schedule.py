"""Run migscope's reports and applies on cron schedules: the logic of ``migscope schedule``.

A schedule file names jobs (``report``: ``migscope analyze ... --out DIR``; ``apply``:
``migscope apply ...``; ``command``: any program, e.g. a script that uploads the latest
report) and a crontab line for each. ``docs/schedule.md`` is the reference and shows the
equivalent Kubernetes CronJobs; every choice below is made so that both behave alike:

* **Crontab meaning, not APScheduler's.** APScheduler 3 numbers weekdays from Monday = 0 and
  always ANDs day-of-month with day-of-week; cron (and Kubernetes, which uses robfig/cron)
  counts Sunday = 0 and ORs the two days when both are restricted. A line copied into a
  CronJob must fire at the same times, so :func:`cron_trigger` translates weekdays to names
  and builds an OR of two triggers instead of calling ``CronTrigger.from_crontab``.
* **Every run is a child process** (the same interpreter running the ``migscope`` CLI): a
  scheduler that lives for months never accumulates the analyzer's memory, and a crash or a
  hang in a run cannot take the scheduler down. A run has a time limit, after which its
  whole process group gets SIGTERM and, if still alive, SIGKILL.
* **One run at a time per scheduler.** A job never overlaps itself (``max_instances=1``:
  a firing while the previous run still runs is skipped, like ``concurrencyPolicy:
  Forbid``), and runs of different jobs are serialised by a single worker, so an apply never
  reconfigures nodes while a report is measuring them and two analyses never double the
  memory. A run waiting behind another still starts if it is less than
  ``misfire_grace_seconds`` late, else it is skipped (``startingDeadlineSeconds``).
* **Coalescing.** When the scheduler was not running (suspended, starved, clock jump) and
  several firings of a job were missed, it runs once, not once per missed firing.
* **Only good reports become ``latest``.** A report run writes ``<out_dir>/<UTC time>/``;
  ``<out_dir>/latest`` is replaced atomically (a symlink) only after the run succeeded and
  left a readable ``report.json``, because an apply job reads its plan from there.
* **Observable.** Everything is one JSON object per line on stderr (:class:`JsonLog`): state
  changes, each line the child printed, the result, the webhook's fate. A failing webhook
  is logged and never fails the run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import IO, Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails, PydanticCustomError

from migscope.core.yaml_messages import (
    FileProblemError,
    Loc,
    YamlProblem,
    compose_with_lines,
    describe_location,
    describe_value,
    first_problem,
    line_for,
)

__all__ = [
    "DEFAULT_KILL_AFTER_SECONDS",
    "DEFAULT_SHUTDOWN_GRACE_SECONDS",
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

DEFAULT_SHUTDOWN_GRACE_SECONDS = 60.0
"""How long a running child may finish after SIGTERM/SIGINT before it is terminated."""

DEFAULT_KILL_AFTER_SECONDS = 10.0
"""How long a terminated child has between SIGTERM and SIGKILL."""

WEBHOOK_ATTEMPTS = 3
WEBHOOK_TIMEOUT_SECONDS = 10.0
SUMMARY_LINES = 20
"""At most this many of the child's last stdout lines go into the webhook's ``summary``."""

_MAX_LOGGED_LINE = 4000
_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)

JobKind = Literal["report", "apply", "command"]
RunStatus = Literal["succeeded", "failed", "timeout", "terminated", "skipped", "error"]


# --------------------------------------------------------------------------------------------
# Cron lines with crontab's (and Kubernetes') meaning


CRON_MACROS: Mapping[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The ``@`` shorthands Kubernetes CronJobs accept."""

_CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DAY_ITEM = re.compile(r"(\*|\?|[0-7]|[a-z]{3})(?:-([0-7]|[a-z]{3}))?(?:/(\d+))?")


def cron_trigger(expr: str, tz: tzinfo) -> BaseTrigger:
    """An APScheduler trigger that fires exactly when cron would for ``expr``.

    ``expr`` is a crontab line (minute hour day-of-month month day-of-week), an ``@daily``
    style shorthand, or six fields with seconds first (finer than a CronJob can express;
    handy for trying a schedule out). Weekdays count Sunday = 0 (7 is Sunday too) and take
    names; when both day fields are restricted a day matching either one fires, as in cron.

    Raises:
        ValueError: the line is not valid; the message says which part.
    """
    text = CRON_MACROS.get(expr.strip().lower(), expr)
    fields = text.split()
    if len(fields) == 5:
        second, (minute, hour, day, month, weekday) = "0", fields
    elif len(fields) == 6:
        second, minute, hour, day, month, weekday = fields
    else:
        raise ValueError(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds "
            f"first, got {len(fields)}"
        )
    day = "*" if day == "?" else day
    days = _cron_weekdays(weekday)
    common = {"second": second, "minute": minute, "hour": hour, "month": month, "timezone": tz}
    try:
        if day != "*" and days is not None:
            return OrTrigger(
                [CronTrigger(day=day, **common), CronTrigger(day_of_week=days, **common)]
            )
        return CronTrigger(day=day, day_of_week=days or "*", **common)
    except ValueError as exc:
        raise ValueError(str(exc).replace('"', "'")) from None


def _cron_weekdays(field: str) -> str | None:
    """Cron's day-of-week field as APScheduler weekday names, or None for every day.

    Expanded to an explicit list because ranges and steps count from a different first day
    in APScheduler (``*/2`` is Sun, Tue, Thu, Sat in cron but Mon, Wed, Fri, Sun there).
    """
    if field in ("*", "?"):
        return None
    chosen: set[int] = set()
    for item in field.lower().split(","):
        match = _DAY_ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"day-of-week {item!r} is not a day (0-7 or sun-sat), range or step")
        first, last, step_text = match.groups()
        if first in ("*", "?"):
            if last is not None:
                raise ValueError(f"day-of-week {item!r}: '*' takes no range")
            low, high = 0, 6
        else:
            low = _cron_day(first)
            high = _cron_day(last) if last is not None else (max(low, 6) if step_text else low)
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"day-of-week {item!r}: the step must be at least 1")
        if low > high:
            raise ValueError(f"day-of-week {item!r}: the range ends before it starts")
        chosen.update(day % 7 for day in range(low, high + 1, step))
    return ",".join(_CRON_DAYS[day] for day in sorted(chosen))


def _cron_day(text: str) -> int:
    """0-7 (both ends Sunday, so ``5-7`` is Fri-Sun) or a three-letter English name."""
    if text.isdigit():
        return int(text)
    if text in _CRON_DAYS:
        return _CRON_DAYS.index(text)
    raise ValueError(f"day-of-week {text!r} is not a day (0-7 or sun-sat)")


def zone(name: str) -> tzinfo:
    """The time zone called ``name`` (IANA); UTC works even without tz data installed.

    Raises:
        ValueError: no such zone.
    """
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r} (an IANA name such as UTC or Europe/Berlin)"
        ) from None


# --------------------------------------------------------------------------------------------
# The schedule file


class ScheduleError(FileProblemError):
    """A schedule file that cannot be used; the message is ``FILE:LINE: key: what``."""


def _problem(message: str, *at: str | int) -> PydanticCustomError:
    """A validation error worded by us; ``at`` is the key below the failing model."""
    return PydanticCustomError("schedule", "{message}", {"message": message, "at": at})


_Args = Annotated[list[str], Field(min_length=1)]

# Which optional keys each kind needs (True) or refuses (False); absent: optional.
_KIND_KEYS: Mapping[str, Mapping[str, bool]] = {
    "report": {"args": True, "out_dir": True, "command": False},
    "apply": {"args": True, "out_dir": False, "command": False},
    "command": {"command": True, "args": False, "out_dir": False},
}
_ARTICLE = {"report": "a", "apply": "an", "command": "a"}


class JobConfig(BaseModel):
    """One scheduled job."""

    model_config = _STRICT
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=52)
    """A DNS label of at most 52 characters, so it can also name the equivalent CronJob."""
    kind: JobKind
    cron: str
    """Crontab line in ``ScheduleConfig.timezone`` (see :func:`cron_trigger`)."""
    args: _Args | None = None
    """``report``: arguments of ``migscope analyze`` (``--out`` is added); ``apply``: of
    ``migscope apply``."""
    command: _Args | None = None
    """``command``: the program and its arguments, run without a shell."""
    out_dir: str | None = None
    """``report``: each run writes ``<out_dir>/<UTC time>/`` and moves ``<out_dir>/latest``."""
    webhook: str | None = None
    """URL that gets a JSON POST after every run (any kind)."""
    webhook_bearer_token_file: str | None = None
    """File holding a bearer token for the webhook, re-read on every POST (rotated secrets)."""
    timeout_seconds: int = Field(default=3600, ge=1)
    """A run still going after this long is terminated (SIGTERM, then SIGKILL)."""

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        try:
            cron_trigger(value, timezone.utc)
        except ValueError as exc:
            raise _problem(f"bad cron line {value!r}: {exc}") from None
        return value

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise _problem(f"must be an http:// or https:// URL, got {value!r}")
        return value

    @model_validator(mode="after")
    def _keys_fit_kind(self) -> JobConfig:
        for key, needed in _KIND_KEYS[self.kind].items():
            present = getattr(self, key) is not None
            if needed and not present:
                raise _problem(f"required in {_ARTICLE[self.kind]} {self.kind} job", key)
            if present and not needed:
                raise _problem(f"not allowed in {_ARTICLE[self.kind]} {self.kind} job", key)
        if self.webhook_bearer_token_file is not None and self.webhook is None:
            raise _problem("needs a webhook", "webhook_bearer_token_file")
        for position, arg in enumerate(self.args or ()):
            option = arg.split("=", 1)[0]
            if self.kind == "report" and option == "--out":
                raise _problem("--out is set by out_dir; remove it from args", "args", position)
        return self


class ScheduleConfig(BaseModel):
    """A schedule file: when each job runs and how late it may still start."""

    model_config = _STRICT
    timezone: str = "UTC"
    """IANA zone the cron lines are read in (daylight saving time included)."""
    misfire_grace_seconds: int = Field(default=3600, ge=1)
    """A run that could not start on time still starts if less than this late."""
    jobs: list[JobConfig] = Field(min_length=1)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            zone(value)
        except ValueError as exc:
            raise _problem(str(exc)) from None
        return value

    @field_validator("jobs")
    @classmethod
    def _unique_names(cls, jobs: list[JobConfig]) -> list[JobConfig]:
        seen: dict[str, int] = {}
        for index, job in enumerate(jobs):
            if job.name in seen:
                raise _problem(
                    f"duplicate job name {job.name!r} (also jobs[{seen[job.name]}])", index, "name"
                )
            seen[job.name] = index
        return jobs

    @property
    def tz(self) -> tzinfo:
        """The zone the cron lines are read in."""
        return zone(self.timezone)

    def job(self, name: str) -> JobConfig:
        """The job called ``name``.

        Raises:
            KeyError: no such job.
        """
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)

    def trigger(self, job: JobConfig) -> BaseTrigger:
        """The job's trigger in the schedule's zone."""
        return cron_trigger(job.cron, self.tz)


def next_fire_times(
    config: ScheduleConfig, now: datetime | None = None
) -> list[tuple[JobConfig, datetime | None]]:
    """Each job with the next time it fires after ``now`` (None: never again)."""
    moment = now or datetime.now(config.tz)
    return [(job, config.trigger(job).get_next_fire_time(None, moment)) for job in config.jobs]


def load_schedule(path: str | os.PathLike[str]) -> ScheduleConfig:
    """Read a schedule file.

    Raises:
        ScheduleError: the file cannot be read or is not a valid schedule.
    """
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScheduleError(exc.strerror or str(exc), source=source) from None
    except UnicodeDecodeError as exc:
        raise ScheduleError(f"not UTF-8 text ({exc.reason})", source=source) from None
    return parse_schedule(text, source=source)


def parse_schedule(text: str, *, source: str = "<schedule>") -> ScheduleConfig:
    """Read a schedule from YAML text, strictly (a typo must not silently change a schedule).

    Raises:
        ScheduleError: YAML syntax, a duplicate or unknown key, a wrong type, a bad cron line
            or time zone, a key the job's kind does not take; the first problem, with its line.
    """
    try:
        data, lines = compose_with_lines(text)
    except YamlProblem as exc:
        raise ScheduleError(exc.message, source=source, line=exc.line) from None
    if data is None:
        raise ScheduleError("empty file: a schedule needs a list of jobs", source=source, line=1)
    try:
        return ScheduleConfig.model_validate(data)
    except ValidationError as exc:
        line, message = first_problem(_describe(err, lines) for err in exc.errors())
        raise ScheduleError(message, source=source, line=line) from None


def _describe(err: ErrorDetails, lines: Mapping[Loc, int]) -> tuple[int | None, str]:
    """One pydantic error as ``(line, "key: what")``."""
    loc: Loc = tuple(err["loc"])
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if kind == "schedule":
        loc = (*loc, *ctx.get("at", ()))
        message = str(ctx["message"])
    elif kind == "extra_forbidden":
        allowed = ScheduleConfig.model_fields if len(loc) == 1 else JobConfig.model_fields
        message = f"unknown key (allowed here: {', '.join(allowed)})"
    elif kind == "missing":
        return line_for(loc, lines), (
            f"{describe_location(loc[:-1])}: missing required key {loc[-1]!r}"
        )
    elif kind == "literal_error":
        message = f"must be one of report, apply, command, got {describe_value(value)}"
    elif kind in ("int_type", "int_from_float"):
        message = f"must be a whole number of seconds, got {describe_value(value)}"
    elif kind == "greater_than_equal":
        message = f"must be at least {ctx.get('ge')}, got {value!r}"
    elif kind == "string_type":
        quote = " (quote it)" if isinstance(value, (bool, int, float)) else ""
        message = f"must be a string, got {describe_value(value)}{quote}"
    elif kind == "string_pattern_mismatch":
        message = (
            f"must be lowercase letters, digits and '-' (a DNS label, like a CronJob name), "
            f"got {value!r}"
        )
    elif kind == "string_too_long":
        message = "must be at most 52 characters (the longest CronJob name)"
    elif kind == "too_short":
        message = "must list at least one job" if loc == ("jobs",) else "must not be empty"
    elif kind == "list_type":
        message = f"must be a list, got {describe_value(value)}"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = f"must be a mapping of keys, got {describe_value(value)}"
    else:
        message = f"invalid value {describe_value(value)} ({err['msg']})"
    return line_for(loc, lines), f"{describe_location(loc)}: {message}"


# --------------------------------------------------------------------------------------------
# The JSON log


class JsonLog:
    """One JSON object per line (``ts``, ``level``, ``event``, ``job``, ...), thread-safe.

    Lines rather than free text because a scheduler runs unattended in a pod: log pipelines
    (Loki, Elasticsearch, ``kubectl logs | jq``) filter by job and event without parsing.

    Args:
        stream: Where to write; None: ``sys.stderr`` at the time of each line.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def __call__(
        self, event: str, *, level: str = "info", job: str | None = None, **fields: object
    ) -> None:
        """Write one line."""
        record: dict[str, object] = {"ts": _iso(_now()), "level": level, "event": event}
        if job is not None:
            record["job"] = job
        record.update(fields)
        line = json.dumps(record, default=str, ensure_ascii=False)
        stream = self._stream or sys.stderr
        with self._lock, contextlib.suppress(OSError, ValueError):
            stream.write(line + "\n")
            stream.flush()


class _JsonLogHandler(logging.Handler):
    """APScheduler's own log records as JSON lines (only errors: we log its events)."""

    def __init__(self, log: JsonLog) -> None:
        super().__init__(level=logging.ERROR)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        self._log(
            "scheduler_error",
            level="error",
            logger=record.name,
            message=record.getMessage(),
            error=repr(error) if error is not None else None,
        )


@contextlib.contextmanager
def _apscheduler_logs_to(log: JsonLog) -> Iterator[None]:
    logger = logging.getLogger("apscheduler")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    handler = _JsonLogHandler(log)
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers = saved[2]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(moment: datetime) -> str:
    """UTC with milliseconds and ``Z``: sorts as text and parses everywhere."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------
# Running one job


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
            "started": _iso(self.started),
            "finished": _iso(self.finished),
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
        started = _now()
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
            self.log("run_error", level="error", job=name, error=f"{type(exc).__name__}: {exc}")
            return RunResult(name, job.kind, "error", started, _now(), None, error=str(exc))
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
                run_dir = _new_run_dir(Path(job.out_dir), started)
            except OSError as exc:
                error = f"cannot create a run directory in {job.out_dir}: {exc.strerror or exc}"
                return self._finish(job, started, "error", None, error=error)
            argv = child_argv(["analyze", *job.args, "--out", str(run_dir)], self.python)
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
            argv=argv,
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
            error = f"cannot start {argv[0]}: {exc.strerror or exc}"
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
            finished=_now(),
            exit_code=code,
            run_dir=run_dir,
            latest=latest,
            summary=summary,
            error=error,
            savings=savings,
        )
        fields: dict[str, object] = {"status": status, "exit_code": code}
        if code is not None and code < 0:
            fields["signal"] = _signal_name(-code)
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
        """Log each line the child prints as it comes (a long run shows progress)."""
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError), stream:
            for raw in stream:
                line = raw.rstrip("\r\n")
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


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _new_run_dir(out_dir: Path, started: datetime) -> Path:
    """A new ``<out_dir>/<YYYYMMDDTHHMMSSZ>`` (``-2``, ``-3`` ... if taken in that second).

    A compact UTC stamp: sorts by time as text and has no ``:``, which some volumes refuse.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = started.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(1, 1000):
        path = out_dir / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{out_dir}: too many runs named {stamp}")


def update_latest(out_dir: Path, run_dir: Path) -> Literal["symlink", "copy"]:
    """Make ``<out_dir>/latest`` show ``run_dir``; returns how.

    A relative symlink swapped in with one ``rename`` (atomic: a reader sees the old report or
    the new one, never neither; relative so the volume may be mounted anywhere). Where the
    volume refuses symlinks, a copy replaces the old one with two renames: a reader may then
    briefly find no ``latest``, never a half-written one.

    Raises:
        OSError: neither worked.
    """
    latest = out_dir / "latest"
    tag = f"{os.getpid()}-{threading.get_ident()}"
    staged = out_dir / f".latest-new-{tag}"
    _remove(staged)
    if not (latest.is_dir() and not latest.is_symlink()):
        try:
            os.symlink(run_dir.name, staged, target_is_directory=True)
        except OSError:
            pass
        else:
            os.replace(staged, latest)
            return "symlink"
    shutil.copytree(run_dir, staged, symlinks=True)
    old = out_dir / f".latest-old-{tag}"
    _remove(old)
    if os.path.lexists(latest):
        os.rename(latest, old)
    os.rename(staged, latest)
    _remove(old)
    return "copy"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _version() -> str:
    try:
        return metadata.version("migscope")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def send_webhook(
    url: str,
    payload: Mapping[str, Any],
    *,
    log: JsonLog,
    job: str,
    token_file: str | None = None,
    attempts: int = WEBHOOK_ATTEMPTS,
    backoff_s: float = 0.5,
    timeout_s: float = WEBHOOK_TIMEOUT_SECONDS,
) -> bool:
    """POST ``payload`` as JSON; retry network errors, 408, 429 and 5xx; log, never raise.

    The URL itself is never logged (only its host): chat webhooks carry their secret in the
    path. Returns whether the server took it.
    """
    host = urlsplit(url).hostname
    headers = {"User-Agent": f"migscope/{_version()}"}
    if token_file is not None:
        try:
            headers["Authorization"] = f"Bearer {Path(token_file).read_text('utf-8').strip()}"
        except (OSError, UnicodeDecodeError) as exc:
            reason = f"{token_file}: {getattr(exc, 'strerror', None) or exc}"
            log("webhook_failed", level="error", job=job, host=host, reason=reason, attempts=0)
            return False
    problem = "not sent"
    attempt = 0
    with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
        for attempt in range(1, attempts + 1):
            try:
                response = client.post(url, json=payload, headers=headers)
            except httpx.HTTPError as exc:
                problem, retry = f"{type(exc).__name__}: {exc}", True
            else:
                if response.is_success:
                    log(
                        "webhook_sent",
                        job=job,
                        host=host,
                        status_code=response.status_code,
                        attempts=attempt,
                    )
                    return True
                code = response.status_code
                problem, retry = f"HTTP {code}", code >= 500 or code in (408, 429)
            if not retry or attempt == attempts:
                break
            log("webhook_retry", level="warning", job=job, host=host, reason=problem)
            time.sleep(backoff_s * 2 ** (attempt - 1))
    log("webhook_failed", level="error", job=job, host=host, reason=problem, attempts=attempt)
    return False


# --------------------------------------------------------------------------------------------
# The long-running scheduler and --once


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
            self.first = _signal_name(signum)


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
    """
    runner = runner or Runner(config, log)
    scheduler = BackgroundScheduler(
        timezone=config.tz,
        # One worker: runs of different jobs wait for each other (see the module docstring).
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
    with _Signals() as signals, _apscheduler_logs_to(log):
        scheduler.start()
        log(
            "scheduler_started",
            pid=os.getpid(),
            timezone=config.timezone,
            misfire_grace_seconds=config.misfire_grace_seconds,
            jobs=[
                {"job": j.id, "next": _iso(j.next_run_time) if j.next_run_time else None}
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
                scheduled=_iso(times[-1]) if times[-1] else None,
                reason="the previous run of this job has not finished (no overlapping runs)",
            )
        elif event.code == EVENT_JOB_MISSED:
            log(
                "run_skipped",
                level="warning",
                job=event.job_id,
                scheduled=_iso(event.scheduled_run_time),
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
