"""Demand per pool: which slices count, at which profile, plus pending pods and headroom."""

from __future__ import annotations

import pytest

from migscope.analyzer._judge.classify import Status, classify
from migscope.analyzer._judge.demand import pool_demand, pool_key, slice_contribution
from migscope.analyzer._model import Owner, SliceInfo, SliceKey, SliceStats
from migscope.core._catalogue import find_model

H200 = find_model("H200-141GB")
GIB = 1 << 30


def _stats(
    profile: str,
    *,
    act: float,
    mem_gib: float,
    held: float = 1.0,
    gi: int = 1,
    model: str | None = "H200-141GB",
) -> SliceStats:
    info = SliceInfo(SliceKey("n1", 0, "GPU-x", gi), model, profile, placement_start=0)
    owners = (Owner("ns", f"pod-{gi}", held),) if held else ()
    return SliceStats(
        info=info,
        window_start=0.0,
        window_end=86400.0,
        samples=1440,
        expected_samples=1440,
        coverage=1.0,
        activity_p50=act,
        activity_p95=act,
        activity_max=act,
        memory_peak_bytes=mem_gib * GIB,
        memory_p95_bytes=mem_gib * GIB,
        memory_total_bytes=None,
        allocated_fraction=held,
        owners=owners,
        energy_joules=None,
    )


@pytest.mark.parametrize(
    ("profile", "act", "mem", "held", "status", "counted_as"),
    [
        ("3g.71gb", 0.5, 40.0, 1.0, Status.HEALTHY, "3g.71gb"),
        ("3g.71gb", 0.0, 0.0, 1.0, Status.IDLE, None),
        ("3g.71gb", 0.0, 0.0, 0.0, Status.UNALLOCATED, None),
        ("7g.141gb", 0.2, 10.0, 1.0, Status.OVERSIZED, "3g.71gb"),
        ("1g.18gb", 0.97, 5.0, 1.0, Status.SATURATED, "2g.35gb"),
        # Issue 10 item 2: busy with no pod known (dcgm-exporter#272) is still demand, at
        # the profile it runs on: attribution is missing, not the work.
        ("3g.71gb", 0.5, 40.0, 0.0, Status.HEALTHY, "3g.71gb"),
    ],
)
def test_slice_contribution_table(
    profile: str, act: float, mem: float, held: float, status: Status, counted_as: str | None
) -> None:
    stats = _stats(profile, act=act, mem_gib=mem, held=held)
    verdict = classify(stats, model=H200)
    assert verdict.status is status
    assert slice_contribution(stats, verdict, model=H200).profile == counted_as


def test_unknown_held_slice_is_kept_at_its_profile() -> None:
    stats = _stats("3g.71gb", act=0.5, mem_gib=40.0, model=None)
    verdict = classify(stats, model=None)
    assert verdict.status is Status.UNKNOWN
    assert slice_contribution(stats, verdict, model=None).profile == "3g.71gb"


@pytest.mark.parametrize(
    ("slices", "pending", "headroom", "busy", "pend", "extra"),
    [
        ([], [], 0.1, {}, {}, {}),
        ([("1g.18gb", 0.5, 5.0)] * 4, [], 0.1, {"1g.18gb": 4}, {}, {}),
        ([("1g.18gb", 0.5, 5.0)] * 5, [], 0.1, {"1g.18gb": 5}, {}, {"1g.18gb": 1}),
        (
            [("1g.18gb", 0.5, 5.0)] * 4,
            [("1g.18gb", 11)],
            0.1,
            {"1g.18gb": 4},
            {"1g.18gb": 11},
            {"1g.18gb": 2},
        ),
        ([("3g.71gb", 0.0, 0.0)], [("mig-2g.35gb", 2)], 0.0, {}, {"2g.35gb": 2}, {}),
        (
            [("1g.18gb", 0.5, 5.0)],
            [("nvidia.com/mig-1g.18gb", 1)],
            0.5,
            {"1g.18gb": 1},
            {"1g.18gb": 1},
            {"1g.18gb": 1},
        ),
    ],
)
def test_pool_demand_table(
    slices: list[tuple[str, float, float]],
    pending: list[tuple[str, int]],
    headroom: float,
    busy: dict[str, int],
    pend: dict[str, int],
    extra: dict[str, int],
) -> None:
    items = []
    for gi, (profile, act, mem) in enumerate(slices):
        stats = _stats(profile, act=act, mem_gib=mem, gi=gi)
        items.append((stats, classify(stats, model=H200)))
    demand = pool_demand(items, pool="H200-141GB", model=H200, pending=pending, headroom=headroom)
    assert dict(demand.busy) == busy
    assert dict(demand.pending) == pend
    assert dict(demand.headroom) == extra
    total: dict[str, int] = {}
    for part in (busy, pend, extra):
        for k, v in part.items():
            total[k] = total.get(k, 0) + v
    assert demand.total == dict(sorted(total.items()))


def test_pending_profile_of_another_model_is_a_note() -> None:
    demand = pool_demand([], pool="H200-141GB", model=H200, pending=[("1g.10gb", 3)])
    assert demand.total == {}
    assert demand.notes == ("pending 1g.10gb x3: not a profile of H200-141GB",)


@pytest.mark.parametrize("bad", [-0.1, float("nan")])
def test_bad_headroom_is_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="headroom"):
        pool_demand([], pool="p", model=H200, headroom=bad)


def test_pool_key_uses_model_and_selector() -> None:
    info = _stats("1g.18gb", act=0.1, mem_gib=1.0).info
    assert pool_key(info) == "H200-141GB"
    assert pool_key(info, selector=lambda i: "team-a") == "H200-141GB/team-a"
    uncatalogued = _stats("1g.18gb", act=0.1, mem_gib=1.0, model=None).info
    assert pool_key(uncatalogued) is None
