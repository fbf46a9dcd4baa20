"""PromQL escaping: pure rendering rules, then the proof that counts, on real engines.

A selector built from a hostile or merely unusual value (quotes, ``"} or vector(1) #``,
backslashes, newlines, regex metacharacters, Unicode) must match that value literally and
nothing else. The engines are the judges: each value is stored as a label value in a real
Prometheus and a real VictoriaMetrics, then selected back by equality and by regex, and
arbitrary text is echoed through ``label_replace`` to prove the quoting round-trips.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.prometheus import HistorySeries, ManagedServer, PrometheusServer, requires_prometheus
from support.victoria import VictoriaServer, requires_victoria

from migscope.analyzer._intake.prometheus import PrometheusClient, PrometheusQueryError
from migscope.analyzer._intake.promql import (
    Matcher,
    duration,
    escape_label_value,
    matcher,
    quote,
    regex_alternation,
    regex_escape,
    selector,
)

# --------------------------------------------------------------------------------------------
# Pure rendering


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("", ""),
        ("node-1", "node-1"),
        ('a"b', 'a\\"b'),
        ("back\\slash", "back\\\\slash"),
        ("new\nline", "new\\nline"),
        ("cr\rtab\t", "cr\\rtab\\t"),
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("ünï—cødé 🚀", "ünï—cødé 🚀"),
        ("'single' `back`", "'single' `back`"),
    ],
)
def test_escape_label_value(value: str, escaped: str) -> None:
    assert escape_label_value(value) == escaped
    assert quote(value) == f'"{escaped}"'


def test_lone_surrogates_are_refused() -> None:
    with pytest.raises(ValueError, match="not valid Unicode"):
        escape_label_value("bad\udcff")
    with pytest.raises(ValueError, match="not valid Unicode"):
        regex_escape("bad\udcff")


def test_regex_escape_is_gos_quotemeta() -> None:
    # Go: regexp.QuoteMeta escapes exactly \.+*?()|[]{}^$ and nothing else.
    for char in "\\.+*?()|[]{}^$":
        assert regex_escape(char) == "\\" + char
    for char in "-#/ &~:,'\"=!<>%@`\n\t":
        assert regex_escape(char) == char
    assert regex_escape("gpu.1|x") == "gpu\\.1\\|x"


def test_regex_alternation_is_sorted_deduplicated_and_grouped() -> None:
    assert regex_alternation(["b.x", "a", "b.x"]) == "(?:a|b\\.x)"
    with pytest.raises(ValueError, match="empty"):
        regex_alternation([])
    with pytest.raises(ValueError, match="collection"):
        regex_alternation("abc")


def test_selector_renders_sorted_matchers() -> None:
    assert selector("up") == "up"
    assert (
        selector("m", node=["b", "a.b"], namespace='x"y', gpu=Matcher("!=", "0"))
        == 'm{gpu!="0",namespace="x\\"y",node=~"(?:a\\\\.b|b)"}'
    )
    assert selector(node="n1") == '{node="n1"}'
    assert selector("m", pod=Matcher.none_of(["a|b"])) == 'm{pod!~"(?:a\\\\|b)"}'
    assert selector("m", **{"GPU_I_ID": "3"}) == 'm{GPU_I_ID="3"}'
    assert matcher("node", Matcher.one_of({"x"})) == 'node=~"(?:x)"'


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: selector("bad-metric"), "invalid metric name"),
        (lambda: selector("m", **{"bad-label": "x"}), "invalid label name"),
        (lambda: selector("m", **{'x"}or': "x"}), "invalid label name"),
        (lambda: selector(), "needs a metric name"),
        (lambda: selector("m", node=[]), "empty"),
        (lambda: matcher("node", Matcher("==", "x")), "operator"),  # type: ignore[arg-type]
    ],
)
def test_selector_refuses_what_cannot_be_escaped(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (604_800, "7d"),
        (timedelta(hours=1), "1h"),
        (90, "90s"),
        (120.0, "2m"),
        (1.5, "1500ms"),
        (timedelta(days=1, seconds=1), "86401s"),
    ],
)
def test_duration(span: float | timedelta, text: str) -> None:
    assert duration(span) == text


@pytest.mark.parametrize("span", [0, -5, 0.0005, math.inf, math.nan])
def test_duration_refuses_non_positive_fractional_or_infinite(span: float) -> None:
    with pytest.raises(ValueError, match="duration"):
        duration(span)


# --------------------------------------------------------------------------------------------
# On the real engines

# Half past an hour two hours ago. Not on the hour: VictoriaMetrics (1.x, as packaged) finds
# no sample stored at exactly 00:00:00 UTC when asked for an instant at that same moment, so
# an on-the-hour T failed every test against it between 02:00 and 03:00 UTC (seen 2026-12-02).
T = (int(time.time()) // 3600 - 2) * 3600 + 1800

# Label values chosen to break naive quoting or regex building. Each is stored in both engines.
TRICKY = [
    "plain",
    'a"b',
    'x"} or vector(1) #',
    'y"} or inj_secret{node=~".+',
    "back\\slash",
    "trailing\\",
    '\\"',
    "new\nline",
    "tab\there",
    "ctl\x01\x7f",
    "ünï—cødé 🚀",
    "gpu.1",
    "gpu-1",
    "gpuX1",
    ".*",
    "(a|b)",
    "a|b",
    "a",
    "^$[]{}+?",
    "'single' `back`",
    "${jndi:x}",
    " spaced  ",
]
# Values that are NOT stored: a selector for them must come back empty.
ABSENT = [
    'nothing"} or vector(1) #',
    'nothing"} or inj_secret{node=~".*',
    "gpu?1",
    ".+",
    "",
]

# One dcgm-exporter family under two spellings whose samples overlap by five minutes, as
# while a lower-casing metric_relabel_configs rolls out (remote_stats reads both).
UPPER, LOWER = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "dcgm_fi_prof_gr_engine_active"
HISTORY = (
    [
        HistorySeries("inj_target", {"node": value}, [(T, float(i))])
        for i, value in enumerate(TRICKY)
    ]
    + [
        HistorySeries("inj_target", {"node": "other"}, [(T, -1.0)]),
        HistorySeries("inj_secret", {"node": "x"}, [(T, 42.0)]),
    ]
    + [
        HistorySeries(UPPER, {"GPU_I_ID": "1"}, [(T - 600 + 60 * k, 0.5) for k in range(6)]),
        HistorySeries(LOWER, {"GPU_I_ID": "1"}, [(T - 300 + 60 * k, 0.7) for k in range(6)]),
    ]
)


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("prometheus", marks=requires_prometheus),
        pytest.param("victoria-metrics", marks=requires_victoria),
    ],
)
def engine(request: pytest.FixtureRequest) -> Iterator[PrometheusClient]:
    server: ManagedServer = (
        PrometheusServer(HISTORY) if request.param == "prometheus" else VictoriaServer(HISTORY)
    )
    with server, PrometheusClient(server.url, retries=0, trust_env=False) as client:
        yield client


def nodes(client: PrometheusClient, expr: str) -> dict[str, float]:
    return {s.labels.get("node", "<none>"): s.value for s in client.query(expr, at=T)}


def test_every_stored_value_is_stored_as_is(engine: PrometheusClient) -> None:
    # Guards the rest: if a value were mangled on the way in, matching it would prove nothing.
    assert sorted(engine.label_values("node", start=T - 60, end=T + 60)) == sorted(
        [*TRICKY, "other", "x"]
    )


@pytest.mark.parametrize("index", range(len(TRICKY)))
def test_equality_selects_exactly_the_value(engine: PrometheusClient, index: int) -> None:
    value = TRICKY[index]
    assert nodes(engine, selector("inj_target", node=value)) == {value: index}


@pytest.mark.parametrize("index", range(len(TRICKY)))
def test_regex_membership_selects_exactly_the_value(engine: PrometheusClient, index: int) -> None:
    value = TRICKY[index]
    assert nodes(engine, selector("inj_target", node=[value])) == {value: index}
    everything_else = {v: float(i) for i, v in enumerate(TRICKY) if v != value}
    everything_else["other"] = -1.0
    assert nodes(engine, selector("inj_target", node=Matcher.none_of([value]))) == everything_else


def test_one_regex_for_all_values_selects_them_and_nothing_else(engine: PrometheusClient) -> None:
    assert nodes(engine, selector("inj_target", node=TRICKY)) == {
        v: float(i) for i, v in enumerate(TRICKY)
    }
    assert nodes(engine, selector("inj_target", node=Matcher.none_of(TRICKY))) == {"other": -1.0}


@pytest.mark.parametrize("value", ABSENT)
def test_injection_attempts_match_nothing(engine: PrometheusClient, value: str) -> None:
    for expr in (selector("inj_target", node=value), selector("inj_target", node=[value])):
        assert nodes(engine, expr) == {}, expr


def test_label_values_match_is_literal(engine: PrometheusClient) -> None:
    for value in TRICKY:
        match = selector("inj_target", node=value)
        assert engine.label_values("node", match=match, start=T - 60, end=T + 60) == [value]


def echo(client: PrometheusClient, text: str) -> str:
    # label_replace writes the replacement as the value of a new label; "$" starts a capture
    # group reference in the replacement, so it is doubled (Go's Regexp.Expand).
    expr = f'label_replace(vector(1), "out", {quote(text.replace("$", "$$"))}, "", "")'
    (sample,) = client.query(expr, at=T)
    return sample.labels.get("out", "")


@pytest.mark.parametrize("text", [*TRICKY, *ABSENT])
def test_quoted_text_round_trips(engine: PrometheusClient, text: str) -> None:
    assert echo(engine, text) == text


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00")))
def test_any_text_round_trips(engine: PrometheusClient, text: str) -> None:
    assert echo(engine, text) == text


# --------------------------------------------------------------------------------------------
# Metric names in any letter case: why remote_stats selects each spelling by its exact name


def test_a_case_insensitive_name_regex_is_accepted_by_both_engines(
    engine: PrometheusClient,
) -> None:
    expr = f'last_over_time({{__name__=~"(?i){LOWER}"}}[10m])'
    assert {s.labels["__name__"] for s in engine.query(expr, at=T)} == {UPPER, LOWER}


def test_but_it_breaks_functions_that_drop_the_name_while_spellings_overlap(
    engine: PrometheusClient,
) -> None:
    # Prometheus: "vector cannot contain metrics with the same labelset"; VictoriaMetrics:
    # "duplicate output timeseries". Either way the whole query fails.
    with pytest.raises(PrometheusQueryError, match=r"same labelset|duplicate output timeseries"):
        engine.query(f'count_over_time({{__name__=~"(?i){LOWER}"}}[10m])', at=T)


def test_exact_spellings_joined_with_or_do_not(engine: PrometheusClient) -> None:
    expr = f"count_over_time({UPPER}[10m]) or count_over_time({LOWER}[10m])"
    # The left spelling's count (its first sample is on the range's edge: 6 on Prometheus 2).
    assert [(s.labels, s.value) for s in engine.query(expr, at=T)] in (
        [({"GPU_I_ID": "1"}, 5.0)],
        [({"GPU_I_ID": "1"}, 6.0)],
    )
    merged = f"max without () (last_over_time({UPPER}[10m]) or last_over_time({LOWER}[10m]))"
    assert [s.labels for s in engine.query(merged, at=T)] == [{"GPU_I_ID": "1"}]
