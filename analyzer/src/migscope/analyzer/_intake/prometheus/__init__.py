"""A strict client for the Prometheus HTTP query API (also Thanos, Mimir, Cortex, VictoriaMetrics).

Why not an existing client library: the analyzer needs four things they do not give together:
an envelope check that turns every way a front end can fail (HTML from a proxy, a login
redirect, a 404 under the wrong path prefix, bad PromQL, a query timeout) into one clear line;
retries that are safe (connection errors, 5xx and 429 with ``Retry-After``; never bad PromQL);
the server's own evaluation timings (``stats=all``), which the benchmark compares to the
analyzer's wall time; and range queries split to stay under the server's points-per-series
limit. Results are numpy arrays, so a week of samples costs 16 bytes a point, not a Python
object per point.

Engine differences this client absorbs or exposes (checked against Prometheus 2.42 and
VictoriaMetrics 1.79 in ``tests/analyzer/test_prometheus_client.py``; see
``docs/analyzer-sources.md`` for sources):

* bad PromQL: Prometheus answers 400 ``errorType: bad_data``, VictoriaMetrics 422 with
  ``errorType: "422"``; both become :class:`PrometheusQueryError` and neither is retried;
* ``stats=all``: Prometheus returns ``data.stats.timings``; VictoriaMetrics ignores the
  parameter, so :attr:`QueryResult.stats` is ``None`` there;
* points per series: Prometheus refuses more than 11,000 steps, VictoriaMetrics 30,000
  (``-search.maxPointsPerTimeseries``); :meth:`PrometheusClient.query_range_chunked` uses the
  smaller;
* VictoriaMetrics does not return NaN samples; Prometheus does. Both return ``+Inf``/``-Inf``.

Limits (``docs/analyzer-sources.md``, "Limits"): every request, retries included, ends by one
deadline however slowly the server sends, and every answer is read within
:data:`DEFAULT_MAX_RESPONSE_BYTES` decoded bytes; secrets are never quoted in messages.

The package, one job a module: :mod:`.client` (the public calls), :mod:`.connection` (the
httpx client it is built on), :mod:`.transport` (sending, timeouts, retries), :mod:`.deadline`
(one deadline per request), :mod:`.body` (reading an answer within the size limit),
:mod:`.auth` (the bearer token and headers), :mod:`.envelope` (checking an answer against the
API envelope), :mod:`.parsing` (its ``data`` into samples and series), :mod:`.chunks` (long
range queries in pieces), :mod:`.timestamps`, :mod:`.results`, :mod:`.usage` and
:mod:`.errors`.
Log records of all of them go to the ``migscope.analyzer._intake.prometheus`` logger.
"""

from __future__ import annotations

from migscope.analyzer._intake.prometheus.body import DEFAULT_MAX_RESPONSE_BYTES
from migscope.analyzer._intake.prometheus.chunks import MAX_POINTS_PER_SERIES
from migscope.analyzer._intake.prometheus.client import PrometheusClient
from migscope.analyzer._intake.prometheus.connection import (
    CONNECT_TIMEOUT_SECONDS as CONNECT_TIMEOUT_SECONDS,
)
from migscope.analyzer._intake.prometheus.connection import DEFAULT_TIMEOUT
from migscope.analyzer._intake.prometheus.errors import (
    PrometheusError,
    PrometheusQueryError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
)
from migscope.analyzer._intake.prometheus.results import QueryResult, QueryStats, Sample, Series
from migscope.analyzer._intake.prometheus.timestamps import Timestamp
from migscope.analyzer._intake.prometheus.usage import ClientUsage

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT",
    "MAX_POINTS_PER_SERIES",
    "ClientUsage",
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
    "Timestamp",
]
