"""One duration type for every flag and file: ``90s``, ``15m``, ``36h``, ``7d``, ``1h30m``.

Why one: ``--window 7d``, ``--timeout 30s``, a scenario's ``duration: 1h30m`` and a
schedule's ``timeout: 2h`` must mean the same thing and fail the same way. The units are
Prometheus' (ms, s, m, h, d, w); parts add up in any order; a bare number is seconds, which
keeps ``--timeout 30`` working where seconds were the old unit. Booleans are refused because
YAML turns ``yes`` into ``True``, and a duration of one second would be a silent surprise.
"""

from __future__ import annotations

import math
import re

from migscope.core._errors import UserError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_EXAMPLES = "e.g. 90s, 15m, 36h, 7d or 1h30m"


class DurationError(UserError, ValueError):
    """Not a duration, or one outside what the caller accepts (the message says which)."""


def parse_duration(
    value: str | float,
    *,
    what: str = "",
    positive: bool = False,
    unit_required: bool = False,
) -> float:
    """Seconds in ``value``: a number of seconds, or text such as ``1h30m``.

    Args:
        value: What the user wrote (a flag's text or a YAML scalar).
        what: The name the error message starts with (``--window``, ``timeout``); none
            when the caller places the message itself.
        positive: Refuse zero (a window or timeout of nothing).
        unit_required: Refuse a bare number in text, where one would be ambiguous (is
            ``--max-plan-age 24`` hours or seconds?). Numbers from YAML stay seconds.

    Raises:
        DurationError: not a duration, negative, not finite, or zero when ``positive``.
    """
    at = f"{what}: " if what else ""
    if isinstance(value, bool):
        raise DurationError(f"{at}not a duration: {value!r} ({_EXAMPLES})")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = value.strip().lower().replace(" ", "")
        if _NUMBER.fullmatch(text) and not unit_required:
            seconds = float(text)
        elif text and not _PART.sub("", text):
            seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(text))
        else:
            raise DurationError(f"{at}not a duration: {value!r} ({_EXAMPLES})")
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"{at}must be a finite duration >= 0, got {value!r}")
    if positive and seconds == 0:
        raise DurationError(f"{at}must be longer than zero, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """``seconds`` the way :func:`parse_duration` reads it back: ``1d12h``, ``90m``, ``45s``.

    Whole seconds only (a sub-second rest is rounded); zero is ``0s``.
    """
    rest = round(seconds)
    if rest <= 0:
        return "0s"
    parts = []
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
