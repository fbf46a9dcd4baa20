"""The three PATCH formats kube-apiserver accepts for JSON bodies (test fake).

* ``application/merge-patch+json`` — RFC 7386, exactly: maps merge recursively, ``null``
  deletes a key, anything else (lists included) replaces.
* ``application/strategic-merge-patch+json`` — built-in types only. Maps merge as above.
  Lists follow the patch strategy of the Go type, for the subset of fields listed in
  :data:`LIST_MERGE_KEYS` (``metadata.ownerReferences`` by ``uid``, containers, volumes and
  ``env`` by ``name``, node/pod ``status.conditions`` and node ``status.addresses`` by
  ``type``, ``metadata.finalizers`` as a set); every other list is replaced wholesale, which is
  what upstream does for fields without a ``patchStrategy`` — including ``spec.taints`` and
  ``spec.tolerations``. Directives: ``$patch: replace`` and ``$patch: delete`` in maps and in
  merge lists, ``$deleteFromPrimitiveList/<field>``; ``$setElementOrder/<field>`` is accepted
  and ignored (order of merged lists follows the original, then the appended items);
  ``$retainKeys`` is not supported (400).
* ``application/json-patch+json`` — RFC 6902 (add, remove, replace, move, copy, test). A
  failing operation, ``test`` included, is the real server's 422 ``Invalid`` with the generic
  message "the server rejected our request due to an error in our request"; a body that is
  not a list of operations is a 400.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .errors import bad_request, generic

__all__ = [
    "JSON_PATCH",
    "LIST_MERGE_KEYS",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

#: ``(path suffix) -> merge key`` for lists with ``patchStrategy:"merge"``; ``""`` marks a list
#: of scalars merged as a set. The suffix is matched against the map keys leading to the list
#: (list positions are not part of the path).
LIST_MERGE_KEYS: dict[tuple[str, ...], str] = {
    ("metadata", "finalizers"): "",
    ("metadata", "ownerReferences"): "uid",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "volumes"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("containers", "env"): "name",
    ("initContainers", "env"): "name",
    ("containers", "volumeMounts"): "mountPath",
    ("containers", "ports"): "containerPort",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
}


# ------------------------------------------------------------------------------ merge patch
def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (returns a new value; the inputs are not changed)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------- strategic merge patch
_DELETE = object()


def apply_strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch for built-in types (see the module docstring for the subset).

    Raises:
        ApiError: 400 for a body that is not a JSON object or uses unsupported directives.
    """
    if not isinstance(patch, Mapping):
        raise bad_request(
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        )
    merged = _merge_map(target if isinstance(target, Mapping) else {}, patch, ())
    return {} if merged is _DELETE else merged


def _merge_map(original: Mapping[str, Any], patch: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _clean({k: v for k, v in patch.items() if k != "$patch"})
    if directive is not None:
        raise bad_request(f"Unknown patch type: {directive}")
    if "$retainKeys" in patch:
        raise bad_request("the fake API server does not support $retainKeys")
    result = copy.deepcopy(dict(original))
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, Mapping):
            merged = _merge_map(
                current if isinstance(current, Mapping) else {}, value, (*path, key)
            )
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(current, value, (*path, key))
        else:
            result[key] = value
    return result


def _merge_key(path: tuple[str, ...]) -> str | None:
    for suffix, key in LIST_MERGE_KEYS.items():
        if path[-len(suffix) :] == suffix:
            return key
    return None


def _merge_list(original: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    key = _merge_key(path)
    if key is None or not isinstance(original, list):
        return _clean([item for item in patch if not _is_directive(item)])
    if key == "":  # a set of scalars
        result = list(original)
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    if any(_is_directive(item, "replace") for item in patch):
        return _clean([item for item in patch if not _is_directive(item)])
    result = [copy.deepcopy(item) for item in original]
    for item in patch:
        if not isinstance(item, Mapping) or key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, Mapping) and old.get(key) == item[key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append(_clean(dict(item)))
        else:
            merged = _merge_map(result[index], item, path)
            if merged is _DELETE:
                del result[index]
            else:
                result[index] = merged
    return result


def _is_directive(item: Any, which: str | None = None) -> bool:
    return (
        isinstance(item, Mapping)
        and set(item) == {"$patch"}
        and (which is None or item["$patch"] == which)
    )


def _clean(value: Any) -> Any:
    # Directives never reach the stored object; nulls in new content mean "absent".
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if v is not None and not k.startswith("$")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return copy.deepcopy(value)


# ------------------------------------------------------------------------------- JSON patch
class _PatchFailed(Exception):
    pass


def apply_json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch (returns a new value).

    Raises:
        ApiError: 400 when the body is not a list of operations; 422 (generic ``Invalid``, as
            upstream) when an operation fails, a ``test`` included.
    """
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, Mapping) or not isinstance(op.get("op"), str):
            raise bad_request("json: cannot unmarshal into Go value of type jsonpatch.Operation")
        try:
            doc = _apply_op(doc, op)
        except _PatchFailed as exc:
            raise generic(422, server_message=str(exc)) from exc
    return doc


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise _PatchFailed(f"invalid JSON pointer {path!r}")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    current = doc
    for part in parts:
        if isinstance(current, dict):
            if part not in current:
                raise _PatchFailed(f"path /{'/'.join(parts)} not found")
            current = current[part]
        elif isinstance(current, list):
            current = current[_index(current, part, allow_end=False)]
        else:
            raise _PatchFailed(f"path /{'/'.join(parts)} not found")
    return current


def _index(container: list[Any], part: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(container)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise _PatchFailed(f"invalid array index {part!r}")
    index = int(part)
    if index > len(container) or (index == len(container) and not allow_end):
        raise _PatchFailed(f"array index {index} out of bounds")
    return index


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), copy.deepcopy(value))
    else:
        raise _PatchFailed(f"cannot add to a scalar at /{'/'.join(parts[:-1])}")
    return doc


def _remove(doc: Any, parts: list[str]) -> tuple[Any, Any]:
    if not parts:
        raise _PatchFailed("cannot remove the whole document")
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _PatchFailed(f"unable to remove nonexistent key: {last}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, allow_end=False))
    raise _PatchFailed(f"cannot remove from a scalar at /{'/'.join(parts[:-1])}")


def _apply_op(doc: Any, op: Mapping[str, Any]) -> Any:
    kind = op["op"]
    parts = _pointer(op.get("path"))
    if kind == "add":
        if "value" not in op:
            raise _PatchFailed("add operation does not apply: missing value")
        return _add(doc, parts, op["value"])
    if kind == "remove":
        return _remove(doc, parts)[0]
    if kind == "replace":
        if "value" not in op:
            raise _PatchFailed("replace operation does not apply: missing value")
        _resolve(doc, parts)  # must exist
        doc, _ = _remove(doc, parts) if parts else (doc, None)
        return _add(doc, parts, op["value"])
    if kind in ("move", "copy"):
        source = _pointer(op.get("from"))
        value = copy.deepcopy(_resolve(doc, source))
        if kind == "move":
            doc, _ = _remove(doc, source)
        return _add(doc, parts, value)
    if kind == "test":
        try:
            actual = _resolve(doc, parts)
        except _PatchFailed as exc:
            raise _PatchFailed(f"testing value /{'/'.join(parts)} failed: {exc}") from exc
        if not _same(actual, op.get("value")):
            raise _PatchFailed(f"testing value /{'/'.join(parts)} failed: test failed")
        return doc
    raise _PatchFailed(f"Unexpected kind: {kind}")


def _same(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, key order does not matter.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
