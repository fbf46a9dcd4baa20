"""Scenario files: strict validation with one-line errors naming the field and line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from simhelpers import ROOT

from migscope.sim import BUILTIN_SCENARIOS, ScenarioError, Simulation

GOOD_GPU: dict[str, Any] = {"model": "H200", "mig": True, "instances": [{"profile": "7g.141gb"}]}


def _scenario(**gpu: Any) -> dict[str, Any]:
    return {"nodes": [{"name": "a", "gpus": [{**GOOD_GPU, **gpu}]}]}


def _error(source: dict[str, Any] | Path) -> ScenarioError:
    with pytest.raises(ScenarioError) as caught:
        Simulation.from_scenario(source)
    message = str(caught.value)
    assert "\n" not in message
    return caught.value


@pytest.mark.parametrize(
    ("scenario", "field", "reason"),
    [
        (_scenario(colour="red"), "nodes[0].gpus[0].colour", "unknown field"),
        (_scenario(model="H300"), "nodes[0].gpus[0].model", "unknown GPU model 'H300'"),
        (
            _scenario(instances=[{"profile": "3g.40gb"}]),
            "nodes[0].gpus[0].instances[0].profile",
            "H200-141GB has no profile '3g.40gb'",
        ),
        (
            _scenario(
                instances=[{"profile": "3g.71gb"}, {"profile": "3g.71gb"}, {"profile": "1g.18gb"}]
            ),
            "nodes[0].gpus[0].instances",
            "no memory slices left for 1g.18gb",
        ),
        (
            _scenario(instances=[{"profile": "3g.71gb", "start": 2}]),
            "nodes[0].gpus[0].instances",
            "3g.71gb cannot start at slot 2 (allowed: 0,4)",
        ),
        (
            _scenario(
                instances=[
                    {"profile": "1g.18gb", "workload": {"pattern": "idle", "memory": "20GiB"}}
                ]
            ),
            "nodes[0].gpus[0].instances[0].workload.memory",
            "do not fit",
        ),
        (
            _scenario(instances=[{"profile": "1g.18gb", "workload": {"pattern": "sine"}}]),
            "nodes[0].gpus[0].instances[0].workload.pattern",
            "unknown 'pattern' 'sine'",
        ),
        (
            _scenario(
                instances=[
                    {
                        "profile": "1g.18gb",
                        "workload": {"pattern": "periodic", "period": "ten minutes", "duty": 0.5},
                    }
                ]
            ),
            "nodes[0].gpus[0].instances[0].workload.period",
            "not a duration: 'ten minutes'",
        ),
        (
            _scenario(
                instances=[{"profile": "1g.18gb", "workload": {"pattern": "constant", "level": 2}}]
            ),
            "nodes[0].gpus[0].instances[0].workload.level",
            "less than or equal to 1",
        ),
        (
            _scenario(
                instances=[
                    {"profile": "1g.18gb", "workload": {"pattern": "trace", "container": "zz"}}
                ]
            ),
            "nodes[0].gpus[0].instances[0].workload.container",
            "unknown container 'zz'",
        ),
        (_scenario(mig=False), "nodes[0].gpus[0].instances", "instances need 'mig: true'"),
        (
            _scenario(workload={"pattern": "constant", "level": 1}),
            "nodes[0].gpus[0].workload",
            "runs workloads in its instances",
        ),
        ({"nodes": []}, "nodes", "at least 1 item"),
        (
            {"nodes": [{"name": "a"}, {"name": "a"}]},
            "nodes[1].name",
            "duplicate node name 'a'",
        ),
        ({"nodes": [{"name": "Node_A"}]}, "nodes[0].name", "not a valid node name"),
        (
            {
                **_scenario(),
                "faults": [{"kind": "nvml_error", "function": "nvmlDeviceGetMemInfo", "error": 2}],
            },
            "faults[0].function",
            "'nvmlDeviceGetMemInfo' is not a pynvml function",
        ),
        (
            {
                **_scenario(),
                "faults": [{"kind": "nvml_error", "function": "nvmlInit", "error": "OOPS"}],
            },
            "faults[0].error",
            "not an NVML error: 'OOPS'",
        ),
        (
            {**_scenario(), "faults": [{"kind": "gpu_lost", "node": "b", "gpu": 0}]},
            "faults[0].node",
            "no node 'b'",
        ),
        (
            {**_scenario(), "faults": [{"kind": "gpu_lost", "node": "a", "gpu": 3}]},
            "faults[0].gpu",
            "no GPU 3",
        ),
        (
            {
                **_scenario(),
                "faults": [
                    {
                        "kind": "layout_change",
                        "node": "a",
                        "gpu": 0,
                        "at": "1h",
                        "instances": [{"profile": "4g.71gb"}, {"profile": "4g.71gb"}],
                    }
                ],
            },
            "faults[0].instances",
            "at most 1 × 4g.71gb",
        ),
    ],
)
def test_errors_name_the_field(scenario: dict[str, Any], field: str, reason: str) -> None:
    """Every invalid scenario fails with one line: ``scenario <field>: <reason>``."""
    error = _error(scenario)
    assert error.field == field
    assert reason in error.reason
    assert f"{field}: " in str(error)


def test_file_errors_carry_the_line(tmp_path: Path) -> None:
    """Loaded from a file, the message starts with ``file:line:``."""
    path = tmp_path / "demo.yaml"
    path.write_text(
        "nodes:\n"
        "  - name: a\n"
        "    gpus:\n"
        "      - model: H200\n"
        "        mig: true\n"
        "        instances:\n"
        "          - profile: 3g.71gb\n"
        "          - profile: 3g.71gb\n"
        "          - profile: 1g.18gb\n"
    )
    error = _error(path)
    assert str(error).startswith(f"{path}:6: scenario nodes[0].gpus[0].instances: ")
    path.write_text("nodes:\n  - name: a\n    gpus: [ {model: H200 \n")
    assert "invalid YAML" in str(_error(path))
    assert _error(tmp_path / "missing.yaml").reason.startswith("cannot read")


def test_memory_amounts_and_defaults() -> None:
    """``memory`` is a fraction (0..1) or a size with a unit; busy patterns default to half
    the device, idle to nothing (and then no process)."""
    sim = Simulation.from_scenario(
        _scenario(
            instances=[
                {"profile": "1g.18gb", "workload": {"pattern": "idle", "memory": "1GiB"}},
                {"profile": "1g.18gb", "workload": {"pattern": "idle", "memory": 0.25}},
                {"profile": "1g.18gb", "workload": {"pattern": "constant", "level": 0.5}},
                {"profile": "1g.18gb"},
            ]
        )
    )
    capacity = (16384 << 20) - (1 << 20)
    instances = sim.node("a").instances()
    assert [i.memory(0).used for i in instances] == [
        1 << 30,
        round(0.25 * capacity),
        round(0.5 * capacity),
        0,
    ]
    assert [len(i.pids) for i in instances] == [1, 1, 1, 0]


def _docs_yaml() -> list[dict[str, Any]]:
    text = (ROOT / "docs" / "scenario.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    return [yaml.safe_load(b) for b in blocks]


def test_docs_example_builds() -> None:
    """The scenario in docs/scenario.md is valid."""
    blocks = _docs_yaml()
    assert blocks
    for block in blocks:
        Simulation.from_scenario(block)


@pytest.mark.parametrize(
    "path",
    [
        *sorted((ROOT / "examples" / "scenarios").glob("*.yaml")),
        *BUILTIN_SCENARIOS.values(),
    ],
    ids=lambda p: p.name,
)
def test_example_scenarios_build(path: Path) -> None:
    """Every example and built-in scenario loads, builds and enumerates."""
    sim = Simulation.from_scenario(path)
    assert sim.nodes
    for node in sim:
        node.nvml.nvmlInit()
        assert node.nvml.nvmlDeviceGetCount() == len(node.gpus)
        node.pod_assignments()


def test_seed_argument_overrides_the_file() -> None:
    """``from_scenario(seed=...)`` replaces the scenario's seed (other UUIDs)."""
    base = {**_scenario(), "seed": 1}
    same = Simulation.from_scenario(base).node("a").gpus[0].uuid
    assert Simulation.from_scenario(base, seed=1).node("a").gpus[0].uuid == same
    assert Simulation.from_scenario(base, seed=2).node("a").gpus[0].uuid != same
