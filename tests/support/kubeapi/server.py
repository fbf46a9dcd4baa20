"""The API test server (test fake): real HTTP/1.1 on loopback, kube-apiserver semantics.

No kube-apiserver can run where migscope's tests run, and a mocked client would not catch a
wrong Content-Type, a missed 409, a watch that never resumes or an eviction that ignores a
PDB. So the applier's tests talk to this server through the unmodified official
``kubernetes`` client, over real sockets: keep-alive connections, chunked watch streams,
read timeouts and dropped connections all happen for real.

The transport is the standard library's threading HTTP server (one thread per connection,
HTTP/1.1 keep-alive), because a watch must stream chunks as events happen and a fault must
be able to cut a connection mid-request; the semantics live in :mod:`.store` and the routing
in :mod:`.app`. Every request is recorded in :attr:`KubeApiServer.requests`; faults are
injected through :attr:`KubeApiServer.faults` (see :mod:`.faults`).

Usage::

    with KubeApiServer() as api:
        api.create(node("gpu-a", labels={"nvidia.com/mig.config": "all-disabled"}))
        core = kubernetes.client.CoreV1Api(api.client())
        core.patch_node("gpu-a", {"metadata": {"labels": {"nvidia.com/mig.config": "x"}}})
        assert api.get("v1", "Node", "gpu-a")["metadata"]["labels"][...] == "x"

Stopping ends every watch stream, closes every connection, joins every thread the server
started (all named ``kubeapi-*``) and closes the API clients :meth:`KubeApiServer.client`
handed out.
"""

from __future__ import annotations

import contextlib
import http.server
import itertools
import json
import socket
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import kubernetes.client

from .app import App, Request, Response, error_response
from .errors import generic
from .faults import Faults, Respond
from .resources import ResourceType
from .store import Change, Store

__all__ = ["THREAD_PREFIX", "KubeApiServer", "RecordedRequest"]

#: Every thread the server starts is named with this prefix (leak checks can filter on it).
THREAD_PREFIX = "kubeapi"

_SERVER_TOKEN: Any = object()  # "use the server's token" default for client()


class RecordedRequest(NamedTuple):
    """A request as the server received it.

    Attributes:
        method: HTTP method.
        path: URL path without the query string.
        query: Query parameters (the last value of each).
        content_type: Media type of the body, without parameters (``""`` if none).
        body: The body decoded as JSON, the raw bytes if it is not JSON, None if empty.
        user_agent: The ``User-Agent`` header (``""`` if none): whose request it was, e.g.
            the simulated MIG Manager's rather than the code under test's.
    """

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    user_agent: str = ""


