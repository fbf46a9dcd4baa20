"""Watch streams as kube-apiserver's watch cache serves them (test fake).

Reproduced: a watch without ``resourceVersion`` (or with ``"0"``) starts with a synthetic
``ADDED`` event per existing object; with a resourceVersion it delivers every later write,
from the store's bounded history; a resourceVersion older than that history, or a consumer
that falls behind it, gets an ``ERROR`` event carrying a 410 ``Expired`` Status ("too old
resource version: N (M)") and the stream ends, as on the real server. Label and field
selectors apply per event, and an object that stops matching is ``DELETED`` for that
watcher (one that starts matching is ``ADDED``). ``BOOKMARK`` events carry only ``kind``,
``apiVersion`` and ``metadata.resourceVersion``; they are sent to watches that allow them
every ``bookmark_interval`` seconds and whenever a test calls ``bookmark()``;
``sendInitialEvents`` ends its initial events with the ``k8s.io/initial-events-end``
bookmark. The stream ends cleanly after ``timeoutSeconds``.

Not reproduced: ``resourceVersionMatch``, the progress-notify timing of etcd, and waiting
for a resourceVersion newer than the store (such a watch simply delivers the writes that
follow).
"""

from __future__ import annotations

import bisect
import copy
import functools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import errors
from .resources import ResourceType
from .selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector

if TYPE_CHECKING:
    from .store import Change, Store

__all__ = ["WatchOptions", "watch_events"]


@dataclass(frozen=True)
class WatchOptions:
    """What one watch request asked for."""

    namespace: str | None = None
    resource_version: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    allow_bookmarks: bool = False
    timeout: float | None = None
    send_initial_events: bool = False
    bookmark_interval: float | None = None


def watch_events(
    store: Store, rtype: ResourceType, options: WatchOptions
) -> Iterator[dict[str, Any]]:
    """Watch events (``{"type": ..., "object": ...}``) for ``rtype`` as they happen.

    Bad selectors raise ApiError (400) on the first ``next()``. An expired
    resourceVersion is not an exception but an ``ERROR`` event carrying a 410 ``Expired``
    Status, which is how the real server reports it on an open watch; so is a consumer
    that falls behind the retained history. The stream ends after ``options.timeout``
    seconds, on :meth:`close`, or when the consumer stops iterating.
    """
    labels = parse_label_selector(options.label_selector)
    fields = parse_field_selector(options.field_selector, rtype)
    now = time.monotonic()
    deadline = None if options.timeout is None else now + options.timeout
    interval = options.bookmark_interval if options.allow_bookmarks else None
    next_bookmark = None if interval is None else now + interval
    out: list[dict[str, Any]] = []
    with store._cond:
        requested = options.resource_version
        if requested in (None, "", "0"):
            cursor = store._rv
            for _, obj in sorted(store._objects[rtype.key].items()):
                if store._visible(rtype, obj, options.namespace, labels, fields):
                    out.append({"type": "ADDED", "object": copy.deepcopy(obj)})
        else:
            try:
                cursor = int(str(requested))
            except ValueError as exc:
                raise errors.bad_request(f"invalid resource version: {requested}") from exc
        bookmarks_seen = store._bookmarks
    if options.send_initial_events and options.allow_bookmarks:
        out.append(_bookmark_event(rtype, cursor, {"k8s.io/initial-events-end": "true"}))
    while True:
        yield from out
        out = []
        with store._cond:
            if cursor < store._compacted:
                # Asked for, or fell behind to, a revision the history no longer has.
                out.append(_expired_event(store, cursor))
                break
            now = time.monotonic()
            wake = min((t for t in (deadline, next_bookmark) if t is not None), default=None)
            store._cond.wait_for(
                functools.partial(_progressed, store, cursor, bookmarks_seen),
                timeout=None if wake is None else max(0.0, wake - now),
            )
            if store._closed:
                return
            if cursor < store._compacted:
                continue
            first = bisect.bisect_right(store._events, cursor, key=_resource_version)
            for change in store._events[first:]:
                if change.rtype.key == rtype.key:
                    event = _translate(store, rtype, change, options.namespace, labels, fields)
                    if event is not None:
                        out.append(event)
            cursor = max(cursor, store._rv)
            now = time.monotonic()
            due = next_bookmark is not None and now >= next_bookmark
            if options.allow_bookmarks and (due or store._bookmarks != bookmarks_seen):
                out.append(_bookmark_event(rtype, cursor))
                if interval is not None:
                    next_bookmark = now + interval
            bookmarks_seen = store._bookmarks
            if deadline is not None and now >= deadline:
                break
    yield from out


def _resource_version(change: Change) -> int:
    return change.resource_version


def _progressed(store: Store, cursor: int, bookmarks_seen: int) -> bool:
    return store._closed or store._rv > cursor or store._bookmarks != bookmarks_seen


def _translate(
    store: Store,
    rtype: ResourceType,
    change: Change,
    namespace: str | None,
    labels: LabelSelector,
    fields: FieldSelector,
) -> dict[str, Any] | None:
    now = store._visible(rtype, change.object, namespace, labels, fields)
    before = change.old is not None and store._visible(rtype, change.old, namespace, labels, fields)
    if change.type == "ADDED":
        kind = "ADDED" if now else None
    elif change.type == "DELETED":
        kind = "DELETED" if before else None
    elif now and before:
        kind = "MODIFIED"
    elif now:
        kind = "ADDED"
    elif before:
        kind = "DELETED"  # left the selection: the watcher sees it go
    else:
        kind = None
    if kind is None:
        return None
    return {"type": kind, "object": copy.deepcopy(change.object)}


def _expired_event(store: Store, cursor: int) -> dict[str, Any]:
    error = errors.expired(f"too old resource version: {cursor} ({store._compacted})")
    return {"type": "ERROR", "object": error.status}


def _bookmark_event(
    rtype: ResourceType, rv: int, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    # A bookmark object is empty but for its resourceVersion (and the initial-events-end
    # annotation of a streaming list), as upstream sends it.
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "type": "BOOKMARK",
        "object": {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta},
    }
