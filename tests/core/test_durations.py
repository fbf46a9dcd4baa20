"""One duration grammar for every flag and file (migscope.core._durations)."""

from __future__ import annotations

import math

import pytest

from migscope.core._durations import DurationError, format_duration, parse_duration
from migscope.core._errors import UserError


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90s", 90.0),
        ("15m", 900.0),
        ("1h30m", 5400.0),
        ("30m1h", 5400.0),  # parts add up in any order
        ("1h 30m", 5400.0),
        ("100ms", 0.1),
        ("1w", 604800.0),
        ("30", 30.0),  # a bare number is seconds: the old unit of --timeout and --step
        ("2.5", 2.5),
        (45, 45.0),
        (0.5, 0.5),
        ("0s", 0.0),
    ],
)
def test_durations(value: str | float, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["", "soon", "5 parsecs", "-3s", "1y", "h", True, math.inf, -1])
def test_what_is_not_a_duration_is_a_user_error(value: object) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration(value)  # type: ignore[arg-type]
    assert isinstance(err.value, UserError)
    assert isinstance(err.value, ValueError)  # pydantic validators turn it into their error
    assert "\n" not in str(err.value)


def test_options_name_the_flag_refuse_zero_and_bare_numbers() -> None:
    with pytest.raises(DurationError, match=r"^--window: must be longer than zero, got '0d'$"):
        parse_duration("0d", what="--window", positive=True)
    with pytest.raises(DurationError, match="not a duration: '24'"):
        parse_duration("24", unit_required=True)
    assert parse_duration(24.0, unit_required=True) == 24.0  # YAML numbers stay seconds


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 3600, 5400, 86400 + 3600 + 61, 8 * 86400])
def test_format_reads_back(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


def test_format_is_the_short_form() -> None:
    assert [format_duration(s) for s in (0, 60.0, 604800, 129600)] == ["0s", "1m", "1w", "1d12h"]
