"""deploy/helm/migscope/values.schema.json: Helm refuses wrong values at install, not a week later.

Issue 22, item 6: ``exporter.podAtribution`` (a typo), ``analyzer.window: "7 days"`` and
``apply.windows: ["saturday 1am-5am"]`` rendered without complaint; the typo silently kept
the default and the other two failed only when the CronJob first ran. Helm validates the
values against the chart's JSON schema on template, install, upgrade and lint, so each case
is checked here through a real render (helm-python-sdk, Helm's Go SDK). The schema's
duration and maintenance-window patterns are held to migscope's own parsers over a corpus,
and to values.yaml key by key, so that neither can drift.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from migscope.core._durations import parse_duration

helm = pytest.importorskip("helm_python", reason="helm-python-sdk not installed (test extra)")
jsonschema = pytest.importorskip("jsonschema")

from deploy.test_helm import CHART, VALUE_SETS, render_raw  # noqa: E402

SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
VALUES: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))


def test_the_schema_is_draft_07_and_closes_every_object_of_the_chart() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    jsonschema.Draft7Validator(SCHEMA).validate(VALUES)

    def walk(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if isinstance(node, dict):
            if "properties" in node:
                yield where, node
            for key, value in node.items():
                yield from walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                yield from walk(value, f"{where}/{index}")

    objects = list(walk(SCHEMA, ""))
    assert len(objects) > 20
    for where, node in objects:
        assert node.get("additionalProperties") is False, where


def _schema_at(path: tuple[str, ...]) -> dict[str, Any]:
    node = SCHEMA
    for key in path:
        node = node.get("properties", {}).get(key, {})
    return node


def _keys(values: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key of values.yaml, down to the chart's own objects (not into open maps)."""
    for key, value in values.items():
        yield (*path, key)
        if isinstance(value, dict) and "properties" in _schema_at((*path, key)):
            yield from _keys(value, (*path, key))


