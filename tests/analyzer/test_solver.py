"""The layout planner: hand-checkable optima, properties over random pools, configs, baselines."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migscope.analyzer._plan import (
    GpuState,
    Instance,
    Plan,
    PlanInputError,
    RequestCount,
    Target,
    Weights,
    config_name,
    demand_from_requests,
    greedy_first_fit,
    lower_bound,
    plan_layouts,
    profile_for_milli,
    scale_demand,
    static_layout,
)
from migscope.core._catalogue import find_model
from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._layout import Layout, is_valid, valid_layouts
from migscope.core._migparted import check_config, emit_config, parse_config

H200 = find_model("H200-141GB")
A30 = find_model("A30-24GB")
ROOT = Path(__file__).resolve().parents[2]
BALANCED = {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}


def gpu(
    node: str,
    index: int,
    layout: Mapping[str, int] | None = None,
    in_use: Sequence[tuple[str, int]] = (),
    model: GpuModel = H200,
) -> GpuState:
    """A GPU from a layout table; ``None`` is MIG disabled."""
    if layout is None:
        return GpuState(node, index, (), mig_enabled=False)
    return GpuState.from_layout(model, node=node, index=index, layout=layout, in_use=in_use)


def layout_of(target: Target) -> dict[str, int]:
    return target.layout.as_dict()


# --------------------------------------------------------------------------------------------
# Hand-checkable optima


@pytest.mark.parametrize(
    ("pool", "demand", "proposed", "changed", "used", "stranded", "unmet"),
    [
        pytest.param(
            [None],
            {"2g.35gb": 3, "1g.18gb": 1},
            [{"2g.35gb": 3, "1g.18gb": 1}],
            1,
            1,
            0,
            {},
            id="3x2g+1g-fills-one-gpu",
        ),
        pytest.param(
            [{"7g.141gb": 1}],
            {"3g.71gb": 1, "2g.35gb": 2},
            [{"3g.71gb": 1, "2g.35gb": 2}],
            1,
            1,
            0,
            {},
            id="7g-repartitioned",
        ),
        pytest.param(
            [None, None],
            {"7g.141gb": 1, "4g.71gb": 1, "3g.71gb": 1},
            [{"4g.71gb": 1, "3g.71gb": 1}, {"7g.141gb": 1}],
            2,
            2,
            0,
            {},
            id="needs-two-gpus",
        ),
        pytest.param(
            [None, None],
            {"3g.71gb": 3},
            [{"3g.71gb": 2}, {"3g.71gb": 2}],
            2,
            2,
            5,
            {},
            id="three-3g-need-two-gpus",
        ),
        pytest.param(
            [BALANCED, BALANCED],
            {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2},
            [BALANCED, BALANCED],
            0,
            1,
            0,
            {},
            id="current-layout-already-fits",
        ),
        pytest.param(
            [BALANCED, {"7g.141gb": 1}],
            {"7g.141gb": 1, "3g.71gb": 1},
            [BALANCED, {"7g.141gb": 1}],
            0,
            2,
            4,
            {},
            id="keeps-both-rather-than-change",
        ),
        pytest.param(
            [None, None],
            {"7g.141gb": 3},
            [{"7g.141gb": 1}, {"7g.141gb": 1}],
            2,
            2,
            0,
            {"7g.141gb": 1},
            id="capacity-short-reports-unmet",
        ),
        pytest.param(
            [None],
            {"4g.71gb": 1, "1g.18gb": 4},
            [{"4g.71gb": 1, "1g.18gb": 3}],
            1,
            1,
            0,
            {"1g.18gb": 1},
            id="partial-cover-keeps-the-larger-instance",
        ),
    ],
)
def test_small_pools_have_the_hand_checked_optimum(
    pool: list[Mapping[str, int] | None],
    demand: dict[str, int],
    proposed: list[dict[str, int]],
    changed: int,
    used: int,
    stranded: int,
    unmet: dict[str, int],
) -> None:
    gpus = [gpu("node-a", i, layout) for i, layout in enumerate(pool)]
    plan = plan_layouts(H200, gpus, demand)
    assert sorted(tuple(sorted(layout_of(g.proposed).items())) for g in plan.gpus) == sorted(
        tuple(sorted(p.items())) for p in proposed
    )
    assert plan.gpus_changed == changed
    assert plan.gpus_used == used
    assert plan.stranded_compute_slices == stranded
    assert {p: n for p, n in plan.unmet.items() if n} == unmet
    assert plan.solve.status == "optimal"
    assert plan.solve.gap == 0.0
    assert plan.solve.best_bound == plan.solve.objective == plan.objective


def test_one_gpu_layout_is_placed_validly() -> None:
    plan = plan_layouts(H200, [gpu("n", 0, None)], {"2g.35gb": 3, "1g.18gb": 1})
    (row,) = plan.gpus
    assert [(p.profile.name, p.start) for p in row.placements] == [
        ("2g.35gb", 0),
        ("2g.35gb", 2),
        ("2g.35gb", 4),
        ("1g.18gb", 6),
    ]
    assert row.demanded == {"1g.18gb": 1, "2g.35gb": 3}
    assert plan.covered == {"2g.35gb": 3, "1g.18gb": 1}
    assert row.changed
    assert row.current == Target(Layout(()), mig_enabled=False)


def test_fewer_changes_beat_fewer_stranded_slices() -> None:
    # Keeping both balanced GPUs strands 4 + 4 slices; re-partitioning one to 3g×2 strands 1
    # but changes a GPU. Changes rank first by default, stranded slices first when
    # consolidating.
    gpus = [gpu("n", 0, BALANCED), gpu("n", 1, BALANCED)]
    demand = {"3g.71gb": 2}
    default = plan_layouts(H200, gpus, demand)
    assert (default.gpus_changed, default.stranded_compute_slices, default.gpus_used) == (0, 8, 2)
    weights = Weights.consolidating(gpus=2, busy_gpus=0, compute_slices=7)
    packed = plan_layouts(H200, gpus, demand, weights=weights)
    assert (packed.gpus_changed, packed.stranded_compute_slices, packed.gpus_used) == (1, 1, 1)
    assert packed.gpus_free == 1
    assert default.objective < score_under(default.weights, packed)


def score_under(weights: Weights, plan: Plan) -> float:
    """Re-score a plan under other weights."""
    unmet = sum(H200.profile(p).compute_slices * n for p, n in plan.unmet.items())
    return (
        weights.unmet * unmet
        + weights.change * plan.gpus_changed
        + weights.busy_change * plan.gpus_disruptive
        + weights.stranded * plan.stranded_compute_slices
        + weights.used * plan.gpus_used
    )


def test_lexicographic_weights_dominate_every_later_term() -> None:
    w = Weights.lexicographic(gpus=100, busy_gpus=30, compute_slices=7)
    stranded_max, changes_max = 7 * 100, 100 + 30
    assert w.change > w.stranded * stranded_max
    assert w.unmet > w.change * changes_max + w.stranded * stranded_max
    c = Weights.consolidating(gpus=100, busy_gpus=30, compute_slices=7)
    assert c.stranded > c.change * changes_max
    assert c.unmet > c.stranded * stranded_max + c.change * changes_max
    assert w.integral()
    assert c.integral()


def test_an_idle_gpu_changes_rather_than_a_busy_one() -> None:
    # Either GPU could become 3g + 2g×2 with equal coverage and stranding; only the idle one
    # can change without recreating the busy pod's instance.
    busy = gpu("n", 0, {"3g.71gb": 2}, in_use=[("3g.71gb", 4)])
    idle = gpu("n", 1, {"3g.71gb": 2})
    plan = plan_layouts(H200, [busy, idle], {"3g.71gb": 2, "2g.35gb": 2})
    assert plan.unmet_total == 0
    assert [g.changed for g in plan.gpus] == [False, True]
    assert plan.gpus_disruptive == 0
    assert layout_of(plan.gpus[1].proposed) == {"3g.71gb": 1, "2g.35gb": 2}


def test_in_use_instances_stay_and_unused_ones_are_reported_destroyed() -> None:
    # A 1g at slot 3 in use blocks 3g@0; the layout around it must leave it alone.
    busy = gpu("n", 0, {"1g.18gb": 7}, in_use=[("1g.18gb", 3)])
    plan = plan_layouts(H200, [busy], {"1g.18gb": 1, "3g.71gb": 1, "2g.35gb": 1})
    (row,) = plan.gpus
    assert ("1g.18gb", 3) in [(p.profile.name, p.start) for p in row.placements]
    assert ("3g.71gb", 4) in [(p.profile.name, p.start) for p in row.placements]
    assert row.changed
    assert row.disruptive
    assert all(not d.in_use for d in row.destroyed)
    assert Instance("1g.18gb", 0) in row.destroyed
    assert row.demanded["1g.18gb"] == 1


def test_moving_in_use_instances_needs_permission() -> None:
    # 4g only starts at 0; the in-use 1g sits at slot 3.
    busy = gpu("n", 0, {"1g.18gb": 7}, in_use=[("1g.18gb", 3)])
    demand = {"4g.71gb": 1, "1g.18gb": 1}
    kept = plan_layouts(H200, [busy], demand)
    assert kept.unmet == {"4g.71gb": 1, "1g.18gb": 0}
    moved = plan_layouts(H200, [busy], demand, allow_move=True)
    assert moved.unmet_total == 0
    (row,) = moved.gpus
    assert row.moved == (("1g.18gb", 3),)
    assert row.disruptive
    assert layout_of(row.proposed) == {"4g.71gb": 1, "1g.18gb": 3}
    assert Instance("1g.18gb", 3, in_use=True) in row.destroyed


def test_park_free_parks_gpus_that_hold_nothing_demanded() -> None:
    gpus = [gpu("m", 0, {"1g.18gb": 7}), gpu("n", 0, {"1g.18gb": 7})]
    stay = plan_layouts(H200, gpus, {"1g.18gb": 3})
    assert (stay.gpus_changed, stay.gpus_free, stay.gpus_parked) == (0, 1, 0)
    parked = plan_layouts(H200, gpus, {"1g.18gb": 3}, park_free=True, parked="disabled")
    assert (parked.gpus_changed, parked.gpus_free, parked.gpus_parked) == (1, 1, 1)
    (free,) = [g for g in parked.gpus if not g.used]
    assert free.proposed == Target(Layout(()), mig_enabled=False)
    assert free.mig_config.endswith("-disabled")


def test_no_demand_changes_nothing() -> None:
    gpus = [gpu("n", 0, BALANCED), gpu("n", 1, None), gpu("m", 0, {"7g.141gb": 1})]
    plan = plan_layouts(H200, gpus, {})
    assert (plan.gpus_changed, plan.gpus_used, plan.stranded_compute_slices) == (0, 0, 0)
    assert all(not n.changed for n in plan.nodes)


def test_the_plan_is_deterministic_whatever_the_input_order() -> None:
    rng = random.Random(7)
    gpus = random_pool(rng, nodes=6)
    demand = {"3g.71gb": 9, "2g.35gb": 7, "1g.18gb": 10, "4g.71gb": 3, "7g.141gb": 4}
    first = plan_layouts(H200, gpus, demand).as_dict()
    shuffled = list(gpus)
    rng.shuffle(shuffled)
    second = plan_layouts(H200, shuffled, demand).as_dict()
    for data in (first, second):
        data["solve"].pop("wall_s")
        data["solve"].pop("solver_s")
    assert first == second


def test_a_time_limit_returns_the_best_warm_start_and_an_honest_gap() -> None:
    gpus = random_pool(random.Random(11), nodes=25)
    demand = {"1g.18gb": 40, "2g.35gb": 20, "3g.71gb": 25, "4g.71gb": 10, "7g.141gb": 15}
    cut = plan_layouts(H200, gpus, demand, time_limit_s=0.0)
    best = plan_layouts(H200, gpus, demand)
    greedy = greedy_first_fit(H200, gpus, demand)
    assert cut.solve.status == "time_limit"
    assert best.solve.status == "optimal"
    assert cut.solve.gap is not None
    assert 0.0 < cut.solve.gap <= 1.0
    assert cut.solve.best_bound is not None
    assert cut.solve.best_bound <= best.objective < cut.objective < greedy.objective


# --------------------------------------------------------------------------------------------
# mig-parted config and node plan


def apply_config(plan: Plan) -> dict[tuple[str, int], dict[str, int] | None]:
    """What MIG Manager would set each GPU to, reading the emitted YAML back."""
    config = parse_config(emit_config(plan.mig_parted))
    out: dict[tuple[str, int], dict[str, int] | None] = {}
    for node in plan.nodes:
        entries = config.mig_configs[node.mig_config]
        for index in node.gpus:
            (entry,) = [e for e in entries if e.devices == "all" or index in e.devices]
            out[(node.node, index)] = dict(entry.mig_devices or {}) if entry.mig_enabled else None
    return out


def test_config_round_trips_and_checks_with_per_gpu_entries() -> None:
    gpus = [
        gpu("a", 0, None),
        gpu("a", 1, BALANCED, in_use=[("3g.71gb", 4)]),
        gpu("b", 0, None),
        gpu("b", 1, None),
    ]
    plan = plan_layouts(H200, gpus, {"7g.141gb": 2, "3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2})
    text = emit_config(plan.mig_parted, header="test")
    assert parse_config(text) == plan.mig_parted
    check = check_config(parse_config(text), gpu=H200)
    assert check.ok, check.invalid
    assert not check.warnings
    assert plan.node_configs["b"] == "migscope-h200-141gb-7g141"
    assert plan.node_configs["a"].startswith("migscope-h200-141gb-node-")
    entries = plan.mig_parted.mig_configs[plan.node_configs["a"]]
    assert sorted(e.devices for e in entries if e.devices != "all") == [(0,), (1,)]
    applied = apply_config(plan)
    assert applied[("a", 0)] is None  # MIG stays disabled on the GPU nobody needs
    for g in plan.gpus[1:]:
        assert applied[(g.node, g.index)] == layout_of(g.proposed)


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (Target(Layout.of(H200, {"3g.71gb": 1, "2g.35gb": 2})), "migscope-h200-141gb-3g71-2g35x2"),
        (Target(Layout.of(H200, {"1g.18gb+me": 1})), "migscope-h200-141gb-1g18me"),
        (Target(Layout(())), "migscope-h200-141gb-empty"),
        (Target(Layout(()), mig_enabled=False), "migscope-h200-141gb-disabled"),
    ],
)
def test_config_names_say_what_they_hold(target: Target, name: str) -> None:
    assert config_name(H200, target) == name


def test_every_config_name_is_a_label_value() -> None:
    for model in (H200, A30, find_model("RTX-PRO-6000-96GB")):
        for layout in valid_layouts(model):
            name = config_name(model, Target(layout))
            assert len(name) <= 63
            assert name.replace("-", "").replace(".", "").isalnum()


# --------------------------------------------------------------------------------------------
# Properties over random pools


LAYOUTS = {m.key: valid_layouts(m) for m in (H200, A30)}


@st.composite
def pools(draw: st.DrawFn) -> tuple[GpuModel, list[GpuState], dict[str, int], bool]:
    model = draw(st.sampled_from([H200, H200, A30]))
    layouts = LAYOUTS[model.key]
    gpus: list[GpuState] = []
    for index in range(draw(st.integers(1, 5))):
        node = f"n{draw(st.integers(0, 2))}"
        if any(g.node == node and g.index == index for g in gpus):
            continue
        kind = draw(st.integers(0, 9))
        if kind == 0:
            gpus.append(GpuState(node, index, (), mig_enabled=False))
            continue
        if kind == 1:
            gpus.append(GpuState(node, index, ()))
            continue
        layout = layouts[draw(st.integers(0, len(layouts) - 1))]
        placed = is_valid(model, layout).placements
        busy = draw(st.lists(st.booleans(), min_size=len(placed), max_size=len(placed)))
        instances = tuple(
            Instance(p.profile.name, p.start, b) for p, b in zip(placed, busy, strict=True)
        )
        frozen = bool(instances) and draw(st.integers(0, 3)) == 0  # a pinned slice on it
        gpus.append(GpuState(node, index, instances, frozen=frozen))
    names = sorted({p.name for p in model.profiles})
    demand = draw(st.dictionaries(st.sampled_from(names), st.integers(0, 5), max_size=4))
    return model, gpus, demand, draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools())
def test_plans_keep_busy_instances_stay_valid_and_beat_the_baselines(
    case: tuple[GpuModel, list[GpuState], dict[str, int], bool],
) -> None:
    model, gpus, demand, allow_move = case
    plan = plan_layouts(model, gpus, demand, allow_move=allow_move)
    by_key = {(g.node, g.index): g for g in gpus}
    placed_total: Counter[str] = Counter()
    for row in plan.gpus:
        state = by_key[(row.node, row.index)]
        placed = [(p.profile.name, p.start) for p in row.placements]
        assert Counter(n for n, _ in placed) == Counter(row.proposed.layout.as_dict()), row
        if placed:
            assert is_valid(model, row.proposed.layout, keep=placed).ok
        busy = [(i.profile, i.start) for i in state.instances if i.in_use or state.frozen]
        assert sorted(row.kept) == sorted(busy)
        if allow_move:
            assert set(busy) - set(placed) == set(row.moved)
            assert Counter(n for n, _ in busy) <= Counter(n for n, _ in placed)
        else:
            assert set(busy) <= set(placed)
            assert not row.moved
        gone = sorted((d.profile, d.start) for d in row.destroyed if d.in_use)
        assert gone == sorted(row.moved)
        if state.frozen:
            assert not row.changed, row
        if not row.changed:
            assert placed == [(i.profile, i.start) for i in state.instances]
        for name, count in row.demanded.items():
            assert count <= row.proposed.layout.as_dict().get(name, 0)
        placed_total.update(n for n, _ in placed)
    for name, wanted in plan.demand.items():
        assert 0 <= plan.covered[name] <= min(wanted, placed_total[name])
        assert plan.unmet[name] == wanted - plan.covered[name]
    assert plan.solve.status == "optimal"
    assert plan.solve.gap == 0.0
    assert plan.objective == plan.solve.objective
    greedy = greedy_first_fit(model, gpus, demand, allow_move=allow_move)
    static = static_layout(model, gpus, demand, allow_move=allow_move)
    assert plan.weights == greedy.weights == static.weights
    for baseline in (greedy, static):
        for row in baseline.gpus:
            assert not (by_key[(row.node, row.index)].frozen and row.changed), baseline.solve
    assert plan.objective <= greedy.objective
    assert plan.objective <= static.objective
    applied = apply_config(plan)
    for row in plan.gpus:
        expect = layout_of(row.proposed) if row.proposed.mig_enabled else None
        assert applied[(row.node, row.index)] == expect
    assert check_config(parse_config(emit_config(plan.mig_parted)), gpu=model).ok
    json.dumps(plan.as_dict())


def random_pool(rng: random.Random, *, nodes: int) -> list[GpuState]:
    """Nodes of 4 H200s, each node uniformly set, a few instances in use."""
    shapes: list[dict[str, int] | None] = [
        {"1g.18gb": 7},
        BALANCED,
        {"3g.71gb": 2},
        {"4g.71gb": 1, "3g.71gb": 1},
        {"7g.141gb": 1},
        None,
    ]
    gpus: list[GpuState] = []
    for n in range(nodes):
        shape = rng.choice(shapes)
        for i in range(4):
            if shape is None:
                gpus.append(GpuState(f"node-{n}", i, (), mig_enabled=False))
                continue
            placed = is_valid(H200, shape).placements
            gpus.append(
                GpuState(
                    f"node-{n}",
                    i,
                    tuple(Instance(p.profile.name, p.start, rng.random() < 0.2) for p in placed),
                )
            )
    return gpus


def test_a_frozen_gpu_stays_when_a_free_one_shares_its_in_use_instances() -> None:
    """Found at 10,000 slices (bench/analyzer_bench.py): a frozen GPU (a slice on it pins it)
    and a free GPU whose in-use instances sit at the same starts share a pool, and the pool's
    move columns served both; the demand was met best by growing the frozen one, and the
    planner stopped with "planner changed frozen GPU" (or, without that check, would have
    re-created every instance of a GPU it may not touch)."""
    one = "1g.18gb"
    pinned = GpuState("node-a", 0, tuple(Instance(one, s) for s in range(4)), frozen=True)
    free = GpuState("node-b", 0, tuple(Instance(one, s, s < 4) for s in range(7)))
    demand = {"2g.35gb": 1, one: 11}
    for plan in (
        plan_layouts(H200, [pinned, free], demand),
        greedy_first_fit(H200, [pinned, free], demand),
        static_layout(H200, [pinned, free], demand),
    ):
        rows = {row.node: row for row in plan.gpus}
        assert not rows["node-a"].changed, plan.solve.method
        assert rows["node-a"].proposed.layout.as_dict() == {one: 4}
    best = plan_layouts(H200, [pinned, free], demand)
    assert best.solve.status == "optimal"
    assert best.unmet == {"2g.35gb": 1, one: 0} or best.unmet == {"2g.35gb": 1}


def test_milp_is_never_worse_than_greedy_on_a_larger_pool() -> None:
    gpus = random_pool(random.Random(11), nodes=25)
    demand = {"1g.18gb": 40, "2g.35gb": 20, "3g.71gb": 25, "4g.71gb": 10, "7g.141gb": 15}
    plan = plan_layouts(H200, gpus, demand)
    greedy = greedy_first_fit(H200, gpus, demand)
    static = static_layout(H200, gpus, demand)
    assert plan.solve.status == "optimal"
    assert plan.objective <= greedy.objective < static.objective
    assert plan.gpus_changed <= greedy.gpus_changed
    assert plan.gpus_disruptive == 0


# --------------------------------------------------------------------------------------------
# Baselines, bounds, demand mix, input errors


def test_greedy_packs_largest_first_and_opens_gpus_in_order() -> None:
    gpus = [gpu("n", 0, None), gpu("n", 1, None), gpu("n", 2, {"7g.141gb": 1})]
    plan = greedy_first_fit(H200, gpus, {"3g.71gb": 1, "2g.35gb": 2, "1g.18gb": 1})
    assert [layout_of(g.proposed) for g in plan.gpus] == [
        {"3g.71gb": 1, "2g.35gb": 2},
        {"1g.18gb": 1},
        {"7g.141gb": 1},
    ]
    assert plan.solve.status == "heuristic"
    assert plan.unmet_total == 0


def test_static_all_balanced_keeps_gpus_whose_busy_instances_do_not_fit() -> None:
    gpus = [gpu("n", 0, None), gpu("n", 1, {"7g.141gb": 1}, in_use=[("7g.141gb", 0)])]
    plan = static_layout(H200, gpus, {"3g.71gb": 1, "7g.141gb": 1})
    assert [layout_of(g.proposed) for g in plan.gpus] == [BALANCED, {"7g.141gb": 1}]
    a30 = static_layout(A30, [gpu("n", 0, None, model=A30)], {})
    assert layout_of(a30.gpus[0].proposed) == {"2g.12gb": 1, "1g.6gb": 2}


@pytest.mark.parametrize(
    ("demand", "compute", "memory", "lp", "gpus"),
    [
        ({"3g.71gb": 3}, 2, 2, 1.5, 2),
        ({"2g.35gb": 3, "1g.18gb": 1}, 1, 1, 1.0, 1),
        ({"4g.71gb": 3}, 2, 2, 3.0, 3),  # one 4g per GPU: only the LP sees it
        ({}, 0, 0, 0.0, 0),
    ],
)
def test_lower_bound(
    demand: dict[str, int], compute: int, memory: int, lp: float, gpus: int
) -> None:
    bound = lower_bound(H200, demand)
    assert (bound.compute, bound.memory, bound.gpus) == (compute, memory, gpus)
    assert bound.configuration_lp == pytest.approx(lp)


def test_pool_bound_counts_gpus_pinned_by_busy_instances() -> None:
    gpus = [gpu("n", i, {"1g.18gb": 7}, in_use=[("1g.18gb", 0)]) for i in range(3)]
    bound = lower_bound(H200, {"1g.18gb": 3}, gpus=gpus)
    assert bound.gpus == 1
    assert bound.pool_gpus == 3
    plan = plan_layouts(H200, gpus, {"1g.18gb": 3})
    assert plan.gpus_used == bound.pool_gpus


@pytest.mark.parametrize(
    ("model", "milli", "profile"),
    [
        (H200, 50, "1g.18gb"),
        (H200, 142, "1g.18gb"),
        (H200, 143, "2g.35gb"),
        (H200, 285, "2g.35gb"),
        (H200, 286, "3g.71gb"),
        (H200, 460, "4g.71gb"),
        (H200, 571, "4g.71gb"),
        (H200, 572, "7g.141gb"),
        (H200, 1000, "7g.141gb"),
        (find_model("H100-80GB"), 320, "3g.40gb"),
        (A30, 250, "1g.6gb"),
        (A30, 251, "2g.12gb"),
        (A30, 501, "4g.24gb"),
    ],
)
def test_gpu_share_maps_to_the_smallest_covering_profile(
    model: GpuModel, milli: int, profile: str
) -> None:
    assert profile_for_milli(model, milli).name == profile


def test_demand_from_requests_and_scaling() -> None:
    requests = [
        RequestCount(1, 470, 3),
        RequestCount(8, 1000, 2),
        RequestCount(0, 0, 5),
        RequestCount(1, 1000, 1),
    ]
    assert demand_from_requests(H200, requests) == {"4g.71gb": 3, "7g.141gb": 17}
    scaled = scale_demand(H200, {"1g.18gb": 7, "7g.141gb": 1}, gpus=10, fill=0.5)
    assert scaled == {"1g.18gb": 18, "7g.141gb": 2}


def test_bench_demand_mix_from_the_alibaba_trace() -> None:
    path = ROOT / "bench" / "data" / "alibaba-v2023-openb-gpu-requests.csv"
    with path.open() as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    requests = [RequestCount(int(r["num_gpu"]), int(r["gpu_milli"]), int(r["pods"])) for r in rows]
    assert sum(r.pods for r in requests) == 7064  # GPU pods in openb_pod_list_default.csv
    assert demand_from_requests(H200, requests) == {
        "1g.18gb": 32,
        "2g.35gb": 280,
        "3g.71gb": 389,
        "4g.71gb": 971,
        "7g.141gb": 5761,
    }


@pytest.mark.parametrize(
    ("gpus", "demand", "message"),
    [
        ([gpu("n", 0, None)], {"9g.1gb": 1}, "no MIG profile"),
        ([gpu("n", 0, None)], {"1g.18gb": -1}, "integer >= 0"),
        ([gpu("n", 0, None), gpu("n", 0, None)], {}, "listed twice"),
        ([], {}, "no GPUs"),
        (
            [GpuState("n", 0, (Instance("3g.71gb", 0), Instance("2g.35gb", 2)))],
            {},
            "not a valid layout",
        ),
        ([GpuState("n", 0, (Instance("1g.18gb", 0),), mig_enabled=False)], {}, "MIG is disabled"),
    ],
)
def test_bad_input_is_a_plan_error(
    gpus: list[GpuState], demand: dict[str, int], message: str
) -> None:
    with pytest.raises(PlanInputError, match=message):
        plan_layouts(H200, gpus, demand)


def test_demand_accepts_aliases_and_nvml_names() -> None:
    plan = plan_layouts(H200, [gpu("n", 0, None)], {"MIG 3g.71gb": 1, "1c.3g.71gb": 1})
    assert plan.demand == {"3g.71gb": 2}
    assert plan.unmet_total == 0


def test_the_planner_imports_no_io_libraries() -> None:
    code = (
        "import sys, migscope.analyzer._plan as p; "
        "print(sorted(m for m in ('httpx', 'kubernetes', 'pandas', 'requests', 'grpc', 'urllib3') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
