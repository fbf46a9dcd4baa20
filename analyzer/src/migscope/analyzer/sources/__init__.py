"""Where the analyzer's samples come from.

* :mod:`~migscope.analyzer.sources.prometheus`: the Prometheus HTTP query API, as served by
  Prometheus, Thanos, Mimir, Cortex and VictoriaMetrics (how the analyzer scales past one
  machine: the server aggregates, the analyzer reads small results);
* :mod:`~migscope.analyzer.sources.promql`: PromQL selectors built from untrusted values
  without injection.

``docs/analyzer-sources.md`` explains how to connect to each kind of server.
"""

from __future__ import annotations

from migscope.analyzer.sources.prometheus import (
    DEFAULT_TIMEOUT,
    MAX_POINTS_PER_SERIES,
    ClientUsage,
    PrometheusClient,
    PrometheusError,
    PrometheusQueryError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
    QueryResult,
    QueryStats,
    Sample,
    Series,
)
from migscope.analyzer.sources.promql import (
    Matcher,
    duration,
    escape_label_value,
    quote,
    regex_alternation,
    regex_escape,
    selector,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_POINTS_PER_SERIES",
    "ClientUsage",
    "Matcher",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusQueryError",
    "PrometheusResponseError",
    "PrometheusTimeout",
    "PrometheusUnreachable",
    "QueryResult",
    "QueryStats",
    "Sample",
    "Series",
    "duration",
    "escape_label_value",
    "quote",
    "regex_alternation",
    "regex_escape",
    "selector",
]
