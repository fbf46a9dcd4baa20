"""The Kubernetes calls the applier makes, as plain dicts, with errors it can act on.

Why a thin layer over the official client: the applier reasons about API *semantics*
(a 409 means someone else wrote first: read again; a 429 on eviction means a
PodDisruptionBudget says not now; a 404 on eviction means the pod is already gone), not about
client exceptions, and it works with objects as the API returns them (JSON dicts) so that
what it compares, records and logs is exactly what the server holds. Every call has a
request timeout, and every answer is read within a size limit and that timeout
(:mod:`.reading`); nothing here retries on its own except where the semantics ask for it
(:meth:`Kube.update_configmap` re-reads on conflict). A request header the HTTP library
refuses (a kubeconfig token with a newline) is reported without its value.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from migscope.core import MigscopeError, UserError, one_line
from migscope.kube._reading import MAX_RESPONSE_BYTES, read_answer, read_json

Obj = dict[str, Any]


class KubeError(UserError):
    """Root of what this package raises: the cluster cannot be used as asked (one line)."""


class ApiError(KubeError):
    """The API refused or could not be reached; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Conflict(ApiError):
    """409: the object changed since it was read (or already exists)."""


class NotFound(ApiError):
    """404."""


class TooManyRequests(ApiError):
    """429: on eviction, a PodDisruptionBudget does not allow it now."""


class DryRunWrite(MigscopeError):
    """A dry run tried to write (a bug): refused before any request was sent.

    Not an :class:`ApiError`, so that no retry loop mistakes it for a flaky API.
    """


def now_rfc3339(micro: bool = False) -> str:
    """Now in UTC as the API writes times (``MicroTime`` with ``micro``)."""
    now = datetime.now(timezone.utc)
    text = now.strftime("%Y-%m-%dT%H:%M:%S.%f" if micro else "%Y-%m-%dT%H:%M:%S")
    return text + "Z"


def _message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "{}")
        text = str(body.get("message") or "")
    except (ValueError, AttributeError):
        text = ""
    return " ".join((text or str(exc.reason or "")).split())


def _header_refused(what: str, exc: ValueError) -> ApiError | None:
    """The error for http.client's "Invalid header value b'Bearer ...'", without the value."""
    if not str(exc).startswith("Invalid header"):
        return None
    return ApiError(
        f"{what}: a request header holds a newline or control character (the kubeconfig's "
        "token or an exec plugin's?)"
    )


