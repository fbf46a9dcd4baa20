"""``migscope apply`` from a report file, through a kubeconfig, as a user runs it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import pytest
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


def _provenance(*, age_s: float = 60.0, simulated: bool = False) -> dict[str, Any]:
    """As `migscope analyze` writes it: from Prometheus (or a simulation), ``age_s`` ago."""
    created = time.time() - age_s
    source: dict[str, Any] = (
        {"kind": "simulation", "scenarios": ["h200-node"]}
        if simulated
        else {"kind": "prometheus", "url": "http://prometheus:9090"}
    )
    return {
        "source": source,
        "simulated": simulated,
        "created": datetime.fromtimestamp(created, tz=timezone.utc).isoformat(),
        "created_unix": created,
    }


def _report(tmp_path: Path, provenance: dict[str, Any] | None = None, *, none: bool = False) -> str:
    """A report.json changing gpu-a, with a fresh real provenance unless told otherwise."""

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
                "gpus_recreated": [1],
                # Every instance of both GPUs was seen; GPU 1's are idle or unallocated
                # and no pod held them, so re-creating it needs no drain.
                "slices": [
                    {"gpu": gpu, "profile": p, "status": status, "pods": [], "pin": None}
                    for gpu, status in ((0, "healthy"), (1, "unallocated"))
                    for p, n in BALANCED.items()
                    for _ in range(n)
                ],
            }
        ],
        "mig_parted_config": PLAN_CONFIGS.model_dump(by_alias=True, exclude_none=True),
    }
    if not none:
        report["provenance"] = provenance or _provenance()
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
            "--node-timeout",
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
        (
            ["--plan", _report(tmp_path), "--maintenance-window", "someday"],
            "bad maintenance window",
        ),
        (
            ["--plan", _report(tmp_path), "--kubeconfig", str(tmp_path / "nope")],
            "no such kubeconfig",
        ),
    ]:
        code, _, err = _apply(*args)
        assert code == 1, (args, err)
        assert err.count("\n") == 1, err
        assert message in err


def test_analyze_apply_refuses_a_plan_from_simulated_data(tmp_path: Path) -> None:
    """`analyze --simulate ... --apply`: the simulated fleet's plan must never reach a
    cluster; refused with one line before the cluster is contacted."""
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
        assert result.exit_code == 1, result.stderr
        # analyze refuses the combination itself; run_apply would too ("refusing to apply
        # the analysis: it comes from simulated data"): either way, one line.
        assert result.stderr.startswith("migscope: error: ")
        assert "simulated data" in result.stderr
        assert result.stderr.count("\n") == 1
        assert c.not_mig_manager() == []
        assert c.labels()[CONFIG_LABEL] == "all-balanced"


@pytest.mark.parametrize(
    ("report_kw", "message"),
    [
        # Built when the test runs, not at collection: a full suite collects minutes before
        # this runs, which used to age the "25 h" plan past 25.05 h ("25.1 h old").
        (lambda: {"provenance": _provenance(simulated=True)}, "comes from simulated data"),
        (lambda: {"provenance": _provenance(age_s=25 * 3600)}, "25.0 h old"),
        (lambda: {"none": True}, "has no provenance"),
    ],
    ids=["simulated", "old", "none"],
)
def test_apply_refuses_with_one_line_and_a_dry_run_says_so(
    tmp_path: Path, report_kw: Callable[[], dict[str, Any]], message: str
) -> None:
    with running_cluster(token=TOKEN) as c:
        kubeconfig = _kubeconfig(tmp_path, c.api.url)
        plan = _report(tmp_path, **report_kw())
        code, out, err = _apply("--plan", plan, "--kubeconfig", kubeconfig, "--apply")
        assert code == 1
        assert out == ""
        assert err.startswith(f"migscope: error: refusing to apply {plan}: ")
        assert message in err
        assert err.count("\n") == 1, err
        assert c.not_mig_manager() == []  # refused before the cluster was contacted
        # Refused before the kubeconfig is even read.
        code, _, err = _apply("--plan", plan, "--kubeconfig", str(tmp_path / "nope"), "--apply")
        assert (code, message in err) == (1, True)
        code, out, err = _apply("--plan", plan, "--kubeconfig", kubeconfig)
        assert code == 0, err
        assert "note: --apply would refuse this plan: " in out
        assert message in out
        assert f"gpu-a: would-apply ({TARGET})" in out
        assert c.writes() == []


def test_allow_simulated_and_max_plan_age_let_it_through(tmp_path: Path) -> None:
    with running_cluster(token=TOKEN) as c:
        kubeconfig = _kubeconfig(tmp_path, c.api.url)
        simulated = _report(tmp_path, _provenance(simulated=True))
        code, out, err = _apply(
            "--plan", simulated, "--kubeconfig", kubeconfig, "--allow-simulated"
        )
        assert code == 0, err
        assert "would refuse" not in out
        old = _report(tmp_path, _provenance(age_s=3 * 86400))
        for limit in ("7d", "0", "96h", "1w"):
            code, out, err = _apply(
                "--plan", old, "--kubeconfig", kubeconfig, "--max-plan-age", limit
            )
            assert code == 0, (limit, err)
            assert "would refuse" not in out, limit
        for limit in ("2d", "90m", "71h"):
            code, out, err = _apply(
                "--plan", old, "--kubeconfig", kubeconfig, "--max-plan-age", limit
            )
            assert code == 0, (limit, err)
            assert "over --max-plan-age" in out, limit
        code, out, err = _apply(
            "--plan", old, "--kubeconfig", kubeconfig, "--max-plan-age", "4d", "--apply"
        )
        assert code == 0, err
        assert "gpu-a: applied" in out
        assert c.labels()[CONFIG_LABEL] == TARGET


@pytest.mark.parametrize("bad", ["soon", "-1h", "24", "1y", ""])
def test_a_bad_max_plan_age_is_one_line(tmp_path: Path, bad: str) -> None:
    code, _, err = _apply("--plan", _report(tmp_path), "--max-plan-age", bad)
    assert code == 1
    assert err == (
        f"migscope: error: bad --max-plan-age {bad!r}: expected a duration such as 90m, 24h "
        "or 7d (0: no limit)\n"
    )


def test_a_dry_run_after_an_interrupted_apply_reports_it_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """The reported defect, as a user met it: `--apply` killed mid-change, then a dry run."""
    from support.kubeapi.mig_manager import Knobs

    from applier.test_resume import Died, DyingKube, make_applier, plan, settle
    from migscope.applier._steps import read_progress

    with running_cluster(token=TOKEN, knobs={"gpu-a": Knobs(stuck_pending=True)}) as c:
        dying = DyingKube(c.api.client(retries=False), die_at=5, after=True)  # after the relabel
        with pytest.raises(Died):
            make_applier(c, dying, "killed").run(plan())
        settle(c)
        left = read_progress(c.node())
        assert left is not None
        c.api.clear_requests()
        before = c.node()
        started = time.monotonic()
        code, out, err = _apply(
            "--plan", _report(tmp_path), "--kubeconfig", _kubeconfig(tmp_path, c.api.url)
        )
        assert time.monotonic() - started < 5  # --timeout is 20 min: it did not wait
        assert code == 0, err
        assert out.startswith("dry run (nothing changed; add --apply): 1 node(s) in the plan")
        assert (
            f"gpu-a: would-resume ({TARGET}): unfinished change by run {left.run} at step "
            f"wait (target {TARGET}); `--apply` would resume it"
        ) in out
        assert c.writes() == []
        assert c.node() == before


def test_deprecated_apply_flags_still_work_and_say_what_to_use(tmp_path: Path) -> None:
    """``--window`` and ``--timeout`` of the last release: same meaning, one warning each."""
    code, _, err = _apply("--plan", _report(tmp_path), "--window", "someday", "--timeout", "5m")
    assert code == 1
    assert sorted(err.splitlines()) == [
        "migscope: error: bad maintenance window 'someday': expected e.g. "
        "'sat-sun 01:00-05:00 UTC'",
        "migscope: warning: --timeout is deprecated, use --node-timeout",
        "migscope: warning: --window is deprecated, use --maintenance-window",
    ]


def test_the_options_defaults_are_the_apply_settings_own() -> None:
    """``ApplySettings`` is the only home of the applier's defaults (issue 26): each option
    of ``migscope apply`` defaults to its field, as ``analyze --apply`` gets them."""
    from migscope.applier._settings import ApplySettings
    from migscope.cli._apply_cmd import apply_command, parse_max_plan_age
    from migscope.core._durations import parse_duration

    ctx = click.Context(apply_command)
    shown = {p.name: p.get_default(ctx) for p in apply_command.params}
    want = ApplySettings()
    durations = {
        "node_timeout": want.node_timeout_s,
        "drain_timeout": want.drain_timeout_s,
        "lease_wait": want.lease_wait_s,
    }
    for name, value in durations.items():
        assert parse_duration(str(shown[name])) == value, name
    for name in ("max_nodes", "max_changes_per_day", "max_changes_per_node_per_day"):
        assert shown[name] == getattr(want, name), name
    assert shown["namespace"] == want.namespace
    assert want.configmap is None  # no default: the ClusterPolicy's ConfigMap
    assert (shown["apply"], shown["drain"]) == (want.apply, want.drain)
    assert (shown["allow_simulated"], shown["allow_stranding"]) == (
        want.allow_simulated,
        want.allow_stranding,
    )
    assert parse_max_plan_age(str(shown["max_plan_age"])) == want.max_plan_age_s
