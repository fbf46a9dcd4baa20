"""The applier checks every plan against the MIG catalogue when it reads it (issue 12, item 16).

Before, ``migscope apply`` took a plan whose config ``migscope validate-config`` rejects
(three 3g.71gb on an H200), an unknown profile, GPU index -1 or a count of 10^30 on trust:
it cordoned the node, labelled it, MIG Manager failed, and the node was rolled back. Now
reading the plan (``load_plan``, ``plan_from_report``) refuses it with one line, so every
caller (``apply``, dry runs, ``analyze --apply``) stops before the cluster is contacted.
"""

from __future__ import annotations

import copy
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support.kubeapi.mig_manager import CONFIG_LABEL
from support.planted_slices import WEEK, planted_week

from applier.cluster import BALANCED, TARGET, TWO_3G, running_cluster
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._report import build_report
from migscope.applier._plan import PlanError, PlanRefused, load_plan, plan_from_report
from migscope.cli.main import cli
from migscope.core._catalogue import find_model
from migscope.core._layout import is_valid
from migscope.core._migparted import MigPartedConfig, emit_config
from migscope.core._spec.v1 import report_json

TOKEN = "t0ken"
H200 = find_model("H200-141GB")
H200_FILTER = H200.device_filter()
THREE_3G = {"3g.71gb": 3}


def _provenance() -> dict[str, Any]:
    created = time.time() - 60.0
    return {
        "source": {"kind": "prometheus", "url": "http://prometheus:9090"},
        "simulated": False,
        "created": datetime.fromtimestamp(created, tz=timezone.utc).isoformat(),
        "created_unix": created,
    }


def _entry(devices: Any, layout: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"devices": devices, "mig-enabled": True, "mig-devices": layout, **extra}


