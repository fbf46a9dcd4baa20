"""The schedule file: its pydantic models, reading it strictly, and its errors' wording.

Why strict: a typo in a schedule must not silently change when reports and applies run, so
unknown keys, wrong types, bad cron lines and keys a job's kind does not take are refused
with ``FILE:LINE: key: what is wrong`` (:class:`ScheduleError`), worded by
:func:`migscope.core._validation.describe_error` plus the few wordings of our own below.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Annotated, Literal, get_args
from urllib.parse import urlsplit

from apscheduler.triggers.base import BaseTrigger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails, PydanticCustomError

from migscope.core import (
    FileProblemError,
    Loc,
    Wording,
    YamlProblem,
    compose_with_lines,
    describe_error,
    first_problem,
    redact_text,
)
from migscope.scheduler._cron import cron_trigger, zone

_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)

MAX_SECONDS = 7 * 86400
"""The most ``misfire_grace_seconds`` and ``timeout_seconds`` may be: 7 days.

Unbounded, a number ``--check`` accepted could break the scheduler later: APScheduler turns
the misfire grace into a ``timedelta`` at every firing, which overflows past about 2.7
million years, so the run failed and the job never ran; and a time limit past a float's
range fails every run. No schedule needs either longer than a week (a weekly job that is a
week late is the next week's run; a run that needs a week is not a scheduled job).
"""

JobKind = Literal["report", "apply", "command"]


class ScheduleError(FileProblemError):
    """A schedule file that cannot be used; the message is ``FILE:LINE: key: what``."""


class JobArgsError(ScheduleError):
    """Jobs whose ``migscope`` arguments the command would refuse: one problem per bad job.

    Attributes:
        problems: One :class:`ScheduleError` per bad job, in file order; the exception's own
            message is the first one's.
    """

    def __init__(self, problems: Sequence[ScheduleError]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0]
        super().__init__(first.reason, source=first.source, line=first.line)


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
    timeout_seconds: int = Field(default=3600, ge=1, le=MAX_SECONDS)
    """A run still going after this long is terminated (SIGTERM, then SIGKILL)."""

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        try:
            cron_trigger(value, timezone.utc)
        except ValueError as exc:
            raise _problem(f"bad cron line {value!r}: {exc}") from exc
        return value

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise _problem(f"must be an http:// or https:// URL, got {redact_text(value)!r}")
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


ArgsCheck = Callable[[JobConfig], tuple[int | None, str] | None]
"""Checks a job's ``migscope`` arguments without running anything: None when they parse,
else ``(position in args or None, what is wrong)``.

The scheduler cannot know the ``migscope`` command line itself (it only runs it as a child
process, and the layers keep it apart from the CLI), so the CLI passes its own parser in.
"""


class ScheduleConfig(BaseModel):
    """A schedule file: when each job runs and how late it may still start."""

    model_config = _STRICT
    timezone: str = "UTC"
    """IANA zone the cron lines are read in (daylight saving time included)."""
    misfire_grace_seconds: int = Field(default=3600, ge=1, le=MAX_SECONDS)
    """A run that could not start on time still starts if less than this late."""
    jobs: list[JobConfig] = Field(min_length=1)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            zone(value)
        except ValueError as exc:
            raise _problem(str(exc)) from exc
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
    """Each job with the next time it fires after ``now`` (None: never again).

    Args:
        config: The schedule.
        now: The moment to look from (default: now, in the schedule's zone).
    """
    moment = now or datetime.now(config.tz)
    return [(job, config.trigger(job).get_next_fire_time(None, moment)) for job in config.jobs]


def load_schedule(
    path: str | os.PathLike[str], *, check_args: ArgsCheck | None = None
) -> ScheduleConfig:
    """Read a schedule file.

    Args:
        path: The schedule file (YAML).
        check_args: Checks each ``report``/``apply`` job's arguments (see
            :func:`parse_schedule`).

    Raises:
        ScheduleError: the file cannot be read or is not a valid schedule.
        JobArgsError: it is, but ``check_args`` refused the arguments of some jobs.
    """
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScheduleError(exc.strerror or str(exc), source=source) from exc
    except UnicodeDecodeError as exc:
        raise ScheduleError(f"not UTF-8 text ({exc.reason})", source=source) from exc
    return parse_schedule(text, source=source, check_args=check_args)


def parse_schedule(
    text: str, *, source: str = "<schedule>", check_args: ArgsCheck | None = None
) -> ScheduleConfig:
    """Read a schedule from YAML text, strictly (a typo must not silently change a schedule).

    Args:
        text: The YAML document.
        source: The name messages give the file.
        check_args: Called with every ``report`` and ``apply`` job once the file is valid,
            so that a misspelt flag or a bad value in ``args`` fails now, at ``--check`` or
            start-up, and not at the job's first run a week later. ``command`` jobs run any
            program and are not checked.

    Raises:
        ScheduleError: YAML syntax, a duplicate or unknown key, a wrong type, a bad cron line
            or time zone, a key the job's kind does not take; the first problem, with its line.
        JobArgsError: the file is valid but ``check_args`` refused some jobs' arguments;
            every such job, each with its line.
    """
    try:
        data, lines = compose_with_lines(text)
    except YamlProblem as exc:
        raise ScheduleError(exc.message, source=source, line=exc.line) from exc
    if data is None:
        raise ScheduleError("empty file: a schedule needs a list of jobs", source=source, line=1)
    try:
        config = ScheduleConfig.model_validate(data)
    except ValidationError as exc:
        line, message = first_problem(_describe(err, lines) for err in exc.errors())
        raise ScheduleError(message, source=source, line=line) from exc
    if check_args is not None:
        _check_job_args(config, check_args, lines, source)
    return config


def _check_job_args(
    config: ScheduleConfig, check: ArgsCheck, lines: Mapping[Loc, int], source: str
) -> None:
    """Raise :class:`JobArgsError` naming every job whose arguments ``check`` refuses."""
    problems: list[ScheduleError] = []
    for index, job in enumerate(config.jobs):
        if job.kind == "command":
            continue
        found = check(job)
        if found is None:
            continue
        position, what = found
        at: Loc = ("jobs", index, "args") + (() if position is None else (position,))
        key = f"jobs[{index}].args" + ("" if position is None else f"[{position}]")
        line = lines.get(at, lines.get(("jobs", index, "args")))
        message = f"{key}: job {job.name!r}: {redact_text(what)}"
        problems.append(ScheduleError(message, source=source, line=line))
    if problems:
        raise JobArgsError(problems)


# Where a schedule's wording differs from BUILTIN_WORDING: seconds, not just integers, and
# job names are CronJob names.
_WORDING: Wording = {
    "literal_error": f"must be one of {', '.join(get_args(JobKind))}, got {{value}}",
    "less_than_equal": (
        f"must be at most {{le}} seconds ({MAX_SECONDS // 86400} days), got {{raw}}"
    ),
    "int_type": "must be a whole number of seconds, got {value}",
    "int_from_float": "must be a whole number of seconds, got {value}",
    "string_pattern_mismatch": (
        "must be lowercase letters, digits and '-' (a DNS label, like a CronJob name), got {raw}"
    ),
    "string_too_long": "must be at most {max_length} characters (the longest CronJob name)",
}


def _describe(err: ErrorDetails, lines: Mapping[Loc, int]) -> tuple[int | None, str]:
    """One pydantic error as ``(line, "key: what")``, in the schedule's words."""
    wording = dict(_WORDING)
    if tuple(err["loc"]) == ("jobs",):
        wording["too_short"] = "must list at least one job"
    if isinstance(err.get("input"), (bool, int, float)):  # YAML typed an unquoted scalar
        wording["string_type"] = "must be a string, got {value} (quote it)"
    return describe_error(
        err, lines, custom_type="schedule", allowed=_allowed_keys, wording=wording
    )


def _allowed_keys(loc: Loc) -> Sequence[str]:
    """The keys a mapping at ``loc`` may have: the file's top level, or a job."""
    return list(ScheduleConfig.model_fields if not loc else JobConfig.model_fields)
