"""One applier at a time per cluster: a ``coordination.k8s.io/v1`` Lease, renewed while it acts.

Two appliers relabelling the same fleet would race on limits (two nodes each thinking it
is the only one in flight) and on the shared ConfigMap. The Lease is the Kubernetes way to
elect one: whoever holds an unexpired Lease acts; others wait or leave. Correctness comes from
the API's optimistic concurrency: every take-over and renewal is a replace conditional on
the ``resourceVersion`` read, so of two contenders exactly one gets 200 and the other 409.

While held, a daemon thread renews it every ``duration/3``. If a renewal finds the Lease
taken (409 and another holder) or cannot renew before it would expire, :attr:`lost` is set;
the applier checks it between steps and stops where it stands (every step is recorded on
the node, so the next holder resumes there).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from datetime import datetime, timezone
from typing import Any

from migscope.applier._clock import SYSTEM_CLOCK, Clock
from migscope.core import UserError
from migscope.kube import ApiError, Conflict, Kube, now_rfc3339


class LeaseHeld(UserError):
    """Another applier holds the Lease (the message names it and when it expires)."""


def default_identity() -> str:
    """``<hostname>-<pid>``: unique enough per process, and says where to look."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    # Python 3.10's fromisoformat wants "+00:00" and at most six fractional digits.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


class Lease:
    """Hold the applier Lease.

    Args:
        kube: The cluster.
        namespace: Where the Lease lives.
        name: Its name.
        identity: This instance's ``holderIdentity``.
        duration_s: ``leaseDurationSeconds``: how long a silent holder keeps it.
        clock: Time for the expiry and for waiting to take it (tests pass simulated
            time); the renewal thread keeps real time, because other appliers judge the
            Lease's expiry by theirs.
    """

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str = "migscope-applier",
        identity: str | None = None,
        duration_s: int = 60,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.duration_s = duration_s
        self.clock = clock
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._version: str | None = None

    # -- taking it ---------------------------------------------------------------------------

    def _body(self, current: dict[str, Any] | None, *, transitions: int) -> dict[str, Any]:
        now = now_rfc3339(micro=True)
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration_s,
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        held = current is not None and (current.get("spec") or {}).get("holderIdentity")
        spec["acquireTime"] = (
            (current or {}).get("spec", {}).get("acquireTime", now)
            if held == self.identity
            else now
        )
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if current is not None:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }

    def holder(self) -> tuple[str | None, float | None]:
        """Who holds the Lease and until when (Unix seconds); ``(None, None)`` if nobody."""
        lease = self.kube.get_lease(self.namespace, self.name)
        if lease is None:
            return None, None
        spec = lease.get("spec") or {}
        renewed = _parse_time(spec.get("renewTime"))
        duration = spec.get("leaseDurationSeconds") or 0
        return spec.get("holderIdentity") or None, (
            renewed + float(duration) if renewed is not None else None
        )

    def try_acquire(self) -> bool:
        """Take the Lease if it is free, expired or already ours; False if someone holds it."""
        current = self.kube.get_lease(self.namespace, self.name)
        try:
            if current is None:
                made = self.kube.create_lease(self.namespace, self._body(None, transitions=0))
                self._version = made["metadata"]["resourceVersion"]
                return True
            spec = current.get("spec") or {}
            holder = spec.get("holderIdentity")
            renewed = _parse_time(spec.get("renewTime"))
            duration = float(spec.get("leaseDurationSeconds") or 0)
            expired = renewed is None or renewed + duration < self.clock.now()
            if holder and holder != self.identity and not expired:
                return False
            transitions = int(spec.get("leaseTransitions") or 0) + (
                0 if holder == self.identity else 1
            )
            made = self.kube.replace_lease(
                self.namespace, self._body(current, transitions=transitions)
            )
            self._version = made["metadata"]["resourceVersion"]
            return True
        except Conflict:
            return False  # another instance wrote between our read and our write

    def acquire(self, *, wait_s: float = 0.0, poll_s: float = 2.0) -> None:
        """Take the Lease, waiting up to ``wait_s`` for its holder to release or expire.

        Raises:
            LeaseHeld: still held by another instance after ``wait_s``.
        """
        deadline = self.clock.monotonic() + wait_s
        while not self.try_acquire():
            if self.clock.monotonic() >= deadline:
                holder, until = self.holder()
                left = f", expires in {until - self.clock.now():.0f} s" if until else ""
                raise LeaseHeld(
                    f"another applier holds lease {self.namespace}/{self.name} "
                    f"({holder or 'unknown'}{left}); only one may act at a time"
                )
            self.clock.sleep(poll_s)
        self.lost.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="migscope-lease", daemon=True)
        self._thread.start()

    # -- keeping it --------------------------------------------------------------------------

    def renew(self) -> bool:
        """Renew once; False (and :attr:`lost` set) when the Lease is no longer ours."""
        current = self.kube.get_lease(self.namespace, self.name)
        if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
            self.lost.set()
            return False
        try:
            spec = current.get("spec") or {}
            made = self.kube.replace_lease(
                self.namespace,
                self._body(current, transitions=int(spec.get("leaseTransitions") or 0)),
            )
        except Conflict:
            self.lost.set()
            return False
        self._version = made["metadata"]["resourceVersion"]
        return True

    def _renew_loop(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.duration_s / 3):
            try:
                if not self.renew():
                    return
                last_ok = time.monotonic()
            except ApiError:
                if time.monotonic() - last_ok > self.duration_s * 2 / 3:
                    self.lost.set()  # it may expire before we manage to renew
                    return

    def release(self) -> None:
        """Stop renewing and give the Lease up (holder cleared) if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self.lost.is_set():
            return
        try:
            current = self.kube.get_lease(self.namespace, self.name)
        except ApiError:
            return  # called from `finally`: never hide the run's own error; it expires
        if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        body = self._body(current, transitions=int(current["spec"].get("leaseTransitions") or 0))
        body["spec"]["holderIdentity"] = None
        body["spec"]["leaseDurationSeconds"] = 1
        with contextlib.suppress(ApiError):  # if this fails it expires on its own
            self.kube.replace_lease(self.namespace, body)

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
