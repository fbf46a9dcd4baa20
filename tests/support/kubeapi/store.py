"""The object store behind the API test server: etcd plus the registry's rules (test fake).

Reproduced, because controllers depend on each of them:

* one global, monotonically increasing ``resourceVersion`` (a decimal string), bumped by
  every write and by nothing else; a write that changes nothing (same labels patched again)
  is not a write: no new resourceVersion, no watch event, as upstream's GuaranteedUpdate;
* ``uid``, ``creationTimestamp``, ``generation`` (bumped when anything outside ``metadata``
  and ``status`` changes), ``generateName``, required namespace for namespaced kinds;
* optimistic concurrency: an update or patch whose body carries a ``resourceVersion`` other
  than the stored one is a 409 ``Conflict``; DELETE with ``preconditions`` likewise;
* status subresources: writes to the object keep its status, writes to ``/status`` keep its
  spec; creating a pod resets its status to ``Pending`` and creating a PDB or a custom
  resource with a status subresource drops the status, as their create strategies do;
* a bounded history of writes that watches resume from (:mod:`.watch`), with 410
  ``Expired`` for a resourceVersion older than what is retained (:meth:`Store.compact` drops
  it on demand, as an etcd compaction does);
* eviction through policy/v1 PDBs (:mod:`.eviction`).

Not reproduced: finalizers and graceful deletion (DELETE removes the object at once, as for a
pod that was never scheduled or a zero grace period), owner-reference garbage collection,
namespace existence and lifecycle, managedFields/server-side apply, admission, defaulting
beyond the pod phase, and consistent snapshots for paginated lists (later pages show the
current state after the last key of the previous page).
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import errors
from .errors import ApiError
from .eviction import evict, note_replacement
from .patch import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from .resources import BUILTIN_TYPES, ResourceType
from .selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from .validation import validate_metadata
from .watch import WatchOptions, watch_events

__all__ = ["Change", "Store"]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # upstream's utilrand alphabet for generateName


@dataclass(frozen=True)
class Change:
    """One committed write, as watchers and :meth:`Store.on_change` hooks see it.

    Attributes:
        resource_version: The write's resourceVersion.
        type: ``ADDED``, ``MODIFIED`` or ``DELETED``.
        rtype: The object's resource type.
        object: The object after the write (for ``DELETED``: its last state, carrying the
            deletion's resourceVersion).
        old: The object before the write (``None`` for ``ADDED``).
    """

    resource_version: int
    type: str
    rtype: ResourceType
    object: dict[str, Any]
    old: dict[str, Any] | None

    @property
    def namespace(self) -> str | None:
        """The object's namespace."""
        ns: str | None = self.object["metadata"].get("namespace")
        return ns


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(namespace: str | None, name: str) -> tuple[str, str]:
    return (namespace or "", name)


def _registry_key(rtype: ResourceType, namespace: str | None, name: str) -> str:
    # etcd keys as kube-apiserver lays them out (nodes live under "minions", for history).
    resource = "minions" if rtype.key == ("", "nodes") else rtype.plural
    prefix = f"/registry/{rtype.group}/{resource}" if not rtype.builtin else f"/registry/{resource}"
    return f"{prefix}/{namespace}/{name}" if namespace else f"{prefix}/{name}"


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(dict(obj))
    result.get("metadata", {}).pop("resourceVersion", None)
    return result


class Store:
    """Thread-safe object store with kube-apiserver's write, list and watch semantics.

    Args:
        history: How many past writes watches can resume from.
        seed: Seed for uids and generated names, so runs are reproducible.
    """

    def __init__(self, *, history: int = 5000, seed: int = 0) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self._rv = 0
        self._history = history
        self._events: list[Change] = []
        self._compacted = 0  # every write with rv <= this is gone from the history
        self._rng = random.Random(seed)
        self._hooks: list[tuple[ResourceType | None, Callable[[Change], None]]] = []
        self._bookmarks = 0  # bumped by bookmark(): every watch sends one
        # Pods evicted through each PDB ((namespace, name)) that no new pod replaced yet:
        # the fake's stand-in for the owners' replica counts (see .eviction).
        self._evicted: dict[tuple[str, str], int] = {}
        self._closed = False
        for rtype in BUILTIN_TYPES:
            self.register(rtype)

    # ------------------------------------------------------------------------------- types
    def register(self, rtype: ResourceType) -> None:
        """Serve another resource type (a custom resource, say)."""
        with self._cond:
            self._types[rtype.key] = rtype
            self._objects.setdefault(rtype.key, {})

    @property
    def types(self) -> tuple[ResourceType, ...]:
        """Every served type."""
        with self._cond:
            return tuple(self._types.values())

    def resource(self, group: str, plural: str) -> ResourceType | None:
        """The type served as ``group``/``plural``, or None."""
        return self._types.get((group, plural))

    def type_for(self, api_version: str, kind: str) -> ResourceType:
        """The type of objects with this ``apiVersion`` and ``kind``.

        Raises:
            KeyError: the store serves no such type.
        """
        for rtype in self._types.values():
            if rtype.api_version == api_version and rtype.kind == kind:
                return rtype
        raise KeyError(f"no resource type {api_version}/{kind} is served")

    # ------------------------------------------------------------------------ bookkeeping
    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest write."""
        with self._cond:
            return self._rv

    def on_change(
        self, fn: Callable[[Change], None], rtype: ResourceType | None = None
    ) -> Callable[[], None]:
        """Call ``fn(change)`` after every committed write (of ``rtype`` only, if given).

        Hooks run in the writing thread after the store lock is released, so they may read
        and write the store; a hook that raises fails the write's request with a 500.

        Returns:
            A function that removes the hook.
        """
        entry = (rtype, fn)
        with self._cond:
            self._hooks.append(entry)

        def remove() -> None:
            with self._cond:
                if entry in self._hooks:
                    self._hooks.remove(entry)

        return remove

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until ``predicate()`` (evaluated under the store lock after each write)."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout=timeout)

    def compact(self) -> int:
        """Forget the whole watch history, as an etcd compaction does; returns its revision.

        Watches resuming from any earlier resourceVersion then get 410 ``Expired``.
        """
        with self._cond:
            self._compacted = self._rv
            self._events.clear()
            return self._rv

    def bookmark(self) -> None:
        """Make every open watch that allows bookmarks send one now."""
        with self._cond:
            self._bookmarks += 1
            self._cond.notify_all()

    def close(self) -> None:
        """End every open watch (their streams finish cleanly) and refuse new ones."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def reopen(self) -> None:
        """Accept watches again after :meth:`close` (a restarted server keeps its data)."""
        with self._cond:
            self._closed = False

    def _commit(
        self, rtype: ResourceType, kind: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> Change:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        bucket = self._objects[rtype.key]
        key = _key(obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if kind == "DELETED":
            bucket.pop(key, None)
        else:
            bucket[key] = obj
        change = Change(self._rv, kind, rtype, copy.deepcopy(obj), copy.deepcopy(old))
        self._events.append(change)
        if len(self._events) > self._history:
            dropped = len(self._events) - self._history
            self._compacted = self._events[dropped - 1].resource_version
            del self._events[:dropped]
        self._cond.notify_all()
        return change

    def _run_hooks(self, changes: list[Change]) -> None:
        with self._cond:
            hooks = list(self._hooks)
        for change in changes:
            for rtype, fn in hooks:
                if rtype is None or rtype.key == change.rtype.key:
                    fn(copy.deepcopy(change))  # a hook must not edit what watchers see

    def _lookup(self, rtype: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        found = self._objects[rtype.key].get(_key(namespace if rtype.namespaced else None, name))
        if found is None:
            raise errors.not_found(rtype.plural, name, rtype.group)
        return found

    def _generate_name(self, rtype: ResourceType, namespace: str | None, prefix: str) -> str:
        bucket = self._objects[rtype.key]
        while True:
            name = prefix + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
            if _key(namespace, name) not in bucket:
                return name

    # -------------------------------------------------------------------------------- reads
    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """One object (a copy).

        Raises:
            ApiError: 404 ``NotFound``.
        """
        with self._cond:
            return copy.deepcopy(self._lookup(rtype, namespace, name))

    def list(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """A ``<Kind>List`` of matching objects, sorted by namespace and name.

        Raises:
            ApiError: 400 for a malformed selector or continue token.
        """
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rtype)
        start: tuple[str, str] = ("", "")
        token_rv: int | None = None
        if continue_token:
            try:
                decoded = json.loads(base64.b64decode(continue_token))
                ns, name = decoded["start"]
                start, token_rv = (str(ns), str(name)), int(decoded["rv"])
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request(f"continue key is not valid: {exc}") from exc
        with self._cond:
            rv = self._rv if token_rv is None else token_rv
            items = [
                copy.deepcopy(obj)
                for key, obj in sorted(self._objects[rtype.key].items())
                if self._visible(rtype, obj, namespace, labels, fields) and key > start
            ]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.b64encode(
                json.dumps({"rv": rv, "start": [last.get("namespace", ""), last["name"]]}).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if rtype.builtin:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": meta,
            "items": items,
        }

    @staticmethod
    def _visible(
        rtype: ResourceType,
        obj: Mapping[str, Any],
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> bool:
        meta = obj["metadata"]
        if namespace and rtype.namespaced and meta.get("namespace") != namespace:
            return False
        return labels.matches(meta.get("labels")) and fields.matches(rtype, obj)

    # ------------------------------------------------------------------------------- writes
    def create(
        self,
        rtype: ResourceType,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        keep_status: bool = False,
    ) -> dict[str, Any]:
        """Create an object; ``keep_status`` seeds its status as given (test setup only).

        Raises:
            ApiError: 409 ``AlreadyExists``, 422 ``Invalid``, 400 for a namespace mismatch,
                500 when the body carries a resourceVersion (as upstream's storage refuses).
        """
        new = copy.deepcopy(dict(obj))
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = new["metadata"] = {}
        body_ns = meta.get("namespace")
        if rtype.namespaced:
            if namespace and body_ns and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            ns = namespace or body_ns
            if not ns:
                raise errors.invalid(
                    rtype.kind,
                    meta.get("name", ""),
                    [("metadata.namespace", "Required value")],
                    rtype.group,
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        changes: list[Change] = []
        with self._cond:
            name = meta.get("name")
            if not name and meta.get("generateName"):
                name = meta["name"] = self._generate_name(
                    rtype, meta.get("namespace"), meta["generateName"]
                )
            if not name:
                raise errors.invalid(
                    rtype.kind,
                    "",
                    [("metadata.name", "Required value: name or generateName is required")],
                    rtype.group,
                )
            validate_metadata(rtype, new, name=name)
            if _key(meta.get("namespace"), name) in self._objects[rtype.key]:
                raise errors.already_exists(rtype.plural, name, rtype.group)
            new["kind"], new["apiVersion"] = rtype.kind, rtype.api_version
            meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
            for server_only in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(server_only, None)
            if not keep_status:
                self._reset_status_on_create(rtype, new)
            if dry_run:
                return copy.deepcopy(new)
            if rtype.key == ("", "pods"):
                note_replacement(self, new)
            changes.append(self._commit(rtype, "ADDED", new, None))
            result = copy.deepcopy(new)
        self._run_hooks(changes)
        return result

    @staticmethod
    def _reset_status_on_create(rtype: ResourceType, obj: dict[str, Any]) -> None:
        if rtype.key == ("", "pods"):
            obj["status"] = {"phase": "Pending"}
        elif rtype.key == ("", "namespaces"):
            obj["status"] = {"phase": "Active"}
        elif rtype.status_subresource and rtype.key != ("", "nodes"):
            obj.pop("status", None)

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        obj: Mapping[str, Any],
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Replace an object (PUT); a ``resourceVersion`` in ``obj`` must be the current one.

        Raises:
            ApiError: 404, 409 ``Conflict`` for a stale resourceVersion, 400 for a name or
                namespace that contradicts the URL, 422 for invalid metadata.
        """
        return self.put(rtype, namespace, name, obj, subresource=subresource, dry_run=dry_run)[0]

    def put(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        obj: Mapping[str, Any],
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """PUT as the HTTP verb does it: :meth:`update`, or a create for types that allow it.

        Leases and events may be created with PUT (their strategies' AllowCreateOnUpdate);
        for every other type a missing object is a 404.

        Returns:
            The stored object and whether it was created (the server then answers 201).
        """
        new = copy.deepcopy(dict(obj))
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = new["metadata"] = {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        if rtype.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        with self._cond:
            try:
                old = self._lookup(rtype, namespace, name)
            except ApiError:
                if not rtype.allow_create_on_update or subresource is not None:
                    raise
                old = None
            if old is not None:
                result, changes = self._replace(
                    rtype, old, new, subresource=subresource, dry_run=dry_run
                )
        if old is None:  # create outside the lock, so its hooks run unlocked too
            meta["name"] = name
            meta.pop("resourceVersion", None)
            return self.create(rtype, new, namespace=namespace, dry_run=dry_run), True
        self._run_hooks(changes)
        return result, False

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Apply a merge, strategic-merge or JSON patch (see :mod:`.patch`).

        A ``metadata.resourceVersion`` left in the patched object (a patch that sets it) must
        be the current one, which is how clients do optimistic concurrency with patches.

        Raises:
            ApiError: 404, 409, 415 (unknown patch type; strategic merge on a custom
                resource), 422 (failed JSON-patch operation), 400 (malformed body).
        """
        with self._cond:
            old = self._lookup(rtype, namespace, name)
            if content_type == MERGE_PATCH:
                patched = apply_merge_patch(old, body)
            elif content_type == STRATEGIC_MERGE_PATCH and rtype.builtin:
                patched = apply_strategic_merge_patch(old, body)
            elif content_type == JSON_PATCH:
                patched = apply_json_patch(old, body)
            else:
                # Upstream also lists application/apply-patch+yaml; the fake has no
                # server-side apply, so it names only what it accepts.
                accepted = [JSON_PATCH, MERGE_PATCH]
                if rtype.builtin:
                    accepted.append(STRATEGIC_MERGE_PATCH)
                raise errors.unsupported_media_type(content_type, accepted)
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise errors.bad_request("the patched object is not a Kubernetes object")
            patched["metadata"]["name"] = name
            result, changes = self._replace(
                rtype, old, patched, subresource=subresource, dry_run=dry_run
            )
        self._run_hooks(changes)
        return result

    def _replace(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str | None,
        dry_run: bool,
    ) -> tuple[dict[str, Any], list[Change]]:
        # Called with the lock held; the caller runs the hooks once it has released it.
        name = old["metadata"]["name"]
        wanted_rv = new["metadata"].get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, name, group=rtype.group)
        if subresource == "status":
            result = copy.deepcopy(old)
            result["metadata"] = new["metadata"]
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            if rtype.status_subresource:
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
        meta = result["metadata"]
        for immutable in ("uid", "creationTimestamp", "namespace", "generateName"):
            if immutable in old["metadata"]:
                meta[immutable] = old["metadata"][immutable]
        meta["name"] = name
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        result["kind"], result["apiVersion"] = rtype.kind, rtype.api_version
        spec_changed = {k: v for k, v in result.items() if k not in ("metadata", "status")} != {
            k: v for k, v in old.items() if k not in ("metadata", "status")
        }
        meta["generation"] = old["metadata"].get("generation", 1) + (1 if spec_changed else 0)
        validate_metadata(rtype, result, name=name)
        if _comparable(result) == _comparable(old) or dry_run:
            return copy.deepcopy(result), []
        change = self._commit(rtype, "MODIFIED", result, old)
        return copy.deepcopy(result), [change]

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Delete an object at once; answers as upstream's DELETE does for this type.

        Raises:
            ApiError: 404, or 409 when ``preconditions`` (uid, resourceVersion) do not hold.
        """
        with self._cond:
            old = self._lookup(rtype, namespace, name)
            gone, changes = self._delete_locked(rtype, old, preconditions or {}, dry_run=dry_run)
        self._run_hooks(changes)
        return self._delete_answer(rtype, gone)

    def _delete_locked(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        preconditions: Mapping[str, Any],
        *,
        dry_run: bool,
    ) -> tuple[dict[str, Any], list[Change]]:
        self._check_preconditions(rtype, old, preconditions)
        gone = copy.deepcopy(old)
        if dry_run:
            return gone, []
        return gone, [self._commit(rtype, "DELETED", gone, old)]

    @staticmethod
    def _delete_answer(rtype: ResourceType, gone: dict[str, Any]) -> dict[str, Any]:
        if rtype.return_deleted_object:
            return copy.deepcopy(gone)
        return errors.status_success(
            {
                "name": gone["metadata"]["name"],
                **({"group": rtype.group} if rtype.group else {}),
                "kind": rtype.plural,
                "uid": gone["metadata"]["uid"],
            }
        )

    @staticmethod
    def _check_preconditions(
        rtype: ResourceType, obj: Mapping[str, Any], preconditions: Mapping[str, Any]
    ) -> None:
        meta = obj["metadata"]
        problem = None
        if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
            problem = (
                f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                f"UID in object meta: {meta['uid']}"
            )
        elif (
            preconditions.get("resourceVersion")
            and preconditions["resourceVersion"] != meta["resourceVersion"]
        ):
            problem = (
                "Precondition failed: ResourceVersion in precondition: "
                f"{preconditions['resourceVersion']}, ResourceVersion in object meta: "
                f"{meta['resourceVersion']}"
            )
        if problem:
            key = _registry_key(rtype, meta.get("namespace"), meta["name"])
            raise errors.conflict(
                rtype.plural,
                meta["name"],
                f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                f"AdditionalErrorMsg: {problem}",
                group=rtype.group,
            )

    def delete_collection(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Delete every matching object; answers with the list of what was deleted."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rtype)
        changes: list[Change] = []
        gone: list[dict[str, Any]] = []
        with self._cond:
            for _, obj in sorted(self._objects[rtype.key].items()):
                if self._visible(rtype, obj, namespace, labels, fields):
                    deleted, done = self._delete_locked(rtype, obj, {}, dry_run=dry_run)
                    gone.append(deleted)
                    changes.extend(done)
            rv = self._rv
        self._run_hooks(changes)
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": str(rv)},
            "items": gone,
        }

    # ------------------------------------------------------------------- eviction and watch
    def evict(self, namespace: str, name: str, eviction: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``pods/<name>/eviction``; see :func:`.eviction.evict`."""
        return evict(self, namespace, name, eviction)

    def watch(self, rtype: ResourceType, options: WatchOptions) -> Iterator[dict[str, Any]]:
        """A watch stream; see :func:`.watch.watch_events`."""
        return watch_events(self, rtype, options)
