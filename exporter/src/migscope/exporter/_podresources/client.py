"""Kubelet PodResources v1 client and the background watcher the exporter reads pod owners from.

The exporter must never call the kubelet from a scrape: dcgm-exporter does, and pays a gRPC
round trip (and a full pod list) per scrape per node. Instead `PodResourcesWatcher` refreshes a
device → pod mapping on its own thread and a scrape reads the latest immutable mapping.

Failure policy, chosen so pod labels are never *wrong*, only sometimes *missing*:

* a failed refresh keeps the last good mapping (a kubelet restart takes seconds and must not
  blank every pod label), but the status says ``ok=False`` with a one-line reason;
* once no refresh has succeeded for ``stale_after`` seconds the mapping is dropped: after that
  long pods may have come and gone, so owners are reported as unknown rather than guessed;
* state changes (ok → failing, failing → ok, mapping dropped) are logged once each, not once per
  attempt, so a node without a kubelet socket does not flood the log.

What one answer may cost is capped: an answer over ``MAX_ANSWER_BYTES`` is refused by gRPC
before it is received (a failed refresh like any other, with its size in the error line), an
answer is decoded one pod at a time (:mod:`.wire`), and :func:`.owners.collect_owners` takes
at most ``MAX_DEVICES`` devices and ``MAX_OWNERS_PER_DEVICE`` owners of each. A cut answer
still refreshes the mapping, but the status carries a note (``truncated``), logged once when
it appears, so the exporter reports attribution as incomplete. docs/pod-attribution.md gives
the measured memory.

A fresh channel is opened per refresh (every ~10 s, so its cost does not matter) with a private
subchannel pool: gRPC otherwise shares connections process-wide and would hold a failed kubelet
connection in exponential back-off (up to two minutes) after the kubelet is back.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import MappingProxyType

import grpc
from google.protobuf.message import DecodeError

from migscope.core import UserError
from migscope.exporter._dra import DraCollector, DraHolders

from . import api_pb2
from .owners import DEFAULT_RESOURCE_PREFIXES, OwnerMap, collect_owners
from .wire import WireError, iter_pods

_log = logging.getLogger(__name__)

#: Where the kubelet serves the PodResources API on every standard Kubernetes node.
DEFAULT_SOCKET_PATH = "/var/lib/kubelet/pod-resources/kubelet.sock"

_SERVICE = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
#: The gRPC path of ``List``, derived from the proto so it cannot drift from it:
#: ``/v1.PodResourcesLister/List``.
LIST_METHOD = f"/{_SERVICE.full_name}/{_SERVICE.methods_by_name['List'].name}"

#: Largest ``List`` answer taken, in bytes on the wire. The exporter runs under a 256 MiB
#: memory limit, and 16 MiB answers (the kubelet's own client's limit) took its RSS to
#: 260-520 MiB (docs/pod-attribution.md). 1,000 pods of 4 containers with CPUs, memory and
#: two devices each are 0.8 MiB on the wire, so 8 MiB is 10 times that.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
_CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_ANSWER_BYTES),
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.enable_http_proxy", 0),
    ("grpc.enable_retries", 0),
)
_MAX_DETAIL_CHARS = 200
# gRPC's words for an answer over max_receive_message_length: "... (17292108 vs. 16777216)".
_TOO_LARGE = re.compile(r"larger than max \((\d+) vs\. \d+\)")
_EMPTY: OwnerMap = MappingProxyType({})
_NO_DRA = DraHolders()


class PodResourcesError(UserError):
    """A ``List`` call failed; the message is one line naming the socket and the cause."""


@dataclass(frozen=True)
class WatcherStatus:
    """Health of pod attribution, for the exporter's collector-success metrics and logs.

    Attributes:
        ok: The latest refresh succeeded. False before the first refresh finishes.
        last_error: One line describing the latest failure, or None once a refresh succeeds.
        last_success: Wall-clock time (``time.time()``) of the latest successful refresh.
        duration_seconds: How long the latest refresh took, failed or not.
        refreshes: Refreshes finished, successful or not.
        failures: Refreshes that failed.
        devices: Device keys in the mapping `PodResourcesWatcher.owners` returns now.
        stale: The last good mapping was dropped because no refresh succeeded for
            ``stale_after`` seconds; owners are unknown until the kubelet answers again.
        truncated: One line saying what the caps cut from the latest successful answer
            (devices past ``MAX_DEVICES``, owners past ``MAX_OWNERS_PER_DEVICE``), or None
            when it was taken whole. The mapping is fresh but incomplete.
    """

    ok: bool
    last_error: str | None
    last_success: float | None
    duration_seconds: float
    refreshes: int
    failures: int
    devices: int
    stale: bool
    truncated: str | None = None


def _clipped(text: str) -> str:
    """``text`` on one line and cut to ``_MAX_DETAIL_CHARS`` characters.

    Not bare ``core._errors.one_line``: gRPC details can run to kilobytes, and this text ends
    up in ``/healthz`` and in every log line of a failing refresh.
    """
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_DETAIL_CHARS else flat[: _MAX_DETAIL_CHARS - 1] + "…"


def _check_socket(socket_path: str) -> None:
    """Fail with a plain sentence before gRPC turns a missing file into a connect error."""
    try:
        mode = os.stat(socket_path).st_mode
    except FileNotFoundError as err:
        raise PodResourcesError(f"kubelet pod-resources socket {socket_path} not found") from err
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise PodResourcesError(
            f"kubelet pod-resources socket {socket_path} not accessible: {reason}"
        ) from err
    if not stat.S_ISSOCK(mode):
        raise PodResourcesError(f"kubelet pod-resources socket {socket_path} is not a socket")


def _tidy(details: str, socket_path: str) -> str:
    """Shorten gRPC's connect errors, which repeat the address and bury the cause.

    ``failed to connect to all addresses; last error: FAILED_PRECONDITION: unix:/x: connect
    failed: addr: unix:/x error: Connection refused`` becomes ``FAILED_PRECONDITION: connect
    failed: Connection refused``. Unknown shapes pass through unchanged (then cut to one line).
    """
    text = " ".join(details.split())
    text = text.replace("failed to connect to all addresses; last error: ", "")
    text = re.sub(r"connect failed: addr: \S+ error: ", "connect failed: ", text)
    absolute = os.path.abspath(socket_path)
    for address in (f"unix://{absolute}", f"unix:{absolute}", f"unix:{socket_path}"):
        text = text.replace(f"{address}: ", "")
    return _clipped(text)


def _describe(err: grpc.RpcError, socket_path: str, timeout: float) -> str:
    # The raised object is also a grpc.Call, but the typing stubs declare the two classes
    # incompatible, so read the status through getattr.
    code_of, details_of = getattr(err, "code", None), getattr(err, "details", None)
    code = code_of() if callable(code_of) else None
    details = (details_of() if callable(details_of) else None) or str(err)
    where = f"kubelet pod-resources socket {socket_path}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"{where}: no answer within {timeout:g} s (DEADLINE_EXCEEDED)"
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return f"{where}: List not implemented (UNIMPLEMENTED); kubelet older than 1.20?"
    over = _TOO_LARGE.search(details)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and over:
        return (
            f"{where}: answer of {int(over.group(1)) / 2**20:.1f} MiB is larger than the "
            f"{MAX_ANSWER_BYTES / 2**20:g} MiB the exporter accepts (RESOURCE_EXHAUSTED)"
        )
    name = code.name if isinstance(code, grpc.StatusCode) else "gRPC error"
    return f"{where}: {name}: {_tidy(details, socket_path)}"


def _list(
    socket_path: str,
    *,
    timeout: float,
    register: Callable[[grpc.Channel | None], None] | None = None,
) -> bytes:
    """The kubelet's ``List`` answer, undecoded (see :mod:`.wire` for why)."""
    _check_socket(socket_path)
    channel = grpc.insecure_channel(
        f"unix://{os.path.abspath(socket_path)}", options=list(_CHANNEL_OPTIONS)
    )
    try:
        if register is not None:
            register(channel)
        call: grpc.UnaryUnaryMultiCallable[api_pb2.ListPodResourcesRequest, bytes]
        call = channel.unary_unary(
            LIST_METHOD,
            request_serializer=api_pb2.ListPodResourcesRequest.SerializeToString,
            response_deserializer=None,  # the bytes as they came
        )
        answer: bytes = call(api_pb2.ListPodResourcesRequest(), timeout=timeout)
        return answer
    except grpc.RpcError as err:
        raise PodResourcesError(_describe(err, socket_path, timeout)) from err
    finally:
        if register is not None:
            register(None)
        channel.close()


