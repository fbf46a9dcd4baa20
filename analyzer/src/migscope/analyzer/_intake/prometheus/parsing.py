"""Turn the ``data`` of a checked envelope into samples, series, label sets and values.

Why a module of its own: the shapes the API returns (vector, scalar, matrix, lists of label
sets) are checked strictly, so that a front end answering with something else fails with
"unexpected response" and the URL instead of a ``KeyError`` deep in the analyzer; and range
results become numpy arrays without a Python object per point.
"""

from __future__ import annotations

import numpy as np

from migscope.analyzer._intake.prometheus.errors import (
    QUERY_IN_MESSAGE,
    PrometheusResponseError,
    clip,
)
from migscope.analyzer._intake.prometheus.results import Sample, Series


def shape_error(url: str, what: str) -> PrometheusResponseError:
    """The error for an answer whose ``data`` has the wrong shape."""
    return PrometheusResponseError(
        f"unexpected response from {url}: {what}", url=url, status_code=None
    )


def _result(data: object, *, url: str) -> tuple[str, object]:
    if not isinstance(data, dict) or "resultType" not in data or "result" not in data:
        raise shape_error(url, "data has no resultType/result")
    return str(data["resultType"]), data["result"]


def _point(pair: object, *, url: str) -> tuple[float, float]:
    try:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise TypeError("not a [timestamp, value] pair")
        return float(pair[0]), float(pair[1])
    except (TypeError, ValueError) as exc:
        raise shape_error(url, f"malformed sample {pair!r:.80}") from exc


def _labels(item: object, *, url: str) -> dict[str, str]:
    if not isinstance(item, dict):
        raise shape_error(url, "result item is not an object")
    metric = item.get("metric", {})
    if not isinstance(metric, dict):
        raise shape_error(url, "metric is not an object")
    if "histogram" in item or "histograms" in item:
        raise shape_error(url, "native histogram samples are not supported")
    return {str(k): str(v) for k, v in metric.items()}


def _sample(item: object, *, url: str) -> Sample:
    labels = _labels(item, url=url)
    timestamp, value = _point(item.get("value") if isinstance(item, dict) else None, url=url)
    return Sample(labels=labels, timestamp=timestamp, value=value)


def _series(item: object, *, url: str) -> Series:
    labels = _labels(item, url=url)
    values = item.get("values", []) if isinstance(item, dict) else None
    if not isinstance(values, list):
        raise shape_error(url, "values is not a list")
    count = len(values)
    try:
        ts = np.fromiter((p[0] for p in values), dtype=np.float64, count=count)
        vs = np.fromiter((p[1] for p in values), dtype=np.float64, count=count)
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise shape_error(url, f"malformed range sample: {exc}") from exc
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
            raise shape_error(url, "vector result is not a list")
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
        raise shape_error(url, f"a range query returned {result_type!r}, not a matrix")
    return [_series(item, url=url) for item in result]


def label_sets(data: object, *, url: str) -> list[dict[str, str]]:
    """The label sets of ``/api/v1/series``.

    Raises:
        PrometheusResponseError: Not a list of objects.
    """
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise shape_error(url, "series data is not a list of label sets")
    return [{str(k): str(v) for k, v in item.items()} for item in data]


def label_values(data: object, *, url: str) -> list[str]:
    """The values of ``/api/v1/label/<label>/values``.

    Raises:
        PrometheusResponseError: Not a list.
    """
    if not isinstance(data, list):
        raise shape_error(url, "label values are not a list")
    return [str(v) for v in data]


def build_info(data: object, *, url: str) -> dict[str, str]:
    """The object of ``/api/v1/status/buildinfo``.

    Raises:
        PrometheusResponseError: Not an object.
    """
    if not isinstance(data, dict):
        raise shape_error(url, "not an object")
    return {str(k): str(v) for k, v in data.items()}
