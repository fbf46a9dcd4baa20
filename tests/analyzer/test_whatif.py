"""The what-if replay: hourly demand against a layout's supply, by hand and end to end."""

from __future__ import annotations

import json

import pytest
from analyzer.test_pipeline import SCENARIO
from click.testing import CliRunner

from migscope.analyzer._intake.base import local_stats
from migscope.analyzer._intake.simulation import load_fleet, simulate_slices, simulation_window
from migscope.analyzer._options import AnalyzeOptions
from migscope.analyzer._pipeline import analyze
from migscope.analyzer._plan.whatif import replay
from migscope.analyzer._report import build_report
from migscope.analyzer._result import AnalysisResult
from migscope.cli.main import cli
from migscope.core._migparted import parse_config
from migscope.core._named_layouts import UnknownConfigError


def test_replay_by_hand() -> None:
    result = replay(
        {"1g": [0.0, 2.0, 3.5, 1.0], "3g": [1.0, 1.0, 0.0, 0.0]},
        {"1g": 2, "3g": 1, "7g": 1},
        hours=4,
    )
    by = {p.profile: p for p in result.profiles}
    assert by["1g"].unmet_peak == 1.5
    assert by["1g"].unmet_instance_hours == 1.5
    assert by["1g"].hours_short == 1
    assert by["1g"].demand_peak == 3.5
    assert by["3g"].unmet_instance_hours == 0.0
    assert by["7g"].demand_instance_hours == 0.0  # supplied, never asked for
    assert result.demand_instance_hours == 8.5
    assert result.served_share == pytest.approx(1 - 1.5 / 8.5)


def test_replay_refuses_ragged_or_negative_demand() -> None:
    with pytest.raises(ValueError, match="3 hours of demand, expected 4"):
        replay({"1g": [1.0, 1.0, 1.0]}, {}, hours=4)
    with pytest.raises(ValueError, match="negative"):
        replay({"1g": [1.0, -1.0]}, {}, hours=2)
    assert replay({}, {}, hours=3).served_share == 1.0


@pytest.fixture(scope="module")
def scenario_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("whatif") / "planted.yaml"
    path.write_text(json.dumps(SCENARIO))  # JSON is YAML
    return str(path)


def _run(path: str, what_if: dict[str, str], config_text: str | None = None) -> AnalysisResult:
    sim = load_fleet([path])
    window = simulation_window(sim, window_s=86400.0)
    return analyze(
        local_stats(simulate_slices(sim, window_s=86400.0), window),
        window=window,
        options=AnalyzeOptions(
            what_if=what_if,
            what_if_config=parse_config(config_text) if config_text else None,
        ),
    )


def test_proposed_plan_serves_the_day_and_all_1g_does_not(scenario_path: str) -> None:
    # Demand over the day: the busy 3g.71gb (held 24 h) and the oversized 7g at its right
    # size, 1g.18gb (held 24 h).
    result = _run(scenario_path, {"*": "all-1g.18gb"})
    (pool,) = result.pools
    assert pool.replays["proposed"].served_share == 1.0
    assert pool.replays["current"].served_share == 1.0
    what_if = pool.replays["what_if"]
    by = {p.profile: p for p in what_if.profiles}
    assert by["3g.71gb"].supply == 0
    assert by["3g.71gb"].unmet_instance_hours == 24.0
    assert by["3g.71gb"].hours_short == 24
    assert by["1g.18gb"].supply == 14  # two GPUs of 7
    assert by["1g.18gb"].unmet_instance_hours == 0.0
    assert what_if.served_share == 0.5
    summary = build_report(result).what_if
    assert summary is not None
    assert summary.proposed is not None
    assert summary.configs == {"*": "all-1g.18gb"}
    assert summary.served_share == 0.5
    assert summary.proposed.served_share == 1.0


def test_balanced_everywhere_serves_it(scenario_path: str) -> None:
    result = _run(scenario_path, {"node-a": "all-balanced"})
    assert result.pools[0].replays["what_if"].served_share == 1.0


def test_names_from_a_users_config_and_unselected_gpus_keep_their_layout(
    scenario_path: str,
) -> None:
    config = (
        "version: v1\nmig-configs:\n  gpu0-only:\n"
        "    - devices: [0]\n      mig-enabled: true\n      mig-devices: {7g.141gb: 1}\n"
    )
    result = _run(scenario_path, {"*": "gpu0-only"}, config)
    by = {p.profile: p for p in result.pools[0].replays["what_if"].profiles}
    # GPU 0 becomes one 7g; GPU 1 keeps its 7g: no 3g and no 1g for the demand.
    assert by["7g.141gb"].supply == 2
    assert by["3g.71gb"].unmet_instance_hours == 24.0
    assert by["1g.18gb"].unmet_instance_hours == 24.0
    with pytest.raises(UnknownConfigError, match="no config named 'all-balanced'"):
        _run(scenario_path, {"*": "all-balanced"}, config)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--what-if", "=x"], "bad --what-if '=x'"),
        (["--what-if", "a=x", "--what-if", "a=y"], "names 'a' twice"),
        (["--what-if", "no-such-config"], "no config named 'no-such-config'"),
        (["--what-if-config", "/nonexistent.yaml", "--what-if", "x"], "/nonexistent.yaml"),
    ],
)
def test_cli_what_if_errors_are_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(
        cli, ["analyze", "--simulate", "h200-node", "--window", "1d", *args]
    )
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert message in result.stderr


def test_cli_what_if_summary_line() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--simulate",
            "h200-node",
            "--window",
            "1d",
            "--what-if",
            "all-balanced",
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["what_if"]["configs"] == {"*": "all-balanced"}
    assert 0.0 <= data["what_if"]["served_share"] <= 1.0
    assert {"current", "proposed", "what_if"} == set(data["pools"][0]["replay"])