def _also(
    pods: Iterator[api_pb2.PodResources], take: Callable[[api_pb2.PodResources], None]
) -> Iterator[api_pb2.PodResources]:
    """``pods``, each handed to ``take`` too (one pass over an answer decoded pod by pod)."""
    for pod in pods:
        take(pod)
        yield pod


def _undecodable(socket_path: str, err: Exception) -> PodResourcesError:
    return PodResourcesError(
        f"kubelet pod-resources socket {socket_path}: the answer is not a PodResources List "
        f"answer ({_clipped(str(err)) or type(err).__name__})"
    )


def list_pod_resources(
    socket_path: str | os.PathLike[str] = DEFAULT_SOCKET_PATH, *, timeout: float
) -> api_pb2.ListPodResourcesResponse:
    """Ask the kubelet once which devices every container on this node holds.

    Args:
        socket_path: The kubelet's PodResources unix socket.
        timeout: Deadline for connecting and answering, in seconds: a wedged kubelet must not
            wedge the caller.

    Returns:
        The kubelet's ``List`` answer.

    Raises:
        PodResourcesError: The socket is missing, the kubelet did not answer in time, answered
            with an error, or spoke something that is not gRPC. The message is one line.
    """
    path = os.fspath(socket_path)
    answer = _list(path, timeout=timeout)
    try:
        return api_pb2.ListPodResourcesResponse.FromString(answer)
    except DecodeError as err:
        raise _undecodable(path, err) from err


