"""Crontab lines with crontab's (and Kubernetes') meaning, as APScheduler triggers.

Why not ``CronTrigger.from_crontab``: APScheduler 3 numbers weekdays from Monday = 0 and
always ANDs day-of-month with day-of-week; cron (and Kubernetes, which uses robfig/cron)
counts Sunday = 0 and ORs the two days when both are restricted. A line copied into a
CronJob must fire at the same times, so :func:`cron_trigger` translates weekdays to names
and builds an OR of two triggers. :func:`zone` names the time zone the lines are read in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

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
        raise ValueError(str(exc).replace('"', "'")) from exc


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
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {name!r} (an IANA name such as UTC or Europe/Berlin)"
        ) from exc
