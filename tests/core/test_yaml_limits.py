"""Every YAML reader refuses alias bombs, deep nesting, duplicate keys and huge texts.

One strict loader (``migscope.core._yaml_messages.compose_node``) sits under every YAML the
product reads; these tests go through each reader's public entry point, so a reader that
goes back to ``yaml.safe_load`` fails here. Each refusal must be one line, quick and in
bounded memory: tracemalloc's peak stays far below what an expansion would cost (a 9×9
alias bomb expands to ~387 million values).
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from migscope.analyzer._intake.simulation import load_fleet
from migscope.analyzer._judge.policy import PolicyError, parse_policy
from migscope.applier._configmap import ConfigMapError, ConfigTarget, config_present
from migscope.core._migparted import ConfigError, parse_config
from migscope.core._yaml_messages import (
    MAX_YAML_ALIASES,
    MAX_YAML_CHARS,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    YamlProblem,
    compose_node,
    compose_with_lines,
    load_strict,
)
from migscope.exporter._http import WebConfigError, load_web_config
from migscope.exporter._settings import SettingsError, load_settings
from migscope.scheduler import ScheduleError, parse_schedule
from migscope.sim._scenario import ScenarioError, load_scenario

PEAK_LIMIT = 50 * 1024 * 1024


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """``a: &a [lol, ...]``, then each level a list of ``width`` aliases of the one before."""
    names = [chr(ord("a") + i) for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    for prev, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * width)}]")
    return "\n".join(lines) + "\n"


DEEP = "[" * 10_000 + "]" * 10_000 + "\n"
HUGE = "# " + "x" * MAX_YAML_CHARS + "\n"
MANY_ALIASES = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n"


class _Kube:
    """The one call :func:`config_present` makes, answering a ConfigMap holding ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def get_configmap(self, namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": namespace}, "data": {"config": self.text}}


def _policy(tmp: Path, text: str) -> None:
    parse_policy(text, source="policy.yaml")


def _schedule(tmp: Path, text: str) -> None:
    parse_schedule(text, source="schedule.yaml")


def _migparted(tmp: Path, text: str) -> None:
    parse_config(text)


def _configmap(tmp: Path, text: str) -> None:
    target = ConfigTarget("gpu-operator", "custom-mig-config", "config", None, True)
    config_present(_Kube(text), target, "all-disabled")  # type: ignore[arg-type]


def _scenario(tmp: Path, text: str) -> None:
    path = tmp / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    load_scenario(path)


def _fleet(tmp: Path, text: str) -> None:
    bad = tmp / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    good = tmp / "good.yaml"
    good.write_text("nodes:\n  - name: a\n    gpus: [{model: H200}]\n", encoding="utf-8")
    load_fleet([good, bad])


def _settings(tmp: Path, text: str) -> None:
    path = tmp / "exporter.yaml"
    path.write_text(text, encoding="utf-8")
    load_settings(config_file=path, environ={})


def _webconfig(tmp: Path, text: str) -> None:
    path = tmp / "web.yaml"
    path.write_text(text, encoding="utf-8")
    load_web_config(path)


READERS: dict[str, tuple[Callable[[Path, str], None], type[Exception]]] = {
    "policy": (_policy, PolicyError),
    "schedule": (_schedule, ScheduleError),
    "mig-parted": (_migparted, ConfigError),
    "configmap": (_configmap, ConfigMapError),
    "scenario": (_scenario, ScenarioError),
    "fleet": (_fleet, ScenarioError),
    "settings": (_settings, SettingsError),
    "webconfig": (_webconfig, WebConfigError),
}

reader = pytest.mark.parametrize(("load", "error"), READERS.values(), ids=READERS.keys())


def _refused(
    load: Callable[[Path, str], None], error: type[Exception], tmp: Path, text: str
) -> str:
    tracemalloc.start()
    try:
        with pytest.raises(error) as caught:
            load(tmp, text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert "\n" not in message
    assert peak < PEAK_LIMIT + 3 * len(text), f"peak {peak / 2**20:.0f} MiB"
    return message


@reader
def test_alias_bomb_is_refused_in_bounded_memory(
    tmp_path: Path, load: Callable[[Path, str], None], error: type[Exception]
) -> None:
    message = _refused(load, error, tmp_path, billion_laughs())
    assert "aliases expand to more than 100,000 values" in message


@reader
def test_too_many_aliases_are_refused(
    tmp_path: Path, load: Callable[[Path, str], None], error: type[Exception]
) -> None:
    message = _refused(load, error, tmp_path, MANY_ALIASES)
    assert f"more than {MAX_YAML_ALIASES} aliases" in message


@reader
def test_deep_nesting_is_refused_without_recursion_error(
    tmp_path: Path, load: Callable[[Path, str], None], error: type[Exception]
) -> None:
    message = _refused(load, error, tmp_path, DEEP)
    assert f"nests deeper than {MAX_YAML_DEPTH} levels" in message


@reader
def test_huge_text_is_refused(
    tmp_path: Path, load: Callable[[Path, str], None], error: type[Exception]
) -> None:
    message = _refused(load, error, tmp_path, HUGE)
    assert "over the limit" in message


DUPLICATE_LINE = {
    "policy": "policy.yaml:3:",
    "schedule": "schedule.yaml:3:",
    "mig-parted": "line 3:",
    "configmap": "line 3:",
    "scenario": "scenario.yaml:3:",
    "fleet": "bad.yaml:3:",
    "settings": "exporter.yaml:3:",
    "webconfig": "line 3:",
}


@pytest.mark.parametrize(
    ("load", "error", "where"),
    [(*READERS[name], DUPLICATE_LINE[name]) for name in READERS],
    ids=READERS.keys(),
)
def test_duplicate_keys_are_refused_with_their_line(
    tmp_path: Path, load: Callable[[Path, str], None], error: type[Exception], where: str
) -> None:
    message = _refused(load, error, tmp_path, "top:\n  x: 1\n  x: 2\n")
    assert where in message
    assert "duplicate key" in message


def test_too_many_values_are_refused_while_reading() -> None:
    with pytest.raises(YamlProblem, match="more than 100,000 values"):
        compose_node("[" + "1, " * MAX_YAML_NODES + "]\n")


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(YamlProblem, match="recursive YAML alias"):
        compose_node("a: &a [*a]\n")


def test_limits_leave_ordinary_yaml_alone() -> None:
    text = "base: &base {x: 1, y: [1, 2]}\nmerged:\n  <<: *base\n  x: 2\n"
    assert load_strict(text) == {"base": {"x": 1, "y": [1, 2]}, "merged": {"x": 2, "y": [1, 2]}}
    nested = "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH
    assert compose_with_lines(nested)[0] is not None
    with pytest.raises(YamlProblem, match="deeper"):
        compose_with_lines("[" + nested + "]")


def test_no_product_module_reads_yaml_around_the_strict_loader() -> None:
    root = Path(__file__).resolve().parents[2]
    loader = root / "src" / "migscope" / "core" / "_yaml_messages.py"
    calls = ("yaml.safe_load(", "yaml.load(", "yaml.compose(", "yaml.full_load(", "yaml.unsafe_")
    found = [
        f"{path.relative_to(root)}: {call}"
        for base in ("src", "analyzer", "exporter")
        for path in sorted((root / base).rglob("*.py"))
        if path != loader
        for call in calls
        if call in path.read_text(encoding="utf-8")
    ]
    assert found == []
