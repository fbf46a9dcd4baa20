"""The Prometheus rules in ``deploy/prometheus/migscope-rules.yaml``.

``promtool check rules`` must accept the file and ``promtool test rules`` must pass on the unit
tests in ``deploy/prometheus/tests/``, which cover every alert firing and not firing and every
recording rule's value. The other tests need no promtool: every metric and label the rules
name exists in the metric contract (:data:`migscope.core._metrics.METRICS`) or in a short list of
external series, so renaming a metric or a label breaks this file instead of silently
emptying an alert; every alert is documented in ``docs/rules.md`` where its runbook link
points.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from migscope.analyzer._judge.policy import default_policy
from migscope.core._catalogue import all_models
from migscope.core._metrics import HOLDER_LABELS, METRICS, MetricSpec

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "migscope-rules.yaml"
UNIT_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yaml"))
DOC = ROOT / "docs" / "rules.md"
RUNBOOK = "https://github.com/migscope/migscope/blob/main/docs/rules.md"

PROMTOOL = shutil.which("promtool")
requires_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not installed (Debian package 'prometheus'; "
    "scripts/install-system-deps installs it)",
)

SPECS: dict[str, MetricSpec] = {spec.name: spec for spec in METRICS}

TARGET_LABELS = frozenset({"job", "instance", "node", "cluster"})
"""Labels Prometheus adds at scrape time (``node`` by relabelling, ``cluster`` optionally)."""

KSM_ALLOWLIST = ("nvidia.com/mig.config", "nvidia.com/mig.config.state")
"""The node labels kube-state-metrics must be told to export (docs/rules.md)."""


def ksm_label(name: str) -> str:
    """kube-state-metrics' name for a Kubernetes label: ``label_`` + non-[a-zA-Z0-9_] as ``_``."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", name)


EXTERNAL: dict[str, frozenset[str]] = {
    "up": TARGET_LABELS,
    "kube_node_labels": TARGET_LABELS | set(map(ksm_label, KSM_ALLOWLIST)),
}
"""Series the rules read that migscope does not export, with the labels they may use."""

DERIVED_LABELS = frozenset({"mig_config"})
"""Labels the rules create themselves (label_replace)."""

JOB_SELECTOR = 'job=~".*migscope.*"'
SEVERITIES = frozenset({"critical", "warning", "info"})


# --- reading the rule file and the unit tests --------------------------------------------------


def rule_groups() -> list[dict[str, Any]]:
    return yaml.safe_load(RULES.read_text())["groups"]


def rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"]]


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def records() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "record" in rule]


def unit_tests() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in UNIT_TESTS:
        doc = yaml.safe_load(path.read_text())
        for test in doc["tests"]:
            yield path, test


# --- a small PromQL scanner --------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"')
_IDENT = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?!\s*\(|[\w:])")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
    | {"group_left", "group_right", "inf", "nan", "atan2"}
)


def metric_names(expr: str) -> set[str]:
    """Every metric name an expression reads (functions, keywords, labels and strings skipped)."""
    text = _STRING.sub('""', expr)
    text = _LABEL_LIST.sub(" ", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in _KEYWORDS}


def selector_labels(expr: str) -> list[tuple[str, str]]:
    """``(metric, label)`` for every label matcher in a selector (``up{job=...}``)."""
    out = []
    for match in _SELECTOR.finditer(expr):
        for label in _MATCHER.findall(match.group(2)):
            out.append((match.group(1) or "", label))
    return out


def grouping_labels(expr: str) -> set[str]:
    """Labels named in ``by``/``on``/``group_left``/... lists."""
    text = _STRING.sub('""', expr)
    return {
        label.strip()
        for _, labels in _LABEL_LIST.findall(text)
        for label in labels.split(",")
        if label.strip()
    }


def test_scanner_reads_names_not_functions_labels_or_strings() -> None:
    expr = """
      sum by (node, gpu_uuid) (avg_over_time(migscope_mig_graphics_active_ratio{gpu="0"}[1h]))
      * on (gpu_uuid) group_left (profile) group by (gpu_uuid, profile) (migscope_mig_info)
      / ignoring (x) label_replace(up{job=~".*migscope.*"}, "uuid", "$1", "gpu_uuid", "(.+)")
      or absent(kube_node_labels) > bool 1e-9 unless level:some_metric:avg1h offset 5m
    """
    assert metric_names(expr) == {
        "migscope_mig_graphics_active_ratio",
        "migscope_mig_info",
        "up",
        "kube_node_labels",
        "level:some_metric:avg1h",
    }
    assert selector_labels(expr) == [
        ("migscope_mig_graphics_active_ratio", "gpu"),
        ("up", "job"),
    ]
    assert grouping_labels(expr) == {"node", "gpu_uuid", "profile", "x"}


# --- promtool ----------------------------------------------------------------------------------


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=300, check=False
    )


@requires_promtool
def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


