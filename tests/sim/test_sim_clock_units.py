"""The simulated clock and the unit parsers scenario files rely on."""

from __future__ import annotations

import pytest

from migscope.core._durations import parse_duration
from migscope.sim import DEFAULT_START, SimClock
from migscope.sim._units import parse_bytes


def test_manual_clock_stands_still_until_advanced() -> None:
    """Manual mode: time moves only through ``advance``/``sleep`` (tests are exact)."""
    clock = SimClock()
    assert clock.now() == DEFAULT_START
    clock.advance(90.5)
    clock.sleep(9.5)
    assert clock.elapsed() == 100.0
    assert clock.now() == DEFAULT_START + 100.0
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


def test_realtime_clock_follows_monotonic_with_speed() -> None:
    """Real-time mode follows the monotonic clock times ``speed``; ``advance`` still jumps,
    and ``sleep`` waits ``s / speed`` of real time."""
    ticks = iter([100.0, 102.0, 105.0])
    slept: list[float] = []
    clock = SimClock(
        0.0, realtime=True, speed=60.0, monotonic=lambda: next(ticks), sleeper=slept.append
    )
    assert clock.elapsed() == 120.0  # 2 real seconds at 60x
    clock.advance(30.0)
    assert clock.now() == 5 * 60.0 + 30.0
    clock.sleep(60.0)
    clock.real_sleep(0.25)
    assert slept == [1.0, 0.25]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1h30m", 5400.0),
        ("100ms", 0.1),
        (42, 42.0),
    ],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["ten", "5 parsecs", "", "-3s", True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("12GiB", 12 * 2**30), ("500MB", 500 * 10**6), ("1.5 GiB", 3 * 2**29), (1024, 1024), ("7", 7)],
)
def test_byte_sizes(text: str | int, nbytes: int) -> None:
    assert parse_bytes(text) == nbytes


@pytest.mark.parametrize("bad", ["12 potatoes", "GiB", -1, False])
def test_bad_byte_sizes(bad: object) -> None:
    with pytest.raises(ValueError, match="byte size"):
        parse_bytes(bad)  # type: ignore[arg-type]
