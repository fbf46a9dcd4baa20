"""The per-slice power estimate adds up to the measurement and follows activity."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migscope.exporter._slice_power import SliceLoad, split_power

slices = st.lists(
    st.builds(
        SliceLoad,
        memory_slices=st.integers(0, 8),
        sm_count=st.integers(0, 132),
        activity=st.one_of(st.none(), st.floats(0, 1)),
    ),
    min_size=1,
    max_size=7,
)


@given(slices, st.floats(0, 1000), st.floats(-10, 1000))
def test_shares_sum_to_the_measured_power_and_are_never_negative(
    loads: list[SliceLoad], watts: float, idle: float
) -> None:
    shares = split_power(watts, idle, loads)
    assert len(shares) == len(loads)
    assert math.isclose(sum(shares), watts, rel_tol=1e-9, abs_tol=1e-9)
    assert all(s >= 0 for s in shares)


def test_idle_power_follows_memory_slices_and_dynamic_power_follows_work() -> None:
    big_busy = SliceLoad(memory_slices=4, sm_count=60, activity=1.0)
    small_idle = SliceLoad(memory_slices=1, sm_count=16, activity=0.0)
    shares = split_power(300.0, 100.0, [big_busy, small_idle])
    assert shares[1] == pytest.approx(100.0 * 1 / 5)
    assert shares[0] == pytest.approx(100.0 * 4 / 5 + 200.0)


def test_activity_is_weighted_by_sms() -> None:
    """50 % of a 7g slice is more work than 50 % of a 1g slice."""
    shares = split_power(
        200.0,
        0.0,
        [SliceLoad(4, 64, 0.5), SliceLoad(1, 16, 0.5)],
    )
    assert shares == pytest.approx([200.0 * 64 / 80, 200.0 * 16 / 80])


def test_unknown_activity_splits_dynamic_power_by_sms() -> None:
    shares = split_power(150.0, 50.0, [SliceLoad(2, 32, None), SliceLoad(2, 32, None)])
    assert shares == pytest.approx([75.0, 75.0])


def test_power_below_idle_is_all_idle() -> None:
    shares = split_power(40.0, 90.0, [SliceLoad(4, 60, 1.0), SliceLoad(4, 60, 0.0)])
    assert shares == pytest.approx([20.0, 20.0])


def test_no_slices_no_shares() -> None:
    assert split_power(100.0, 50.0, []) == []