def _schema_keys(node: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, sub in node.get("properties", {}).items():
        yield (*path, key)
        yield from _schema_keys(sub, (*path, key))


def _default(path: tuple[str, ...]) -> Any:
    node: Any = VALUES
    for key in path:
        node = node[key]
    return node


def test_every_key_of_values_yaml_is_in_the_schema_and_back() -> None:
    """values.yaml is what the chart's README table is generated from (test_helm holds the two
    together), so this keeps the schema, the defaults and the documented table one set."""
    in_values = set(_keys(VALUES))
    in_schema = set(_schema_keys(SCHEMA))
    missing = sorted(".".join(k) for k in in_values - in_schema)
    assert not missing, f"keys of values.yaml the schema does not describe: {missing}"
    # the other way, below the objects values.yaml spells out (a Secret reference such as
    # analyzer.bearerTokenSecret defaults to {} and has its {name, key} only in the schema)
    stale = sorted(
        ".".join(k)
        for k in in_schema - in_values
        if k[:-1] == () or (k[:-1] in in_values and _default(k[:-1]))
    )
    assert not stale, f"keys in the schema that values.yaml does not have: {stale}"


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_value_set_the_chart_tests_render_is_accepted(name: str) -> None:
    assert render_raw(VALUE_SETS[name])


BAD: list[tuple[dict[str, Any], str, str]] = [
    # the three
    ({"exporter": {"podAtribution": {"enabled": False}}}, "at '/exporter'", "'podAtribution'"),
    ({"analyzer": {"window": "7 days"}}, "at '/analyzer/window'", "'7 days'"),
    ({"apply": {"windows": ["saturday 1am-5am"]}}, "at '/apply/windows/0'", "'saturday 1am-5am'"),
    # unknown keys at every level
    ({"exportr": {"enabled": False}}, "at ''", "'exportr'"),
    ({"analyzer": {"tls": {"caSecret": {"nam": "ca"}}}}, "at '/analyzer/tls/caSecret'", "'nam'"),
    (
        {"exporter": {"probes": {"liveness": {"period": 5}}}},
        "at '/exporter/probes/liveness'",
        "'period'",
    ),
    # wrong types, enums, minimums
    ({"exporter": {"port": "9400"}}, "at '/exporter/port'", "want integer"),
    (
        {"exporter": {"podAttribution": {"enabled": "no"}}},
        "at '/exporter/podAttribution/enabled'",
        "want boolean",
    ),
    ({"apply": {"maxNodes": -1}}, "at '/apply/maxNodes'", "minimum"),
    ({"apply": {"maxNodes": 0}}, "at '/apply/maxNodes'", "minimum"),
    ({"report": {"keep": -3}}, "at '/report/keep'", "minimum"),
    ({"exporter": {"backend": "nvidia"}}, "at '/exporter/backend'", "'nvml', 'dcgm'"),
    ({"analyzer": {"stats": "quick"}}, "at '/analyzer/stats'", "'auto', 'exact', 'fast'"),
    ({"apply": {"windows": "sat-sun 01:00-05:00 UTC"}}, "at '/apply/windows'", "want array"),
    # durations: migscope's and Prometheus'
    ({"analyzer": {"window": "0d"}}, "at '/analyzer/window'", "'0d'"),
    ({"analyzer": {"window": 7}}, "at '/analyzer/window'", "want string"),
    ({"analyzer": {"timeout": "a minute"}}, "at '/analyzer/timeout'", "a minute"),
    ({"apply": {"nodeTimeout": "20 minutes"}}, "at '/apply/nodeTimeout'", "20 minutes"),
    ({"apply": {"leaseWait": -1}}, "at '/apply/leaseWait'", ""),
    ({"exporter": {"interval": 0}}, "at '/exporter/interval'", ""),
    ({"serviceMonitor": {"interval": "30 s"}}, "at '/serviceMonitor/interval'", "'30 s'"),
    ({"apply": {"windows": ["sat 1:00-05:00"]}}, "at '/apply/windows/0'", "'sat 1:00-05:00'"),
    ({"apply": {"windows": ["sat 25:00-05:00"]}}, "at '/apply/windows/0'", "'sat 25:00-05:00'"),
]


@pytest.mark.parametrize(("values", "where", "what"), BAD, ids=[json.dumps(b[0]) for b in BAD])
def test_wrong_values_are_refused_by_helm_naming_the_key(
    values: dict[str, Any], where: str, what: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        render_raw(values)
    message = str(caught.value)
    assert "don't meet the specifications of the schema" in message
    assert where in message
    assert what in message


# --- the patterns are migscope's parsers ------------------------------------------------------


def _matches(definition: str, value: Any) -> bool:
    schema = {"$ref": f"#/definitions/{definition}", "definitions": SCHEMA["definitions"]}
    return jsonschema.Draft7Validator(schema).is_valid(value)


def _accepted(value: Any, **options: bool) -> bool:
    try:
        parse_duration(value, **options)
    except ValueError:
        return False
    return True


def _duration_corpus() -> list[str]:
    numbers = ["0", "7", "10", "1.5", "0.0", "0.25", "1.", ".5", "-5", "1e3", "1 0", "1_0"]
    units = ["", "s", "ms", "m", "h", "d", "w", "M", "MS", "D", "x", "days", "sec", "y"]
    spaces = ["", " "]
    one = [n + sp + u for n, sp, u in itertools.product(numbers, spaces, units)]
    two = [a + sp + b for a, sp, b in itertools.product(one[::7], spaces, one[::5])]
    odd = ["", " ", "7d ", " 7d", "\t7d\t", "7 days", "1h30m", "1 h 30 m", "7d\t1h", "h", "0s0m"]
    return one + two + odd


@pytest.mark.parametrize(
    ("definition", "options"),
    [
        ("duration", {}),
        ("positiveDuration", {"positive": True}),
        ("positiveDurationWithUnit", {"positive": True, "unit_required": True}),
    ],
)
def test_duration_patterns_accept_what_parse_duration_accepts(
    definition: str, options: dict[str, bool]
) -> None:
    corpus = _duration_corpus()
    assert len(corpus) > 500
    wrong = [t for t in corpus if _matches(definition, t) != _accepted(t, **options)]
    assert not wrong, wrong
    # numbers from YAML are seconds (except where a unit is required)
    for number in (0, 5, 0.5, -1):
        if definition == "positiveDurationWithUnit":
            assert not _matches(definition, number)
        else:
            assert _matches(definition, number) == _accepted(number, **options), number


def test_the_window_pattern_accepts_what_parse_window_spec_accepts() -> None:
    """Except the time zone's existence, which no pattern can know: the CronJob's
    ``migscope apply`` still refuses ``Mars/Olympus`` (docs/install.md says so)."""
    from migscope.applier._settings import parse_window_spec

    days = [
        "",
        "sat",
        "SAT",
        "Sat",
        "sat-sun",
        "mon,wed",
        "mon-fri,sun",
        "fri-mon",
        "saturday",
        "sa",
        "xyz",
        "sat-",
        "sat,",
        "sat sun",
    ]
    gaps = ["", " ", "  "]
    times = [
        "01:00-05:00",
        "22:00-04:00",
        "00:00-23:59",
        "1:00-05:00",
        "24:00-01:00",
        "01:60-02:00",
        "1am-5am",
        "01:00 - 05:00",
        "01:00-05:00-06:00",
        "0100-0500",
    ]
    zones = ["", " UTC", " utc", " Europe/Berlin", "  UTC", " UTC ", "UTC"]
    corpus = ["".join(p) for p in itertools.product(days, gaps, times, zones)]
    assert len(corpus) > 2000

    def accepted(text: str) -> bool:
        try:
            parse_window_spec(text)
        except ValueError:
            return False
        return True

    wrong = [t for t in corpus if _matches("maintenanceWindow", t) != accepted(t)]
    assert not wrong, wrong[:20]
