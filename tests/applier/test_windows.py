"""Maintenance windows: day names in any case, time zones exactly as the tz database names them.

Zone names are file names under the tz database (case-sensitive on Linux), so lower-casing
the whole spec made the documented Helm example, ``sat-sun 01:00-05:00 Europe/Berlin``,
unusable. The checks here run at real instants on both sides of the DST changes, because a
window is local wall-clock time: 01:00 in Berlin is 00:00 UTC in winter, 23:00 UTC the day
before in summer.
"""

from __future__ import annotations

from datetime import datetime, time, timezone

import pytest

from migscope.applier._settings import ApplySettings, parse_window_spec


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def test_the_helm_example_parses_with_the_zone_as_written() -> None:
    window = parse_window_spec("sat-sun 01:00-05:00 Europe/Berlin")
    assert window.tz == "Europe/Berlin"
    assert window.days == frozenset({5, 6})
    assert (window.start, window.end) == (time(1), time(5))


@pytest.mark.parametrize(
    "spec",
    [
        "Sat-Sun 01:00-05:00 Europe/Berlin",
        "SAT-SUN 01:00-05:00 Europe/Berlin",
        "  sat-SUN   01:00-05:00   Europe/Berlin ",
    ],
)
def test_day_names_are_case_insensitive(spec: str) -> None:
    window = parse_window_spec(spec)
    assert window.days == frozenset({5, 6})
    assert window.tz == "Europe/Berlin"


@pytest.mark.parametrize("spec", ["mon 00:00-06:00 UTC", "mon 00:00-06:00 utc", "mon 00:00-06:00"])
def test_utc_in_any_case_or_left_out(spec: str) -> None:
    window = parse_window_spec(spec)
    assert window.tz == "UTC"
    assert window.contains(_utc("2026-01-05T05:59:00"))  # a Monday
    assert not window.contains(_utc("2026-01-05T06:00:00"))


@pytest.mark.parametrize(
    ("instant", "inside"),
    [
        # Winter, CET = UTC+1: Saturday 01:00-05:00 local is 00:00-04:00 UTC.
        ("2026-01-10T00:00:00", True),  # Sat 01:00 local
        ("2026-01-09T23:59:00", False),  # Sat 00:59 local
        ("2026-01-11T03:59:00", True),  # Sun 04:59 local
        ("2026-01-11T04:00:00", False),  # Sun 05:00 local
        ("2026-01-12T00:30:00", False),  # Mon 01:30 local
        # Summer, CEST = UTC+2: Saturday 01:00 local is Friday 23:00 UTC.
        ("2026-07-10T23:00:00", True),  # Sat 01:00 local, still Friday in UTC
        ("2026-07-10T22:59:00", False),  # Sat 00:59 local
        ("2026-07-12T02:59:00", True),  # Sun 04:59 local
        ("2026-07-12T03:30:00", False),  # Sun 05:30 local, 03:30 UTC (inside in winter)
        ("2026-07-11T00:30:00", True),  # Sat 02:30 local
        # The spring-forward night (Sun 29 March 2026, 02:00 CET -> 03:00 CEST).
        ("2026-03-29T00:30:00", True),  # 01:30 CET
        ("2026-03-29T01:30:00", True),  # 03:30 CEST (02:xx does not exist that night)
        ("2026-03-29T02:59:00", True),  # 04:59 CEST
        ("2026-03-29T03:00:00", False),  # 05:00 CEST: the window was one hour short
        # The fall-back night (Sun 25 October 2026, 03:00 CEST -> 02:00 CET).
        ("2026-10-24T23:00:00", True),  # 01:00 CEST
        ("2026-10-25T03:59:00", True),  # 04:59 CET: the window was one hour long
        ("2026-10-25T04:00:00", False),  # 05:00 CET
    ],
)
def test_a_berlin_window_follows_daylight_saving_time(instant: str, inside: bool) -> None:
    settings = ApplySettings(windows=(parse_window_spec("sat-sun 01:00-05:00 Europe/Berlin"),))
    assert settings.in_window(_utc(instant)) is inside


@pytest.mark.parametrize(
    ("spec", "zone"),
    [
        ("sat-sun 01:00-05:00 Europe/Nowhere", "Europe/Nowhere"),
        ("sat-sun 01:00-05:00 europe/berlin", "europe/berlin"),
        ("sat-sun 01:00-05:00 Europe", "Europe"),  # a directory of the tz database
        ("sat-sun 01:00-05:00 ../etc/passwd", "../etc/passwd"),
        ("sat-sun 01:00-05:00 /etc/localtime", "/etc/localtime"),
    ],
)
def test_a_bad_zone_is_one_line_naming_it(spec: str, zone: str) -> None:
    with pytest.raises(ValueError, match="unknown time zone") as err:
        parse_window_spec(spec)
    message = str(err.value)
    assert "\n" not in message
    assert repr(zone) in message


def test_a_zone_in_the_wrong_case_gets_a_suggestion() -> None:
    with pytest.raises(ValueError, match="did you mean 'Europe/Berlin'"):
        parse_window_spec("sat-sun 01:00-05:00 europe/berlin")


@pytest.mark.parametrize(
    "spec", ["", "someday", "sat-sun 1:00-05:00", "xyz 01:00-05:00", "sat 25:00-26:00"]
)
def test_other_bad_specs_say_the_expected_form(spec: str) -> None:
    with pytest.raises(ValueError, match="bad maintenance window") as err:
        parse_window_spec(spec)
    assert "\n" not in str(err.value)
