"""What a Prometheus API request comes back as: a checked answer, its results, or an error.

A front end can fail in many ways that all look like "HTTP 200 from somewhere" (HTML from a
proxy, a login redirect, a 404 under the wrong path prefix, JSON that is not the API's):
:func:`check_response` turns each into one :class:`PrometheusError` line, so that the request
loop (:mod:`.transport`) only decides what to retry. The envelope is ``{"status":
"success"|"error", "data": ..., "errorType": ..., "error": ..., "warnings": [...], "infos":
[...]}``; its ``data`` is then read strictly into the types callers hold (:class:`Sample`,
:class:`Series` with numpy arrays, :class:`QueryStats`, :class:`QueryResult`), so that an
answer of another shape fails with "unexpected response" and the URL instead of a ``KeyError``
deep in the analyzer.

Every message is one line that names the URL (credentials removed). Server text quoted in a
message (an error string, the start of an HTML page, the query) is folded onto one line and
cut to a length, so that a proxy's 50 kB error page cannot flood a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import numpy as np
import numpy.typing as npt

from migscope.core import UserError, one_line

_T = TypeVar("_T")

# --------------------------------------------------------------------------------------------
# Errors: every failure of the client is one of these


QUERY_IN_MESSAGE = 200
"""Characters of a query a message quotes (the exception keeps the whole query)."""

SERVER_TEXT_IN_MESSAGE = 300
"""Characters of server text (an error string, a body) a message quotes."""


def clip(text: str | BaseException, limit: int = SERVER_TEXT_IN_MESSAGE) -> str:
    """``text`` on one line, cut to ``limit`` characters (``...`` marks the cut).

    Args:
        text: Server text, a query, or an exception (then :func:`one_line` of it, which
            names the exception type when its message is empty).
        limit: The longest result.

    Returns:
        The folded, possibly shortened text; ``""`` for blank text.
    """
    flat = one_line(text) if isinstance(text, BaseException) else " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


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
# Results: what the calls return


def _opt_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


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


class QueryResult(list[_T]):
    """A list of results plus what the server said about producing them.

    It is a plain ``list`` (of :class:`Sample`, :class:`Series` or strings), so
    callers that only want the data can ignore the rest.

    Attributes:
        result_type: ``vector``, ``scalar`` or ``matrix`` for queries; ``""`` otherwise.
        warnings: The envelope's ``warnings`` (partial data from Thanos stores, failed remote
            reads, ...): the data may be incomplete. Also logged once per client.
        infos: The envelope's ``infos`` (Prometheus 2.50+ query annotations).
        stats: The server's timings, or ``None`` when it reports none (VictoriaMetrics).
        elapsed: Client-side wall time of the call in seconds: requests, retries, parsing.
        requests: HTTP requests the call made (retries included).
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


# --------------------------------------------------------------------------------------------
# The API envelope


@dataclass(slots=True)
class Envelope:
    """A successful answer: its ``data``, warnings, infos, and how many requests it took.

    Attributes:
        data: The envelope's ``data``, as decoded JSON.
        warnings: The envelope's ``warnings`` (partial data, mostly).
        infos: The envelope's ``infos`` (query annotations).
        requests: HTTP requests it took, retries included.
    """

    data: Any
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    requests: int = 1


def maybe_json(response: httpx.Response) -> object:
    """The decoded body, or ``None`` when it is not JSON."""
    try:
        return json.loads(response.content)
    except ValueError:
        return None


def describe(response: httpx.Response, payload: object) -> str:
    """One line about a failed response: the envelope's error, or the start of the body."""
    if isinstance(payload, dict) and "error" in payload:
        return clip(str(payload.get("error")))
    content_type = response.headers.get("content-type", "").split(";")[0].strip()
    text = clip(response.text) if response.content else "(empty body)"
    if "html" in content_type or text.lstrip().lower().startswith(("<!doctype", "<html")):
        return f"an HTML page, not the Prometheus API (a proxy or login page?): {text}"
    return f"{content_type or 'no content type'}: {text}"


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [str(v) for v in value]