def _report(
    *,
    gpu1: dict[str, Any] | None = None,
    proposed1: dict[str, Any] | None = None,
    index1: int = 1,
    model: str | None = "H200-141GB",
    entries: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A report changing GPU 1 of gpu-a to ``gpu1`` (config) and ``proposed1`` (layout).

    By default both are two 3g.71gb, the test cluster's plan, which is valid on an H200.
    """
    config_layout = TWO_3G if gpu1 is None else gpu1
    proposed = config_layout if proposed1 is None else proposed1

    def layout(gpu: int, profiles: dict[str, Any]) -> dict[str, Any]:
        return {"gpu": gpu, "mig_enabled": True, "layout": profiles}

    rec: dict[str, Any] = {
        "node": "gpu-a",
        "mig_config": TARGET,
        "current": [layout(0, BALANCED), layout(1, BALANCED)],
        "proposed": [layout(0, BALANCED), layout(index1, proposed)],
        "pods_to_move": [],
        "disruptive": False,
        "gpus_recreated": [index1],
        "slices": [
            {"gpu": gpu, "profile": p, "status": status, "pods": [], "pin": None}
            for gpu, status in ((0, "healthy"), (index1, "unallocated"))
            for p, n in BALANCED.items()
            for _ in range(n)
        ],
    }
    if model is not None:
        rec["model"] = model
    return {
        "schema_version": 1,
        "recommendations": [rec],
        "mig_parted_config": {
            "version": "v1",
            "mig-configs": {
                TARGET: entries
                if entries is not None
                else [_entry([0], BALANCED), _entry([1], config_layout)]
            },
        },
        "provenance": _provenance(),
    }


def _refusal(data: dict[str, Any]) -> str:
    with pytest.raises(PlanRefused) as err:
        plan_from_report(data, "report.json")
    message = str(err.value)
    assert message.startswith("refusing to apply report.json: recommendations[0]")
    assert "\n" not in message
    return message


# -- what is refused ----------------------------------------------------------------------------


def test_the_valid_plan_reads() -> None:
    (change,) = plan_from_report(_report(), "report.json").nodes
    assert change.config == TARGET
    assert [g.proposed for g in change.gpus] == [BALANCED, TWO_3G]


def test_a_config_validate_config_rejects_is_refused() -> None:
    message = _refusal(_report(gpu1=THREE_3G))
    assert f"mig_config {TARGET!r} is not valid on H200-141GB" in message
    assert "at most 2 × 3g.71gb per H200-141GB GPU, asked for 3" in message


def test_a_proposed_layout_that_cannot_be_built_is_refused() -> None:
    """The config is fine but the layout the applier verifies against is not."""
    message = _refusal(_report(proposed1={"7g.141gb": 1, "1g.18gb": 1}))
    assert "proposed[1] (gpu 1): 7g.141gb + 1g.18gb:" in message


@pytest.mark.parametrize(
    ("where", "profile"),
    [("config", "9g.999gb"), ("config", "1g.5gb"), ("layout", "1g.5gb")],
    ids=["config-unknown-everywhere", "config-other-models", "layout-other-models"],
)
def test_a_profile_the_model_lacks_is_refused(where: str, profile: str) -> None:
    if where == "config":
        message = _refusal(_report(gpu1={profile: 1}, proposed1=TWO_3G))
    else:
        message = _refusal(_report(proposed1={profile: 1}))
    assert profile in message
    assert "H200-141GB" in message or "no catalogued GPU offers" in message


def test_a_negative_gpu_index_is_refused() -> None:
    message = _refusal(_report(index1=-1))
    assert "proposed[1]: GPU index -1 must be >= 0" in message


def test_an_absurd_gpu_index_is_refused() -> None:
    message = _refusal(_report(index1=10**6))
    assert "proposed[1]: GPU index 1000000 is over" in message


def test_a_gpu_listed_twice_is_refused() -> None:
    message = _refusal(_report(index1=0))
    assert "proposed[1]: GPU 0 is listed more than once" in message


@pytest.mark.parametrize("where", ["config", "layout"])
def test_a_huge_count_is_refused_at_once(where: str) -> None:
    """10^30 instances: refused by the bound, never expanded into instances to place."""
    huge = {"1g.18gb": 10**30}
    data = _report(gpu1=huge) if where == "config" else _report(proposed1=huge)
    message = _refusal(data)
    assert f"{10**30} × 1g.18gb" in message
    assert "at most 7" in message


def test_a_count_over_the_models_maximum_is_refused() -> None:
    message = _refusal(_report(proposed1={"1g.18gb": 8}))
    assert "at most 7 × 1g.18gb per H200-141GB GPU" in message


def test_a_config_with_no_entry_for_the_model_is_refused() -> None:
    a100 = find_model("A100-40GB").device_filter()
    entries = [_entry("all", {"3g.20gb": 2}, **{"device-filter": a100})]
    message = _refusal(_report(entries=entries))
    assert f"mig_config {TARGET!r} has no entry for H200-141GB" in message


def test_an_unknown_model_is_refused() -> None:
    message = _refusal(_report(model="Z9000-1TB"))
    assert "model 'Z9000-1TB' is not in the MIG catalogue" in message


def test_a_huge_device_index_in_the_config_is_refused() -> None:
    entries = [_entry([0], BALANCED), _entry([10**9], TWO_3G)]
    message = _refusal(_report(entries=entries))
    assert "devices: GPU index 1000000000 is over" in message


def test_without_a_model_the_config_is_checked_on_every_model_it_reaches() -> None:
    """A report trimmed by hand (no ``model``): checked as ``validate-config`` without --gpu."""
    plan_from_report(_report(model=None), "report.json")  # still valid
    message = _refusal(_report(model=None, gpu1=THREE_3G))
    assert "at most 2 × 3g.71gb per H200-141GB GPU, asked for 3" in message
    message = _refusal(_report(model=None, proposed1={"9g.999gb": 1}))
    assert "no catalogued GPU offers 9g.999gb" in message


def test_configs_the_plan_does_not_name_are_not_checked() -> None:
    """mig-parted files hold other people's configs; only the ones the plan applies count."""
    data = _report()
    data["mig_parted_config"]["mig-configs"]["not-ours"] = [_entry("all", THREE_3G)]
    plan_from_report(data, "report.json")


def test_a_node_plans_configs_are_checked_too(tmp_path: Path) -> None:
    config = MigPartedConfig.model_validate(_report(gpu1=THREE_3G)["mig_parted_config"])
    (tmp_path / "mig-parted-config.yaml").write_text(emit_config(config))
    (tmp_path / "node-plan.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "provenance": _provenance(),
                "nodes": [{"node": "gpu-a", "mig_config": TARGET, "changed": True}],
            }
        )
    )
    with pytest.raises(PlanRefused, match=r"nodes\[0\] \(gpu-a\): mig_config .* 3g\.71gb"):
        load_plan(tmp_path / "node-plan.json")


