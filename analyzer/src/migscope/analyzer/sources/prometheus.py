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
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import logging
import math
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import httpx
import numpy as np
import numpy.typing as npt

from migscope.analyzer.sources.promql import LABEL_NAME_RE
from migscope.core.errors import UserError

__all__ = [
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

_log = logging.getLogger(__name__)

#: Connect quickly or fail (an unreachable host should say so in seconds); give a window query
#: a minute to evaluate, which is the order of Prometheus's own default ``-query.timeout`` (2m).
DEFAULT_TIMEOUT_SECONDS = 60.0
"""How long one request may take: a week of statistics for a big chunk of nodes is slow."""

CONNECT_TIMEOUT_SECONDS = 5.0
"""Connecting takes milliseconds when the server is there; waiting longer only hides it."""

DEFAULT_TIMEOUT = httpx.Timeout(DEFAULT_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)

#: Prometheus refuses a range query with more than 11,000 steps per series ("exceeded maximum
#: resolution of 11,000 points per timeseries"); VictoriaMetrics allows 30,000 by default.
MAX_POINTS_PER_SERIES = 11_000

#: A point in time: Unix seconds, or a timezone-aware datetime (naive ones are refused as
#: ambiguous).
Timestamp = float | datetime

_T = TypeVar("_T")
_QUERY_IN_MESSAGE = 200
_SERVER_TEXT_IN_MESSAGE = 300
_NOT_RETRIED_5XX = frozenset({501, 505})


# --------------------------------------------------------------------------------------------
# Errors


class PrometheusError(UserError):
    """Base of every error the client raises; the message is one line that names the URL.

    Attributes:
        url: The request URL (credentials removed) the error is about.
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class PrometheusUnreachable(PrometheusError):
    """No HTTP answer at all: refused, reset, DNS, TLS, or connect timeout.

    Retried before raising, except TLS verification failures, which no retry can fix.
    """


class PrometheusTimeout(PrometheusError):
    """The server did not answer within the read timeout, or its query timed out.

    A query timeout is Prometheus's 503 ``errorType: timeout``. Not retried: the same query
    would be as slow again.
    """


class PrometheusQueryError(PrometheusError):
    """The server rejected the query (400/422: bad PromQL, too many samples, ...). Not retried.

    Attributes:
        error_type: The envelope's ``errorType`` (``bad_data``, ``execution``; VictoriaMetrics
            puts the HTTP status there, e.g. ``"422"``).
        server_message: The envelope's ``error`` text, as the server wrote it.
        query: The full query (the message holds at most its first 200 characters).
        status_code: The HTTP status.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str,
        error_type: str,
        server_message: str,
        query: str | None,
        status_code: int,
    ) -> None:
        super().__init__(message, url=url)
        self.error_type = error_type
        self.server_message = server_message
        self.query = query
        self.status_code = status_code


