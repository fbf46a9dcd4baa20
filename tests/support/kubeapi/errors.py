"""``metav1.Status`` failures exactly as kube-apiserver writes them (test fake).

The applier tells a conflict from a missing object from a budget refusal by the ``reason`` and
``code`` of the ``Status`` body, and shows its ``message`` to people, so the fake builds them
with the constructors of ``k8s.io/apimachinery/pkg/api/errors`` (``NewNotFound``,
``NewConflict``, ``NewInvalid``, ...): same reasons, same message templates, same
``details`` (``kind`` holds the *resource*, e.g. ``nodes``, except for ``Invalid`` which
names the Kind). Empty fields are left out, as Go's ``omitempty`` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ApiError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "generic",
    "internal",
    "invalid",
    "method_not_allowed",
    "not_found",
    "status_failure",
    "status_success",
    "too_many_requests",
    "unauthorized",
    "unsupported_media_type",
]


class ApiError(Exception):
    """A request the fake refuses; :attr:`status` is the ``Status`` body it answers with."""

    def __init__(self, status: Mapping[str, Any]) -> None:
        self.status: dict[str, Any] = dict(status)
        super().__init__(f"{self.code} {self.reason}: {self.status.get('message', '')}")

    @property
    def code(self) -> int:
        """The HTTP status code."""
        return int(self.status["code"])

    @property
    def reason(self) -> str:
        """``StatusReason`` (``NotFound``, ``Conflict``, ...), ``""`` where upstream sets none."""
        return str(self.status.get("reason", ""))

    @property
    def retry_after(self) -> int | None:
        """``details.retryAfterSeconds`` when set; the server also sends it as Retry-After."""
        seconds = self.status.get("details", {}).get("retryAfterSeconds")
        return int(seconds) if seconds else None


def _details(
    *,
    name: str = "",
    group: str = "",
    kind: str = "",
    uid: str = "",
    causes: Sequence[Mapping[str, str]] = (),
    retry_after: int = 0,
) -> dict[str, Any]:
    details: dict[str, Any] = {}
    for key, value in (("name", name), ("group", group), ("kind", kind), ("uid", uid)):
        if value:
            details[key] = value
    if causes:
        details["causes"] = [dict(c) for c in causes]
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return details


def status_failure(
    code: int,
    reason: str,
    message: str,
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``Status`` with ``status: Failure``; ``details`` is omitted when ``None``."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        status["reason"] = reason
    if details is not None:
        status["details"] = dict(details)
    status["code"] = code
    return status


def status_success(details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"kind": "Status", "status": "Success"}``: what deletes and evictions answer."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    }
    if details:
        status["details"] = dict(details)
    return status


def _qualified(resource: str, group: str) -> str:
    # schema.GroupResource.String(): "nodes", "leases.coordination.k8s.io".
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    """``NewNotFound``: ``nodes "n1" not found``."""
    return ApiError(
        status_failure(
            404,
            "NotFound",
            f'{_qualified(resource, group)} "{name}" not found',
            _details(name=name, group=group, kind=resource),
        )
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    """``NewAlreadyExists``: 409 with reason ``AlreadyExists``."""
    return ApiError(
        status_failure(
            409,
            "AlreadyExists",
            f'{_qualified(resource, group)} "{name}" already exists',
            _details(name=name, group=group, kind=resource),
        )
    )


#: The text ``NewConflict`` wraps for a stale resourceVersion (storage's errConflict).
STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def conflict(resource: str, name: str, why: str = STALE, group: str = "") -> ApiError:
    """``NewConflict``: ``Operation cannot be fulfilled on nodes "n1": <why>``."""
    return ApiError(
        status_failure(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
            _details(name=name, group=group, kind=resource),
        )
    )


def invalid(kind: str, name: str, errors: Sequence[tuple[str, str]], group: str = "") -> ApiError:
    """``NewInvalid`` from ``(field, "Invalid value: ...")`` pairs (note: Kind, not resource)."""
    parts = [f"{field}: {body}" for field, body in errors]
    aggregate = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    causes = [
        {"reason": _cause_type(body), "message": body, "field": field} for field, body in errors
    ]
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        status_failure(
            422,
            "Invalid",
            f'{qualified} "{name}" is invalid: {aggregate}',
            _details(name=name, group=group, kind=kind, causes=causes),
        )
    )


def _cause_type(body: str) -> str:
    # field.ErrorType values as they appear in StatusCause.reason.
    if body.startswith("Required value"):
        return "FieldValueRequired"
    if body.startswith("Forbidden"):
        return "FieldValueForbidden"
    if body.startswith("Unsupported value"):
        return "FieldValueNotSupported"
    return "FieldValueInvalid"


def bad_request(message: str) -> ApiError:
    """``NewBadRequest``: 400 with the message as given."""
    return ApiError(status_failure(400, "BadRequest", message))


def unauthorized() -> ApiError:
    """What the authentication filter answers to a missing or wrong bearer token."""
    return ApiError(status_failure(401, "Unauthorized", "Unauthorized"))


def method_not_allowed(resource: str, action: str, group: str = "") -> ApiError:
    """``NewMethodNotSupported``: 405."""
    return ApiError(
        status_failure(
            405,
            "MethodNotAllowed",
            f'{action} is not supported on resources of kind "{_qualified(resource, group)}"',
            _details(group=group, kind=resource),
        )
    )


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> ApiError:
    """415, as for a strategic-merge patch of a custom resource."""
    return ApiError(
        status_failure(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted)}",
        )
    )


def too_many_requests(
    message: str, *, retry_after: int = 0, causes: Sequence[Mapping[str, str]] = ()
) -> ApiError:
    """``NewTooManyRequests``: 429; ``details`` is always present (it carries retryAfter)."""
    return ApiError(
        status_failure(
            429,
            "TooManyRequests",
            message,
            _details(causes=causes, retry_after=retry_after),
        )
    )


def expired(message: str) -> ApiError:
    """``NewResourceExpired``: 410 with reason ``Expired`` (a too old resourceVersion)."""
    return ApiError(status_failure(410, "Expired", message))


def internal(message: str) -> ApiError:
    """``NewInternalError``: 500 ``Internal error occurred: <message>``."""
    return ApiError(
        status_failure(
            500,
            "InternalError",
            f"Internal error occurred: {message}",
            _details(causes=[{"message": message}]),
        )
    )


_GENERIC = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", "the server reported a conflict"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: (
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    ),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: (
        "Timeout",
        "the server was unable to return a response in the time allotted, "
        "but may still be processing the request",
    ),
}


def generic(code: int, *, retry_after: int = 0, server_message: str = "") -> ApiError:
    """``NewGenericServerResponse``: the Status upstream builds for a bare status code.

    The fake answers failed JSON-patch operations with it (422, as the real patch handler
    does) and fault rules use it for their canned failures.
    """
    reason, message = _GENERIC.get(
        code,
        (
            "InternalError" if code >= 500 else "",
            f"an error on the server ({json.dumps(server_message)}) has prevented the request "
            "from succeeding"
            if code >= 500
            else f"the server responded with the status code {code} "
            "but did not return more information",
        ),
    )
    return ApiError(status_failure(code, reason, message, _details(retry_after=retry_after)))
