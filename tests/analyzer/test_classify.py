"""Classification and right-sizing, table-driven against the default policy and the catalogue.

Each row states a slice's statistics and the verdict a platform engineer should get, with the
arithmetic that decides it in the row's comment (H200-141GB unless said: 1g.18gb = 16384 MiB,
1g.35gb = 2g.35gb = 33280 MiB, 3g.71gb = 4g.71gb = 71424 MiB, 7g.141gb = 143360 MiB).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migscope.analyzer._intake.dialect import DIALECT_METRICS, iter_slice_series
from migscope.analyzer._intake.openmetrics import read_exposition
from migscope.analyzer._intake.stats_local import iter_slice_stats
from migscope.analyzer._judge.classify import (
    ACTIVITY_UNKNOWN,
    Classification,
    Status,
    classify,
    right_size,
)
from migscope.analyzer._judge.policy import Policy, parse_policy
from migscope.analyzer._model import Owner, SliceInfo, SliceKey, SliceStats
from migscope.core._catalogue import find_model
from migscope.core._gpu_models.gpu_model import GpuModel

MIB = float(1 << 20)
H200 = find_model("H200-141GB")
A30 = find_model("A30-24GB")
OWNER = Owner("ml", "trainer-0", 1.0)


def make(
    profile: str = "3g.71gb",
    *,
    model: GpuModel | None = H200,
    act: float | None = 0.5,
    mem: float | None = 0.5,
    mem_p95: float | None = None,
    total: float | str | None = "catalogue",
    allocated: float = 1.0,
    coverage: float = 1.0,
    samples: int = 10080,
) -> SliceStats:
    """Statistics of one slice; ``mem``/``mem_p95`` are shares of the profile's memory."""
    size = model.profile(profile).memory_mib * MIB if model and model.has_profile(profile) else 1.0
    peak = None if mem is None else mem * size
    p95 = None if mem is None else (mem if mem_p95 is None else mem_p95) * size
    return SliceStats(
        info=SliceInfo(
            key=SliceKey("node-a", 0, "GPU-0", 1),
            model=model.key if model else None,
            profile=profile,
        ),
        window_start=0.0,
        window_end=604800.0,
        samples=samples,
        expected_samples=10080,
        coverage=coverage,
        activity_p50=None if act is None else act / 2,
        activity_p95=act,
        activity_max=None if act is None else min(1.0, act * 1.05),
        memory_peak_bytes=peak,
        memory_p95_bytes=p95,
        memory_total_bytes=size if isinstance(total, str) else total,
        allocated_fraction=allocated,
        owners=(OWNER._replace(fraction=allocated),) if allocated else (),
        energy_joules=None,
    )


@dataclass(frozen=True)
class Case:
    stats: SliceStats
    status: Status
    suggested: str | None = None
    confidence: float = 1.0
    says: tuple[str, ...] = field(default=())
    right: str | None = None  # right_size's answer, when the row checks it