@requires_promtool
@pytest.mark.parametrize("path", UNIT_TESTS, ids=[p.name for p in UNIT_TESTS])
def test_promtool_unit_tests(path: Path) -> None:
    result = promtool("test", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


MUTATIONS = {
    # id: (unit-test file, text in the rule file, replacement); each must fail the unit tests
    "pending-for-50m": ("mig-manager.test.yaml", "for: 30m", "for: 50m"),
    "state-misspelt": ("mig-manager.test.yaml", 'state="failed"', 'state="Failed"'),
    "rebooting-forgotten": ("mig-manager.test.yaml", '"pending|rebooting"', '"pending"'),
    "absent-broken": ("exporter.test.yaml", "absent(up{", "absent(nothing{"),
    "wrong-collector-excluded": (
        "exporter.test.yaml",
        'collector!="podresources"',
        'collector!="gpm"',
    ),
    # a computing slice (0.5) must not be idle
    "idle-threshold-raised": (
        "slices.test.yaml",
        "avg1h < bool 0.05",
        "avg1h < bool 0.6",
    ),
    # the old definition, memory held under 10 % too: a loaded model that never runs is idle
    "memory-held-counted-as-use": (
        "slices.test.yaml",
        "(slice:migscope_mig_graphics_active_ratio:avg1h < bool 0.05)",
        "(slice:migscope_mig_graphics_active_ratio:avg1h < bool 0.05)"
        " * on (cluster, node, gpu, gpu_uuid, gpu_instance_id, mig_uuid)"
        " (slice:migscope_mig_memory_used_ratio:max1h < bool 0.10)",
    ),
}


@requires_promtool
@pytest.mark.parametrize(("unit", "old", "new"), MUTATIONS.values(), ids=MUTATIONS.keys())
def test_unit_tests_catch_a_broken_rule(tmp_path: Path, unit: str, old: str, new: str) -> None:
    """The unit tests are not vacuous: a changed threshold or selector fails them."""
    text = RULES.read_text()
    assert text.count(old) == 1, old
    (tmp_path / "tests").mkdir()
    (tmp_path / RULES.name).write_text(text.replace(old, new))
    test_file = tmp_path / "tests" / unit
    shutil.copy(RULES.parent / "tests" / unit, test_file)
    result = promtool("test", "rules", test_file)
    assert result.returncode != 0, result.stdout
    assert "FAILED" in result.stdout + result.stderr


# --- what the unit tests cover -----------------------------------------------------------------


def test_unit_tests_read_the_rule_file() -> None:
    assert len(UNIT_TESTS) >= 3, UNIT_TESTS
    for path in UNIT_TESTS:
        doc = yaml.safe_load(path.read_text())
        files = [(path.parent / f).resolve() for f in doc["rule_files"]]
        assert files == [RULES], path


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for _, test in unit_tests():
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {rule["alert"] for rule in alerts()}
    assert names - firing == set(), "alerts never tested firing"
    assert names - silent == set(), "alerts never tested not firing"
    assert (firing | silent) - names == set(), "tests of alerts that do not exist"


def test_every_recording_rule_value_is_checked() -> None:
    checked: set[str] = set()
    for _, test in unit_tests():
        for case in test.get("promql_expr_test", []):
            if case.get("exp_samples"):
                checked |= metric_names(case["expr"])
    names = {rule["record"] for rule in records()}
    assert names - checked == set(), "recording rules without a promql_expr_test"


def test_unit_test_series_follow_the_metric_contract() -> None:
    """Input series use real names with exactly the contract's labels (plus target labels)."""
    seen = set()
    for path, test in unit_tests():
        for series in test["input_series"]:
            name, _, rest = series["series"].partition("{")
            labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"', rest))
            seen.add(name)
            if name in SPECS:
                # The holder labels (claim, claim_namespace, attribution) may be absent: empty
                # for device-plugin holders (Prometheus drops empty labels), and missing from
                # history recorded before the exporter wrote them.
                expected = set(SPECS[name].labels)
                assert labels - TARGET_LABELS <= expected, (path.name, series)
                assert expected - labels <= set(HOLDER_LABELS), (path.name, series)
            else:
                assert name in EXTERNAL, (path.name, name)
                assert labels <= EXTERNAL[name], (path.name, series)
    assert {"migscope_mig_graphics_active_ratio", "kube_node_labels", "up"} <= seen


# --- the rules against the metric contract -----------------------------------------------------


def test_every_metric_the_rules_read_exists() -> None:
    recorded = {rule["record"] for rule in records()}
    used: set[str] = set()
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names, rule
        unknown = names - SPECS.keys() - EXTERNAL.keys() - recorded
        assert unknown == set(), f"{rule.get('alert') or rule.get('record')}: {unknown}"
        used |= names
    # the scanner found what the rules are about (not an empty, vacuous pass)
    assert {
        "migscope_mig_graphics_active_ratio",
        "migscope_mig_memory_used_bytes",
        "migscope_mig_memory_total_bytes",
        "migscope_mig_info",
        "migscope_mig_pod_info",
        "migscope_gpu_compute_slices",
        "migscope_collector_success",
        "up",
        "kube_node_labels",
    } <= used


def test_every_label_the_rules_name_exists() -> None:
    every = (
        {label for spec in METRICS for label in spec.labels}
        | TARGET_LABELS
        | DERIVED_LABELS
        | {label for labels in EXTERNAL.values() for label in labels}
    )
    for rule in rules():
        expr = rule["expr"]
        for metric, label in selector_labels(expr):
            if metric in SPECS:
                assert label in {*SPECS[metric].labels, *TARGET_LABELS}, (metric, label)
            else:
                assert label in EXTERNAL[metric], (metric, label)
        assert grouping_labels(expr) <= every, rule.get("alert") or rule.get("record")


def test_recording_rule_names_follow_level_metric_operations() -> None:
    names = [rule["record"] for rule in records()]
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"[a-z_]+:migscope_[a-z0-9_]+:[a-z0-9_]+", name), name


