"""A strict client for the Prometheus HTTP query API (also Thanos, Mimir, Cortex, VictoriaMetrics).

Why not an existing client library: the analyzer needs three things they do not give together:
an envelope check that turns every way a front end can fail (HTML from a proxy, a login
redirect, a 404 under the wrong path prefix, bad PromQL, a query timeout) into one clear line;
retries that are safe (connection errors, 5xx and 429 with ``Retry-After``; never bad PromQL);
and the server's own evaluation timings (``stats=all``), which the benchmark compares to the
analyzer's wall time. Results are numpy arrays, so a week of samples costs 16 bytes a point,
not a Python object per point.

Engine differences this client absorbs or exposes (checked against Prometheus 2.42 and
VictoriaMetrics 1.79 in ``tests/analyzer/test_prometheus_client.py``; see
``docs/analyzer-sources.md`` for sources):

* bad PromQL: Prometheus answers 400 ``errorType: bad_data``, VictoriaMetrics 422 with
  ``errorType: "422"``; both become :class:`PrometheusQueryError` and neither is retried;
* ``stats=all``: Prometheus returns ``data.stats.timings``; VictoriaMetrics ignores the
  parameter, so :attr:`QueryResult.stats` is ``None`` there;
* points per series: Prometheus refuses a range query of more than 11,000 steps,
  VictoriaMetrics of more than 30,000 (``-search.maxPointsPerTimeseries``); either refusal is
  a :class:`PrometheusQueryError`;
* VictoriaMetrics does not return NaN samples; Prometheus does. Both return ``+Inf``/``-Inf``.

Limits (``docs/analyzer-sources.md``, "Limits"): every request, retries included, ends by one
deadline however slowly the server sends, and every answer is read within
:data:`.body.DEFAULT_MAX_RESPONSE_BYTES` decoded bytes; secrets are never quoted in messages.

The package, along a request: :mod:`.client` (the public calls, their options and times),
:mod:`.transport` (the httpx client, authentication, sending, retries, the usage counters),
:mod:`.body` (an answer read within the size limit), :mod:`.deadline` (one deadline per
request, kept by every connection) and :mod:`.answers` (the envelope check, the results and
the errors).
Log records of all of them go to the ``migscope.analyzer._intake.prometheus`` logger.
"""

from __future__ import annotations

from migscope.analyzer._intake.prometheus.answers import (
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
from migscope.analyzer._intake.prometheus.client import PrometheusClient

__all__ = [
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
]