CASES: dict[str, Case] = {
    # -- unallocated ---------------------------------------------------------------------------
    "no pod, unused": Case(
        make(act=0.01, mem=0.02, allocated=0.0),
        Status.UNALLOCATED,
        says=("No pod held this slice",),
        right="1g.18gb",
    ),
    "held 9.9% of the window is below 10%": Case(
        make(act=0.0, mem=0.0, allocated=0.099), Status.UNALLOCATED
    ),
    "held exactly 10% counts as held, and unused is idle": Case(
        make(act=0.0, mem=0.0, allocated=0.10), Status.IDLE
    ),
    "no pod, activity unknown, memory empty": Case(
        make(act=None, mem=0.0, allocated=0.0),
        Status.UNALLOCATED,
        confidence=0.5,
        says=(ACTIVITY_UNKNOWN,),
    ),
    # -- in use although no pod holds it: attribution is suspect ---------------------------------
    "no pod but busy: judged on use, lower confidence": Case(
        make("1g.18gb", act=0.5, mem=0.5, allocated=0.0),
        Status.HEALTHY,
        confidence=0.6,
        says=("no pod held it",),
    ),
    "no pod but saturated": Case(
        make("1g.18gb", act=0.99, mem=0.9, allocated=0.0), Status.SATURATED, confidence=0.6
    ),
    # -- idle -----------------------------------------------------------------------------------
    "held and unused": Case(
        make(act=0.02, mem=0.05),
        Status.IDLE,
        says=("ml/trainer-0", "p95 activity 2.0% < 5.0%"),
        right="1g.18gb",
    ),
    "p95 activity exactly at the idle threshold is not idle": Case(
        make("1g.18gb", act=0.05, mem=0.05), Status.HEALTHY
    ),
    # Issue 10 item 5: memory held is not use. A notebook that loaded a model and never
    # computes is the canonical idle slice; the memory it holds is shown with the verdict.
    "memory p95 at 10% and no compute is idle (memory held is not use)": Case(
        make("1g.18gb", act=0.0, mem=0.10), Status.IDLE, says=("holds 1.6 GiB",)
    ),
    "a week at 0% compute holding most of its memory is idle, not saturated": Case(
        make("1g.18gb", act=0.0, mem=0.97), Status.IDLE, says=("holds 15.5 GiB",)
    ),
    "idle by memory only when activity is unknown": Case(
        make(act=None, mem=0.02),
        Status.IDLE,
        confidence=0.5,
        says=(ACTIVITY_UNKNOWN,),
    ),
    "idle by activity only when memory is unknown": Case(
        make(act=0.01, mem=None), Status.IDLE, confidence=0.7, says=("memory unknown",)
    ),
    "a brief memory spike does not stop idle (p95 decides)": Case(
        make(act=0.0, mem=0.9, mem_p95=0.03), Status.IDLE
    ),
    # -- saturated ------------------------------------------------------------------------------
    "p95 activity above 90%": Case(
        make("1g.18gb", act=0.95, mem=0.3),
        Status.SATURATED,
        says=("p95 activity 95.0% > 90.0%",),
        # Needs 0.95·1/c <= 0.7: c >= 2 compute slices; 2g.35gb is the smallest larger.
        right="2g.35gb",
    ),
    "p95 activity exactly 90% is not saturated": Case(
        make("1g.18gb", act=0.90, mem=0.3), Status.HEALTHY, right="1g.18gb"
    ),
    "peak memory above 95%": Case(
        make("1g.18gb", act=0.3, mem=0.97),
        Status.SATURATED,
        says=("peak memory 97.0% > 95.0%",),
        # Needs 0.97·16384/m <= 0.8 MiB: m >= 19866: 1g.35gb (activity 0.3 fits 1 slice).
        right="1g.35gb",
    ),
    "saturated by memory with activity unknown": Case(
        make("1g.18gb", act=None, mem=0.99),
        Status.SATURATED,
        confidence=0.5,
        says=(ACTIVITY_UNKNOWN,),
        right="1g.35gb",  # keeps one compute slice: nothing guessed
    ),
    "saturated on the largest profile stays there": Case(
        make("7g.141gb", act=1.0, mem=0.5), Status.SATURATED, right="7g.141gb"
    ),
    # -- oversized ------------------------------------------------------------------------------
    "7g at 35% fits 4g": Case(
        # 3g.71gb: 0.35·7/3 = 0.817 > 0.7; 4g.71gb: 0.35·7/4 = 0.6125, memory 0.25·140/69.75
        # GiB = 50% <= 80%.
        make("7g.141gb", act=0.35, mem=0.25),
        Status.OVERSIZED,
        suggested="4g.71gb",
        says=("4g.71gb would do",),
        right="4g.71gb",
    ),
    "scaled activity exactly at the headroom fits": Case(
        # 2g.35gb at 35%: 0.35·2/1 = 0.7 on a 1g; memory 0.2·33280/16384 = 40.6% on 1g.18gb.
        make("2g.35gb", act=0.35, mem=0.2),
        Status.OVERSIZED,
        suggested="1g.18gb",
        right="1g.18gb",
    ),
    "memory decides between 1g.18gb and 1g.35gb": Case(
        # 2g.35gb at 20% activity (0.4 on 1 slice) with 50% of 33280 MiB = 16640 MiB peak:
        # 101.6% of 1g.18gb, 50% of 1g.35gb.
        make("2g.35gb", act=0.2, mem=0.5),
        Status.OVERSIZED,
        suggested="1g.35gb",
    ),
    "oversized by memory alone when the smaller profile has the same compute": Case(
        # 1g.35gb -> 1g.18gb keeps one compute slice, so unknown activity does not matter:
        # peak 0.2·33280 = 6656 MiB is 40.6% of 16384.
        make("1g.35gb", act=None, mem=0.2),
        Status.OVERSIZED,
        suggested="1g.18gb",
        confidence=0.5,
        says=(ACTIVITY_UNKNOWN,),
        right="1g.18gb",
    ),
    "A30: 4g.24gb at 10% fits 2g.12gb, not 1g.6gb": Case(
        # 1g.6gb: activity 0.1·4/1 = 0.4 fits, memory 0.2·24064/5952 = 80.9% > 80% does not;
        # 2g.12gb: 0.2 and 0.2·24064/11968 = 40.2%.
        make("4g.24gb", model=A30, act=0.1, mem=0.2),
        Status.OVERSIZED,
        suggested="2g.12gb",
    ),
    # -- healthy --------------------------------------------------------------------------------
    "smallest profile in use": Case(
        make("1g.18gb", act=0.5, mem=0.5), Status.HEALTHY, says=("smallest profile",)
    ),
    "3g at 60% fits no smaller profile": Case(
        # 2g: 0.6·3/2 = 0.9 > 0.7.
        make("3g.71gb", act=0.6, mem=0.3),
        Status.HEALTHY,
        right="3g.71gb",
    ),
    "big memory, no compute: healthy by memory alone": Case(
        # 3g.71gb with 70% of 71424 MiB = 50 GB: more than 80% of every smaller profile.
        make("3g.71gb", act=None, mem=0.7),
        Status.HEALTHY,
        confidence=0.5,
        says=(ACTIVITY_UNKNOWN,),
        right="3g.71gb",
    ),
    "+me slice is only offered +me profiles": Case(
        make("1g.18gb+me", act=0.3, mem=0.3), Status.HEALTHY, right="1g.18gb+me"
    ),
    # -- unknown --------------------------------------------------------------------------------
    "no samples": Case(
        make(act=None, mem=None, samples=0, coverage=0.0),
        Status.UNKNOWN,
        confidence=0.0,
        says=("no activity or memory samples",),
        right="3g.71gb",
    ),
    "memory fits smaller profiles but activity is unknown": Case(
        # 3g.71gb with a 20% peak (14285 MiB): 87% of 1g.18gb (no), 43% of 1g.35gb and
        # 2g.35gb (yes), but those have fewer compute slices and the activity that would
        # have to fit is unknown.
        make("3g.71gb", act=None, mem=0.2, mem_p95=0.15),
        Status.UNKNOWN,
        confidence=0.5,
        says=("activity is unknown", ACTIVITY_UNKNOWN),
        right="3g.71gb",
    ),
    "GPU model not in the catalogue": Case(
        make("3g.71gb", model=None, act=0.5, mem=0.5, total=1e10),
        Status.UNKNOWN,
        says=("not in the catalogue",),
        right="3g.71gb",
    ),
    "unknown model can still be idle": Case(
        make("3g.71gb", model=None, act=0.0, mem=0.0, total=1e10), Status.IDLE
    ),
    "profile the model lacks": Case(
        make("5g.99gb", act=0.5, mem=0.5, total=1e10),
        Status.UNKNOWN,
        says=("profile '5g.99gb'",),
        right="5g.99gb",
    ),
    "memory without a size is unknown memory": Case(
        make("3g.71gb", model=None, act=0.02, mem=0.01, total=None),
        Status.IDLE,
        confidence=0.7,
        says=("memory unknown",),
    ),
    # -- coverage -------------------------------------------------------------------------------
    "40% coverage halves confidence": Case(
        make(act=0.02, mem=0.05, coverage=0.4), Status.IDLE, confidence=0.5, says=("coverage",)
    ),
    "coverage above 80% does not lower it": Case(
        make(act=0.02, mem=0.05, coverage=0.85), Status.IDLE, confidence=1.0
    ),
    "low coverage and unknown activity multiply": Case(
        make(act=None, mem=0.02, coverage=0.2), Status.IDLE, confidence=0.125
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_classification_table(name: str) -> None:
    case = CASES[name]
    model = find_model(case.stats.info.model) if case.stats.info.model else None
    verdict = classify(case.stats, model=model)
    assert verdict.status is case.status, verdict.reason
    assert verdict.suggested_profile == case.suggested
    assert verdict.confidence == pytest.approx(case.confidence)
    for fragment in case.says:
        assert fragment in verdict.reason
    assert verdict.reason.endswith((".", ")"))
    assert "\n" not in verdict.reason
    if case.right is not None:
        assert right_size(case.stats, model=model) == case.right


def test_evidence_quotes_numbers_and_thresholds() -> None:
    verdict = classify(make("7g.141gb", act=0.35, mem=0.25), model=H200)
    evidence = verdict.evidence
    assert evidence["activity_p95"] == 0.35
    assert evidence["memory_peak_ratio"] == pytest.approx(0.25)
    assert evidence["coverage"] == 1.0
    thresholds = evidence["thresholds"]
    assert isinstance(thresholds, dict)
    assert thresholds["oversized.activity_p95_at_most"] == 0.7
    assert thresholds["idle.activity_p95_below"] == 0.05
    candidates = evidence["candidates"]
    assert isinstance(candidates, list)
    by_name = {c["profile"]: c for c in candidates if isinstance(c, dict)}
    assert by_name["3g.71gb"]["compute_fits"] is False
    assert by_name["3g.71gb"]["activity_p95_after"] == pytest.approx(0.35 * 7 / 3, abs=1e-6)
    assert by_name["4g.71gb"]["compute_fits"] is True
    assert "1g.18gb+me" not in by_name  # a plain slice is not offered the +me profile
    data = json.loads(json.dumps(verdict.to_dict(), allow_nan=False))
    assert data["status"] == "oversized"
    assert data["suggested_profile"] == "4g.71gb"


def test_activity_is_never_guessed_in_the_evidence() -> None:
    verdict = classify(make(act=None, mem=0.02), model=H200)
    assert verdict.evidence["activity_known"] is False
    assert verdict.evidence["activity_p95"] is None
    factors = verdict.evidence["confidence_factors"]
    assert isinstance(factors, dict)
    assert factors["activity_unknown"] == 0.5


def test_policy_changes_verdicts() -> None:
    stats = make("1g.18gb", act=0.08, mem=0.05)
    assert classify(stats, model=H200).status is Status.HEALTHY
    lenient = parse_policy("idle:\n  activity_p95_below: 0.10\n")
    assert classify(stats, model=H200, policy=lenient).status is Status.IDLE
    # Less headroom demanded: a 2g at 40% (0.8 on a 1g) now fits 1g.18gb.
    two = make("2g.35gb", act=0.4, mem=0.2)
    assert classify(two, model=H200).status is Status.HEALTHY
    tight = parse_policy("oversized:\n  activity_p95_at_most: 0.85\n")
    assert classify(two, model=H200, policy=tight).suggested_profile == "1g.18gb"
    assert right_size(two, model=H200, policy=tight) == "1g.18gb"


def test_model_none_right_size_keeps_profile() -> None:
    assert right_size(make(model=None, total=1e10), model=None) == "3g.71gb"


# ---------------------------------------------------------------------------------------------
# Invariants over random statistics

PROFILES = [p.name for p in H200.profiles]


@st.composite
def random_stats(draw: st.DrawFn) -> SliceStats:
    profile = draw(st.sampled_from(PROFILES))
    act = draw(st.one_of(st.none(), st.floats(0.0, 1.0)))
    mem = draw(st.one_of(st.none(), st.floats(0.0, 1.0)))
    mem_p95 = None if mem is None else draw(st.floats(0.0, 1.0)) * mem
    return make(
        profile,
        act=act,
        mem=mem,
        mem_p95=mem_p95,
        allocated=draw(st.floats(0.0, 1.0)),
        coverage=draw(st.floats(0.0, 1.0)),
        samples=draw(st.integers(0, 10080)),
    )


@settings(max_examples=400, deadline=None)
@given(stats=random_stats())
def test_invariants(stats: SliceStats) -> None:
    verdict: Classification = classify(stats, model=H200)
    current = H200.profile(stats.info.profile)
    assert 0.0 <= verdict.confidence <= 1.0
    json.dumps(verdict.to_dict(), allow_nan=False)
    if stats.activity_p95 is None and stats.samples:
        assert ACTIVITY_UNKNOWN in verdict.reason
        assert verdict.confidence <= 0.5
    if stats.samples == 0:
        assert verdict.status is Status.UNKNOWN
        assert verdict.confidence == 0.0
    if verdict.status is Status.OVERSIZED:
        assert verdict.suggested_profile is not None
        smaller = H200.profile(verdict.suggested_profile)
        assert smaller.compute_slices <= current.compute_slices
        assert smaller.memory_slices <= current.memory_slices
        assert smaller.name != current.name
        assert right_size(stats, model=H200) == verdict.suggested_profile
    else:
        assert verdict.suggested_profile is None
    if verdict.status is Status.IDLE:
        assert stats.allocated_fraction >= Policy().allocated.min_fraction
    if verdict.status is Status.UNALLOCATED:
        assert stats.allocated_fraction < Policy().allocated.min_fraction
    if verdict.status is Status.HEALTHY:
        assert right_size(stats, model=H200) == current.name
    assert H200.has_profile(right_size(stats, model=H200))


def test_decision_modules_stay_free_of_io_clients() -> None:
    # The decision code takes data and returns data: importing it must not pull in the
    # exporter, an HTTP client or the Kubernetes client.
    code = (
        "import sys\n"
        "import migscope.analyzer._judge.classify, migscope.analyzer._intake.dialect, "
        "migscope.analyzer._judge.policy, migscope.analyzer._intake.stats_local, "
        "migscope.analyzer._model, "
        "migscope.analyzer._intake.openmetrics\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'kubernetes')"
        " or m.startswith('migscope.exporter'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


# ---------------------------------------------------------------------------------------------
# The examples of docs/classification.md, end to end from the real fixtures

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRAPE_TIME = 1_760_000_000.0


def verdicts(path: Path) -> dict[tuple[int, int], tuple[Classification, str]]:
    series = read_exposition(path, keep=DIALECT_METRICS, default_timestamp=SCRAPE_TIME)
    out = {}
    for stats in iter_slice_stats(
        iter_slice_series(series), start=SCRAPE_TIME - 60, end=SCRAPE_TIME
    ):
        model = find_model(stats.info.model) if stats.info.model else None
        key = (stats.key.gpu, stats.key.gpu_instance_id)
        out[key] = (classify(stats, model=model), right_size(stats, model=model))
    return out


def test_documented_dcgm_example() -> None:
    got = verdicts(FIXTURES / "dcgm" / "dcgm-mig-a100-40gb-3gi-active.txt")
    assert {k: v.status for k, (v, _) in got.items()} == {
        (0, 5): Status.UNALLOCATED,
        (0, 7): Status.UNALLOCATED,
        (0, 9): Status.SATURATED,
    }
    saturated = got[(0, 9)][0]
    factors = saturated.evidence["confidence_factors"]
    assert isinstance(factors, dict)
    assert factors["unattributed_use"] == pytest.approx(0.6)
    # One scrape is one minute of history against the policy's 24 h: confidence says so.
    assert factors["history"] == pytest.approx(1 / (24 * 60), rel=1e-3)
    assert saturated.confidence == pytest.approx(0.6 / (24 * 60), abs=1e-4)
    assert "no pod held it" in saturated.reason


def test_documented_migscope_example() -> None:
    got = verdicts(FIXTURES / "migscope" / "sim-h200-node-once.txt")
    idle, _ = got[(2, 2)]
    assert idle.status is Status.IDLE
    assert "ml/forgotten-job" in idle.reason
    assert got[(0, 10)][0].status is Status.UNALLOCATED
    oversized, right = got[(3, 0)]
    assert oversized.status is Status.OVERSIZED
    assert oversized.suggested_profile == "4g.71gb"
    assert right == "4g.71gb"
    saturated, right = got[(0, 9)]
    assert saturated.status is Status.SATURATED
    assert right == "2g.35gb"
    assert got[(1, 9)][0].status is Status.HEALTHY


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_statistic_never_reaches_the_evidence(bad: float) -> None:
    """One NaN in the evidence makes report.json unwritable (json.dumps allow_nan=False)."""
    verdict = classify(make(act=bad, mem=bad), model=H200)
    json.dumps(dict(verdict.evidence), allow_nan=False)
