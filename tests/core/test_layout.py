"""Layout validity: table-driven cases from the MIG user guide, and an independent brute force."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migscope.core._catalogue import all_models, find_model
from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._layout import Layout, LayoutError, is_valid, maximal_layouts, valid_layouts

H200 = find_model("H200-141GB")
A30 = find_model("A30-24GB")


@pytest.mark.parametrize(
    "layout",
    [
        ["4g.71gb", "3g.71gb"],
        ["3g.71gb", "3g.71gb"],
        ["4g.71gb", "2g.35gb", "1g.18gb"],
        ["3g.71gb", "2g.35gb", "2g.35gb"],
        ["2g.35gb", "2g.35gb", "2g.35gb", "1g.18gb"],
        ["1g.35gb"] * 4,
        ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"],
        ["1g.18gb"] * 7,
        ["1g.18gb+me", *["1g.18gb"] * 6],
        ["7g.141gb"],
        ["MIG 3g.71gb", "1c.3g.71gb"],
    ],
)
def test_layouts_the_hardware_accepts(layout: list[str]) -> None:
    check = is_valid(H200, layout)
    assert check.ok, check.reason
    spans = sorted((p.start, p.start + p.size) for p in check.placements)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"overlap in {spans}"
    for placed in check.placements:
        assert placed.start in placed.profile.placements


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        (
            {"3g.71gb": 2, "1g.18gb": 1},
            "3g.71gb×2 + 1g.18gb: no memory slices left for 1g.18gb",
        ),
        (
            ["1g.18gb+me", "1g.18gb+me"],
            "1g.18gb+me×2: at most 1 × 1g.18gb+me per H200-141GB GPU, asked for 2",
        ),
        (
            {"3g.71gb": 3},
            "3g.71gb×3: at most 2 × 3g.71gb per H200-141GB GPU, asked for 3",
        ),
        (
            {"2g.35gb": 3, "1g.18gb": 2},
            "2g.35gb×3 + 1g.18gb×2: needs 8 compute slices, a H200-141GB has 7",
        ),
        (
            ["4g.71gb", "2g.35gb", "2g.35gb"],
            "4g.71gb + 2g.35gb×2: needs 8 compute slices, a H200-141GB has 7",
        ),
        (
            ["1g.10gb"],
            "H200-141GB has no MIG profile '1g.10gb' (known: 1g.18gb, 1g.18gb+me, "
            "1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb)",
        ),
        ({"1g.18gb": -1}, "count for 1g.18gb must be >= 0, got -1"),
    ],
)
def test_layouts_the_hardware_refuses_say_why(layout: object, reason: str) -> None:
    check = is_valid(H200, layout)  # type: ignore[arg-type]
    assert not check.ok
    assert check.reason == reason
    assert check.placements == ()


def test_two_media_extension_profiles_of_different_kinds_conflict() -> None:
    check = is_valid(A30, ["1g.6gb+me", "2g.12gb+me"])
    assert check.reason is not None
    assert "at most one media-extension (+me) instance per GPU" in check.reason


def test_order_matters_but_not_to_the_solver() -> None:
    """NVML's own -cgi 19,19,14,9 fails; the layout is valid with 3g@4 (MIG guide)."""
    check = is_valid(H200, ["1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"])
    assert check.ok, check.reason
    assert ("3g.71gb", 4) in {(p.profile.name, p.start) for p in check.placements}


def test_kept_instances_stay_where_they_are() -> None:
    check = is_valid(H200, ["2g.35gb", "3g.71gb"], keep=[("2g.35gb", 4)])
    assert check.ok, check.reason
    assert {(p.profile.name, p.start) for p in check.placements} == {
        ("2g.35gb", 4),
        ("3g.71gb", 0),
    }
    blocked = is_valid(H200, ["1g.18gb", "4g.71gb"], keep=[("1g.18gb", 0)])
    assert blocked.reason == (
        "4g.71gb + 1g.18gb: no free placement for 4g.71gb "
        "(it may start at 0; free memory slices: 1,2,3,4,5,6,7)"
    )
    wrong_start = is_valid(H200, ["2g.35gb"], keep=[("2g.35gb", 6)])
    assert "cannot start at slot 6" in (wrong_start.reason or "")


