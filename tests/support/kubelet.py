"""A fake kubelet PodResources v1 server: a real ``grpc.server`` on a temporary unix socket.

It speaks the wire protocol of the real kubelet (it registers the generated servicer, so the
method path comes from api.proto too), which is what the exporter's pod attribution must be
tested against: a mock of the client would not catch a wrong field number, path or channel
option. Its pods can be replaced while it runs, and it can be switched into the ways a real
kubelet socket goes wrong on a node:

* ``slow(seconds)``   — answers ``List`` only after a delay (a wedged kubelet);
* ``error(code, details)`` — aborts every call with a gRPC status;
* ``garbage()``       — not gRPC at all: a plain socket server that writes random bytes and
  hangs up (something else bound the path, or a proxy in the way);
* ``stale()``         — the socket file is left behind but nobody listens (kubelet crashed);
* ``stop()``          — the socket file is gone (kubelet stopped, or the hostPath is empty);
* ``serve()``         — back to normal (the kubelet restarted).

Usage::

    with FakeKubelet([make_pod("train-0", namespace="ml",
                               containers={"main": {"nvidia.com/mig-1g.18gb": ["MIG-..."]}})]
                     ) as kubelet:
        watcher = PodResourcesWatcher(kubelet.socket_path, interval=0.05)
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent import futures
from typing import Any, Literal

import grpc

from migscope.exporter._podresources import api_pb2, api_pb2_grpc

__all__ = ["NVIDIA_CDI_KIND", "THREAD_PREFIX", "FakeKubelet", "Mode", "make_claim", "make_pod"]

#: NVIDIA's DRA driver's CDI kind: its CDI device ids are ``k8s.gpu.nvidia.com/claim=<claim
#: UID>-<device name>`` (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/cdi.go L44-46, 318-325).
NVIDIA_CDI_KIND = "k8s.gpu.nvidia.com/claim"

#: Every thread the fake starts is named with this prefix, so leak checks can tell them apart
#: from the threads of the code under test.
THREAD_PREFIX = "fake-kubelet"

Mode = Literal["serving", "slow", "error", "garbage", "stale", "stopped", "closed"]


def make_claim(
    claim_name: str,
    devices: Sequence[str],
    *,
    claim_namespace: str = "default",
    pool: str = "node-a",
    driver: str = "gpu.nvidia.com",
    claim_uid: str = "dab5ab50-1c4e-4b7e-9a43-5d1f0c2b7e11",
    cdi: bool = True,
) -> api_pb2.DynamicResource:
    """One ``DynamicResource`` as the kubelet fills it for a claim of NVIDIA's driver.

    One ``ClaimResource`` per allocated device (``driver_name``, ``pool_name``,
    ``device_name``), each with the driver's CDI id for that device
    (``k8s.gpu.nvidia.com/claim=<claim UID>-<device name>``). NVIDIA's driver names the pool
    after the node. Shape: kubelet ``GetDynamicResources`` (container_manager_linux.go) and
    KEP-3695's proto; docs/dra-sources.md §3.
    """
    return api_pb2.DynamicResource(
        claim_name=claim_name,
        claim_namespace=claim_namespace,
        claim_resources=[
            api_pb2.ClaimResource(
                cdi_devices=(
                    [api_pb2.CDIDevice(name=f"{NVIDIA_CDI_KIND}={claim_uid}-{device}")]
                    if cdi
                    else []
                ),
                driver_name=driver,
                pool_name=pool,
                device_name=device,
            )
            for device in devices
        ],
    )


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    containers: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    claims: Mapping[str, Sequence[api_pb2.DynamicResource]] | None = None,
) -> api_pb2.PodResources:
    """Build a ``PodResources`` message from ``{container: {resource_name: [device_id, ...]}}``.

    ``claims`` adds ``dynamic_resources``: ``{container: [make_claim(...), ...]}``; a
    container named only there is listed with no device-plugin devices.
    """
    names = list(containers or {})
    names += [c for c in (claims or {}) if c not in names]
    return api_pb2.PodResources(
        name=name,
        namespace=namespace,
        containers=[
            api_pb2.ContainerResources(
                name=container,
                devices=[
                    api_pb2.ContainerDevices(resource_name=resource, device_ids=list(ids))
                    for resource, ids in (containers or {}).get(container, {}).items()
                ],
                dynamic_resources=list((claims or {}).get(container, ())),
            )
            for container in names
        ],
    )


class _Servicer(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self._kubelet = kubelet

    def List(self, request: Any, context: grpc.ServicerContext) -> Any:
        pods = self._kubelet._answer(context)
        return api_pb2.ListPodResourcesResponse(pod_resources=pods)

    def Get(self, request: Any, context: grpc.ServicerContext) -> Any:
        for pod in self._kubelet._answer(context):
            if pod.name == request.pod_name and pod.namespace == request.pod_namespace:
                return api_pb2.GetPodResourcesResponse(pod_resources=pod)
        context.abort(
            grpc.StatusCode.NOT_FOUND,
            f"pod {request.pod_namespace}/{request.pod_name} not found",
        )
        raise AssertionError("unreachable")  # abort raises

    def GetAllocatableResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        devices = [
            api_pb2.ContainerDevices(resource_name=d.resource_name, device_ids=d.device_ids)
            for pod in self._kubelet._answer(context)
            for c in pod.containers
            for d in c.devices
        ]
        return api_pb2.AllocatableResourcesResponse(devices=devices)


class FakeKubelet:
    """Fake kubelet PodResources server; see the module docstring for the fault modes.

    Thread-safe: pods and modes may be changed from the test while clients are calling.
    """

    def __init__(
        self,
        pods: Iterable[api_pb2.PodResources] = (),
        *,
        socket_path: str | os.PathLike[str] | None = None,
    ) -> None:
        # Unix socket paths are limited to ~107 bytes; pytest's tmp_path can be longer, so the
        # default is a short directory of our own under the system temp dir.
        self._own_dir: str | None = None
        if socket_path is None:
            self._own_dir = tempfile.mkdtemp(prefix="kubelet-")
            socket_path = os.path.join(self._own_dir, "kubelet.sock")
        self.socket_path = os.fspath(socket_path)

        self._cond = threading.Condition()
        self._pods: tuple[api_pb2.PodResources, ...] = tuple(pods)
        self._calls = 0
        self._delay = 0.0
        self._error: tuple[grpc.StatusCode, str] | None = None
        self._generation = 0  # bumped on every mode change; wakes slow handlers

        self._transition = threading.Lock()
        self._mode: Mode = "stopped"
        self._server: grpc.Server | None = None
        self._executor: futures.ThreadPoolExecutor | None = None
        self._garbage_stop: threading.Event | None = None
        self._garbage_thread: threading.Thread | None = None
        self._garbage_sock: socket.socket | None = None

    # ----------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> FakeKubelet:
        self.serve()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop everything, join every thread the fake started and remove its directory."""
        self._switch("closed")
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

    @property
    def mode(self) -> Mode:
        """The current behaviour."""
        return self._mode

    # ------------------------------------------------------------------------------- content
    @property
    def pods(self) -> tuple[api_pb2.PodResources, ...]:
        """The pods ``List`` answers with now."""
        with self._cond:
            return self._pods

    def set_pods(self, pods: Iterable[api_pb2.PodResources]) -> None:
        """Replace the pods; the next ``List`` sees the new set."""
        new = tuple(pods)
        with self._cond:
            self._pods = new

    @property
    def calls(self) -> int:
        """Number of RPCs received so far (answered or not)."""
        with self._cond:
            return self._calls

    def wait_for_calls(self, count: int, *, timeout: float = 10.0) -> bool:
        """Wait until at least ``count`` RPCs have been received in total."""
        with self._cond:
            return self._cond.wait_for(lambda: self._calls >= count, timeout=timeout)

    # --------------------------------------------------------------------------------- modes
    def serve(self) -> None:
        """Answer normally (starting the gRPC server if it is not running)."""
        self._switch("serving")

    def slow(self, seconds: float) -> None:
        """Answer every call only after ``seconds`` (released early by any mode change)."""
        self._switch("slow", delay=seconds)

    def error(
        self,
        code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
        details: str = "kubelet is shutting down",
    ) -> None:
        """Abort every call with ``code`` and ``details``."""
        self._switch("error", error=(code, details))

    def garbage(self, *, seed: int = 0) -> None:
        """Replace the gRPC server by a socket that writes random bytes and hangs up."""
        self._switch("garbage", seed=seed)

    def stale(self) -> None:
        """Leave a socket file nobody listens on (connection refused)."""
        self._switch("stale")

    def stop(self) -> None:
        """Remove the socket file, as when the kubelet is not running."""
        self._switch("stopped")

    # ------------------------------------------------------------------------------ internals
    def _answer(self, context: grpc.ServicerContext) -> list[api_pb2.PodResources]:
        with self._cond:
            self._calls += 1
            self._cond.notify_all()
            generation, delay, error = self._generation, self._delay, self._error
            if delay > 0:
                self._cond.wait_for(lambda: self._generation != generation, timeout=delay)
            pods = list(self._pods)
        if error is not None:
            context.abort(*error)
        return pods

    def _switch(
        self,
        mode: Mode,
        *,
        delay: float = 0.0,
        error: tuple[grpc.StatusCode, str] | None = None,
        seed: int = 0,
    ) -> None:
        with self._transition:
            with self._cond:
                self._generation += 1
                self._delay = delay
                self._error = error
                self._cond.notify_all()
            wants_grpc = mode in ("serving", "slow", "error")
            if not wants_grpc or self._server is None:
                self._stop_grpc()
                self._stop_garbage()
                self._unlink()
            if mode == "garbage":
                self._start_garbage(seed)
            elif mode == "stale":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.bind(self.socket_path)  # bound, never listening: connect is refused
                sock.close()
            elif wants_grpc and self._server is None:
                self._start_grpc()
            self._mode = mode

    def _unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)

    def _start_grpc(self) -> None:
        self._executor = futures.ThreadPoolExecutor(
            max_workers=8, thread_name_prefix=f"{THREAD_PREFIX}-grpc"
        )
        server = grpc.server(self._executor)
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(_Servicer(self), server)
        if not server.add_insecure_port(f"unix://{self.socket_path}"):
            raise RuntimeError(f"fake kubelet could not bind {self.socket_path}")
        server.start()
        self._server = server

    def _stop_grpc(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _start_garbage(self, seed: int) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.socket_path)
        sock.listen(16)
        stop = threading.Event()
        rng = random.Random(seed)

        def run() -> None:
            while not stop.is_set():
                ready, _, _ = select.select([sock], [], [], 0.05)
                if not ready:
                    continue
                try:
                    conn, _ = sock.accept()
                except OSError:
                    continue
                with conn:
                    with self._cond:
                        self._calls += 1
                        self._cond.notify_all()
                    with contextlib.suppress(OSError):
                        conn.sendall(rng.randbytes(512))

        thread = threading.Thread(target=run, name=f"{THREAD_PREFIX}-garbage", daemon=True)
        thread.start()
        self._garbage_sock, self._garbage_stop, self._garbage_thread = sock, stop, thread

    def _stop_garbage(self) -> None:
        if self._garbage_stop is not None and self._garbage_thread is not None:
            self._garbage_stop.set()
            self._garbage_thread.join()
        if self._garbage_sock is not None:
            self._garbage_sock.close()
        self._garbage_sock = self._garbage_stop = self._garbage_thread = None
