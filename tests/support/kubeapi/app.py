"""URL routing and REST verbs of the API test server (test fake), apart from the transport.

Maps kube-apiserver's URL layout onto :class:`~support.kubeapi.store.Store` calls:

* ``/api/v1/...`` and ``/apis/<group>/<version>/...``; namespaced collections under
  ``namespaces/<ns>/``, and the same collection without it lists across namespaces;
* ``GET`` (get, list, ``?watch=true``/``1`` streams), ``POST`` (create: 201), ``PUT``
  (201 when it creates a lease or event), ``PATCH`` (by ``Content-Type``; server-side apply
  is not supported and answers 415), ``DELETE`` (one object, or the collection), the ``status``
  subresource of types that have one, and ``POST pods/<name>/eviction`` (201);
* query parameters ``labelSelector``, ``fieldSelector``, ``limit``, ``continue``,
  ``resourceVersion``, ``timeoutSeconds``, ``allowWatchBookmarks``, ``sendInitialEvents``,
  ``dryRun=All``; others (``pretty``, ``fieldManager``, ...) are accepted and ignored;
* discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/<g>/<v>``) and ``/version``, for
  clients that look before they call (the dynamic client does, the typed ones do not);
* optional bearer-token authentication: any other ``Authorization`` is a 401 Status.

Every failure is a ``Status`` body (see :mod:`.errors`), with ``Retry-After`` when the
Status carries ``retryAfterSeconds``, as upstream's response writer sets it.

Not served: authorization (RBAC; every authenticated request may do anything), the legacy
``/api/v1/watch/...`` paths, ``resourceVersionMatch`` and list ``resourceVersion`` semantics
(lists always answer from the latest state), protobuf and YAML bodies, ``/openapi``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .errors import ApiError
from .faults import EndWatch, ExpireWatch
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector
from .store import Store
from .watch import WatchOptions

__all__ = ["App", "Request", "Response"]

#: What ``/version`` reports: a recent release, marked as the fake.
VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-migscope-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class Request:
    """One HTTP request, as the transport read it."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names
    body: bytes = b""

    def param(self, name: str) -> str | None:
        """The last value of a query parameter, or None."""
        values = self.query.get(name)
        return values[-1] if values else None

    def flag(self, name: str) -> bool:
        """A boolean query parameter (``true``/``1``)."""
        return (self.param(name) or "").lower() in ("true", "1")

    @property
    def content_type(self) -> str:
        """The media type of the body, without parameters."""
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_watch(self) -> bool:
        """Whether this is a watch request."""
        return self.method == "GET" and self.flag("watch")