def test_idle_is_about_compute_whatever_memory_is_held() -> None:
    """docs/classification.md: memory held is not use. The indicator reads activity alone, at
    the analyzer's default threshold, and MigSliceIdle quotes the memory held as evidence."""
    (rule,) = [r for r in records() if r["record"] == "slice_pod:migscope_mig_held_idle:1h"]
    read = metric_names(rule["expr"])
    assert "slice:migscope_mig_graphics_active_ratio:avg1h" in read
    assert not [name for name in read if "memory" in name], read
    thresholds = [float(x) for x in re.findall(r"<\s*bool\s*([0-9.]+)", rule["expr"])]
    assert thresholds == [default_policy().idle.activity_p95_below]
    (alert,) = [a for a in alerts() if a["alert"] == "MigSliceIdle"]
    description = alert["annotations"]["description"]
    assert "slice:migscope_mig_memory_used_bytes:max1h" in description
    assert "memory stayed under" not in description


def test_gpu_share_lists_every_instance_size_of_the_catalogue() -> None:
    """PromQL cannot read a label as a number: the rule must list every compute-slice count."""
    (rule,) = [r for r in records() if r["record"] == "slice:migscope_mig_gpu_share:ratio"]
    size = r'(\d+) \* group by \([^)]*\) \(migscope_mig_info\{compute_slices="(\d+)"\}'
    pairs = re.findall(size, rule["expr"])
    assert pairs
    assert all(factor == label for factor, label in pairs), pairs
    listed = {int(label) for _, label in pairs}
    sizes = {profile.compute_slices for model in all_models() for profile in model.profiles}
    assert sizes <= listed, f"sizes missing from the rule: {sizes - listed}"


def test_exporter_job_selector_is_the_documented_convention() -> None:
    selectors = [
        m.group(0) for rule in rules() for m in re.finditer(r"\bup\{[^}]*\}", rule["expr"])
    ]
    assert selectors
    assert all(s == "up{" + JOB_SELECTOR + "}" for s in selectors), selectors
    assert JOB_SELECTOR in DOC.read_text()


def test_kube_state_metrics_labels_are_the_sanitised_allowlist() -> None:
    used = {
        label
        for rule in rules()
        for metric, label in selector_labels(rule["expr"])
        if metric == "kube_node_labels"
    } | {label for rule in rules() for label in re.findall(r'"(label_[a-z0-9_]+)"', rule["expr"])}
    assert used == {ksm_label(name) for name in KSM_ALLOWLIST}
    assert ksm_label("nvidia.com/mig.config.state") == "label_nvidia_com_mig_config_state"
    flag = f"--metric-labels-allowlist=nodes=[{','.join(KSM_ALLOWLIST)}]"
    assert flag in DOC.read_text()


# --- alerts and their documentation --------------------------------------------------------------


def doc_anchors() -> set[str]:
    """GitHub's anchors of the Markdown headings of docs/rules.md."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", DOC.read_text(), flags=re.MULTILINE):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        anchors.add(text.replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("rule", alerts(), ids=[rule["alert"] for rule in alerts()])
def test_alert_is_complete_and_documented(rule: dict[str, Any]) -> None:
    name = rule["alert"]
    assert re.fullmatch(r"(Mig|Migscope)[A-Z][A-Za-z]+", name)
    assert rule.get("for"), "an alert without `for` fires on one bad evaluation"
    assert rule["labels"]["severity"] in SEVERITIES
    annotations = rule["annotations"]
    assert set(annotations) == {"summary", "description", "runbook_url"}
    assert "$labels" in annotations["summary"] + annotations["description"]
    anchor = name.lower()
    assert annotations["runbook_url"] == f"{RUNBOOK}#{anchor}"
    assert anchor in doc_anchors(), f"docs/rules.md has no section {name}"


def test_every_recording_rule_is_documented() -> None:
    text = DOC.read_text()
    missing = [rule["record"] for rule in records() if f"`{rule['record']}`" not in text]
    assert missing == []
