"""The classification policy: the packaged default, partial overrides, and strict errors.

A typo in a threshold must not silently fall back to a default, so every problem is an error
with the file, the line and the key on one line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
import pytest
import yaml

from migscope.analyzer._judge.policy import (
    Policy,
    PolicyError,
    default_policy,
    load_policy,
    parse_policy,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FILE = (
    ROOT / "analyzer" / "src" / "migscope" / "analyzer" / "_judge" / "policy-default.yaml"
)
DOC = ROOT / "docs" / "classification.md"


def test_packaged_default_equals_the_model_defaults() -> None:
    # The YAML file is the documented default; the field defaults make partial files work.
    # Both must say the same.
    assert default_policy() == Policy()
    assert load_policy() == Policy()
    assert load_policy(DEFAULT_FILE) == Policy()
    # Every value of the file is written out, none left to the code.
    data = yaml.safe_load(DEFAULT_FILE.read_text())
    written = {
        f"{section}.{key}": value
        for section, keys in data.items()
        if isinstance(keys, dict)
        for key, value in keys.items()
    }
    assert written == Policy().thresholds()


def test_default_values() -> None:
    policy = Policy()
    assert policy.idle.activity_p95_below == 0.05
    assert policy.saturated.activity_p95_above == 0.90
    assert policy.saturated.memory_peak_above == 0.95
    assert policy.oversized.activity_p95_at_most == 0.70
    assert policy.oversized.memory_peak_at_most == 0.80
    assert policy.confidence.full_coverage == 0.80


def test_partial_file_overrides_only_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("idle:\n  activity_p95_below: 0.02\n")
    policy = load_policy(path)
    assert policy.idle.activity_p95_below == 0.02
    assert policy.idle.memory_p95_below == Policy().idle.memory_p95_below
    assert policy.saturated == Policy().saturated
    assert parse_policy("") == Policy()  # an empty file is the default policy
    assert parse_policy("version: 1\nallocated:\n  min_fraction: 1\n").allocated.min_fraction == 1


def test_policy_is_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        Policy().idle.activity_p95_below = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "idle:\n  activity_p95_below: 'low'\n",
            2,
            "idle.activity_p95_below: must be a number, got the string 'low'",
        ),
        (
            "idle:\n  activity_p95_below: true\n",
            2,
            "idle.activity_p95_below: must be a number, got the boolean true",
        ),
        (
            "saturated:\n  activity_p95_above: 0.9\n  memory_peak_above: 1.5\n",
            3,
            "saturated.memory_peak_above: must be a ratio at least 0 and at most 1, got 1.5",
        ),
        (
            "confidence:\n  full_coverage: 0\n",
            2,
            "confidence.full_coverage: must be a ratio above 0 and at most 1, got 0",
        ),
        ("idel:\n  activity_p95_below: 0.1\n", 1, "idel: unknown key (allowed here: version, "),
        (
            "# comment\nidle:\n  activity_p95_below: 0.1\n  activty_p95_below: 0.1\n",
            4,
            "idle.activty_p95_below: unknown key (allowed here: activity_p95_below, "
            "memory_p95_below)",
        ),
        (
            "idle:\n  activity_p95_below: 0.1\n  activity_p95_below: 0.2\n",
            3,
            "idle.activity_p95_below: duplicate key (first at line 2)",
        ),
        ("version: 2\n", 1, "version: must be 1 (the only policy version), got the number 2"),
        ("version: yes\n", 1, "version: must be 1 (the only policy version), got the boolean"),
        ("idle: 0.05\n", 1, "idle: must be a mapping of keys, got the number 0.05"),
        ("- idle\n", 1, "the top level: must be a mapping of keys, got a list"),
        (
            "idle:\n  activity_p95_below: 0.95\n",
            2,
            "idle.activity_p95_below: must be below saturated.activity_p95_above",
        ),
        (
            "saturated:\n  memory_peak_above: 0.5\noversized:\n  memory_peak_at_most: 0.6\n",
            4,
            "oversized.memory_peak_at_most: must not exceed saturated.memory_peak_above",
        ),
        ("idle:\n  activity_p95_below: [0.1\n", 3, "YAML syntax error"),
        ("idle:\n\tactivity_p95_below: 0.1\n", 2, "YAML syntax error"),
    ],
)
def test_errors_name_file_line_and_key(text: str, line: int, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(text, source="site.yaml")
    assert err.value.line == line
    assert str(err.value).startswith(f"site.yaml:{line}: {message}")
    assert "\n" not in str(err.value)


def test_several_problems_are_counted() -> None:
    with pytest.raises(PolicyError, match=r"\(and 1 more problem\)$"):
        parse_policy("idle:\n  activity_p95_below: x\n  memory_p95_below: y\n")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"missing\.yaml: No such file"):
        load_policy(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"idle:\n  activity_p95_below: \xff\n")
    with pytest.raises(PolicyError, match=r"bad\.yaml: not UTF-8"):
        load_policy(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("saturated:\n  activity_p95_abov: 0.8\n")
    with pytest.raises(
        PolicyError, match=rf"^{re.escape(str(typo))}:2: saturated\.activity_p95_abov"
    ):
        load_policy(typo)


def test_every_key_is_documented() -> None:
    doc = DOC.read_text()
    for key in Policy().thresholds():
        assert f"`{key}`" in doc, f"{key} is not explained in docs/classification.md"
