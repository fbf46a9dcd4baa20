"""Check an HTTP answer against the Prometheus API envelope, and say what is wrong with it.

Why a module of its own: a front end can fail in many ways that all look like "HTTP 200 from
somewhere" (HTML from a proxy, a login redirect, a 404 under the wrong path prefix, JSON that
is not the API's); this module turns each into one clear line, so that the request loop only
decides what to retry.

The envelope is ``{"status": "success"|"error", "data": ..., "errorType": ..., "error": ...,
"warnings": [...], "infos": [...]}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from migscope.analyzer._intake.prometheus.errors import (
    QUERY_IN_MESSAGE,
    PrometheusQueryError,
    PrometheusResponseError,
    clip,
)


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
