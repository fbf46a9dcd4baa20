"""``--drain`` evicts the pods the report names, not every holder of a destroyed profile.

Issue 22, item 5: the applier evicted 11 pods where the report named 8, pods on GPUs the plan
does not change, because the broad rule (a pod holding a profile present on a changed GPU)
cannot tell GPUs apart. The report can: its per-GPU slices say which pod is on which GPU.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from support.kubeapi import pod
from support.kubeapi.mig_manager import GPU_ANNOTATION

from applier.cluster import PLAN_CONFIGS, change, provenance, running_cluster
from migscope.applier._plan import ApplyPlan


def _pods(c, *names_and_gpus: tuple[str, int]) -> None:  # type: ignore[no-untyped-def]
    for name, gpu in names_and_gpus:
        c.api.create(
            pod(
                name,
                "ml",
                node_name="gpu-a",
                requests={"nvidia.com/mig-2g.35gb": 1},
                annotations={GPU_ANNOTATION: str(gpu)},
            )
        )


def _two_3g_everywhere():  # type: ignore[no-untyped-def]
    from applier.cluster import TARGET
    from migscope.core._migparted import parse_config

    return parse_config(
        f"""\
version: v1
mig-configs:
  {TARGET}:
    - devices: all
      mig-enabled: true
      mig-devices: {{"3g.71gb": 2}}
"""
    )


def _plan(placed: tuple[tuple[str, tuple[int, ...]], ...], *, at: float) -> ApplyPlan:
    node = replace(change(), placed=placed, placed_at=at, pods_to_move=("ml/on-gpu1",))
    return ApplyPlan("test", (node,), PLAN_CONFIGS, provenance(age_s=0))


def test_drain_evicts_only_the_pods_on_the_gpus_the_plan_changes() -> None:
    with running_cluster() as c:
        _pods(c, ("on-gpu0", 0), ("on-gpu1", 1))
        placed = (("ml/on-gpu0", (0,)), ("ml/on-gpu1", (1,)))
        plan = _plan(placed, at=time.time() + 1)  # the plan saw both pods
        (dry,) = c.applier(apply=False, drain=True).run(plan).outcomes
        text = "\n".join(dry.actions)
        assert "ml/on-gpu1" in text
        assert "ml/on-gpu0" not in text
        (out,) = c.applier(drain=True).run(plan).outcomes
        assert out.result == "applied", out.reason
        left = {p["metadata"]["name"] for p in c.api.list("v1", "Pod", namespace="ml")}
        assert left == {"on-gpu0"}


def test_a_pod_created_after_the_plan_keeps_the_broad_rule() -> None:
    """A pod of the same name made since (a restarted StatefulSet pod) may hold a device on
    the changed GPU now: the plan's placement of its predecessor is not trusted."""
    with running_cluster() as c:
        plan = _plan((("ml/on-gpu0", (0,)), ("ml/on-gpu1", (1,))), at=time.time() - 60)
        _pods(c, ("on-gpu0", 1), ("on-gpu1", 1))
        (out,) = c.applier().run(plan).outcomes
        assert out.result == "skipped"
        assert "ml/on-gpu0" in out.reason
        assert "ml/on-gpu1" in out.reason


def test_a_pod_the_plan_does_not_place_keeps_the_broad_rule() -> None:
    with running_cluster() as c:
        _pods(c, ("stranger", 0))
        plan = _plan((("ml/on-gpu1", (1,)),), at=time.time() + 1)
        (out,) = c.applier().run(plan).outcomes
        assert out.result == "skipped"
        assert "ml/stranger" in out.reason