class _HttpServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # threads are tracked and joined by KubeApiServer.stop()
    allow_reuse_address = True

    def __init__(self, owner: KubeApiServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.counter = itertools.count(1)
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"{THREAD_PREFIX}-conn-{next(self.counter)}",
            daemon=True,
        )
        with self.lock:
            self.connections.add(request)
            self.threads = [t for t in self.threads if t.is_alive()]
            self.threads.append(thread)
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-answer is a normal event in these tests


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle's algorithm and
        # the client's delayed ACK add 40 ms to every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        request = Request(
            method=self.command,
            path=url.path,
            query=urllib.parse.parse_qs(url.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        owner._record(request)
        plan = owner.faults.plan(request.method, request.path, is_watch=request.is_watch)
        if plan.delay and owner._stopping.wait(plan.delay):
            self._drop()
            return
        if plan.drop:
            self._drop()
            return
        if plan.respond is not None:
            response = _fault_response(plan.respond)
        else:
            try:
                response = owner.app.handle(request, watch_fault=plan.watch)
            except Exception as exc:  # a hook or a bug: answer as the apiserver would
                response = error_response(generic(500, server_message=repr(exc)))
        self._send(response)

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send(self, response: Response) -> None:
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            for key, value in response.headers.items():
                self.send_header(key, value)
            if response.stream is None:
                payload = response.payload()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for chunk in response.stream:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away
        finally:
            close = getattr(response.stream, "close", None)
            if close is not None:
                close()


def _fault_response(action: Respond) -> Response:
    headers = {} if action.retry_after is None else {"Retry-After": str(action.retry_after)}
    if action.body is not None:
        return Response(action.status, dict(action.body), headers)
    response = error_response(generic(action.status, retry_after=action.retry_after or 0))
    response.headers.update(headers)
    return response


class KubeApiServer:
    """An in-process Kubernetes API test server (see the module docstring).

    Args:
        token: Require ``Authorization: Bearer <token>`` on every request (401 otherwise);
            :meth:`client` sends it.
        history: Writes kept for watches to resume from; older resourceVersions get 410.
        watch_timeout: Seconds a watch without ``timeoutSeconds`` stays open (upstream picks
            30-60 minutes).
        bookmark_interval: Seconds between periodic BOOKMARK events on watches that allow
            them (upstream: about a minute); None sends them only on :meth:`bookmark`.
        seed: Seed for uids, generated names and fault probabilities.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        history: int = 5000,
        watch_timeout: float = 1800.0,
        bookmark_interval: float | None = None,
        seed: int = 0,
    ) -> None:
        self.token = token
        self.store = Store(history=history, seed=seed)
        self.faults = Faults(seed=seed)
        self.app = App(
            self.store,
            token=token,
            watch_timeout=watch_timeout,
            bookmark_interval=bookmark_interval,
        )
        self._requests: list[RecordedRequest] = []
        self._requests_lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._clients: list[kubernetes.client.ApiClient] = []
        self._port = 0

    # ----------------------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if not self._port:
            raise RuntimeError("KubeApiServer is not started")
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> KubeApiServer:
        """Listen on a free loopback port, serving from a background thread."""
        if self._httpd is not None:
            raise RuntimeError("KubeApiServer is already started")
        self._stopping.clear()
        self.store.reopen()
        self._httpd = _HttpServer(self)
        self._port = self._httpd.server_address[1]
        self.app.address = f"127.0.0.1:{self._port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"{THREAD_PREFIX}-accept",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """End watches, close connections and clients, join every thread (idempotent)."""
        self._stopping.set()
        self.store.close()
        for client in self._clients:
            client.close()
        self._clients.clear()
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        with httpd.lock:
            connections = list(httpd.connections)
            threads = list(httpd.threads)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=10)
            if thread.is_alive():
                raise RuntimeError(f"{thread.name} did not finish within 10 s")
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------ clients
    def configuration(
        self, *, token: str | None = _SERVER_TOKEN, retries: Any = None
    ) -> kubernetes.client.Configuration:
        """A client Configuration for this server.

        Args:
            token: Bearer token to send (default: the server's own; None for none).
            retries: urllib3 retries (``Configuration.retries``). None keeps urllib3's
                default, ``Retry(3)``, which silently retries idempotent requests on a
                dropped connection and on 429/503 with ``Retry-After``; pass ``False`` or
                ``0`` to see every failure.
        """
        config = kubernetes.client.Configuration(host=self.url)
        chosen = self.token if token is _SERVER_TOKEN else token
        if chosen is not None:
            config.api_key = {"BearerToken": chosen}
            config.api_key_prefix = {"BearerToken": "Bearer"}
        config.retries = retries
        return config

    def client(
        self,
        *,
        token: str | None = _SERVER_TOKEN,
        retries: Any = None,
        user_agent: str | None = None,
    ) -> kubernetes.client.ApiClient:
        """A ``kubernetes.client.ApiClient`` for this server, closed when the server stops.

        See :meth:`configuration` for ``token`` and ``retries``; ``user_agent`` (default:
        the client library's) tells this client's requests apart in :attr:`requests`.
        """
        client = kubernetes.client.ApiClient(self.configuration(token=token, retries=retries))
        if user_agent is not None:
            client.user_agent = user_agent
        self._clients.append(client)
        return client

    # ------------------------------------------------------------------------------ requests
    def _record(self, request: Request) -> None:
        body: Any = None
        if request.body:
            try:
                body = json.loads(request.body)
            except ValueError:
                body = request.body
        recorded = RecordedRequest(
            request.method,
            request.path,
            {k: v[-1] for k, v in request.query.items()},
            request.content_type,
            body,
            request.headers.get("user-agent", ""),
        )
        with self._requests_lock:
            self._requests.append(recorded)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy), oldest first."""
        with self._requests_lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._requests_lock:
            self._requests.clear()

    # ------------------------------------------------------------------- direct store access
    def register(self, rtype: ResourceType) -> None:
        """Serve another resource type (e.g. a further custom resource)."""
        self.store.register(rtype)

    def _type(self, api_version: str, kind: str) -> ResourceType:
        return self.store.type_for(api_version, kind)

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Seed an object (its ``apiVersion``/``kind`` pick the type; status is kept as given).

        Goes through the same store path as an API create (validation, resourceVersion,
        watch events), except that status is not reset, so tests can seed running pods.
        """
        rtype = self._type(obj["apiVersion"], obj["kind"])
        return self.store.create(rtype, obj, keep_status=True)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        """An object as stored (raises :class:`~support.kubeapi.errors.ApiError` 404)."""
        return self.store.get(self._type(api_version, kind), namespace, name)

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """The matching objects, with ``kind``/``apiVersion`` kept on every item."""
        rtype = self._type(api_version, kind)
        items = self.store.list(
            rtype,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )["items"]
        for item in items:
            item["kind"], item["apiVersion"] = rtype.kind, rtype.api_version
        return items

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = "application/merge-patch+json",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Patch an object directly (merge patch by default), e.g. to play the kubelet."""
        rtype = self._type(api_version, kind)
        return self.store.patch(
            rtype, namespace, name, content_type, patch, subresource=subresource
        )

    def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> None:
        """Delete an object directly."""
        self.store.delete(self._type(api_version, kind), namespace, name)

    def on_change(
        self,
        fn: Callable[[Change], None],
        *,
        api_version: str | None = None,
        kind: str | None = None,
    ) -> Callable[[], None]:
        """Run ``fn(change)`` after every write (of one type, if given); returns a remover."""
        rtype = self._type(api_version, kind) if api_version and kind else None
        return self.store.on_change(fn, rtype)

    def wait_for(
        self,
        api_version: str,
        kind: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        namespace: str | None = None,
        timeout: float = 5.0,
    ) -> dict[str, Any]:
        """Wait until the object exists and ``predicate(obj)`` holds; returns the object.

        Raises:
            TimeoutError: with the object's last state in the message.
        """
        rtype = self._type(api_version, kind)
        seen: dict[str, Any] = {}

        def check() -> bool:
            try:
                obj = self.store.get(rtype, namespace, name)
            except Exception:
                return False
            seen["last"] = obj
            return predicate(obj)

        if not self.store.wait(check, timeout):
            raise TimeoutError(
                f"{kind} {name!r}: condition not met within {timeout} s; last state: "
                f"{json.dumps(seen.get('last'), sort_keys=True)[:2000]}"
            )
        return seen["last"]

    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest write."""
        return self.store.resource_version

    def compact(self) -> int:
        """Drop the watch history (older resourceVersions then get 410); see Store.compact."""
        return self.store.compact()

    def bookmark(self) -> None:
        """Make every open watch that allows bookmarks send one now."""
        self.store.bookmark()
