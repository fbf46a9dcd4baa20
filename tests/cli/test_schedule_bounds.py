"""``misfire_grace_seconds`` and ``timeout_seconds`` are bounded (issue 12, item 17).

A huge ``misfire_grace_seconds`` passed ``migscope schedule --check``, and then no job ever
ran: APScheduler turns the grace into a ``timedelta`` at every firing, which overflows
(``OverflowError`` in the worker, the run lost). A ``timeout_seconds`` past a float's range
failed every run the same way. Both are now at most :data:`MAX_SECONDS` (7 days), refused
with one line naming the line and the key.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from apscheduler.events import EVENT_JOB_EXECUTED
from apscheduler.executors.base import run_job
from apscheduler.schedulers.background import BackgroundScheduler
from click.testing import CliRunner

from migscope.cli.main import cli
from migscope.scheduler import parse_schedule
from migscope.scheduler._config import MAX_SECONDS

JOBS = """\
jobs:
  - name: nightly
    kind: command
    cron: "0 3 * * *"
    command: ["/bin/true"]
"""
"""A valid schedule, its job's keys on lines 3 to 5 (``timeout_seconds`` goes on line 6)."""


def _check(tmp_path: Path, text: str) -> tuple[int, str, str]:
    path = tmp_path / "schedule.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["schedule", "--config", str(path), "--check"])
    return result.exit_code, result.stdout, result.stderr.replace(str(path), "FILE")


def test_apscheduler_loses_a_run_whose_grace_overflows() -> None:
    """Why the bound exists: the grace the scheduler hands APScheduler must fit a timedelta."""

    def fired_with(grace: int) -> list[int]:
        scheduler = BackgroundScheduler(timezone=timezone.utc)
        job = scheduler.add_job(lambda: None, "date", misfire_grace_time=grace)
        now = datetime.now(timezone.utc)
        return [event.code for event in run_job(job, "default", [now], "test")]

    with pytest.raises(OverflowError):
        fired_with(10**14)
    assert fired_with(MAX_SECONDS) == [EVENT_JOB_EXECUTED]
    assert timedelta(seconds=MAX_SECONDS) == timedelta(days=7)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "misfire_grace_seconds: 100000000000000\n" + JOBS,
            1,
            "misfire_grace_seconds: must be at most 604800 seconds (7 days), got 100000000000000",
        ),
        (
            f"misfire_grace_seconds: {MAX_SECONDS + 1}\n" + JOBS,
            1,
            "misfire_grace_seconds: must be at most 604800 seconds (7 days), got 604801",
        ),
        (
            JOBS + f"    timeout_seconds: {10**400}\n",
            6,
            "jobs[0].timeout_seconds: must be at most 604800 seconds (7 days), got 1000",
        ),
        (
            JOBS + "    timeout_seconds: 604801\n",
            6,
            "jobs[0].timeout_seconds: must be at most 604800 seconds (7 days), got 604801",
        ),
    ],
    ids=["grace-huge", "grace-a-second-over", "timeout-huge", "timeout-a-second-over"],
)
def test_check_refuses_a_bound_past_a_week_with_its_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    code, out, err = _check(tmp_path, text)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"migscope: error: FILE:{line}: {message}"), err


def test_a_week_is_still_accepted(tmp_path: Path) -> None:
    text = (
        f"misfire_grace_seconds: {MAX_SECONDS}\n" + JOBS + f"    timeout_seconds: {MAX_SECONDS}\n"
    )
    code, out, err = _check(tmp_path, text)
    assert code == 0, err
    assert "nightly" in out
    config = parse_schedule(text)
    assert (config.misfire_grace_seconds, config.jobs[0].timeout_seconds) == (
        MAX_SECONDS,
        MAX_SECONDS,
    )