def test_the_report_places_each_pod_on_its_gpus(tmp_path: Path) -> None:
    """``load_plan`` reads the per-GPU pods of every recommendation, and the pools."""
    from support.planted_slices import WEEK

    from applier.test_contract import _fresh, _slice
    from migscope.analyzer._options import AnalyzeOptions
    from migscope.analyzer._pipeline import analyze
    from migscope.analyzer._report import build_report, validate_report, write_reports
    from migscope.applier._plan import load_plan
    from migscope.core._spec.v1 import report_json

    slices = [
        _slice("gpu-a", 0, 1, "3g.71gb", 4, "busy"),
        _slice("gpu-a", 1, 1, "3g.71gb", 4, "idle"),
        _slice("gpu-a", 1, 2, "2g.35gb", 0, "idle"),
    ]
    result = analyze(slices, window=(0.0, WEEK), options=AnalyzeOptions(time_limit_s=2.0))
    data = report_json(build_report(result))
    data["provenance"] = _fresh()
    write_reports(result, tmp_path, formats=("json",), report=validate_report(data))
    written = json.loads((tmp_path / "report.json").read_text())
    plan = load_plan(tmp_path / "report.json")
    placed = {c.node: dict(c.placed) for c in plan.nodes}
    seen = {
        holder: s["gpu"]
        for rec in written["recommendations"]
        for s in rec["slices"]
        for holder in s["pods"]
    }
    assert seen, "the planted week holds pods"
    for node, pods in placed.items():
        assert pods
        for holder, gpus in pods.items():
            assert seen[holder] in gpus, (node, holder)
    assert all(c.placed_at == plan.provenance.created_unix for c in plan.nodes)  # type: ignore[union-attr]
    # The pools and current profiles the stranding check reads come from the same report.
    assert plan.pools == {s["node"]: s["pool"] for s in written["slices"] if s["pool"]}
    assert plan.pools == {"gpu-a": "H200-141GB"}
    assert plan.profiles_now["gpu-a"] == {"3g.71gb", "2g.35gb"}


def _both_gpus_to_two_3g() -> ApplyPlan:
    """gpu-a's two GPUs both become 3g.71gb x2: its pool (gpu-a alone) loses 2g.35gb."""
    from applier.cluster import BALANCED, TARGET, TWO_3G
    from migscope.applier._plan import GpuChange, NodeChange

    both = NodeChange(
        "gpu-a", TARGET, gpus=(GpuChange(0, BALANCED, TWO_3G), GpuChange(1, BALANCED, TWO_3G))
    )
    return ApplyPlan(
        "test", (both,), _two_3g_everywhere(), provenance(age_s=0), pools={"gpu-a": "h200"}
    )


def test_drain_refuses_to_strand_a_pod_whose_profile_the_pool_loses() -> None:
    """Issue 22, item 2: a pod still asking for a profile that no GPU of its pool offers
    after the plan stays Pending once evicted; the applier refuses in one line unless
    ``--allow-stranding``, and not when another node of the pool keeps the profile."""
    from applier.cluster import BALANCED

    alone = _both_gpus_to_two_3g()
    with running_cluster() as c:
        _pods(c, ("serve", 1))
        (out,) = c.applier(drain=True).run(alone).outcomes
        assert out.result == "skipped"
        assert "would strand ml/serve (nvidia.com/mig-2g.35gb)" in out.reason
        assert "\n" not in out.reason
        assert c.api.list("v1", "Pod", namespace="ml")  # not evicted
        # gpu-b, in the same pool, keeps its 2g.35gb: the pod can land there again.
        shared = replace(
            alone,
            pools={"gpu-a": "h200", "gpu-b": "h200"},
            profiles_now={"gpu-b": frozenset(BALANCED)},
        )
        (out,) = c.applier(drain=True).run(shared).outcomes
        assert out.result == "applied", out.reason


def test_allow_stranding_evicts_all_the_same() -> None:
    with running_cluster() as c:
        _pods(c, ("serve", 1))
        (out,) = c.applier(drain=True, allow_stranding=True).run(_both_gpus_to_two_3g()).outcomes
        assert out.result == "applied", out.reason
        assert c.api.list("v1", "Pod", namespace="ml") == []
