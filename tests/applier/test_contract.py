"""The applier re-checks the safety contract on the plan it is handed (issue 10).

The planner promises that a GPU is re-created only when every slice on it is idle or
unallocated with enough evidence, or that the change is disruptive and names every pod on
it (docs/planner.md). The applier does not take that on trust: it runs
``migscope.core._disruption.violations`` on each recommendation of the report and skips a node
whose recommendation breaks it, so a hand-edited, truncated or buggy report cannot destroy a
slice in use. And every plan, whatever it holds, goes through a dry run without one write.

The property test takes random fleets through the real pipeline (``analyze``), the report
JSON and the plan reader, into a dry run against the API test server with its simulated MIG
Manager: zero write requests for every example, and no node the contract flags would apply.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.planted_slices import ROLES, WEEK, planted_week

from applier.cluster import BALANCED, Cluster, provenance, running_cluster
from migscope.analyzer._model import SliceStats
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report
from migscope.applier._plan import NO_EVIDENCE, PlanError, load_plan, plan_from_report
from migscope.core._catalogue import find_model
from migscope.core._disruption import violations
from migscope.core._layout import is_valid
from migscope.core._migparted import MigPartedConfig, emit_config
from migscope.core._spec.v1 import report_json

H200 = find_model("H200-141GB")


def _slice(node: str, gpu: int, gi: int, profile: str, start: int, role: str) -> SliceStats:
    """A slice of the test cluster's balanced H200s playing ``role`` for a week."""
    return planted_week(H200, node, gpu, gi, profile, start, role)[0]


PLACED = is_valid(H200, BALANCED).placements


@st.composite
def reports(draw: st.DrawFn) -> dict[str, Any]:
    """The report ``migscope analyze`` writes for a random week of the test cluster."""
    slices = [
        _slice(node, gpu, gi + 1, placed.profile.name, placed.start, draw(st.sampled_from(ROLES)))
        for node in ("gpu-a", "gpu-b")
        for gpu in (0, 1)
        for gi, placed in enumerate(PLACED)
    ]
    data = report_json(
        build_report(analyze(slices, window=(0.0, WEEK), options=AnalyzeOptions(time_limit_s=2.0)))
    )
    data["provenance"] = _fresh()
    return data


def _fresh() -> dict[str, Any]:
    p = provenance()
    return {
        "source": p.source,
        "simulated": p.simulated,
        "created": p.created,
        "created_unix": p.created_unix,
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster() as c:
        yield c


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(reports())
def test_every_plan_passes_the_contract_and_its_dry_run_writes_nothing(
    cluster: Cluster, data: dict[str, Any]
) -> None:
    plan = plan_from_report(data, "report.json")
    assert all(change.unsafe == () for change in plan.nodes)
    for rec in data["recommendations"]:
        assert violations(rec) == []
    cluster.api.clear_requests()
    report = cluster.applier(apply=False).run(plan)
    assert cluster.writes() == []
    for outcome in report.outcomes:
        assert outcome.result in ("would-apply", "skipped", "unchanged"), outcome


def _tampered(data: dict[str, Any], how: str) -> dict[str, Any]:
    """The first recommendation, edited the way a hand-edited or buggy report would be."""
    out = copy.deepcopy(data)
    rec = out["recommendations"][0]
    recreated = rec["gpus_recreated"][0]
    on_gpu = [s for s in rec["slices"] if s["gpu"] == recreated]
    if how == "pinned":
        on_gpu[0]["pin"] = "verdict unknown"
    elif how == "busy-without-pod":
        on_gpu[0].update(status="healthy", pods=[])
    elif how == "pod-not-named":
        on_gpu[0]["pods"] = ["team/somebody"]
    elif how == "slice-missing":
        rec["slices"].remove(on_gpu[0])
    elif how == "no-slices":
        del rec["slices"]
    return out


def _reclaimable() -> dict[str, Any]:
    """A week where GPU 1 of gpu-a is unallocated throughout: the plan re-creates it."""
    slices = [
        _slice(node, gpu, gi + 1, p.profile.name, p.start, role)
        for node in ("gpu-a", "gpu-b")
        for gpu in (0, 1)
        for gi, p in enumerate(PLACED)
        for role in ["unallocated" if (node, gpu) == ("gpu-a", 1) else "busy"]
    ]
    # No headroom: nothing needs gpu-a/1's instances, so the plan parks (empties) it.
    result = analyze(
        slices, window=(0.0, WEEK), options=AnalyzeOptions(time_limit_s=2.0, headroom=0.0)
    )
    data = report_json(build_report(result))
    data["provenance"] = _fresh()
    assert [r["gpus_recreated"] for r in data["recommendations"]] == [[1]]
    return data


@pytest.mark.parametrize(
    "how", ["pinned", "busy-without-pod", "pod-not-named", "slice-missing", "no-slices"]
)
def test_a_plan_that_breaks_the_contract_is_not_applied(how: str) -> None:
    data = _tampered(_reclaimable(), how)
    plan = plan_from_report(data, "report.json")
    (change,) = [c for c in plan.nodes if c.unsafe]
    with running_cluster() as c:
        before = c.labels(change.node)
        report = c.applier().run(plan)
        out = next(o for o in report.outcomes if o.node == change.node)
        assert out.result == "skipped"
        assert "the plan breaks the safety contract" in out.reason
        assert c.labels(change.node) == before
        assert not (c.node(change.node).get("spec") or {}).get("unschedulable")


def test_the_untampered_plan_applies() -> None:
    """The same week, as the analyzer wrote it: the contract holds and the node changes."""
    data = _reclaimable()
    plan = plan_from_report(data, "report.json")
    with running_cluster() as c:
        report = c.applier().run(plan)
        (out,) = report.outcomes
        assert out.result == "applied", out.reason
        assert c.labels(out.node)["nvidia.com/mig.config"] == out.target


def test_a_node_plan_has_no_evidence_to_recheck(tmp_path: Path) -> None:
    data = _reclaimable()
    (tmp_path / "node-plan.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "provenance": data["provenance"],
                "nodes": [
                    {"node": r["node"], "mig_config": r["mig_config"], "changed": True}
                    for r in data["recommendations"]
                ],
            }
        )
    )
    config = MigPartedConfig.model_validate(data["mig_parted_config"])
    (tmp_path / "mig-parted-config.yaml").write_text(emit_config(config))
    plan = load_plan(tmp_path / "node-plan.json")
    assert [c.unsafe for c in plan.nodes] == [(NO_EVIDENCE,)]
    with running_cluster() as c:
        before = c.labels("gpu-a")
        (out,) = c.applier().run(plan).outcomes
        assert out.result == "skipped"
        assert "apply report.json instead" in out.reason
        assert c.labels("gpu-a") == before


def test_a_bad_layout_in_a_recommendation_is_still_a_plan_error() -> None:
    data = _reclaimable()
    data["recommendations"][0]["current"][0]["layout"] = {"1g.18gb": -1}
    with pytest.raises(PlanError, match="layout must map profile names to counts"):
        plan_from_report(data, "report.json")
