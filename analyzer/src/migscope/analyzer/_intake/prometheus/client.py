"""The Prometheus client's public face: its options, one method per API call, and their times.

This is what callers construct and call; how a request is sent and retried lives in
:mod:`.transport`, what comes back in :mod:`.answers`. Times and steps are taken as the API
takes them, seconds with millisecond precision, converted on exact integers (milliseconds),
never on floats, so that a range's ``start``, ``end`` and ``step`` reach the server as given.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

import httpx

from migscope.analyzer._intake.prometheus import answers
from migscope.analyzer._intake.prometheus.answers import (
    QUERY_IN_MESSAGE,
    Envelope,
    QueryResult,
    QueryStats,
    Sample,
    Series,
    clip,
)
from migscope.analyzer._intake.prometheus.body import DEFAULT_MAX_RESPONSE_BYTES
from migscope.analyzer._intake.prometheus.transport import (
    DEFAULT_TIMEOUT,
    ApiTransport,
    BearerToken,
    ClientUsage,
    UsageTally,
    api_base,
    checked_options,
    make_http_client,
    request_timeout,
)
from migscope.analyzer._intake.promql import LABEL_NAME_RE

# The package's logger, whichever module of it logs: one name to configure and filter on.
_log = logging.getLogger(__name__.rpartition(".")[0])

_T = TypeVar("_T")

# --------------------------------------------------------------------------------------------
# Times and steps as the API takes them

#: A point in time: Unix seconds, or a timezone-aware datetime (naive ones are refused as
#: ambiguous).
Timestamp = float | datetime


def to_millis(value: Timestamp, *, what: str) -> int:
    """Unix milliseconds of ``value``: the API takes seconds with ms precision.

    Args:
        value: Unix seconds or an aware datetime.
        what: The argument's name, for the error message.

    Raises:
        ValueError: A naive datetime or a value that is not finite.
        TypeError: Neither a number nor a datetime.
    """
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


def step_millis(step: float | timedelta) -> int:
    """A step in whole milliseconds.

    Raises:
        ValueError: Shorter than 1 ms, or not finite.
    """
    seconds = step.total_seconds() if isinstance(step, timedelta) else float(step)
    millis = round(seconds * 1000) if math.isfinite(seconds) else 0
    if millis <= 0:
        raise ValueError(f"step must be at least 1 ms, got {step!r}")
    return millis


def fmt_millis(millis: int) -> str:
    """Seconds with exactly the millisecond precision of ``millis``, no float rounding."""
    sign = "-" if millis < 0 else ""
    whole, frac = divmod(abs(millis), 1000)
    return f"{sign}{whole}.{frac:03d}" if frac else f"{sign}{whole}"


def range_millis(start: Timestamp, end: Timestamp, step: float | timedelta) -> tuple[int, int, int]:
    """``start``, ``end`` and ``step`` of a range query in milliseconds.

    Raises:
        ValueError: ``end`` before ``start``, or a bad time or step.
    """
    start_ms = to_millis(start, what="start")
    end_ms = to_millis(end, what="end")
    step_ms = step_millis(step)
    if end_ms < start_ms:
        raise ValueError(f"end ({fmt_millis(end_ms)}) is before start ({fmt_millis(start_ms)})")
    return start_ms, end_ms, step_ms


def optional_range(start: Timestamp | None, end: Timestamp | None) -> list[tuple[str, str]]:
    """The ``start``/``end`` parameters of the metadata endpoints, for those given."""
    out: list[tuple[str, str]] = []
    if start is not None:
        out.append(("start", fmt_millis(to_millis(start, what="start"))))
    if end is not None:
        out.append(("end", fmt_millis(to_millis(end, what="end"))))
    return out


class PrometheusClient:
    """Query a Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics).

    ``base_url`` is the address a Grafana data source would use: the server root plus any
    path prefix (``http://prometheus:9090``, ``https://mimir.example/prometheus``,
    ``http://vmselect:8481/select/0/prometheus``). ``/api/v1/...`` is appended to it. A
    trailing ``/api/v1`` is tolerated and removed; user info (``https://user:pw@host``) becomes
    basic auth and never appears in messages; a query string (``?dedup=true``) is sent with
    every request.

    Queries use POST with a form body (URL-length limits do not bite on long node lists);
    label values use GET, the only method that endpoint has.

    Retries: connection errors (refused, reset, DNS, connect timeout), HTTP 5xx (except 501,
    505 and a 503 that says the query timed out) and 429 are retried ``retries`` times with
    exponential backoff (``backoff`` × 2^n seconds, jittered, at most ``max_backoff``); a
    ``Retry-After`` header sets the wait instead, and one longer than ``max_backoff`` ends the
    retries. Bad PromQL (400/422), auth failures and read timeouts are never retried.

    Limits: a request ends by its deadline (``timeout``), retries included, however slowly the
    server sends (:class:`PrometheusTimeout`); an answer past ``max_response_bytes`` decoded
    stops there as it streams in (:class:`PrometheusResponseError`).

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
        timeout: Seconds per request, retries included (connecting: at most 5 of them), or an
            httpx timeout (the deadline is then its longest limit).
        retries: Retries after the first attempt (0 disables retrying).
        backoff: First retry delay in seconds.
        max_backoff: Longest single wait, and the longest ``Retry-After`` honoured.
        stats: Ask for ``stats=all`` so results carry the server's timings.
        max_response_bytes: The most decoded bytes one answer may have (256 MiB).
        trust_env: Honour ``HTTP(S)_PROXY``/``NO_PROXY`` and ``SSL_CERT_FILE`` (httpx).
        transport: An httpx transport (tests use ``httpx.MockTransport`` for protocol edge
            cases a real server cannot be made to produce).
        sleep: Called with each retry delay; defaults to :func:`time.sleep`.

    Raises:
        ValueError: Bad URL scheme, conflicting auth or TLS options, negative retries or
            limit, a token or header value HTTP cannot carry (the value is never quoted).
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
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        trust_env: bool = True,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url, basic_auth = checked_options(
            base_url,
            basic_auth=basic_auth,
            bearer=(bearer_token, bearer_token_file),
            verify=verify,
            ca_file=ca_file,
            counts=(retries, backoff, max_backoff),
            max_response_bytes=max_response_bytes,
        )

        http_timeout = request_timeout(timeout)
        base = api_base(url)
        self._tally = UsageTally()
        self._transport = ApiTransport(
            base,
            make_http_client(
                basic_auth=basic_auth,
                ca_file=ca_file,
                client_cert=client_cert,
                verify=verify,
                headers=headers,
                timeout=http_timeout,
                trust_env=trust_env,
                transport=transport,
            ),
            self._tally,
            params={**dict(url.params.multi_items()), **(params or {})},
            bearer=BearerToken(bearer_token, bearer_token_file, url=str(base)),
            timeout=http_timeout,
            max_response_bytes=max_response_bytes,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            stats=stats,
            sleep=sleep,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The normalised base URL (ends with ``/``; credentials removed)."""
        return str(self._transport.base)

    @property
    def params(self) -> dict[str, str]:
        """The query parameters sent with every request: the URL's query string and ``params``.

        The source reads Thanos's ``max_source_resolution`` from them, to say in the report
        that downsampled data may have been read.
        """
        return self._transport.params

    @property
    def usage(self) -> ClientUsage:
        """A copy of the running totals over all calls so far."""
        return self._tally.snapshot()

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every distinct warning the server sent so far, in order (partial data, mostly).

        The report repeats them: a Thanos store that did not answer means the statistics
        rest on part of the data, and the reader must know that.
        """
        return self._tally.warnings

    def close(self) -> None:
        """Close the connection pool."""
        self._transport.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- public API ----------------------------------------------------------------------------

    def query(self, expr: str, *, at: Timestamp | None = None) -> QueryResult[Sample]:
        """Evaluate an instant query (``/api/v1/query``).

        Args:
            expr: PromQL; build selectors with :mod:`migscope.analyzer._intake.promql`.
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
            form["time"] = fmt_millis(to_millis(at, what="at"))
        envelope = self._transport.request("POST", "api/v1/query", form=form, query=expr)
        url = self._transport.url("api/v1/query")
        result_type, samples = answers.instant_samples(envelope.data, url=url, expr=expr)
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
                :class:`PrometheusQueryError` (query a shorter range or a longer step).
        """
        started = time.perf_counter()
        start_ms, end_ms, step_ms = range_millis(start, end, step)
        form = {
            "query": expr,
            "start": fmt_millis(start_ms),
            "end": fmt_millis(end_ms),
            "step": fmt_millis(step_ms),
        }
        envelope = self._transport.request("POST", "api/v1/query_range", form=form, query=expr)
        url = self._transport.url("api/v1/query_range")
        series = answers.matrix_series(envelope.data, url=url)
        return self._finish(series, envelope, result_type="matrix", started=started, query=expr)

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
        params += optional_range(start, end)
        path = f"api/v1/label/{label}/values"
        envelope = self._transport.request("GET", path, form=params, query=None)
        values = answers.label_values(envelope.data, url=self._transport.url(path))
        return self._finish(values, envelope, result_type="", started=started, query=None)

    def build_info(self) -> dict[str, str]:
        """The server's ``/api/v1/status/buildinfo`` (version, revision, ...).

        Why: a cheap first request that tells "unreachable" and "wrong prefix" apart from
        query problems. VictoriaMetrics answers with an empty object; Thanos and Mimir answer
        with their own versions.
        """
        path = "api/v1/status/buildinfo"
        envelope = self._transport.request("GET", path, form=[], query=None)
        return answers.build_info(envelope.data, url=self._transport.url(path))

    # -- shared steps --------------------------------------------------------------------------

    def _finish(
        self,
        items: Iterable[_T],
        envelope: Envelope,
        *,
        result_type: str,
        started: float,
        query: str | None,
    ) -> QueryResult[_T]:
        stats = None
        if isinstance(envelope.data, dict):
            stats = QueryStats.from_json(envelope.data.get("stats"))
        elapsed = time.perf_counter() - started
        self._tally.add(
            calls=1,
            wall_seconds=elapsed,
            server_eval_seconds=stats.eval_total_time if stats is not None else None,
        )
        if query is not None:
            _log.debug(
                "query took %.3f s (server %s): %s", elapsed, stats, clip(query, QUERY_IN_MESSAGE)
            )
        return QueryResult(
            items,
            result_type=result_type,
            warnings=envelope.warnings,
            infos=envelope.infos,
            stats=stats,
            elapsed=elapsed,
            requests=envelope.requests,
        )