def test_a_refusal_is_a_plan_error() -> None:
    """Callers that catch :class:`PlanError` (every reader of a plan) catch it too."""
    with pytest.raises(PlanError):
        plan_from_report(_report(index1=-1), "report.json")


# -- what the analyzer writes is always accepted --------------------------------------------


def test_the_analyzers_own_report_reads() -> None:
    placed = is_valid(H200, BALANCED).placements
    slices = [
        planted_week(H200, node, gpu, gi + 1, p.profile.name, p.start, role)[0]
        for node in ("gpu-a", "gpu-b")
        for gpu in (0, 1)
        for gi, p in enumerate(placed)
        for role in ["unallocated" if (node, gpu) == ("gpu-a", 1) else "busy"]
    ]
    result = analyze(
        slices, window=(0.0, WEEK), options=AnalyzeOptions(time_limit_s=2.0, headroom=0.0)
    )
    data = report_json(build_report(result))
    assert data["recommendations"]
    plan = plan_from_report(copy.deepcopy(data), "the analysis")
    assert [c.node for c in plan.nodes] == [r["node"] for r in data["recommendations"]]


# -- the command: refused before the cluster is contacted, dry run or not ---------------------


def _kubeconfig(tmp_path: Path, url: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


@pytest.mark.parametrize(
    "report",
    [_report(gpu1=THREE_3G), _report(index1=-1), _report(proposed1={"1g.18gb": 10**30})],
    ids=["three-3g", "gpu-minus-1", "count-10e30"],
)
@pytest.mark.parametrize("mode", [["--apply"], []], ids=["apply", "dry-run"])
def test_apply_refuses_before_the_cluster_is_contacted(
    tmp_path: Path, report: dict[str, Any], mode: list[str]
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    with running_cluster(token=TOKEN) as c:
        kubeconfig = _kubeconfig(tmp_path, c.api.url)
        result = CliRunner().invoke(
            cli, ["apply", "--plan", str(path), "--kubeconfig", kubeconfig, *mode]
        )
        assert result.exit_code == 1, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"migscope: error: refusing to apply {path}: recommendations[0]")
        assert c.not_mig_manager() == []  # not a read, not the Lease: nothing
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        assert not (c.node().get("spec") or {}).get("unschedulable")


def test_compute_instance_profiles_are_checked_as_the_gpu_instances_they_make() -> None:
    """``3g.71gb`` + 2 × ``1c.3g.71gb`` is two 3g GPU instances (mig-parted fills the first
    with the 3-slice CI and the second with the two 1-slice CIs): valid; one more 3g is not."""
    fits = {"3g.71gb": 1, "1c.3g.71gb": 2}
    (change,) = plan_from_report(_report(gpu1=fits, proposed1=fits), "report.json").nodes
    assert change.config == TARGET
    over = {"3g.71gb": 2, "1c.3g.71gb": 1}
    message = _refusal(_report(gpu1=over, proposed1=over))
    assert "at most 2 × 3g.71gb" in message


# -- each GPU's UUID, from the report's slices -----------------------------------------------------


def _with_slices(*where: tuple[int, str]) -> dict[str, Any]:
    data = _report()
    data["slices"] = [{"node": "gpu-a", "gpu": gpu, "gpu_uuid": uuid} for gpu, uuid in where]
    return data


def test_each_gpu_is_paired_with_its_uuid_where_the_report_is_sure() -> None:
    """The applier tells which GPU a DRA claim's device is on by UUID (the ResourceSlice's
    ``parentUUID``); the plan pairs indices and UUIDs from the report's slices."""
    (change,) = plan_from_report(_with_slices((0, "GPU-a"), (1, "GPU-b"), (1, "GPU-b")), "r").nodes
    assert [g.uuid for g in change.gpus] == ["GPU-a", "GPU-b"]


@pytest.mark.parametrize(
    "where",
    [
        ((0, "GPU-a"), (1, "GPU-b"), (1, "GPU-c")),  # GPU 1 replaced within the window
        ((0, "GPU-a"), (1, "GPU-A")),  # one GPU seen at two indices (case aside)
    ],
)
def test_a_pairing_in_doubt_is_no_pairing(where: tuple[tuple[int, str], ...]) -> None:
    (change,) = plan_from_report(_with_slices(*where), "r").nodes
    uuids = {g.index: g.uuid for g in change.gpus}
    assert uuids[1] == ""
    if where[1][1] == "GPU-A":
        assert uuids[0] == ""