def _call(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    refused: ApiError | None = None
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        status = int(exc.status or 0)
        text = f"{what}: HTTP {status} {_message(exc)}".rstrip()
        kind = {409: Conflict, 404: NotFound, 429: TooManyRequests}.get(status, ApiError)
        raise kind(text, status) from exc
    except (HTTPError, OSError) as exc:
        raise ApiError(f"{what}: {one_line(exc)}") from exc
    except ValueError as exc:
        refused = _header_refused(what, exc)
        if refused is None:
            raise
    # Raised out of the except block, so that neither its cause nor its context is the error
    # that quotes the refused header: the header's value is a credential.
    raise refused


class Kube:
    """The applier's view of one cluster.

    Args:
        api: A ``kubernetes.client.ApiClient``.
        timeout_s: Request timeout for every call, its answer's body included.
        max_response_bytes: The most decoded bytes one answer may have.
    """

    def __init__(
        self,
        api: client.ApiClient,
        *,
        timeout_s: float = 30.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.policy = client.PolicyV1Api(api)
        self.coordination = client.CoordinationV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.resource = client.ResourceV1Api(api)
        self.timeout = timeout_s
        self.max_response_bytes = max_response_bytes

    def _opts(self) -> dict[str, Any]:
        return {"_request_timeout": self.timeout, "_preload_content": False}

    def _obj(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        """Call ``fn`` and read its answer as a JSON object, within the limit and the timeout."""
        started = time.monotonic()
        response = _call(what, fn, *args, **kwargs, **self._opts())
        return read_json(
            response,
            what=what,
            limit=self.max_response_bytes,
            timeout_s=self.timeout,
            started=started,
            error=ApiError,
        )

    def _done(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn`` for its effect; its answer is read within the limit and dropped."""
        started = time.monotonic()
        response = _call(what, fn, *args, **self._opts())
        read_answer(
            response,
            what=what,
            limit=self.max_response_bytes,
            timeout_s=self.timeout,
            started=started,
            error=ApiError,
        )

    # -- nodes -------------------------------------------------------------------------------

    def get_node(self, name: str) -> Obj:
        """The node as stored."""
        return self._obj(f"reading node {name}", self.core.read_node, name)

    def list_nodes(self) -> list[Obj]:
        """Every node."""
        body = self._obj("listing nodes", self.core.list_node)
        return list(body.get("items") or [])

    def list_pods(self, *, field_selector: str, page_size: int = 500) -> Iterator[Obj]:
        """Every pod matching ``field_selector`` in all namespaces, a page at a time.

        Paginated (``limit``/``continue``) so that a large cluster is read in bounded pieces.
        """
        token: str | None = None
        while True:
            body = self._obj(
                "listing pods",
                self.core.list_pod_for_all_namespaces,
                field_selector=field_selector,
                limit=page_size,
                _continue=token,
            )
            yield from body.get("items") or []
            token = (body.get("metadata") or {}).get("continue") or None
            if not token:
                return

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        """A strategic-merge patch (``null`` deletes a label or annotation).

        Put ``metadata.resourceVersion`` in the patch to make it conditional: the server
        answers 409 when the node changed since that version.
        """
        return self._obj(f"patching node {name}", self.core.patch_node, name, dict(patch))

    def watch_node(
        self, name: str, *, resource_version: str, timeout_s: float
    ) -> Iterator[tuple[str, Obj]]:
        """``(type, node)`` events for one node from ``resource_version`` on.

        Ends after ``timeout_s`` (server-side) or when the stream ends. A 410 (the version
        is too old) raises :class:`ApiError` with status 410: read the node again and
        resume from its version.
        """
        stream = watch.Watch()
        refused: ApiError | None = None
        try:
            for event in stream.stream(
                self.core.list_node,
                field_selector=f"metadata.name={name}",
                resource_version=resource_version,
                timeout_seconds=max(1, int(timeout_s)),
                allow_watch_bookmarks=True,
                _request_timeout=timeout_s + self.timeout,
            ):
                kind = str(event.get("type", ""))
                raw = event.get("raw_object")
                if kind == "ERROR":
                    status = int((raw or {}).get("code", 0)) if isinstance(raw, Mapping) else 0
                    raise ApiError(f"watching node {name}: {raw}", status)
                if isinstance(raw, Mapping):
                    yield kind, dict(raw)
        except ApiException as exc:
            raise ApiError(
                f"watching node {name}: HTTP {exc.status} {_message(exc)}", int(exc.status or 0)
            ) from exc
        except (HTTPError, OSError) as exc:
            raise ApiError(f"watching node {name}: {' '.join(str(exc).split())}") from exc
        except ValueError as exc:
            refused = _header_refused(f"watching node {name}", exc)
            if refused is None:
                raise
        finally:
            stream.stop()
        if refused is not None:
            raise refused  # out of the except block: see _call

    # -- pods --------------------------------------------------------------------------------

    def pods_on_node(self, name: str) -> list[Obj]:
        """Pods bound to the node that are not finished (they may still hold devices)."""
        body = self._obj(
            f"listing pods on {name}",
            self.core.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={name}",
        )
        items = body.get("items") or []
        return [
            p for p in items if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]

    def get_pod(self, namespace: str, name: str) -> Obj:
        """One pod."""
        return self._obj(
            f"reading pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace
        )

    def evict(self, namespace: str, name: str) -> None:
        """POST an Eviction (PodDisruptionBudgets decide: 429 means not now)."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        self._done(
            f"evicting {namespace}/{name}",
            self.core.create_namespaced_pod_eviction,
            name,
            namespace,
            body,
        )

    # -- config maps -------------------------------------------------------------------------

    def get_configmap(self, namespace: str, name: str) -> Obj | None:
        """The ConfigMap, or None when it does not exist."""
        return self._read("configmap", self.core.read_namespaced_config_map, namespace, name)

    def create_configmap(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Create (409 :class:`Conflict` when someone else just did)."""
        return self._create("configmap", self.core.create_namespaced_config_map, namespace, body)

    def replace_configmap(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Replace; ``metadata.resourceVersion`` in ``body`` makes it conditional (409)."""
        return self._replace("configmap", self.core.replace_namespaced_config_map, namespace, body)

    # -- namespaced objects, read and written whole -------------------------------------------

    def _read(self, kind: str, read: Callable[..., Any], namespace: str, name: str) -> Obj | None:
        """``read`` the object ``namespace/name``, or None when it does not exist."""
        try:
            return self._obj(f"reading {kind} {namespace}/{name}", read, name, namespace)
        except NotFound:
            return None

    def _create(
        self, kind: str, create: Callable[..., Any], namespace: str, body: Mapping[str, Any]
    ) -> Obj:
        """``create`` ``body`` in ``namespace`` (409 :class:`Conflict` when it exists)."""
        what = f"creating {kind} {namespace}/{body['metadata']['name']}"
        return self._obj(what, create, namespace, dict(body))

    def _replace(
        self, kind: str, replace: Callable[..., Any], namespace: str, body: Mapping[str, Any]
    ) -> Obj:
        """``replace`` the object with ``body`` (conditional on its ``resourceVersion``)."""
        name = body["metadata"]["name"]
        what = f"writing {kind} {namespace}/{name}"
        return self._obj(what, replace, name, namespace, dict(body))

    # -- GPU Operator ------------------------------------------------------------------------

    def cluster_policies(self) -> list[Obj]:
        """The GPU Operator's ClusterPolicies (empty when the CRD is not installed)."""
        try:
            body = self._obj(
                "listing clusterpolicies",
                self.custom.list_cluster_custom_object,
                "nvidia.com",
                "v1",
                "clusterpolicies",
            )
        except NotFound:
            return []
        return list(body.get("items") or [])

    # -- events and leases -------------------------------------------------------------------

    def gpu_clusters(self) -> list[Obj]:
        """The GPU Operator's ``GPUCluster`` objects (empty when the CRD is not installed).

        GPU Operator 26.7's ``GPUCluster`` (``nvidia.com/v1alpha1``, cluster-scoped) runs the
        DRA driver without MIG Manager: on such a cluster nothing reads
        ``nvidia.com/mig.config``.
        """
        try:
            body = self._obj(
                "listing gpuclusters",
                self.custom.list_cluster_custom_object,
                "nvidia.com",
                "v1alpha1",
                "gpuclusters",
            )
        except NotFound:
            return []
        return list(body.get("items") or [])

    # -- DRA (resource.k8s.io/v1) ------------------------------------------------------------

    def resource_slices(self, node: str) -> list[Obj]:
        """The ResourceSlices of the node's DRA drivers (empty where DRA is not served)."""
        try:
            body = self._obj(
                f"listing resourceslices of {node}",
                self.resource.list_resource_slice,
                field_selector=f"spec.nodeName={node}",
            )
        except NotFound:
            return []  # no resource.k8s.io/v1 on this cluster: nothing is allocated through DRA
        return list(body.get("items") or [])

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        """The ResourceClaim, or None when it does not exist (any more)."""
        try:
            return self._obj(
                f"reading resourceclaim {namespace}/{name}",
                self.resource.read_namespaced_resource_claim,
                name,
                namespace,
            )
        except NotFound:
            return None

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        """Record a core/v1 Event."""
        self._done("recording an event", self.core.create_namespaced_event, namespace, dict(body))

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        """The Lease, or None."""
        return self._read("lease", self.coordination.read_namespaced_lease, namespace, name)

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Create (409 when another instance just did)."""
        return self._create("lease", self.coordination.create_namespaced_lease, namespace, body)

    def replace_lease(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Replace, conditional on ``metadata.resourceVersion`` (409 when it moved)."""
        return self._replace("lease", self.coordination.replace_namespaced_lease, namespace, body)


class ReadOnlyKube(Kube):
    """A dry run's view of the cluster: the reads of ``inner``, and every write refused.

    A dry run must change nothing, and "nothing" is easier to guarantee by construction than
    by reviewing every path that might write (a resume, a rollback, an Event, the Lease): a
    write reaching this class is a bug, reported as :class:`DryRunWrite` before any request
    leaves. Reads go to ``inner``'s own methods, so a test double's behaviour is kept.
    """

    def __init__(self, inner: Kube) -> None:  # no super().__init__: nothing of its own
        self.inner = inner
        self.api = inner.api
        self.timeout = inner.timeout
        self.max_response_bytes = getattr(inner, "max_response_bytes", MAX_RESPONSE_BYTES)

    @staticmethod
    def _refuse(what: str) -> DryRunWrite:
        return DryRunWrite(f"{what}: refused, this is a dry run (a bug: please report it)")

    # -- reads: the inner view's ------------------------------------------------------------

    def get_node(self, name: str) -> Obj:
        """See :meth:`Kube.get_node`."""
        return self.inner.get_node(name)

    def list_nodes(self) -> list[Obj]:
        """See :meth:`Kube.list_nodes`."""
        return self.inner.list_nodes()

    def watch_node(
        self, name: str, *, resource_version: str, timeout_s: float
    ) -> Iterator[tuple[str, Obj]]:
        """See :meth:`Kube.watch_node`."""
        return self.inner.watch_node(name, resource_version=resource_version, timeout_s=timeout_s)

    def pods_on_node(self, name: str) -> list[Obj]:
        """See :meth:`Kube.pods_on_node`."""
        return self.inner.pods_on_node(name)

    def get_pod(self, namespace: str, name: str) -> Obj:
        """See :meth:`Kube.get_pod`."""
        return self.inner.get_pod(namespace, name)

    def get_configmap(self, namespace: str, name: str) -> Obj | None:
        """See :meth:`Kube.get_configmap`."""
        return self.inner.get_configmap(namespace, name)

    def cluster_policies(self) -> list[Obj]:
        """See :meth:`Kube.cluster_policies`."""
        return self.inner.cluster_policies()

    def gpu_clusters(self) -> list[Obj]:
        """See :meth:`Kube.gpu_clusters`."""
        return self.inner.gpu_clusters()

    def resource_slices(self, node: str) -> list[Obj]:
        """See :meth:`Kube.resource_slices`."""
        return self.inner.resource_slices(node)

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        """See :meth:`Kube.get_resource_claim`."""
        return self.inner.get_resource_claim(namespace, name)

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        """See :meth:`Kube.get_lease`."""
        return self.inner.get_lease(namespace, name)

    def list_pods(self, *, field_selector: str, page_size: int = 500) -> Iterator[Obj]:
        """See :meth:`Kube.list_pods`."""
        return self.inner.list_pods(field_selector=field_selector, page_size=page_size)

    # -- writes: refused ---------------------------------------------------------------------

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        """Refused."""
        raise self._refuse(f"patching node {name}")

    def evict(self, namespace: str, name: str) -> None:
        """Refused."""
        raise self._refuse(f"evicting {namespace}/{name}")

    def create_configmap(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Refused."""
        raise self._refuse(f"creating configmap {namespace}/{body['metadata']['name']}")

    def replace_configmap(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Refused."""
        raise self._refuse(f"writing configmap {namespace}/{body['metadata']['name']}")

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        """Refused."""
        raise self._refuse("recording an event")

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Refused."""
        raise self._refuse(f"creating lease {namespace}/{body['metadata']['name']}")

    def replace_lease(self, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Refused."""
        raise self._refuse(f"writing lease {namespace}/{body['metadata']['name']}")
