"""A plan's provenance decides whether it may be applied: never simulated, never stale.

The analyzer records in ``report.json`` and ``node-plan.json`` where its data came from and
when it made the plan. Layouts computed from a simulation describe no real cluster; a plan
made days ago describes the cluster as it was then; a plan without provenance (an older
migscope, a hand-written file) could be either. ``--apply`` refuses all three, with one
line and before it contacts the cluster; a dry run describes the plan anyway and says what
``--apply`` would refuse.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from applier.cluster import PLAN_CONFIGS, TARGET, plan, provenance, running_cluster
from migscope.applier._plan import (
    ApplyPlan,
    PlanError,
    PlanRefused,
    Provenance,
    load_plan,
    plan_from_report,
)

DAY = 86400.0
NOW = 1_796_162_400.0  # 2026-12-01T22:00:00Z


def _raw(
    *, kind: str = "prometheus", simulated: bool | None = None, created_unix: float = NOW
) -> dict[str, Any]:
    source: dict[str, Any] = {
        "prometheus": {"kind": "prometheus", "url": "http://prom:9090"},
        "file": {"kind": "file", "path": "/data/metrics.json"},
        "simulation": {"kind": "simulation", "scenarios": ["h200-node", "a100-node"]},
    }[kind]
    out: dict[str, Any] = {
        "source": source,
        "created": "2026-12-01T22:00:00Z",
        "created_unix": created_unix,
    }
    if simulated is not None:
        out["simulated"] = simulated
    return out


def _report(prov: Any = None, *, with_provenance: bool = True) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema_version": 1,
        "window": {"start_unix": NOW - 7 * DAY, "end_unix": NOW},
        "recommendations": [],
    }
    if with_provenance:
        report["provenance"] = _raw() if prov is None else prov
    return report


def _with(p: Provenance | None) -> ApplyPlan:
    return ApplyPlan("report.json", (), PLAN_CONFIGS, p)


# -- reading it -------------------------------------------------------------------------------


def test_a_reports_provenance_is_read_into_a_typed_field() -> None:
    p = plan_from_report(_report(), "report.json").provenance
    assert p == Provenance(
        kind="prometheus",
        simulated=False,
        created_unix=NOW,
        created="2026-12-01T22:00:00Z",
        source={"kind": "prometheus", "url": "http://prom:9090"},
    )
    assert p.describe() == "prometheus http://prom:9090"


def test_a_simulation_source_is_simulated_whatever_the_flag_says() -> None:
    for flag in (None, False, True):
        p = plan_from_report(_report(_raw(kind="simulation", simulated=flag))).provenance
        assert p is not None
        assert p.simulated is True
        assert p.describe() == "simulation h200-node, a100-node"


def test_a_file_source_is_real_data_and_simulated_true_is_believed() -> None:
    p = plan_from_report(_report(_raw(kind="file"))).provenance
    assert p is not None
    assert (p.simulated, p.describe()) == (False, "file /data/metrics.json")
    p = plan_from_report(_report(_raw(kind="file", simulated=True))).provenance
    assert p is not None
    assert p.simulated is True


def test_created_alone_is_enough() -> None:
    raw = _raw()
    del raw["created_unix"]
    p = plan_from_report(_report(raw)).provenance
    assert p is not None
    assert p.created_unix == NOW


def test_no_provenance_or_null_is_none() -> None:
    assert plan_from_report(_report(with_provenance=False)).provenance is None
    assert plan_from_report({**_report(), "provenance": None}).provenance is None


@pytest.mark.parametrize(
    ("prov", "message"),
    [
        ("prometheus", "provenance: expected an object"),
        ({"simulated": False, "created_unix": NOW}, "provenance.source: expected an object"),
        ({**_raw(), "source": {"url": "x"}}, "provenance.source: expected an object with a 'kind'"),
        ({**_raw(), "simulated": "no"}, "provenance.simulated: expected true or false"),
        ({**_raw(), "created_unix": "yesterday"}, "provenance.created_unix: expected Unix"),
        ({**_raw(), "created_unix": True}, "provenance.created_unix: expected Unix"),
        ({"source": {"kind": "prometheus"}}, "no 'created_unix' or 'created'"),
        ({"source": {"kind": "file"}, "created": "last week"}, "not an RFC 3339 time"),
        ({"source": {"kind": "file"}, "created": "2026-12-01T22:00:00"}, "has no time zone"),
    ],
)
def test_a_malformed_provenance_is_one_line_naming_the_field(prov: Any, message: str) -> None:
    with pytest.raises(PlanError, match=r"report\.json: provenance") as err:
        plan_from_report(_report(prov), "report.json")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_node_plan_carries_it_too(tmp_path: Path) -> None:
    (tmp_path / "mig-parted-config.yaml").write_text(
        json.dumps(PLAN_CONFIGS.model_dump(by_alias=True, exclude_none=True))
    )
    path = tmp_path / "node-plan.json"
    entry = {"node": "gpu-a", "mig_config": TARGET, "changed": True, "disruptive": False}
    path.write_text(
        json.dumps({"schema_version": 1, "nodes": [entry], "provenance": _raw(kind="simulation")})
    )
    loaded = load_plan(path)
    assert loaded.provenance is not None
    assert loaded.provenance.simulated
    assert [n.node for n in loaded.nodes] == ["gpu-a"]
    path.write_text(json.dumps({"schema_version": 1, "nodes": [entry]}))
    assert load_plan(path).provenance is None


# -- the rules --------------------------------------------------------------------------------


def _refusal(p: Provenance | None, **kw: Any) -> str:
    args: dict[str, Any] = {"now": NOW, "allow_simulated": False, "max_age_s": DAY, **kw}
    return _with(p).refusal(**args)


def _prov(**kw: Any) -> Provenance:
    return plan_from_report(_report(_raw(**kw))).provenance  # type: ignore[return-value]


def test_a_fresh_plan_from_real_data_may_be_applied() -> None:
    assert _refusal(_prov()) == ""
    assert _refusal(_prov(kind="file")) == ""
    assert _refusal(_prov(created_unix=NOW - DAY + 1)) == ""  # just within the day


def test_without_provenance_it_is_refused_whatever_the_flags() -> None:
    for kw in ({}, {"allow_simulated": True}, {"max_age_s": None}):
        assert "has no provenance" in _refusal(None, **kw)


def test_simulated_is_refused_unless_allowed() -> None:
    why = _refusal(_prov(kind="simulation"))
    assert "simulated data (simulation h200-node, a100-node)" in why
    assert "--allow-simulated" in why
    assert "test clusters only" in why
    assert _refusal(_prov(kind="simulation"), allow_simulated=True) == ""
    # Allowed as simulated, it must still be fresh.
    old = _prov(kind="simulation", created_unix=NOW - 2 * DAY)
    assert "over --max-plan-age" in _refusal(old, allow_simulated=True)


@pytest.mark.parametrize(
    ("age_s", "limit_s", "refused"),
    [
        (25 * 3600, DAY, True),
        (DAY + 1, DAY, True),
        (DAY, DAY, False),  # "within": the limit itself is allowed
        (90 * 60, 60 * 60.0, True),
        (6 * DAY, 7 * DAY, False),
        (365 * DAY, None, False),  # --max-plan-age 0: no limit
        (-60, DAY, False),  # a minute in the future: clock skew, fine
    ],
)
def test_the_age_limit(age_s: float, limit_s: float | None, refused: bool) -> None:
    why = _refusal(_prov(created_unix=NOW - age_s), max_age_s=limit_s)
    assert bool(why) is refused, why
    if refused:
        assert "old (created 2026-12-01T22:00:00Z), over --max-plan-age" in why


def test_a_plan_from_the_future_means_a_wrong_clock() -> None:
    why = _refusal(_prov(created_unix=NOW + 3600), max_age_s=None)
    assert "in the future" in why
    assert "check the clocks" in why


# -- the applier --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prov", "message"),
    [
        (None, "has no provenance"),
        (provenance(kind="simulation"), "comes from simulated data"),
        (provenance(age_s=2 * DAY), "over --max-plan-age 24.0 h"),
    ],
    ids=["none", "simulated", "old"],
)
def test_apply_refuses_before_contacting_the_cluster(prov: Provenance | None, message: str) -> None:
    with running_cluster() as c:
        refused = ApplyPlan("report.json", plan().nodes, PLAN_CONFIGS, prov)
        with pytest.raises(
            PlanRefused, match=rf"refusing to apply report\.json: .*{re.escape(message)}"
        ):
            c.applier().run(refused)
        assert c.not_mig_manager() == []  # not a read, not the Lease: nothing
        # A dry run describes it all the same, and says what --apply would refuse.
        report = c.applier(apply=False).run(refused)
        assert [o.result for o in report.outcomes] == ["would-apply"]
        assert report.notes[0].startswith("--apply would refuse this plan: ")
        assert message in report.notes[0]
        assert report.as_dict()["apply_refused"] == report.refusal
        assert c.writes() == []


def test_allow_simulated_and_a_raised_age_limit_apply() -> None:
    with running_cluster() as c:
        simulated = ApplyPlan("sim", plan().nodes, PLAN_CONFIGS, provenance(kind="simulation"))
        (out,) = c.applier(allow_simulated=True).run(simulated).outcomes
        assert out.result == "applied", out.reason
        old = ApplyPlan("old", plan("gpu-b").nodes, PLAN_CONFIGS, provenance(age_s=3 * DAY))
        (out,) = c.applier(max_plan_age_s=7 * DAY).run(old).outcomes
        assert out.result == "applied", out.reason


def test_the_age_is_measured_with_the_appliers_clock() -> None:
    with running_cluster() as c:
        p = provenance(age_s=0)
        fresh = ApplyPlan("report.json", plan().nodes, PLAN_CONFIGS, p)
        later = p.created_unix + 2 * DAY
        with pytest.raises(PlanRefused, match=r"2\.0 days old"):
            c.applier(clock=lambda: later).run(fresh)
        assert time.time() - p.created_unix < 60


def test_run_apply_refuses_an_in_process_plan_too() -> None:
    """`analyze --apply` hands its plan to run_apply directly: the same rules apply there."""
    from migscope.applier._settings import ApplySettings
    from migscope.cli._apply_cmd import run_apply
    from migscope.cli._errors import InvalidInput

    report = _report(_raw(kind="simulation", created_unix=time.time()))
    args: dict[str, Any] = {
        "settings": ApplySettings(apply=True),  # the defaults analyze --apply uses
        "kubeconfig": "/nonexistent/kubeconfig",  # never read: refused before
        "context": None,
        "output": "text",
    }
    with pytest.raises(InvalidInput, match="refusing to apply the analysis: it comes from simu"):
        run_apply(plan_from_report(report, "the analysis"), **args)
    old = _report(_raw(created_unix=time.time() - 2 * DAY))
    with pytest.raises(InvalidInput, match=r"over --max-plan-age 24\.0 h"):
        run_apply(plan_from_report(old, "the analysis"), **args)
