"""Property tests of the safety contract: random fleets through the whole pipeline.

Issue 10: migscope recommended re-partitions that destroyed slices in use (a single scrape
emptied GPUs whose slices pods held; busy slices without a pod label were planned away).
Each example here is a random fleet whose slices play roles the data makes hard: idle with
memory held, busy with a pod, busy with no pod known (dcgm-exporter#272), unallocated,
unknown (no samples), too little history, idle on memory alone, and re-partitioned (an
older slice overlapping the current one). Every example goes through ``analyze`` and the
contract is checked from the *roles*, not from the pipeline's own pin field, so a planner
that pins the wrong GPUs fails here:

- a GPU holding an unknown, low-history, busy-without-pod or memory-only-idle slice is never
  changed;
- every pod seen on a slice of a changed GPU is in ``pods_to_move`` and the change is
  disruptive;
- busy slices count as demand whether or not a pod is known;
- with too little history anywhere, nothing is recommended;
- ``migscope.core._disruption.violations`` finds nothing in any recommendation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.planted_slices import PINNING, ROLES, WEEK, planted_week

from migscope.analyzer._judge.classify import Status
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._result import AnalysisResult
from migscope.core._catalogue import find_model
from migscope.core._disruption import violations
from migscope.core._gpu_models.gpu_model import GpuModel
from migscope.core._layout import is_valid, valid_layouts

MODELS = [find_model("H200-141GB"), find_model("H100-80GB"), find_model("A30-24GB")]


@dataclass(frozen=True)
class Planted:
    """One generated slice and the role it was given."""

    stats: SliceStats
    role: str
    pod: str | None


def _stats(
    model: GpuModel, node: str, gpu: int, gi: int, profile: str, start: int, role: str
) -> Planted:
    """A slice playing ``role`` (:func:`support.planted_slices.planted_week`)."""
    stats, pod = planted_week(model, node, gpu, gi, profile, start, role)
    return Planted(stats, role, pod)


@st.composite
def fleets(draw: st.DrawFn) -> list[Planted]:
    """1-3 nodes of 1-3 GPUs of one model, every slice with a random role."""
    model = draw(st.sampled_from(MODELS))
    layouts = valid_layouts(model)
    out: list[Planted] = []
    for n in range(draw(st.integers(1, 3))):
        node = f"node-{n}"
        for gpu in range(draw(st.integers(1, 3))):
            layout = draw(st.sampled_from(layouts))
            placed = is_valid(model, layout).placements
            for gi, inst in enumerate(placed):
                role = draw(st.sampled_from(ROLES))
                out.append(_stats(model, node, gpu, gi + 1, inst.profile.name, inst.start, role))
            if placed and draw(st.booleans()):
                # Re-partitioned in the window: an older slice overlapping the first one.
                first = placed[0]
                old = _stats(model, node, gpu, 90, first.profile.name, first.start, "busy")
                out.append(Planted(_shifted(old.stats), "history", old.pod))
    return out


def _shifted(stats: SliceStats) -> SliceStats:
    """An older slice: observed for the first two days only (coverage 2/7)."""
    from dataclasses import replace

    return replace(stats, coverage=2 / 7, samples=2880)


def _run(planted: Sequence[Planted]) -> AnalysisResult:
    return analyze(
        [p.stats for p in planted], window=(0.0, WEEK), options=AnalyzeOptions(time_limit_s=2.0)
    )


def _changed_gpus(result: AnalysisResult) -> set[tuple[str, int]]:
    return {(g.node, g.index) for p in result.pools for g in p.plan.gpus if g.changed}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(fleets())
def test_no_unsafe_change_in_any_fleet(planted: list[Planted]) -> None:
    result = _run(planted)
    changed = _changed_gpus(result)
    recs = {r["node"]: r for r in result.recommendations()}
    current = {
        (s.stats.info.key.node, s.stats.info.key.gpu, s.stats.info.key.gpu_instance_id)
        for s in result.slices
        if s.current
    }
    for p in planted:
        key = p.stats.info.key
        where = (key.node, key.gpu)
        if p.role == "history" or (key.node, key.gpu, key.gpu_instance_id) not in current:
            continue
        if p.role in PINNING:
            assert where not in changed, f"{p.role} slice on {where} was planned away"
        if where in changed and p.pod is not None:
            rec = recs[key.node]
            assert f"team/{p.pod}" in rec["pods_to_move"], (p.role, rec["pods_to_move"])
            assert rec["disruptive"]
    for rec in recs.values():
        assert violations(rec) == []
        assert set(rec["gpus_recreated"]) == {g for n, g in changed if n == rec["node"]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_busy_slices_are_demand_with_or_without_a_pod(planted: list[Planted]) -> None:
    result = _run(planted)
    busy_now = [
        s
        for s in result.slices
        if s.current and s.status in (Status.HEALTHY, Status.SATURATED, Status.OVERSIZED)
    ]
    for s in busy_now:
        assert s.demand_profile is not None, s.verdict.reason
    # Demand is exactly the current slices that count (busy ones, and unknown ones a pod
    # holds, kept at their profile): none is dropped for want of a pod label.
    counted = [s for s in result.slices if s.current and s.demand_profile is not None]
    demanded = sum(sum(p.demand.busy.values()) for p in result.pools)
    assert demanded == len(counted) >= len(busy_now)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_too_little_history_recommends_nothing(planted: list[Planted]) -> None:
    # The same fleet seen for 2 hours of a week: every slice below the 24 h minimum.
    from dataclasses import replace

    short = [
        Planted(replace(p.stats, coverage=min(p.stats.coverage, 2 / 168)), p.role, p.pod)
        for p in planted
    ]
    result = _run(short)
    assert result.recommendations() == []
    assert result.history is not None
    assert not result.history.enough
    assert any("no change recommended" in n for n in result.notes)
