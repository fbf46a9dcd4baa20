"""The object-metadata checks every kube-apiserver write goes through (test fake).

Only ``ObjectMeta`` is validated, because that is what the applier writes freely: names
(RFC 1123 subdomains), label keys and values, annotation keys, and the types of both maps.
The messages are upstream's (``k8s.io/apimachinery/pkg/util/validation``), so a test can
show the operator the exact text a real cluster would. Type-specific validation (pod specs,
lease fields, ...) is not reproduced: the fake stores whatever JSON it is given there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import ApiError, bad_request, invalid
from .resources import ResourceType

__all__ = ["validate_metadata"]

_NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"

_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    f"used for validation is '{_NAME_PART}')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '{_LABEL_VALUE}')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    f"used for validation is '{_SUBDOMAIN}')"
)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _qualified_name_errors(key: str) -> list[str]:
    errors: list[str] = []
    prefix, _, name = key.rpartition("/")
    if "/" in key:
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not re.fullmatch(_SUBDOMAIN, prefix):
            errors.append(f"prefix part {_SUBDOMAIN_MSG}")
    if not name:
        errors.append("name part must be non-empty")
    else:
        if len(name) > 63:
            errors.append("name part must be no more than 63 characters")
        if not re.fullmatch(_NAME_PART, name):
            errors.append(_NAME_PART_MSG)
    return errors


def validate_metadata(rtype: ResourceType, obj: Mapping[str, Any], *, name: str) -> None:
    """Check ``obj['metadata']`` as upstream's ``ValidateObjectMeta`` would.

    Raises:
        ApiError: 400 when labels/annotations are not maps of strings (a decode error
            upstream), 422 ``Invalid`` for a bad name, label or annotation key.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise bad_request(
            f'{rtype.kind} in version "{rtype.version}" cannot be handled as a '
            f"{rtype.kind}: metadata must be an object"
        )
    problems: list[tuple[str, str]] = []
    if not re.fullmatch(_SUBDOMAIN, name) or len(name) > 253:
        problems.append(("metadata.name", f"Invalid value: {_quote(name)}: {_SUBDOMAIN_MSG}"))
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if values is None:
            continue
        if not isinstance(values, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in values.items()
        ):
            raise _decode_error(rtype, field)
        for key, value in values.items():
            for why in _qualified_name_errors(key):
                problems.append((f"metadata.{field}", f"Invalid value: {_quote(key)}: {why}"))
            if field == "labels":
                if len(value) > 63:
                    problems.append(
                        (
                            "metadata.labels",
                            f"Invalid value: {_quote(value)}: must be no more than 63 characters",
                        )
                    )
                if not re.fullmatch(_LABEL_VALUE, value):
                    problems.append(
                        ("metadata.labels", f"Invalid value: {_quote(value)}: {_LABEL_VALUE_MSG}")
                    )
    if problems:
        raise invalid(rtype.kind, name, problems, group=rtype.group)


def _decode_error(rtype: ResourceType, field: str) -> ApiError:
    return bad_request(
        f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
        f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{field} of type string"
    )