def check_response(response: httpx.Response, shown: str, query: str | None) -> Envelope:
    """Turn a non-retryable response into an envelope or the right exception.

    Args:
        response: The answer (not a 5xx or 429 that is still to be retried).
        shown: The request URL without credentials, for messages.
        query: The PromQL sent, if any, for messages.

    Returns:
        The checked envelope (``requests`` is 1; the caller sets it).

    Raises:
        PrometheusQueryError: The server rejected the query (an error envelope with 200, 400
            or 422).
        PrometheusResponseError: A redirect, 401/403/404, another error status, or a body
            that is not a successful API envelope with ``data``.
    """
    status = response.status_code
    if 300 <= status < 400:
        location = response.headers.get("location", "?")
        raise PrometheusResponseError(
            f"HTTP {status} from {shown}: redirected to {location} (a login page or a "
            "different base URL?)",
            url=shown,
            status_code=status,
        )
    payload = maybe_json(response)
    if status in (401, 403):
        raise PrometheusResponseError(
            f"HTTP {status} from {shown}: not authorised; check the bearer token, basic "
            f"auth or tenant header ({describe(response, payload)})",
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
            about = f"; query: {clip(query, QUERY_IN_MESSAGE)}" if query else ""
            raise PrometheusQueryError(
                f"{shown} rejected the request ({error_type}): {clip(server_message)}{about}",
                url=shown,
                error_type=error_type,
                server_message=server_message,
                query=query,
                status_code=status,
            )
        hint = "" if is_envelope else " (not a Prometheus API answer: wrong path prefix?)"
        raise PrometheusResponseError(
            f"HTTP {status} from {shown}{hint}: {describe(response, payload)}",
            url=shown,
            status_code=status,
        )
    if payload is None:
        raise PrometheusResponseError(
            f"HTTP {status} from {shown} is not JSON: {describe(response, payload)}",
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
    return Envelope(
        data=payload["data"],
        warnings=_strings(payload.get("warnings")),
        infos=_strings(payload.get("infos")),
    )


# --------------------------------------------------------------------------------------------
# The envelope's data as samples, series and values


def _shape_error(url: str, what: str) -> PrometheusResponseError:
    """The error for an answer whose ``data`` has the wrong shape."""
    return PrometheusResponseError(
        f"unexpected response from {url}: {what}", url=url, status_code=None
    )


def _result(data: object, *, url: str) -> tuple[str, object]:
    if not isinstance(data, dict) or "resultType" not in data or "result" not in data:
        raise _shape_error(url, "data has no resultType/result")
    return str(data["resultType"]), data["result"]


def _point(pair: object, *, url: str) -> tuple[float, float]:
    try:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise TypeError("not a [timestamp, value] pair")
        return float(pair[0]), float(pair[1])
    except (TypeError, ValueError) as exc:
        raise _shape_error(url, f"malformed sample {pair!r:.80}") from exc


def _labels(item: object, *, url: str) -> dict[str, str]:
    if not isinstance(item, dict):
        raise _shape_error(url, "result item is not an object")
    metric = item.get("metric", {})
    if not isinstance(metric, dict):
        raise _shape_error(url, "metric is not an object")
    if "histogram" in item or "histograms" in item:
        raise _shape_error(url, "native histogram samples are not supported")
    return {str(k): str(v) for k, v in metric.items()}


def _sample(item: object, *, url: str) -> Sample:
    labels = _labels(item, url=url)
    timestamp, value = _point(item.get("value") if isinstance(item, dict) else None, url=url)
    return Sample(labels=labels, timestamp=timestamp, value=value)


def _series(item: object, *, url: str) -> Series:
    labels = _labels(item, url=url)
    values = item.get("values", []) if isinstance(item, dict) else None
    if not isinstance(values, list):
        raise _shape_error(url, "values is not a list")
    count = len(values)
    try:
        ts = np.fromiter((p[0] for p in values), dtype=np.float64, count=count)
        vs = np.fromiter((p[1] for p in values), dtype=np.float64, count=count)
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise _shape_error(url, f"malformed range sample: {exc}") from exc
    return Series(labels=labels, timestamps=ts, values=vs)


def instant_samples(data: object, *, url: str, expr: str) -> tuple[str, list[Sample]]:
    """The result type and samples of an instant query.

    Args:
        data: The envelope's ``data``.
        url: The request URL, for messages.
        expr: The query, for the message about a range-vector result.

    Returns:
        ``("vector", one sample per series)`` or ``("scalar", [one unlabelled sample])``.

    Raises:
        PrometheusResponseError: A malformed answer, or a matrix or string result.
    """
    result_type, result = _result(data, url=url)
    if result_type == "vector":
        if not isinstance(result, list):
            raise _shape_error(url, "vector result is not a list")
        return result_type, [_sample(item, url=url) for item in result]
    if result_type == "scalar":
        timestamp, value = _point(result, url=url)
        return result_type, [Sample(labels={}, timestamp=timestamp, value=value)]
    raise PrometheusResponseError(
        f"{url} returned a {result_type} for an instant query; expected a vector or "
        f"scalar (wrap a range selector in an *_over_time function) - query: "
        f"{clip(expr, QUERY_IN_MESSAGE)}",
        url=url,
        status_code=None,
    )


def matrix_series(data: object, *, url: str) -> list[Series]:
    """The series of a range query.

    Raises:
        PrometheusResponseError: A malformed answer or a result that is not a matrix.
    """
    result_type, result = _result(data, url=url)
    if result_type != "matrix" or not isinstance(result, list):
        raise _shape_error(url, f"a range query returned {result_type!r}, not a matrix")
    return [_series(item, url=url) for item in result]


def label_values(data: object, *, url: str) -> list[str]:
    """The values of ``/api/v1/label/<label>/values``.

    Raises:
        PrometheusResponseError: Not a list.
    """
    if not isinstance(data, list):
        raise _shape_error(url, "label values are not a list")
    return [str(v) for v in data]


def build_info(data: object, *, url: str) -> dict[str, str]:
    """The object of ``/api/v1/status/buildinfo``.

    Raises:
        PrometheusResponseError: Not an object.
    """
    if not isinstance(data, dict):
        raise _shape_error(url, "not an object")
    return {str(k): str(v) for k, v in data.items()}