class PrometheusResponseError(PrometheusError):
    """An answer that is not a usable Prometheus API response.

    Not JSON, HTML from a proxy or login page, a redirect, the wrong envelope, 401/403/404,
    or 5xx/429 after every retry.

    Attributes:
        status_code: The HTTP status, or ``None`` when the problem is not tied to one.
    """

    def __init__(self, message: str, *, url: str, status_code: int | None) -> None:
        super().__init__(message, url=url)
        self.status_code = status_code


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class QueryStats:
    """The server's own account of a query (Prometheus ``stats=all``), in seconds.

    Why: the benchmark compares the analyzer's wall time with the time the server spent
    evaluating, so the analyzer's own overhead (HTTP, JSON, numpy) can be measured. Fields
    the server did not report are ``None``; VictoriaMetrics reports none of them.

    Attributes:
        eval_total_time: ``timings.evalTotalTime``: the whole evaluation.
        exec_total_time: ``timings.execTotalTime``: evaluation plus queueing.
        exec_queue_time: ``timings.execQueueTime``: waiting for a query slot.
        query_preparation_time: ``timings.queryPreparationTime``: selecting series.
        inner_eval_time: ``timings.innerEvalTime``: the PromQL engine's inner loop.
        result_sort_time: ``timings.resultSortTime``.
        total_queryable_samples: ``samples.totalQueryableSamples``: samples touched.
        peak_samples: ``samples.peakSamples``: the most samples held at once.
    """

    eval_total_time: float | None = None
    exec_total_time: float | None = None
    exec_queue_time: float | None = None
    query_preparation_time: float | None = None
    inner_eval_time: float | None = None
    result_sort_time: float | None = None
    total_queryable_samples: int | None = None
    peak_samples: int | None = None

    @classmethod
    def from_json(cls, stats: object) -> QueryStats | None:
        """Read ``data.stats``; ``None`` when absent or not an object (engines without it)."""
        if not isinstance(stats, dict):
            return None
        timings = stats.get("timings")
        samples = stats.get("samples")
        timings = timings if isinstance(timings, dict) else {}
        samples = samples if isinstance(samples, dict) else {}
        return cls(
            eval_total_time=_opt_float(timings.get("evalTotalTime")),
            exec_total_time=_opt_float(timings.get("execTotalTime")),
            exec_queue_time=_opt_float(timings.get("execQueueTime")),
            query_preparation_time=_opt_float(timings.get("queryPreparationTime")),
            inner_eval_time=_opt_float(timings.get("innerEvalTime")),
            result_sort_time=_opt_float(timings.get("resultSortTime")),
            total_queryable_samples=_opt_int(samples.get("totalQueryableSamples")),
            peak_samples=_opt_int(samples.get("peakSamples")),
        )

    def merge(self, other: QueryStats) -> QueryStats:
        """Combine the stats of two requests of one logical query (its chunks).

        Times and samples add up, the peak is the larger; a field unknown in either stays
        unknown.
        """

        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        def add_int(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        return QueryStats(
            eval_total_time=add(self.eval_total_time, other.eval_total_time),
            exec_total_time=add(self.exec_total_time, other.exec_total_time),
            exec_queue_time=add(self.exec_queue_time, other.exec_queue_time),
            query_preparation_time=add(self.query_preparation_time, other.query_preparation_time),
            inner_eval_time=add(self.inner_eval_time, other.inner_eval_time),
            result_sort_time=add(self.result_sort_time, other.result_sort_time),
            total_queryable_samples=add_int(
                self.total_queryable_samples, other.total_queryable_samples
            ),
            peak_samples=None
            if self.peak_samples is None or other.peak_samples is None
            else max(self.peak_samples, other.peak_samples),
        )


class QueryResult(list[_T]):
    """A list of results plus what the server said about producing them.

    It is a plain ``list`` (of :class:`Sample`, :class:`Series`, label sets or strings), so
    callers that only want the data can ignore the rest.

    Attributes:
        result_type: ``vector``, ``scalar`` or ``matrix`` for queries; ``""`` otherwise.
        warnings: The envelope's ``warnings`` (partial data from Thanos stores, failed remote
            reads, ...): the data may be incomplete. Also logged once per client.
        infos: The envelope's ``infos`` (Prometheus 2.50+ query annotations).
        stats: The server's timings, or ``None`` when it reports none (VictoriaMetrics).
        elapsed: Client-side wall time of the call in seconds: requests, retries, parsing.
        requests: HTTP requests the call made (chunks and retries included).
    """

    result_type: str
    warnings: tuple[str, ...]
    infos: tuple[str, ...]
    stats: QueryStats | None
    elapsed: float
    requests: int

    def __init__(
        self,
        items: Iterable[_T] = (),
        *,
        result_type: str = "",
        warnings: Sequence[str] = (),
        infos: Sequence[str] = (),
        stats: QueryStats | None = None,
        elapsed: float = 0.0,
        requests: int = 0,
    ) -> None:
        super().__init__(items)
        self.result_type = result_type
        self.warnings = tuple(warnings)
        self.infos = tuple(infos)
        self.stats = stats
        self.elapsed = elapsed
        self.requests = requests


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of an instant query.

    Attributes:
        labels: The series' labels, ``__name__`` included when the result keeps it.
        timestamp: Evaluation time, Unix seconds.
        value: The value; NaN and ±Inf are kept as floats.
    """

    labels: Mapping[str, str]
    timestamp: float
    value: float


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """One series of a range query: labels and two aligned float64 arrays.

    Why arrays instead of a list of pairs: a week at 60 s is 10,080 points per slice; as
    numpy arrays that is 160 kB, as Python tuples of floats about 1 MB, and statistics over it
    are one vectorised call.

    Attributes:
        labels: The series' labels.
        timestamps: Unix seconds, strictly increasing.
        values: One value per timestamp (NaN and ±Inf kept).
    """

    labels: Mapping[str, str]
    timestamps: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.timestamps.shape[0])

    def points(self) -> Iterator[tuple[float, float]]:
        """Iterate over ``(timestamp, value)`` pairs as Python floats."""
        return zip(self.timestamps.tolist(), self.values.tolist(), strict=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Series):
            return NotImplemented
        return (
            dict(self.labels) == dict(other.labels)
            and np.array_equal(self.timestamps, other.timestamps)
            and np.array_equal(self.values, other.values, equal_nan=True)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside: not hashable


@dataclass(slots=True)
class ClientUsage:
    """Running totals over every call of one client, for benchmarks and progress reports.

    Attributes:
        calls: Results returned (each chunk of a chunked range query counts as one).
        requests: HTTP requests sent, retries included.
        retries: Requests that were repeats after a retryable failure.
        wall_seconds: Client-side wall time of all calls.
        server_eval_seconds: Sum of ``evalTotalTime`` over the requests that reported it.
        requests_with_stats: How many requests reported ``evalTotalTime``.
        bytes_received: Response body bytes.
    """

    calls: int = 0
    requests: int = 0
    retries: int = 0
    wall_seconds: float = 0.0
    server_eval_seconds: float = 0.0
    requests_with_stats: int = 0
    bytes_received: int = 0


@dataclass(slots=True)
class _Envelope:
    data: Any
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    requests: int = 1


# --------------------------------------------------------------------------------------------
# Helpers


def _opt_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _one_line(text: str, limit: int = _SERVER_TEXT_IN_MESSAGE) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _to_millis(value: Timestamp, *, what: str) -> int:
    """Unix milliseconds of ``value``: the API takes seconds with ms precision."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{what} is a naive datetime; give a timezone (e.g. UTC)")
        seconds = value.timestamp()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be Unix seconds or an aware datetime, got {value!r}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{what} must be finite, got {seconds!r}")
    return round(seconds * 1000)


