"""The scheduler's front door: the names it exports, each loaded on first use.

As httpx's ``test_exported_members.py``: the list is held here, so a name added to or
dropped from the front door is a decision, not an accident.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import migscope.scheduler

EXPORTED = [
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


def test_the_front_door_exports_exactly_these_names() -> None:
    assert migscope.scheduler.__all__ == EXPORTED
    for name in EXPORTED:
        assert getattr(migscope.scheduler, name) is not None
        assert name in dir(migscope.scheduler)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        migscope.scheduler.nope  # noqa: B018


def test_importing_the_front_door_loads_no_engine() -> None:
    """``migscope schedule --help`` imports the package for its defaults only."""
    code = (
        "import sys, migscope.scheduler\n"
        "from migscope.scheduler import DEFAULT_SHUTDOWN_GRACE_SECONDS\n"
        "print(sorted(m for m in sys.modules if m.startswith(('apscheduler', 'yaml',"
        " 'pydantic', 'migscope.scheduler.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['migscope.scheduler.defaults']"
