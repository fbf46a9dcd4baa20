"""``migscope apply`` from a report file, through a kubeconfig, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from support.kubeapi.mig_manager import CONFIG_LABEL

from applier.cluster import BALANCED, PLAN_CONFIGS, TARGET, TWO_3G, running_cluster
from migscope.cli.main import cli

TOKEN = "t0ken"


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


def _report(tmp_path: Path) -> str:
    def layout(profiles: dict[str, int]) -> dict[str, Any]:
        return {"mig_enabled": True, "layout": profiles}

    report: dict[str, Any] = {
        "schema_version": 1,
        "recommendations": [
            {
                "node": "gpu-a",
                "mig_config": TARGET,
                "current": [{"gpu": 0, **layout(BALANCED)}, {"gpu": 1, **layout(BALANCED)}],
                "proposed": [{"gpu": 0, **layout(BALANCED)}, {"gpu": 1, **layout(TWO_3G)}],
                "pods_to_move": [],
                "disruptive": False,
            }
        ],
        "mig_parted_config": PLAN_CONFIGS.model_dump(by_alias=True, exclude_none=True),
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return str(path)


def _apply(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["apply", *args])
    return result.exit_code, result.stdout, result.stderr


def test_dry_run_then_apply(tmp_path: Path) -> None:
    with running_cluster(token=TOKEN) as c:
        kubeconfig = _kubeconfig(tmp_path, c.api.url)
        plan = _report(tmp_path)
        code, out, err = _apply("--plan", plan, "--kubeconfig", kubeconfig)
        assert code == 0, err
        assert out.startswith("dry run (nothing changed; add --apply): 1 node(s)")
        assert f"gpu-a: would-apply ({TARGET})" in out
        assert f"label {CONFIG_LABEL}: all-balanced -> {TARGET}" in out
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        code, out, err = _apply("--plan", plan, "--kubeconfig", kubeconfig, "--apply", "-o", "json")
        assert code == 0, err
        result = json.loads(out)
        assert result["dry_run"] is False
        assert [n["result"] for n in result["nodes"]] == ["applied"]
        assert c.labels()[CONFIG_LABEL] == TARGET
        audit = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        assert {"record", "configmap", "cordon", "label", "applied"} <= {a["action"] for a in audit}
        assert all({"ts", "actor", "node", "action"} <= set(a) for a in audit)


def test_a_failed_node_exits_3(tmp_path: Path) -> None:
    from support.kubeapi.mig_manager import Knobs

    with running_cluster(token=TOKEN, knobs={"gpu-a": Knobs(fail=True)}) as c:
        code, out, _ = _apply(
            "--plan",
            _report(tmp_path),
            "--kubeconfig",
            _kubeconfig(tmp_path, c.api.url),
            "--apply",
            "--timeout",
            "5s",
        )
        assert code == 3
        assert "gpu-a: failed" in out
        assert c.labels()[CONFIG_LABEL] == "all-balanced"


def test_bad_inputs_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for args, message in [
        (["--plan", str(tmp_path / "none.json")], "No such file"),
        (["--plan", str(bad)], "not JSON"),
        (["--plan", _report(tmp_path), "--window", "someday"], "bad maintenance window"),
        (
            ["--plan", _report(tmp_path), "--kubeconfig", str(tmp_path / "nope")],
            "no such kubeconfig",
        ),
    ]:
        code, _, err = _apply(*args)
        assert code == 1, (args, err)
        assert err.count("\n") == 1, err
        assert message in err


def test_analyze_apply_hands_the_plan_to_the_applier(tmp_path: Path) -> None:
    """`analyze --apply`: the simulated fleet's plan goes to the applier, which checks each
    node in the cluster (here the simulated nodes do not exist, so each is skipped)."""
    with running_cluster(token=TOKEN) as c:
        result = CliRunner().invoke(
            cli,
            [
                "analyze",
                "--simulate",
                "h200-node",
                "--window",
                "1d",
                "-o",
                "json",
                "--apply",
                "--kubeconfig",
                _kubeconfig(tmp_path, c.api.url),
            ],
        )
        assert result.exit_code == 0, result.stderr
        assert "apply: 1 node(s) in the plan" in result.stdout
        assert "gpu-node-a: skipped" in result.stdout
        assert "node not found" in result.stdout
        assert c.labels()[CONFIG_LABEL] == "all-balanced"  # the real nodes were not touched