def test_layout_is_canonical() -> None:
    a = Layout.of(H200, ["1g.18gb", "3g.71gb", "MIG 1g.18gb"])
    b = Layout.of(H200, {"3g.71gb": 1, "1g.18gb": 2, "2g.35gb": 0})
    assert a == b
    assert hash(a) == hash(b)
    assert str(a) == "3g.71gb + 1g.18gb×2"
    assert a.names() == ["3g.71gb", "1g.18gb", "1g.18gb"]
    with pytest.raises(LayoutError, match="must be an integer"):
        Layout.of(H200, {"1g.18gb": True})


def _brute_force_valid(model: GpuModel, names: list[str]) -> bool:
    """Independent oracle: try every combination of starts, no pruning, no shared code."""
    profiles = [model.profile(n) for n in names]
    if any(Counter(names)[p.name] > p.max_instances for p in profiles):
        return False
    if sum(p.media_extensions for p in profiles) > 1:
        return False
    for i, greedy in enumerate(profiles):  # +me.all takes every media engine
        others = profiles[:i] + profiles[i + 1 :]
        if greedy.takes_all_media and any(
            p.decoders + p.encoders + p.jpegs + p.ofas for p in others
        ):
            return False
    if sum(p.compute_slices for p in profiles) > model.compute_slices:
        return False
    for starts in itertools.product(*(p.placements for p in profiles)):
        used: set[int] = set()
        ok = True
        for profile, start in zip(profiles, starts, strict=True):
            span = set(range(start, start + profile.memory_slices))
            if used & span or max(span) >= model.memory_slices:
                ok = False
                break
            used |= span
        if ok:
            return True
    return False


def _candidate_layouts(model: GpuModel) -> list[list[str]]:
    """Every multiset within instance limits whose memory fits: the oracle's search space."""
    ranges = [range(p.max_instances + 1) for p in model.profiles]
    out = []
    for counts in itertools.product(*ranges):
        memory = sum(c * p.memory_slices for c, p in zip(counts, model.profiles, strict=True))
        if 0 < memory <= model.memory_slices:
            out.append(
                [p.name for c, p in zip(counts, model.profiles, strict=True) for _ in range(c)]
            )
    return out


@pytest.mark.parametrize("key", ["H200-141GB", "A30-24GB", "RTX-PRO-6000-96GB"])
def test_valid_layouts_is_exactly_what_brute_force_accepts(key: str) -> None:
    model = find_model(key)
    enumerated = set(valid_layouts(model))
    brute = {
        Layout.of(model, names)
        for names in _candidate_layouts(model)
        if _brute_force_valid(model, names)
    }
    assert enumerated == brute
    for layout in enumerated:
        assert is_valid(model, layout).ok


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_maximal_layouts_cannot_grow_and_cover_every_layout(model: GpuModel) -> None:
    maximal = maximal_layouts(model)
    assert maximal
    for layout in maximal:
        for profile in model.profiles:
            assert not is_valid(model, [*layout.names(), profile.name]).ok
    for layout in valid_layouts(model):
        need = Counter(layout.names())
        assert any(not need - Counter(m.names()) for m in maximal), str(layout)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([p.name for p in H200.profiles]),
        min_size=1,
        max_size=9,
    )
)
def test_solver_agrees_with_brute_force_on_random_multisets(names: list[str]) -> None:
    check = is_valid(H200, names)
    memory = sum(H200.profile(n).memory_slices for n in names)
    expected = memory <= H200.memory_slices and _brute_force_valid(H200, names)
    assert check.ok == expected, check.reason
    if check.ok:
        assert Counter(p.profile.name for p in check.placements) == Counter(names)


def test_an_absurd_count_is_refused_without_building_the_instances() -> None:
    """10**30 instances (a hostile or broken file) used to build a list of 10**30 entries."""
    check = is_valid("H200-141GB", {"1g.18gb": 10**30})
    assert not check.ok
    assert check.reason.endswith(f"at most 7 × 1g.18gb per H200-141GB GPU, asked for {10**30}")