class PodResourcesWatcher:
    """Keeps a device → pod owners mapping fresh on a daemon thread.

    Reads (`owners`, `status`) are cheap and never block on the kubelet, so a scrape can call
    them freely. The mapping is keyed by normalised device ID (see `owners.parse_device_id`);
    each value is a tuple because time-sliced replicas let several containers share a device.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] = DEFAULT_SOCKET_PATH,
        *,
        interval: float = 10.0,
        timeout: float = 2.0,
        stale_after: float | None = None,
        resource_prefixes: Iterable[str] = DEFAULT_RESOURCE_PREFIXES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Configure the watcher; nothing runs until `start` (or a manual `refresh`).

        Args:
            socket_path: The kubelet's PodResources unix socket (mounted read-only from the
                host in the exporter's DaemonSet).
            interval: Seconds between refreshes. Pods start and stop at human speed; 10 s
                keeps labels current without loading the kubelet.
            timeout: Deadline of one ``List`` call, in seconds.
            stale_after: Seconds without a successful refresh after which the last good
                mapping is dropped. Defaults to five intervals: long enough to ride out a
                kubelet restart, short enough that a dead kubelet does not pin old owners.
            resource_prefixes: Resource names to attribute, matched as prefixes.
            clock: Monotonic seconds used for staleness; tests pass a controllable one.

        Raises:
            ValueError: A non-positive interval, timeout or stale_after.
        """
        stale = 5 * interval if stale_after is None else stale_after
        for name, value in (("interval", interval), ("timeout", timeout), ("stale_after", stale)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
        self._socket_path = os.fspath(socket_path)
        self._interval = interval
        self._timeout = timeout
        self._stale_after = stale
        self._prefixes = tuple(resource_prefixes)
        self._clock = clock

        self._refresh_lock = threading.Lock()  # one refresh at a time
        self._lock = threading.Lock()  # guards the state below
        self._changed = threading.Condition(self._lock)
        self._owners: OwnerMap = _EMPTY
        self._dra: DraHolders = _NO_DRA  # devices held through ResourceClaims
        self._owners_at: float | None = None  # clock() of the refresh that produced _owners
        self._healthy: bool | None = None  # None until the first refresh: first state change
        self._last_error: str | None = None
        self._last_success: float | None = None
        self._duration = 0.0
        self._refreshes = 0
        self._failures = 0
        self._dropped = False
        self._truncated: str | None = None  # the cut of the answer behind _owners

        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._channel: grpc.Channel | None = None

    @property
    def socket_path(self) -> str:
        """The socket this watcher asks."""
        return self._socket_path

    def __enter__(self) -> PodResourcesWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start refreshing in the background; the first refresh begins at once.

        Calling it while already running does nothing, so callers need not track state.
        """
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="migscope-podresources", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread and wait for it.

        Prompt even in the middle of a slow ``List``: the in-flight channel is closed, which
        cancels the call, instead of waiting out its deadline. The interrupted refresh is not
        counted. The mapping and status stay readable after stopping.
        """
        self._stop.set()
        with self._lock:
            channel = self._channel
        if channel is not None:
            channel.close()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=self._timeout + 5.0)
            if thread.is_alive():  # pragma: no cover - gRPC ignored the cancellation
                _log.warning("pod attribution: refresh thread did not stop; leaving it (daemon)")
            self._thread = None

    def dra_holders(self) -> DraHolders:
        """The latest answer's DRA holders (``dynamic_resources`` of ``gpu.nvidia.com``).

        Kept and dropped with the owner map: empty once the mapping went stale.
        """
        with self._lock:
            return _NO_DRA if self._current()[1] else self._dra

    def owners(self) -> OwnerMap:
        """Return the latest device → owners mapping (read-only; empty when unknown).

        Checks staleness at read time too, so owners go unknown on schedule even if the
        refresh thread were stuck.
        """
        with self._lock:
            return self._current()[0]

    def status(self) -> WatcherStatus:
        """Return a consistent snapshot of the watcher's health."""
        with self._lock:
            owners, stale = self._current()
            return WatcherStatus(
                ok=bool(self._healthy),
                last_error=self._last_error,
                last_success=self._last_success,
                duration_seconds=self._duration,
                refreshes=self._refreshes,
                failures=self._failures,
                devices=len(owners),
                stale=stale,
                truncated=self._truncated if owners else None,
            )

    def wait_for_refreshes(self, count: int, *, timeout: float) -> bool:
        """Block until at least ``count`` refreshes have finished in total.

        Lets the exporter give the first scrape pod labels (wait briefly after `start`) and
        lets tests wait for an event instead of sleeping.

        Args:
            count: Total number of finished refreshes to wait for.
            timeout: Most seconds to wait.

        Returns:
            Whether the count was reached.
        """
        with self._changed:
            return self._changed.wait_for(lambda: self._refreshes >= count, timeout=timeout)

    def refresh(self) -> WatcherStatus:
        """Run one refresh now, on the calling thread, and return the resulting status.

        The background thread calls this; ``migscope exporter --once`` can call it directly
        without starting a thread. Never raises for kubelet trouble: that goes to the status.
        """
        with self._refresh_lock:
            started = time.perf_counter()
            error: str | None = None
            owners: OwnerMap = _EMPTY
            note: str | None = None
            dra = DraCollector()
            try:
                answer = _list(self._socket_path, timeout=self._timeout, register=self._set_channel)
                try:  # one pod decoded at a time: see .wire
                    taken = collect_owners(
                        _also(iter_pods(answer), dra.add), resource_prefixes=self._prefixes
                    )
                except (WireError, DecodeError) as err:
                    raise _undecodable(self._socket_path, err) from err
                del answer
                owners, note = taken.owners, taken.note
            except PodResourcesError as err:
                error = str(err)
            except Exception as err:  # a bug or an odd answer must not kill the thread
                error = (
                    f"kubelet pod-resources socket {self._socket_path}: "
                    f"{type(err).__name__}: {_clipped(str(err))}"
                )
            duration = time.perf_counter() - started
            if (
                error is not None
                and self._stop.is_set()
                and threading.current_thread() is self._thread
            ):
                return self.status()  # cancelled by stop(): not a kubelet failure
            if error is None:
                with self._lock:
                    self._dra = dra.result()
            self._record(owners, error, duration, note)
        return self.status()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            if self._stop.wait(self._interval):
                break

    def _set_channel(self, channel: grpc.Channel | None) -> None:
        with self._lock:
            self._channel = channel
            stopping = self._stop.is_set() and threading.current_thread() is self._thread
        if channel is not None and stopping:
            channel.close()  # stop() ran before this channel existed: cancel it now

    def _current(self) -> tuple[OwnerMap, bool]:
        """Mapping to serve and whether it was dropped as stale; caller holds ``_lock``."""
        if self._owners_at is not None and self._clock() - self._owners_at > self._stale_after:
            return _EMPTY, True
        return self._owners, self._dropped

    def _record(
        self, owners: OwnerMap, error: str | None, duration: float, note: str | None = None
    ) -> None:
        messages: list[tuple[int, str]] = []
        with self._changed:
            self._refreshes += 1
            self._duration = duration
            was_healthy = self._healthy
            if error is None:
                if note is not None and self._truncated is None:
                    messages.append(
                        (
                            logging.WARNING,
                            f"pod attribution: the kubelet's answer is over the exporter's "
                            f"limits: {note}; attribution is reported incomplete "
                            f"(collector podresources) until it fits",
                        )
                    )
                elif note is None and self._truncated is not None:
                    messages.append(
                        (
                            logging.INFO,
                            "pod attribution: the kubelet's answer is within the exporter's "
                            "limits again",
                        )
                    )
                self._truncated = note
                self._owners, self._owners_at, self._dropped = owners, self._clock(), False
                self._last_success = time.time()
                self._last_error = None
                self._healthy = True
                if was_healthy is not True:
                    pods = len({(o.namespace, o.pod) for held in owners.values() for o in held})
                    again = " again" if was_healthy is False else ""
                    messages.append(
                        (
                            logging.INFO,
                            f"pod attribution: kubelet pod-resources socket "
                            f"{self._socket_path} answering{again}: {len(owners)} devices "
                            f"held by {pods} pods",
                        )
                    )
            else:
                self._failures += 1
                self._last_error = error
                self._healthy = False
                if was_healthy is not False:
                    if self._owners_at is None:
                        keep = "pod labels stay empty until it answers"
                    else:
                        keep = (
                            f"keeping the last pod mapping ({len(self._owners)} devices) "
                            f"for up to {self._stale_after:g} s"
                        )
                    messages.append((logging.WARNING, f"pod attribution failing: {error}; {keep}"))
                if self._current()[1] and not self._dropped:
                    self._owners, self._owners_at, self._dropped = _EMPTY, None, True
                    self._truncated = None
                    messages.append(
                        (
                            logging.WARNING,
                            f"pod attribution: no usable answer from the kubelet for "
                            f"{self._stale_after:g} s; dropped the pod mapping "
                            f"(owners unknown until it answers)",
                        )
                    )
            self._changed.notify_all()
        for level, message in messages:
            _log.log(level, message)