def _step_millis(step: float | timedelta) -> int:
    seconds = step.total_seconds() if isinstance(step, timedelta) else float(step)
    millis = round(seconds * 1000) if math.isfinite(seconds) else 0
    if millis <= 0:
        raise ValueError(f"step must be at least 1 ms, got {step!r}")
    return millis


def _fmt_millis(millis: int) -> str:
    """Seconds with exactly the millisecond precision of ``millis``, no float rounding."""
    sign = "-" if millis < 0 else ""
    whole, frac = divmod(abs(millis), 1000)
    return f"{sign}{whole}.{frac:03d}" if frac else f"{sign}{whole}"


def _redact(url: httpx.URL) -> str:
    return str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)


def _retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _has_ssl_cause(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError | ssl.CertificateError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _attempts(count: int) -> str:
    return f"{count} attempt" + ("s" if count != 1 else "")


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [str(v) for v in value]


# --------------------------------------------------------------------------------------------
# Client


class PrometheusClient:
    """Query a Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics).

    ``base_url`` is the address a Grafana data source would use: the server root plus any
    path prefix (``http://prometheus:9090``, ``https://mimir.example/prometheus``,
    ``http://vmselect:8481/select/0/prometheus``). ``/api/v1/...`` is appended to it. A
    trailing ``/api/v1`` is tolerated and removed; user info (``https://user:pw@host``) becomes
    basic auth and never appears in messages; a query string (``?dedup=true``) is sent with
    every request.

    Requests use POST with a form body for queries and series (URL-length limits do not bite
    on long node lists); label values use GET, the only method that endpoint has.

    Retries: connection errors (refused, reset, DNS, connect timeout), HTTP 5xx (except 501,
    505 and a 503 that says the query timed out) and 429 are retried ``retries`` times with
    exponential backoff (``backoff`` × 2^n seconds, jittered, at most ``max_backoff``); a
    ``Retry-After`` header sets the wait instead, and one longer than ``max_backoff`` ends the
    retries. Bad PromQL (400/422), auth failures and read timeouts are never retried.

    The client is thread-safe (one httpx connection pool); close it, or use it as a context
    manager.

    Args:
        base_url: Server root plus path prefix; ``http`` or ``https``.
        bearer_token: Sent as ``Authorization: Bearer ...`` (OpenShift/Thanos, Grafana Cloud).
        bearer_token_file: Read before every request, so rotated service-account tokens work.
        basic_auth: ``(user, password)``.
        ca_file: PEM bundle of the CA(s) that signed the server certificate (replaces the
            system trust store for this client).
        client_cert: PEM certificate (and key, if separate) for mutual TLS.
        verify: ``False`` disables certificate verification (testing only).
        headers: Extra headers on every request, e.g. ``{"X-Scope-OrgID": "team-a"}`` for
            Mimir/Cortex tenants.
        params: Extra query parameters on every request, e.g. ``{"dedup": "true"}`` for Thanos
            or ``{"nocache": "1"}`` for VictoriaMetrics.
        timeout: httpx timeout, or seconds per request (connecting: at most 5 of them).
        retries: Retries after the first attempt (0 disables retrying).
        backoff: First retry delay in seconds.
        max_backoff: Longest single wait, and the longest ``Retry-After`` honoured.
        stats: Ask for ``stats=all`` so results carry the server's timings.
        trust_env: Honour ``HTTP(S)_PROXY``/``NO_PROXY`` and ``SSL_CERT_FILE`` (httpx).
        transport: An httpx transport (tests use ``httpx.MockTransport`` for protocol edge
            cases a real server cannot be made to produce).
        sleep: Called with each retry delay; defaults to :func:`time.sleep`.

    Raises:
        ValueError: Bad URL scheme, conflicting auth or TLS options, negative retries.
    """

    def __init__(
        self,
        base_url: str,
        *,
        bearer_token: str | None = None,
        bearer_token_file: str | os.PathLike[str] | None = None,
        basic_auth: tuple[str, str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        client_cert: str | tuple[str, str] | None = None,
        verify: bool = True,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        stats: bool = True,
        trust_env: bool = True,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                f"Prometheus URL must be http(s)://host[:port][/prefix], got {base_url!r}"
            )
        if retries < 0 or backoff < 0 or max_backoff < 0:
            raise ValueError("retries, backoff and max_backoff must not be negative")
        if url.username or url.password:
            if basic_auth is not None:
                raise ValueError("give basic auth in the URL or as basic_auth=, not both")
            basic_auth = (url.username, url.password)
        if sum(x is not None for x in (bearer_token, bearer_token_file, basic_auth)) > 1:
            raise ValueError("choose one of bearer_token, bearer_token_file and basic_auth")
        if not verify and (ca_file is not None):
            raise ValueError("ca_file has no effect with verify=False; drop one of them")

        path = url.path.rstrip("/")
        if path.endswith("/api/v1"):
            path = path[: -len("/api/v1")]
        self._base = url.copy_with(username=None, password=None, path=path + "/", query=None)
        self._params: dict[str, str] = dict(url.params.multi_items())
        self._params.update(params or {})
        self._bearer_token = bearer_token
        self._bearer_token_file = bearer_token_file
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._stats = stats
        self._sleep = sleep
        self._timeout = (
            timeout
            if isinstance(timeout, httpx.Timeout)
            else httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_SECONDS))
        )
        self._seen_warnings: dict[str, None] = {}
        self._lock = threading.Lock()
        self._usage = ClientUsage()

        verify_arg: ssl.SSLContext | bool = verify
        if ca_file is not None or client_cert is not None:
            context = ssl.create_default_context(
                cafile=os.fspath(ca_file) if ca_file is not None else None
            )
            if not verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if client_cert is not None:
                certfile, keyfile = (
                    (client_cert, None) if isinstance(client_cert, str) else client_cert
                )
                context.load_cert_chain(certfile, keyfile)
            verify_arg = context
        self._client = httpx.Client(
            auth=httpx.BasicAuth(*basic_auth) if basic_auth is not None else None,
            headers={"Accept": "application/json", **(headers or {})},
            verify=verify_arg,
            timeout=self._timeout,
            trust_env=trust_env,
            follow_redirects=False,
            transport=transport,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The normalised base URL (ends with ``/``; credentials removed)."""
        return str(self._base)

    @property
    def usage(self) -> ClientUsage:
        """A copy of the running totals over all calls so far."""
        with self._lock:
            return dataclasses.replace(self._usage)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every distinct warning the server sent so far, in order (partial data, mostly).

        The report repeats them: a Thanos store that did not answer means the statistics
        rest on part of the data, and the reader must know that.
        """
        with self._lock:
            return tuple(self._seen_warnings)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- public API ----------------------------------------------------------------------------

    def query(self, expr: str, *, at: Timestamp | None = None) -> QueryResult[Sample]:
        """Evaluate an instant query (``/api/v1/query``).

        Args:
            expr: PromQL; build selectors with :mod:`migscope.analyzer.sources.promql`.
            at: Evaluation time; the server's "now" when omitted.

        Returns:
            One :class:`Sample` per series for a vector; one unlabelled sample for a scalar.

        Raises:
            PrometheusError: See the class hierarchy; a range-vector or string result raises
                :class:`PrometheusResponseError` (use ``query_range`` or an ``*_over_time``).
        """
        started = time.perf_counter()
        form = {"query": expr}
        if at is not None:
            form["time"] = _fmt_millis(_to_millis(at, what="at"))
        envelope = self._request("POST", "api/v1/query", form=form, query=expr)
        url = self._url("api/v1/query")
        result_type, result = self._result(envelope.data, url=url)
        samples: list[Sample] = []
        if result_type == "vector":
            if not isinstance(result, list):
                raise self._shape_error(url, "vector result is not a list")
            samples = [self._sample(item, url=url) for item in result]
        elif result_type == "scalar":
            timestamp, value = self._point(result, url=url)
            samples = [Sample(labels={}, timestamp=timestamp, value=value)]
        else:
            raise PrometheusResponseError(
                f"{url} returned a {result_type} for an instant query; expected a vector or "
                f"scalar (wrap a range selector in an *_over_time function) - query: "
                f"{_one_line(expr, _QUERY_IN_MESSAGE)}",
                url=url,
                status_code=None,
            )
        return self._finish(samples, envelope, result_type=result_type, started=started, query=expr)

    def query_range(
        self, expr: str, *, start: Timestamp, end: Timestamp, step: float | timedelta
    ) -> QueryResult[Series]:
        """Evaluate a range query (``/api/v1/query_range``) in one request.

        The server evaluates ``expr`` at ``start``, ``start + step``, ... up to ``end``. For
        identical grids on every engine pass a ``start`` that is a multiple of ``step``:
        VictoriaMetrics rounds ``start``/``end`` to multiples of ``step`` when a query has 50
        points or more, and Thanos's query-frontend does by default.

        Args:
            expr: PromQL returning an instant vector or scalar.
            start: First evaluation time.
            end: Last evaluation time (inclusive), not before ``start``.
            step: Resolution in seconds or as a timedelta.

        Returns:
            One :class:`Series` per result series.

        Raises:
            ValueError: ``end`` before ``start`` or a non-positive step.
            PrometheusError: See the class hierarchy; more than the server's points limit is a
                :class:`PrometheusQueryError` (use :meth:`query_range_chunked`).
        """
        started = time.perf_counter()
        start_ms, end_ms, step_ms = self._range_args(start, end, step)
        envelope, series = self._range_request(expr, start_ms, end_ms, step_ms)
        return self._finish(series, envelope, result_type="matrix", started=started, query=expr)

    def iter_range_chunks(
        self,
        expr: str,
        *,
        start: Timestamp,
        end: Timestamp,
        step: float | timedelta,
        chunk: float | timedelta | None = None,
        max_points: int = MAX_POINTS_PER_SERIES,
    ) -> Iterator[QueryResult[Series]]:
        """Yield a long range query as consecutive chunks, each one request.

        Why a generator: a caller that aggregates as it goes (sums, maxima, histograms) then
        holds one chunk at a time, so memory does not grow with the window.

        Chunk boundaries lie on the grid ``start + k × step`` and never overlap: chunk ``i``
        covers ``[start + i×n×step, start + ((i+1)×n − 1)×step]`` with ``n`` points.

        Args:
            expr: PromQL returning an instant vector or scalar.
            start: First evaluation time.
            end: Last evaluation time (inclusive).
            step: Resolution.
            chunk: Time span per request; default and maximum ``max_points`` steps.
            max_points: Points per series per request (Prometheus allows 11,000).

        Yields:
            One :class:`QueryResult` per request, in time order.
        """
        start_ms, end_ms, step_ms = self._range_args(start, end, step)
        points = max_points
        if chunk is not None:
            points = min(points, max(1, _step_millis(chunk) // step_ms))
        if points < 1:
            raise ValueError(f"max_points must be at least 1, got {max_points}")
        span = points * step_ms
        chunk_start = start_ms
        while chunk_start <= end_ms:
            chunk_end = min(end_ms, chunk_start + (points - 1) * step_ms)
            started = time.perf_counter()
            envelope, series = self._range_request(expr, chunk_start, chunk_end, step_ms)
            yield self._finish(series, envelope, result_type="matrix", started=started, query=expr)
            chunk_start += span

    def query_range_chunked(
        self,
        expr: str,
        *,
        start: Timestamp,
        end: Timestamp,
        step: float | timedelta,
        chunk: float | timedelta | None = None,
        max_points: int = MAX_POINTS_PER_SERIES,
    ) -> QueryResult[Series]:
        """Evaluate a range query of any length as several requests and merge the series.

        Each request stays under the server's points-per-series limit (see
        :meth:`iter_range_chunks`); the pieces of each series are joined in time order, and a
        point repeated at a chunk boundary (an engine that shifted a chunk's grid) is kept
        once. Series are returned in order of first appearance; stats are summed over the
        requests and warnings collected from all of them.

        Args:
            expr: PromQL returning an instant vector or scalar.
            start: First evaluation time.
            end: Last evaluation time (inclusive).
            step: Resolution.
            chunk: Time span per request; default and maximum ``max_points`` steps.
            max_points: Points per series per request.

        Returns:
            The merged series, as one :class:`QueryResult`.
        """
        started = time.perf_counter()
        pieces: dict[tuple[tuple[str, str], ...], list[Series]] = {}
        labels_of: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
        warnings: list[str] = []
        infos: list[str] = []
        stats: QueryStats | None = None
        requests = 0
        chunk_elapsed = 0.0
        first = True
        for part in self.iter_range_chunks(
            expr, start=start, end=end, step=step, chunk=chunk, max_points=max_points
        ):
            requests += part.requests
            chunk_elapsed += part.elapsed
            warnings.extend(w for w in part.warnings if w not in warnings)
            infos.extend(i for i in part.infos if i not in infos)
            if first:
                stats = part.stats
                first = False
            elif stats is not None and part.stats is not None:
                stats = stats.merge(part.stats)
            else:
                stats = None
            for series in part:
                key = tuple(sorted(series.labels.items()))
                labels_of.setdefault(key, series.labels)
                pieces.setdefault(key, []).append(series)
        merged = [self._join(labels_of[key], parts) for key, parts in pieces.items()]
        elapsed = time.perf_counter() - started
        with self._lock:
            # Each chunk counted its own request time in _finish; add the merging.
            self._usage.wall_seconds += max(0.0, elapsed - chunk_elapsed)
        return QueryResult(
            merged,
            result_type="matrix",
            warnings=warnings,
            infos=infos,
            stats=stats,
            elapsed=elapsed,
            requests=requests,
        )

    def series(
        self,
        match: str | Sequence[str],
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
    ) -> QueryResult[dict[str, str]]:
        """List the label sets of the series matching any selector (``/api/v1/series``).

        Args:
            match: One selector or several (``match[]``); at least one.
            start: Only series with samples after this (the server's default otherwise;
                VictoriaMetrics looks back one day only, so pass it).
            end: Only series with samples before this.

        Returns:
            One label dict per series.
        """
        started = time.perf_counter()
        matches = [match] if isinstance(match, str) else list(match)
        if not matches:
            raise ValueError("series() needs at least one selector")
        form: list[tuple[str, str]] = [("match[]", m) for m in matches]
        form += self._optional_range(start, end)
        url = self._url("api/v1/series")
        envelope = self._request("POST", "api/v1/series", form=form, query=" or ".join(matches))
        data = envelope.data
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise self._shape_error(url, "series data is not a list of label sets")
        label_sets = [{str(k): str(v) for k, v in item.items()} for item in data]
        return self._finish(label_sets, envelope, result_type="", started=started, query=None)

    def label_values(
        self,
        label: str,
        *,
        match: str | Sequence[str] | None = None,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
    ) -> QueryResult[str]:
        """List the values of one label (``/api/v1/label/<label>/values``).

        Args:
            label: The label name; checked (it becomes part of the URL path).
            match: Only values on series matching these selectors.
            start: Only series with samples after this.
            end: Only series with samples before this.

        Returns:
            The values, as the server sorted them.
        """
        if not LABEL_NAME_RE.fullmatch(label):
            raise ValueError(f"invalid label name {label!r}: must match {LABEL_NAME_RE.pattern}")
        started = time.perf_counter()
        params: list[tuple[str, str]] = []
        if match is not None:
            params += [("match[]", m) for m in ([match] if isinstance(match, str) else match)]
        params += self._optional_range(start, end)
        path = f"api/v1/label/{label}/values"
        envelope = self._request("GET", path, form=params, query=None)
        data = envelope.data
        if not isinstance(data, list):
            raise self._shape_error(self._url(path), "label values are not a list")
        return self._finish(
            [str(v) for v in data], envelope, result_type="", started=started, query=None
        )

    def build_info(self) -> dict[str, str]:
        """The server's ``/api/v1/status/buildinfo`` (version, revision, ...).

        Why: a cheap first request that tells "unreachable" and "wrong prefix" apart from
        query problems. VictoriaMetrics answers with an empty object; Thanos and Mimir answer
        with their own versions.
        """
        envelope = self._request("GET", "api/v1/status/buildinfo", form=[], query=None)
        data = envelope.data
        if not isinstance(data, dict):
            raise self._shape_error(self._url("api/v1/status/buildinfo"), "not an object")
        return {str(k): str(v) for k, v in data.items()}

    # -- request machinery -----------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return _redact(self._base.join(path))

    def _headers(self) -> dict[str, str]:
        token = self._bearer_token
        if self._bearer_token_file is not None:
            try:
                with open(self._bearer_token_file, encoding="utf-8") as fh:
                    token = fh.read().strip()
            except OSError as exc:
                raise PrometheusError(
                    f"cannot read the bearer token file {self._bearer_token_file}: "
                    f"{exc.strerror or exc}",
                    url=str(self._base),
                ) from exc
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _delay(self, attempt: int) -> float:
        base = min(self._max_backoff, self._backoff * (2**attempt))
        return float(base * (0.75 + random.random() / 4))

    def _request(
        self,
        method: str,
        path: str,
        *,
        form: Mapping[str, str] | Sequence[tuple[str, str]],
        query: str | None,
    ) -> _Envelope:
        """Send one API request with retries and return its checked envelope."""
        url = self._base.join(path)
        shown = _redact(url)
        items = list(form.items()) if isinstance(form, Mapping) else list(form)
        if self._stats and path in ("api/v1/query", "api/v1/query_range"):
            items.append(("stats", "all"))
        items += list(self._params.items())
        attempts = self._retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            if attempt:
                with self._lock:
                    self._usage.retries += 1
            with self._lock:
                self._usage.requests += 1
            try:
                if method == "GET":
                    response = self._client.request(
                        method, url, params=tuple(items), headers=self._headers()
                    )
                else:
                    response = self._client.request(
                        method, url, data=_form(items), headers=self._headers()
                    )
            except httpx.ConnectTimeout as exc:
                if last:
                    raise PrometheusUnreachable(
                        f"cannot reach Prometheus at {shown}: no answer to the connection "
                        f"within {self._timeout.connect} s ({_attempts(attempts)})",
                        url=shown,
                    ) from exc
                self._wait(attempt, None, shown, f"connect timeout: {exc}")
                continue
            except httpx.TimeoutException as exc:
                phase = type(exc).__name__.replace("Timeout", "").lower() or "request"
                limit = {
                    "read": self._timeout.read,
                    "write": self._timeout.write,
                    "pool": self._timeout.pool,
                }.get(phase)
                within = f" within {limit} s" if limit is not None else ""
                about = f" for query {_one_line(query, _QUERY_IN_MESSAGE)}" if query else ""
                raise PrometheusTimeout(
                    f"Prometheus at {shown} did not answer{within} ({phase} timeout){about}; "
                    "raise the timeout or query a shorter range",
                    url=shown,
                ) from exc
            except httpx.TransportError as exc:
                reason = _one_line(str(exc) or type(exc).__name__)
                if _has_ssl_cause(exc):
                    raise PrometheusUnreachable(
                        f"TLS with {shown} failed: {reason}; give the server's CA with "
                        "ca_file= (or verify=False to test)",
                        url=shown,
                    ) from exc
                if isinstance(exc, httpx.UnsupportedProtocol | httpx.ProxyError) or last:
                    raise PrometheusUnreachable(
                        f"cannot reach Prometheus at {shown}: {reason} ({_attempts(attempt + 1)})",
                        url=shown,
                    ) from exc
                self._wait(attempt, None, shown, reason)
                continue
            except httpx.HTTPError as exc:  # e.g. a body that does not decode (bad gzip)
                raise PrometheusResponseError(
                    f"could not read the answer of {shown}: "
                    f"{_one_line(str(exc) or type(exc).__name__)}",
                    url=shown,
                    status_code=None,
                ) from exc

            with self._lock:
                self._usage.bytes_received += len(response.content)
            status = response.status_code
            retryable = status == 429 or (status >= 500 and status not in _NOT_RETRIED_5XX)
            if retryable:
                payload = self._maybe_json(response)
                if (
                    status == 503
                    and isinstance(payload, dict)
                    and payload.get("errorType") == "timeout"
                ):
                    message = _one_line(str(payload.get("error", "")))
                    about = f"; query: {_one_line(query, _QUERY_IN_MESSAGE)}" if query else ""
                    raise PrometheusTimeout(
                        f"query timed out on the server {shown}: {message}{about}", url=shown
                    )
                retry_after = _retry_after(response)
                if not last and (retry_after is None or retry_after <= self._max_backoff):
                    self._wait(attempt, retry_after, shown, f"HTTP {status}")
                    continue
                detail = self._describe(response, payload)
                why = (
                    f"; it asked to retry after {retry_after:g} s (more than max_backoff="
                    f"{self._max_backoff:g} s)"
                    if retry_after is not None and retry_after > self._max_backoff
                    else ""
                )
                raise PrometheusResponseError(
                    f"HTTP {status} from {shown} after {_attempts(attempt + 1)}{why}: {detail}",
                    url=shown,
                    status_code=status,
                )
            envelope = self._check(response, shown, query)
            envelope.requests = attempt + 1
            return envelope
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait(self, attempt: int, retry_after: float | None, shown: str, reason: str) -> None:
        delay = retry_after if retry_after is not None else self._delay(attempt)
        _log.info("retrying %s in %.2f s after %s", shown, delay, reason)
        self._sleep(delay)

    @staticmethod
    def _maybe_json(response: httpx.Response) -> object:
        try:
            return json.loads(response.content)
        except ValueError:
            return None

    @staticmethod
    def _describe(response: httpx.Response, payload: object) -> str:
        """One line about a failed response: the envelope's error, or the start of the body."""
        if isinstance(payload, dict) and "error" in payload:
            return _one_line(str(payload.get("error")))
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        text = _one_line(response.text) if response.content else "(empty body)"
        if "html" in content_type or text.lstrip().lower().startswith(("<!doctype", "<html")):
            return f"an HTML page, not the Prometheus API (a proxy or login page?): {text}"
        return f"{content_type or 'no content type'}: {text}"

    def _check(self, response: httpx.Response, shown: str, query: str | None) -> _Envelope:
        """Turn a non-retryable response into an envelope or the right exception."""
        status = response.status_code
        if 300 <= status < 400:
            location = response.headers.get("location", "?")
            raise PrometheusResponseError(
                f"HTTP {status} from {shown}: redirected to {location} (a login page or a "
                "different base URL?)",
                url=shown,
                status_code=status,
            )
        payload = self._maybe_json(response)
        if status in (401, 403):
            raise PrometheusResponseError(
                f"HTTP {status} from {shown}: not authorised; check the bearer token, basic "
                f"auth or tenant header ({self._describe(response, payload)})",
                url=shown,
                status_code=status,
            )
        if status == 404:
            raise PrometheusResponseError(
                f"HTTP 404 from {shown}: no Prometheus API there; check the base URL and its "
                "path prefix (e.g. https://mimir.example/prometheus)",
                url=shown,
                status_code=status,
            )
        is_envelope = isinstance(payload, dict) and payload.get("status") in ("success", "error")
        if status >= 400 or (
            is_envelope and isinstance(payload, dict) and payload["status"] == "error"
        ):
            if is_envelope and isinstance(payload, dict) and status in (200, 400, 422):
                error_type = str(payload.get("errorType", "")) or str(status)
                server_message = str(payload.get("error", ""))
                about = f"; query: {_one_line(query, _QUERY_IN_MESSAGE)}" if query else ""
                raise PrometheusQueryError(
                    f"{shown} rejected the request ({error_type}): "
                    f"{_one_line(server_message)}{about}",
                    url=shown,
                    error_type=error_type,
                    server_message=server_message,
                    query=query,
                    status_code=status,
                )
            hint = "" if is_envelope else " (not a Prometheus API answer: wrong path prefix?)"
            raise PrometheusResponseError(
                f"HTTP {status} from {shown}{hint}: {self._describe(response, payload)}",
                url=shown,
                status_code=status,
            )
        if payload is None:
            raise PrometheusResponseError(
                f"HTTP {status} from {shown} is not JSON: {self._describe(response, payload)}",
                url=shown,
                status_code=status,
            )
        if not is_envelope or not isinstance(payload, dict):
            raise PrometheusResponseError(
                f"HTTP {status} from {shown} is JSON but not a Prometheus API response (no "
                "'status': 'success'|'error')",
                url=shown,
                status_code=status,
            )
        if "data" not in payload:
            raise PrometheusResponseError(
                f"HTTP {status} from {shown}: success without 'data'",
                url=shown,
                status_code=status,
            )
        warnings = _strings(payload.get("warnings"))
        infos = _strings(payload.get("infos"))
        for warning in warnings:
            if warning not in self._seen_warnings:
                self._seen_warnings[warning] = None
                _log.warning("Prometheus at %s warns: %s", shown, _one_line(warning))
        return _Envelope(data=payload["data"], warnings=warnings, infos=infos)

    # -- parsing ---------------------------------------------------------------------------------

    def _shape_error(self, url: str, what: str) -> PrometheusResponseError:
        return PrometheusResponseError(
            f"unexpected response from {url}: {what}", url=url, status_code=None
        )

    def _result(self, data: object, *, url: str) -> tuple[str, object]:
        if not isinstance(data, dict) or "resultType" not in data or "result" not in data:
            raise self._shape_error(url, "data has no resultType/result")
        return str(data["resultType"]), data["result"]

    def _point(self, pair: object, *, url: str) -> tuple[float, float]:
        try:
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise TypeError("not a [timestamp, value] pair")
            return float(pair[0]), float(pair[1])
        except (TypeError, ValueError) as exc:
            raise self._shape_error(url, f"malformed sample {pair!r:.80}") from exc

    def _labels(self, item: object, *, url: str) -> dict[str, str]:
        if not isinstance(item, dict):
            raise self._shape_error(url, "result item is not an object")
        metric = item.get("metric", {})
        if not isinstance(metric, dict):
            raise self._shape_error(url, "metric is not an object")
        if "histogram" in item or "histograms" in item:
            raise self._shape_error(url, "native histogram samples are not supported")
        return {str(k): str(v) for k, v in metric.items()}

    def _sample(self, item: object, *, url: str) -> Sample:
        labels = self._labels(item, url=url)
        timestamp, value = self._point(
            item.get("value") if isinstance(item, dict) else None, url=url
        )
        return Sample(labels=labels, timestamp=timestamp, value=value)

    def _series(self, item: object, *, url: str) -> Series:
        labels = self._labels(item, url=url)
        values = item.get("values", []) if isinstance(item, dict) else None
        if not isinstance(values, list):
            raise self._shape_error(url, "values is not a list")
        count = len(values)
        try:
            ts = np.fromiter((p[0] for p in values), dtype=np.float64, count=count)
            vs = np.fromiter((p[1] for p in values), dtype=np.float64, count=count)
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            raise self._shape_error(url, f"malformed range sample: {exc}") from exc
        return Series(labels=labels, timestamps=ts, values=vs)

    def _range_args(
        self, start: Timestamp, end: Timestamp, step: float | timedelta
    ) -> tuple[int, int, int]:
        start_ms = _to_millis(start, what="start")
        end_ms = _to_millis(end, what="end")
        step_ms = _step_millis(step)
        if end_ms < start_ms:
            raise ValueError(
                f"end ({_fmt_millis(end_ms)}) is before start ({_fmt_millis(start_ms)})"
            )
        return start_ms, end_ms, step_ms

    def _range_request(
        self, expr: str, start_ms: int, end_ms: int, step_ms: int
    ) -> tuple[_Envelope, list[Series]]:
        form = {
            "query": expr,
            "start": _fmt_millis(start_ms),
            "end": _fmt_millis(end_ms),
            "step": _fmt_millis(step_ms),
        }
        envelope = self._request("POST", "api/v1/query_range", form=form, query=expr)
        url = self._url("api/v1/query_range")
        result_type, result = self._result(envelope.data, url=url)
        if result_type != "matrix" or not isinstance(result, list):
            raise self._shape_error(url, f"a range query returned {result_type!r}, not a matrix")
        return envelope, [self._series(item, url=url) for item in result]

    def _optional_range(
        self, start: Timestamp | None, end: Timestamp | None
    ) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if start is not None:
            out.append(("start", _fmt_millis(_to_millis(start, what="start"))))
        if end is not None:
            out.append(("end", _fmt_millis(_to_millis(end, what="end"))))
        return out

    def _finish(
        self,
        items: Iterable[_T],
        envelope: _Envelope,
        *,
        result_type: str,
        started: float,
        query: str | None,
    ) -> QueryResult[_T]:
        stats = None
        if isinstance(envelope.data, dict):
            stats = QueryStats.from_json(envelope.data.get("stats"))
        elapsed = time.perf_counter() - started
        with self._lock:
            self._usage.calls += 1
            self._usage.wall_seconds += elapsed
            if stats is not None and stats.eval_total_time is not None:
                self._usage.server_eval_seconds += stats.eval_total_time
                self._usage.requests_with_stats += 1
        if query is not None:
            _log.debug("query took %.3f s (server %s): %s", elapsed, stats, _one_line(query, 200))
        return QueryResult(
            items,
            result_type=result_type,
            warnings=envelope.warnings,
            infos=envelope.infos,
            stats=stats,
            elapsed=elapsed,
            requests=envelope.requests,
        )

    @staticmethod
    def _join(labels: Mapping[str, str], parts: list[Series]) -> Series:
        if len(parts) == 1:
            return parts[0]
        ts_parts: list[npt.NDArray[np.float64]] = []
        vs_parts: list[npt.NDArray[np.float64]] = []
        last = -math.inf
        for part in parts:
            keep = part.timestamps > last
            if keep.any():
                ts_parts.append(part.timestamps[keep])
                vs_parts.append(part.values[keep])
                last = float(ts_parts[-1][-1])
        return Series(
            labels=labels,
            timestamps=np.concatenate(ts_parts) if ts_parts else np.empty(0),
            values=np.concatenate(vs_parts) if vs_parts else np.empty(0),
        )


def _form(items: Sequence[tuple[str, str]]) -> dict[str, str | list[str]]:
    """Form fields for httpx: repeated keys (``match[]``) become lists."""
    out: dict[str, str | list[str]] = {}
    for key, value in items:
        existing = out.get(key)
        if existing is None:
            out[key] = value
        elif isinstance(existing, list):
            existing.append(value)
        else:
            out[key] = [existing, value]
    return out