@dataclass
class Response:
    """An answer: a JSON body, or a stream of chunks (a watch)."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None

    def payload(self) -> bytes:
        """The body as bytes."""
        return json.dumps(self.body, separators=(",", ":")).encode()


def error_response(error: ApiError) -> Response:
    """The Status of ``error``, with Retry-After when it asks the client to wait."""
    headers = {}
    if error.retry_after:
        headers["Retry-After"] = str(error.retry_after)
    return Response(error.code, error.status, headers)


@dataclass(frozen=True)
class _Route:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class App:
    """Turns :class:`Request` objects into :class:`Response` objects against a store.

    Args:
        store: The objects.
        token: Bearer token every request must carry, or None for no authentication.
        address: ``host:port`` reported in ``/api`` discovery.
        watch_timeout: Seconds a watch without ``timeoutSeconds`` stays open.
        bookmark_interval: Seconds between periodic bookmarks (None: only on demand).
    """

    def __init__(
        self,
        store: Store,
        *,
        token: str | None = None,
        address: str = "127.0.0.1:0",
        watch_timeout: float = 1800.0,
        bookmark_interval: float | None = None,
    ) -> None:
        self.store = store
        self.token = token
        self.address = address
        self.watch_timeout = watch_timeout
        self.bookmark_interval = bookmark_interval

    def handle(
        self, request: Request, *, watch_fault: EndWatch | ExpireWatch | None = None
    ) -> Response:
        """Answer one request; never raises for an API-level failure."""
        try:
            self._authenticate(request)
            return self._dispatch(request, watch_fault)
        except ApiError as exc:
            return error_response(exc)

    def _authenticate(self, request: Request) -> None:
        if self.token is None:
            return
        if request.headers.get("authorization", "") != f"Bearer {self.token}":
            raise errors.unauthorized()

    # ----------------------------------------------------------------------------- routing
    def _dispatch(self, request: Request, watch_fault: EndWatch | ExpireWatch | None) -> Response:
        parts = [p for p in request.path.split("/") if p]
        if parts == ["version"]:
            return Response(200, VERSION_INFO)
        discovery = self._discovery(parts)
        if discovery is not None:
            if request.method != "GET":
                raise errors.generic(405)
            return Response(200, discovery)
        route = self._route(parts)
        if route is None:
            raise errors.generic(404)
        if route.subresource is not None:
            return self._subresource(request, route)
        if route.name is None:
            return self._collection(request, route, watch_fault)
        return self._object(request, route)

    def _route(self, parts: list[str]) -> _Route | None:
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        rtype = self.store.resource(group, rest[0])
        if rtype is None or rtype.version != version:
            return None
        if namespace is not None and not rtype.namespaced:
            return None
        name = rest[1] if len(rest) > 1 else None
        if rtype.namespaced and name is not None and namespace is None:
            return None
        return _Route(rtype, namespace, name, rest[2] if len(rest) > 2 else None)

    # ------------------------------------------------------------------------------- verbs
    def _collection(
        self, request: Request, route: _Route, watch_fault: EndWatch | ExpireWatch | None
    ) -> Response:
        rtype, namespace = route.rtype, route.namespace
        if request.method == "GET":
            if request.is_watch:
                return self._watch(request, route, watch_fault)
            limit = request.param("limit")
            return Response(
                200,
                self.store.list(
                    rtype,
                    namespace=namespace,
                    label_selector=request.param("labelSelector"),
                    field_selector=request.param("fieldSelector"),
                    limit=int(limit) if limit else None,
                    continue_token=request.param("continue"),
                ),
            )
        if request.method == "POST":
            if rtype.namespaced and namespace is None:
                raise errors.generic(405)
            created = self.store.create(
                rtype, _json_object(request), namespace=namespace, dry_run=_dry_run(request)
            )
            return Response(201, created)
        if request.method == "DELETE":
            return Response(
                200,
                self.store.delete_collection(
                    rtype,
                    namespace=namespace,
                    label_selector=request.param("labelSelector"),
                    field_selector=request.param("fieldSelector"),
                    dry_run=_dry_run(request),
                ),
            )
        raise errors.method_not_allowed(rtype.plural, _verb(request.method), rtype.group)

    def _object(self, request: Request, route: _Route, subresource: str | None = None) -> Response:
        rtype, namespace, name = route.rtype, route.namespace, route.name
        assert name is not None
        if request.method == "GET":
            return Response(200, self.store.get(rtype, namespace, name))
        if request.method == "PUT":
            stored, created = self.store.put(
                rtype,
                namespace,
                name,
                _json_object(request),
                subresource=subresource,
                dry_run=_dry_run(request),
            )
            return Response(201 if created else 200, stored)
        if request.method == "PATCH":
            patched = self.store.patch(
                rtype,
                namespace,
                name,
                request.content_type,
                _json_body(request),
                subresource=subresource,
                dry_run=_dry_run(request),
            )
            return Response(200, patched)
        if request.method == "DELETE" and subresource is None:
            options = _json_body(request) if request.body.strip() else {}
            if not isinstance(options, dict):
                raise errors.bad_request("DeleteOptions must be a JSON object")
            dry_run = _dry_run(request) or "All" in (options.get("dryRun") or [])
            deleted = self.store.delete(
                rtype,
                namespace,
                name,
                preconditions=options.get("preconditions") or {},
                dry_run=dry_run,
            )
            return Response(200, deleted)
        raise errors.method_not_allowed(rtype.plural, _verb(request.method), rtype.group)

    def _subresource(self, request: Request, route: _Route) -> Response:
        rtype = route.rtype
        if route.subresource == "status" and rtype.status_subresource:
            return self._object(request, route, subresource="status")
        if route.subresource == "eviction" and rtype.key == ("", "pods"):
            if request.method != "POST":
                raise errors.method_not_allowed("pods/eviction", _verb(request.method))
            assert route.name is not None
            assert route.namespace is not None
            return Response(
                201, self.store.evict(route.namespace, route.name, _json_object(request))
            )
        raise errors.generic(404)

    def _watch(
        self, request: Request, route: _Route, watch_fault: EndWatch | ExpireWatch | None
    ) -> Response:
        rtype = route.rtype
        # Check everything that can fail before the 200 and the stream start.
        parse_label_selector(request.param("labelSelector"))
        parse_field_selector(request.param("fieldSelector"), rtype)
        rv = request.param("resourceVersion")
        if rv not in (None, "") and not rv.isdigit():
            raise errors.bad_request(f"invalid resource version: {rv}")
        timeout = request.param("timeoutSeconds")
        options = WatchOptions(
            namespace=route.namespace,
            resource_version=rv,
            label_selector=request.param("labelSelector"),
            field_selector=request.param("fieldSelector"),
            allow_bookmarks=request.flag("allowWatchBookmarks"),
            timeout=float(timeout) if timeout else self.watch_timeout,
            send_initial_events=request.flag("sendInitialEvents"),
            bookmark_interval=self.bookmark_interval,
        )
        events = self.store.watch(rtype, options)
        return Response(200, stream=_encode(events, watch_fault))

    # --------------------------------------------------------------------------- discovery
    def _discovery(self, parts: list[str]) -> dict[str, Any] | None:
        types = self.store.types
        if parts == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}
                ],
            }
        if parts == ["apis"]:
            groups: dict[str, list[str]] = {}
            for rtype in types:
                if rtype.group and rtype.version not in groups.setdefault(rtype.group, []):
                    groups[rtype.group].append(rtype.version)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": group,
                        "versions": [
                            {"groupVersion": f"{group}/{v}", "version": v} for v in versions
                        ],
                        "preferredVersion": {
                            "groupVersion": f"{group}/{versions[0]}",
                            "version": versions[0],
                        },
                    }
                    for group, versions in groups.items()
                ],
            }
        if parts == ["api", "v1"]:
            group, version = "", "v1"
        elif len(parts) == 3 and parts[0] == "apis":
            group, version = parts[1], parts[2]
        else:
            return None
        served = [t for t in types if t.group == group and t.version == version]
        if not served:
            return None
        resources: list[dict[str, Any]] = []
        for rtype in served:
            resources.append(
                {
                    "name": rtype.plural,
                    "singularName": rtype.kind.lower(),
                    "namespaced": rtype.namespaced,
                    "kind": rtype.kind,
                    "verbs": [
                        "create",
                        "delete",
                        "deletecollection",
                        "get",
                        "list",
                        "patch",
                        "update",
                        "watch",
                    ],
                    **({"shortNames": list(rtype.short_names)} if rtype.short_names else {}),
                }
            )
            if rtype.status_subresource:
                resources.append(
                    {
                        "name": f"{rtype.plural}/status",
                        "singularName": "",
                        "namespaced": rtype.namespaced,
                        "kind": rtype.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if rtype.key == ("", "pods"):
                resources.append(
                    {
                        "name": "pods/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }


def _encode(
    events: Iterator[dict[str, Any]], fault: EndWatch | ExpireWatch | None
) -> Iterator[bytes]:
    # One JSON document per line, one line per chunk, as the apiserver's watch encoder does.
    delivered = 0
    try:
        if fault is None or fault.after_events > 0:
            for event in events:
                yield json.dumps(event, separators=(",", ":")).encode() + b"\n"
                if event["type"] != "BOOKMARK":
                    delivered += 1
                if fault is not None and delivered >= fault.after_events:
                    break
            else:
                return  # the stream ended by itself (timeout, server stop)
        if isinstance(fault, ExpireWatch):
            gone = errors.expired("too old resource version: injected by a fault rule")
            yield json.dumps({"type": "ERROR", "object": gone.status}).encode() + b"\n"
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def _json_body(request: Request) -> Any:
    try:
        return json.loads(request.body or b"null")
    except ValueError as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc


def _json_object(request: Request) -> dict[str, Any]:
    body = _json_body(request)
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    return body


def _dry_run(request: Request) -> bool:
    return request.query.get("dryRun", []) == ["All"]


def _verb(method: str) -> str:
    return {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch"}.get(
        method, method.lower()
    )
