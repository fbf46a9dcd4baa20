"""The applier under API faults: 409s, 500s, 503s, timeouts, dropped connections and watches.

Each fault is injected in the API test server (:attr:`KubeApiServer.faults`) or, where the
fault is "the server did it but the answer never came back", in a :class:`Kube` subclass
that lets the write through and then raises as a read timeout would. Whatever the fault, a
run either completes correctly or stops with an error saying which call failed, leaving the
node recorded at a step; once the fault is gone, the next run must end consistent: the
target applied (label, ``success``, uncordoned, recorded ``done``) or the previous label
restored and the node uncordoned; never a cordon or a non-terminal step left behind, and
MIG Manager never asked twice for the same change nor relabelled while busy. None of the
faults here is a reason to give a change up, so every case asserts the stronger end: applied,
MIG Manager asked exactly once, the change counted once.

Faults on requests MIG Manager (the sim) also makes, such as node reads and patches, are
added from a hook just before one of the applier's own node patches, when the sim is idle,
so that they hit the applier and not the sim.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.kubeapi import Delay, Drop, EndWatch, ExpireWatch, Respond, pdb, pod
from support.kubeapi.mig_manager import CONFIG_LABEL, GPU_ANNOTATION, STATE_LABEL, Knobs

from applier.cluster import (
    NAMESPACE,
    TARGET,
    Cluster,
    SimClock,
    SimTimeKube,
    plan,
    running_cluster,
)
from applier.test_resume import (
    READS,
    WRITES,
    assert_applied_once,
    expire_lease,
    lease_holder,
    make_applier,
    settle,
)
from migscope.applier._applier import LeaseLost, RunReport
from migscope.applier._lease import Lease, LeaseHeld
from migscope.applier._steps import read_progress
from migscope.kube import ApiError, Kube

NODE_PATH = r"^/api/v1/nodes/gpu-a$"
NODES_PATH = r"^/api/v1/nodes$"


class FlakyKube(Kube):
    """A :class:`Kube` that records calls and can lose answers or be cut off from the Lease.

    Attributes:
        calls: Every call's name, in order (all threads).
        writes: ``(name, args)`` of every write that landed, in order (all threads).
        before: ``{k: hook}``: ``hook()`` runs just before the ``k``-th node patch (1:
            intent, 2: cordon, 3: label, 4: done) is sent: the moment to add a server fault
            aimed at the applier's next requests while MIG Manager is idle.
        lose: ``{k: hook}``: the ``k``-th node patch is sent and lands, then ``hook()`` runs
            and an :class:`ApiError` is raised, as when the read times out after the
            server applied the write.
        partitioned: Lease calls fail (this applier cannot reach the Lease any more).
    """

    def __init__(self, api: Any, *, timeout_s: float = 5.0) -> None:
        super().__init__(api, timeout_s=timeout_s)
        self.calls: list[str] = []
        self.writes: list[tuple[str, Any]] = []
        self.before: dict[int, Callable[[], None]] = {}
        self.lose: dict[int, Callable[[], None]] = {}
        self.partitioned = threading.Event()
        self._patches = 0
        self._lock = threading.Lock()

    def _call(self, name: str, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        with self._lock:
            self.calls.append(name)
        if "lease" in name and self.partitioned.is_set():
            raise ApiError(f"{name}: connection refused (partitioned)")
        if name != "patch_node":
            result = fn(self, *args, **kwargs)
            if name in WRITES:
                with self._lock:
                    self.writes.append((name, args))
            return result
        with self._lock:
            self._patches += 1
            k = self._patches
        hook = self.before.pop(k, None)
        if hook is not None:
            hook()
        result = fn(self, *args, **kwargs)
        with self._lock:
            self.writes.append((name, args))
        hook = self.lose.pop(k, None)
        if hook is not None:
            hook()
            raise ApiError(f"patching node {args[0]}: read timed out (the write landed)")
        return result

    def node_writes(self) -> list[dict[str, Any]]:
        return [args[1] for name, args in self.writes if name == "patch_node"]

    def label_writes(self) -> list[dict[str, Any]]:
        return [
            p for p in self.node_writes() if CONFIG_LABEL in (p["metadata"].get("labels") or {})
        ]


def _guard(name: str) -> Callable[..., Any]:
    base = getattr(Kube, name)

    def method(self: FlakyKube, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, base, args, kwargs)

    method.__name__ = name
    return method


for _name in READS + WRITES:
    setattr(FlakyKube, _name, _guard(_name))


def _baseline(c: Cluster, node: str = "gpu-a") -> tuple[int, int]:
    return c.mig.reconciles(node), len(c.mig.states(node))


def _second_run(c: Cluster, **overrides: Any) -> RunReport:
    """The fault is gone: a fresh applier (after the first one's Lease, if held, expired)."""
    if lease_holder(c) is not None:
        expire_lease(c)
    return make_applier(c, FlakyKube(c.api.client(retries=False)), "second", **overrides).run(
        plan()
    )


def _step(node: dict[str, Any]) -> str | None:
    progress = read_progress(node)
    return None if progress is None else progress.step.value


def _pod_on_gpu1(c: Cluster) -> None:
    c.api.create(
        pod(
            "train",
            "ml",
            node_name="gpu-a",
            requests={"nvidia.com/mig-2g.35gb": 1},
            annotations={GPU_ANNOTATION: "1"},
        )
    )


# -- faults the applier rides out --------------------------------------------------------------

# name: (action, method, path, times, when: before the applier's when-th node patch, drain)
TRANSIENT: dict[str, tuple[Any, str, str, int | None, int, bool]] = {
    "500-on-cordon-patch": (Respond(500), "PATCH", NODE_PATH, 2, 2, False),
    "500-on-label-patch": (Respond(500), "PATCH", NODE_PATH, 3, 3, False),
    "500-on-done-patch": (Respond(500), "PATCH", NODE_PATH, 3, 4, False),
    "409-on-label-patch": (Respond(409), "PATCH", NODE_PATH, 5, 3, False),
    "503-on-node-reads": (Respond(503, retry_after=0), "GET", NODE_PATH, 3, 2, False),
    "500-on-configmap-write": (Respond(500), "PUT", r"/configmaps/", 3, 0, False),
    "503-on-configmap-read": (Respond(503), "GET", r"/configmaps/", 3, 1, False),
    "500-on-pod-list": (Respond(500), "GET", r"^/api/v1/pods$", 3, 2, True),
    "500-on-eviction": (Respond(500), "POST", r"/eviction$", 2, 0, True),
    "dropped-label-patch": (Drop(), "PATCH", NODE_PATH, 1, 3, False),
    "dropped-node-reads": (Drop(), "GET", NODE_PATH, 3, 2, False),
    "slow-node-read": (Delay(1.0), "GET", NODE_PATH, 1, 2, False),
    "slow-pod-list": (Delay(1.0), "GET", r"^/api/v1/pods$", 1, 2, True),
    "slow-configmap-write": (Delay(1.0), "PUT", r"/configmaps/", 1, 0, False),
    "events-always-fail": (Respond(500), "POST", r"/events$", None, 0, False),
}


@pytest.mark.parametrize("case", sorted(TRANSIENT))
def test_transient_faults_are_ridden_out(case: str) -> None:
    action, method, path, times, when, drain = TRANSIENT[case]
    with running_cluster() as c:
        if drain:
            _pod_on_gpu1(c)
        base = _baseline(c)
        rules: list[Any] = []

        def add() -> None:
            rules.append(c.api.faults.add(action, method=method, path=path, times=times))

        kube = FlakyKube(c.api.client(retries=False), timeout_s=0.5)
        if when:
            kube.before[when] = add
        else:
            add()
        applier = make_applier(c, kube, "flaky", drain=drain)
        (out,) = applier.run(plan()).outcomes
        (rule,) = rules
        assert rule.hits == (times or rule.hits) > 0, "the fault did not fire as planned"
        assert out.result == "applied", out.reason
        settle(c)
        assert_applied_once(c, "gpu-a", *base, case)
        assert c.mig.overlaps == []
        assert len(kube.label_writes()) == 1  # relabelled once, never again
        assert lease_holder(c) is None
        if case == "events-always-fail":  # best effort: logged, never a reason to stop
            assert c.api.list("v1", "Event", namespace="default") == []
            assert any(line["action"] == "event-failed" for line in applier.audit.lines)


@pytest.mark.parametrize("index", [1, 2, 3, 4], ids=["intent", "cordon", "label", "done"])
def test_another_writer_between_read_and_patch_is_a_409_that_is_retried(index: int) -> None:
    """A kubelet or GFD writes the node just before the applier's conditional patch."""
    with running_cluster() as c:
        base = _baseline(c)
        touches = iter(range(100))

        def someone_writes() -> None:
            c.api.patch(
                "v1",
                "Node",
                "gpu-a",
                {"metadata": {"annotations": {"x/touch": str(next(touches))}}},
            )

        kube = FlakyKube(c.api.client(retries=False))
        kube.before[index] = someone_writes
        (out,) = make_applier(c, kube, "raced").run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert next(touches) == 1  # it did write in between
        settle(c)
        assert_applied_once(c, "gpu-a", *base, f"409 at {index}")
        assert len(kube.label_writes()) == 1


def test_a_lease_renewal_that_fails_once_keeps_the_lease() -> None:
    with running_cluster() as c:
        base = _baseline(c)
        c.mig.knobs("gpu-a").delay_s = 0.4  # the run lasts a few renewals (every 1/3 s)
        rule = c.api.faults.add(Respond(500), method="PUT", path=r"/leases/", times=1)
        kube = FlakyKube(c.api.client(retries=False))
        (out,) = make_applier(c, kube, "renewer", lease_duration_s=1).run(plan()).outcomes
        assert rule.hits == 1
        assert out.result == "applied", out.reason
        assert_applied_once(c, "gpu-a", *base, "renewal")
        assert lease_holder(c) is None  # and it was released at the end


# -- answers lost after the write landed -------------------------------------------------------

LOST = {1: "intent", 2: "cordon", 3: "label", 4: "done"}


@pytest.mark.parametrize("index", sorted(LOST), ids=[LOST[i] for i in sorted(LOST)])
def test_a_write_whose_answer_is_lost_is_not_redone_blindly(index: int) -> None:
    """The node patch lands, the answer does not: the retry must see what landed."""
    with running_cluster() as c:
        base = _baseline(c)
        kube = FlakyKube(c.api.client(retries=False))

        def mig_manager_answers() -> None:
            if index == 3:  # the relabel landed and MIG Manager is done before the retry
                c.mig.wait_for_state("gpu-a", "success")

        kube.lose[index] = mig_manager_answers
        applier = make_applier(c, kube, "lossy")
        report: RunReport | None = None
        if index == 1:  # the intent is written before any retry loop: the run stops
            with pytest.raises(ApiError, match="patching node gpu-a"):
                applier.run(plan())
        else:
            report = applier.run(plan())
        if report is not None:
            (out,) = report.outcomes
            assert out.result == "applied", out.reason
        else:
            (out,) = _second_run(c).outcomes
            assert out.result == "applied", out.reason
        settle(c)
        assert_applied_once(c, "gpu-a", *base, LOST[index])
        assert c.mig.overlaps == []


def test_a_late_write_after_a_client_timeout_lands_once() -> None:
    """The label patch outlives the client's timeout and lands before the retry reads."""
    with running_cluster() as c:
        base = _baseline(c)
        rule = c.api.faults.add(Delay(0.6), method="PATCH", path=NODE_PATH, skip=2, times=1)
        kube = FlakyKube(c.api.client(retries=False), timeout_s=0.3)
        # The retry waits poll_s * 2 = 1 s: the delayed relabel has landed by then.
        report = make_applier(c, kube, "slow", poll_s=0.5).run(plan())
        (out,) = report.outcomes
        assert rule.hits == 1
        assert out.result == "applied", out.reason
        settle(c)
        assert_applied_once(c, "gpu-a", *base, "late label")
        assert c.mig.overlaps == []


# -- watches ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action",
    [EndWatch(0), ExpireWatch(0), Drop(), Respond(500), Delay(3.0)],
    ids=["ends-at-once", "410-at-once", "dropped", "500", "hangs"],
)
def test_a_watch_that_keeps_failing_falls_back_to_reading_the_node(action: Any) -> None:
    """Every watch of the node fails: the applier polls at ``poll_s``, it does not spin.

    The applier's time is simulated (:class:`SimClock`): its 2 s timeout counts its polls,
    each after MIG Manager has reacted, not the real seconds a loaded machine takes to run
    MIG Manager's simulation (or the hanging watches, which fail in real time).
    """
    with running_cluster() as c:
        base = _baseline(c)
        c.mig.knobs("gpu-a").delay_s = 0.3  # MIG Manager takes ~0.6 s to answer
        # Only watches opened from now on: MIG Manager's own watch is already open.
        rule = c.api.faults.add(action, path=NODES_PATH, watch=True)
        kube = FlakyKube(c.api.client(retries=False), timeout_s=0.5)
        clock = SimClock(lambda _node: settle(c))
        started = time.monotonic()
        # node_timeout_s=2: a watch is held 2 s at most, and given up 0.5 s after that, so
        # the 3 s Delay is a watch the client times out on.
        applier = make_applier(c, kube, "watcher", poll_s=0.05, node_timeout_s=2.0, clock=clock)
        (out,) = applier.run(plan()).outcomes
        took = time.monotonic() - started
        assert rule.hits >= 1
        assert out.result == "applied", out.reason
        assert_applied_once(c, "gpu-a", *base, "watch")
        watches = kube.calls.count("watch_node")
        # About one attempt per poll (plus the hanging watch's own timeout), not thousands.
        assert watches <= took / 0.05 + 5, (watches, took)


def test_a_watch_that_ends_or_expires_now_and_then_is_resumed() -> None:
    with running_cluster() as c:
        base = _baseline(c)
        c.mig.knobs("gpu-a").delay_s = 0.3  # pending after 0.3 s, success after 0.6 s
        # The first watch gets a 410 at once, the second ends after one event (pending).
        expires = c.api.faults.add(ExpireWatch(0), path=NODES_PATH, watch=True, times=1)
        ends = c.api.faults.add(EndWatch(1), path=NODES_PATH, watch=True, times=1)
        (out,) = make_applier(c, FlakyKube(c.api.client(retries=False)), "w").run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert expires.hits == 1
        assert ends.hits == 1
        assert_applied_once(c, "gpu-a", *base, "watch")


# -- time: the applier's timeouts count simulated time -----------------------------------------


def _sim_time(c: Cluster) -> tuple[SimClock, SimTimeKube]:
    clock = SimClock(lambda _node: settle(c))
    return clock, SimTimeKube(c.api, clock)


def test_a_mig_manager_slower_than_the_timeout_in_real_time_is_no_timeout() -> None:
    """What a loaded machine does to MIG Manager's simulation costs no simulated time."""
    with running_cluster() as c:
        base = _baseline(c)
        c.mig.knobs("gpu-a").delay_s = 0.5  # ~1 s of real time to answer: twice the timeout
        clock, kube = _sim_time(c)
        applier = make_applier(c, kube, "patient", node_timeout_s=0.5, clock=clock)
        (out,) = applier.run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert_applied_once(c, "gpu-a", *base, "slow simulation")
        assert clock.elapsed == 0.0  # the answer came on the first watch: no wait at all


def test_a_stuck_change_times_out_exactly_when_simulated_time_passes_the_timeout() -> None:
    with running_cluster(knobs={"gpu-a": Knobs(stuck_pending=True)}) as c:
        clock, kube = _sim_time(c)
        applier = make_applier(c, kube, "stuck", node_timeout_s=3600.0, clock=clock)
        (out,) = applier.run(plan()).outcomes
        assert out.result == "failed"
        assert "timed out after 3600 s waiting for MIG Manager, state pending" in out.reason
        assert clock.elapsed == pytest.approx(3600.0)  # 30 s watches, none cut short
        assert clock.sleeps == []  # every watch was held to its end: no polling
        settle(c)
        assert c.labels()[CONFIG_LABEL] == "all-balanced"
        assert not c.node()["spec"].get("unschedulable")


def test_a_drain_a_pdb_forbids_times_out_after_its_simulated_polls() -> None:
    with running_cluster() as c:
        c.api.create(
            pod(
                "serve",
                "ml",
                node_name="gpu-a",
                labels={"app": "serve"},
                requests={"nvidia.com/mig-1g.18gb": 1},
            )
        )
        c.api.create(pdb("serve", "ml", match_labels={"app": "serve"}, min_available=1))
        clock, kube = _sim_time(c)
        applier = make_applier(
            c, kube, "drainer", drain=True, drain_timeout_s=600.0, poll_s=2.0, clock=clock
        )
        (out,) = applier.run(plan()).outcomes
        assert out.result == "failed"
        assert "drain timed out after 600 s: ml/serve still there" in out.reason
        assert clock.sleeps == [2.0] * 300
        assert len(c.api.list("v1", "Pod", namespace="ml")) == 1


def test_waiting_for_the_lease_counts_simulated_time() -> None:
    with running_cluster() as c:
        holder = Lease(c.kube, namespace=NAMESPACE, identity="holder", duration_s=3600)
        holder.acquire()
        try:
            clock, _ = _sim_time(c)
            waiter = Lease(c.kube, namespace=NAMESPACE, identity="waiter", clock=clock)
            with pytest.raises(LeaseHeld, match="holder"):
                waiter.acquire(wait_s=600.0, poll_s=2.0)
            assert clock.sleeps == [2.0] * 300
        finally:
            holder.release()


# -- faults that stop the run ------------------------------------------------------------------

# name: (action, method, path, when: before the applier's when-th node patch, drain, message)
PERSISTENT: dict[str, tuple[Any, str, str, int, bool, str]] = {
    "intent-patch": (Respond(500), "PATCH", NODE_PATH, 1, False, "patching node gpu-a"),
    "cordon-patch": (Respond(500), "PATCH", NODE_PATH, 2, False, "patching node gpu-a"),
    "label-patch": (Respond(500), "PATCH", NODE_PATH, 3, False, "patching node gpu-a"),
    "done-patch": (Respond(503), "PATCH", NODE_PATH, 4, False, "patching node gpu-a"),
    "conflicts-forever": (Respond(409), "PATCH", NODE_PATH, 3, False, "HTTP 409"),
    "node-reads": (Drop(), "GET", NODE_PATH, 2, False, "reading node gpu-a"),
    "configmap-write": (Respond(500), "PUT", r"/configmaps/", 0, False, "writing configmap"),
    "pod-list": (Respond(500), "GET", r"^/api/v1/pods$", 0, False, "listing pods on gpu-a"),
    "pod-list-mid-drain": (Respond(500), "GET", r"^/api/v1/pods$", 2, True, "listing pods"),
    "eviction": (Respond(500), "POST", r"/eviction$", 0, True, "evicting ml/train"),
    "node-list": (Respond(500), "GET", NODES_PATH, 0, False, "listing nodes"),
    "lease-create": (Respond(500), "POST", r"/leases$", 0, False, "creating lease"),
    "clusterpolicies": (Respond(500), "GET", r"clusterpolicies", 0, False, "clusterpolicies"),
}


@pytest.mark.parametrize("case", sorted(PERSISTENT))
def test_a_persistent_fault_stops_the_run_and_the_next_run_ends_consistent(case: str) -> None:
    action, method, path, when, drain, names = PERSISTENT[case]
    with running_cluster() as c:
        if drain:
            _pod_on_gpu1(c)
        base = _baseline(c)
        rules: list[Any] = []

        def add() -> None:
            rules.append(c.api.faults.add(action, method=method, path=path, watch=False))

        kube = FlakyKube(c.api.client(retries=False), timeout_s=0.5)
        if when:
            kube.before[when] = add
        else:
            add()
        with pytest.raises(ApiError, match=re.escape(names)):
            make_applier(c, kube, "first", drain=drain).run(plan())
        (rule,) = rules
        assert rule.hits >= 1
        c.api.faults.remove(rule)
        _assert_resumable(c)
        (out,) = _second_run(c, drain=drain).outcomes
        assert out.result == "applied", out.reason
        settle(c)
        assert_applied_once(c, "gpu-a", *base, case)
        assert c.mig.overlaps == []


def test_the_api_going_away_once_mig_manager_answered_stops_the_run_resumably() -> None:
    with running_cluster() as c:
        base = _baseline(c)
        rules: list[Any] = []

        def on_success(change: Any) -> None:
            labels = change.object["metadata"].get("labels") or {}
            answered = (labels.get(CONFIG_LABEL), labels.get(STATE_LABEL)) == (TARGET, "success")
            if not rules and answered:
                rules.append(c.api.faults.add(Drop(), method="GET", path=NODE_PATH))
                rules.append(c.api.faults.add(Drop(), path=NODES_PATH, watch=True))

        c.api.on_change(on_success, api_version="v1", kind="Node")
        kube = FlakyKube(c.api.client(retries=False), timeout_s=0.5)
        with pytest.raises(ApiError, match="reading node gpu-a"):
            make_applier(c, kube, "first").run(plan())
        for rule in rules:
            c.api.faults.remove(rule)
        progress = read_progress(c.node())
        assert progress is not None
        assert progress.step.value == "wait"
        _assert_resumable(c)
        fresh = FlakyKube(c.api.client(retries=False))
        (out,) = make_applier(c, fresh, "second").run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert fresh.label_writes() == []
        assert_applied_once(c, "gpu-a", *base, "api gone")


def _assert_resumable(c: Cluster) -> None:
    """Stopped where its record says: never cordoned without a record saying so."""
    node = c.node()
    progress = read_progress(node)
    if node["spec"].get("unschedulable"):
        assert progress is not None
        assert progress.cordoned
    if c.labels()[CONFIG_LABEL] == TARGET:
        assert progress is not None
        assert progress.step.value in ("wait", "verify", "done")
    assert progress is None or not progress.step.terminal


# -- the Lease ---------------------------------------------------------------------------------


def test_an_applier_cut_off_from_its_lease_stops_and_the_next_resumes() -> None:
    with running_cluster() as c:
        base = _baseline(c)
        c.mig.knobs("gpu-a").delay_s = 1.0  # success ~2 s after the relabel
        rule = c.api.faults.add(Respond(500), method="PUT", path=r"/leases/")
        kube = FlakyKube(c.api.client(retries=False))
        with pytest.raises(LeaseLost, match="resumes on the next run"):
            make_applier(c, kube, "cut-off", lease_duration_s=1).run(plan())
        c.api.faults.remove(rule)
        progress = read_progress(c.node())
        assert progress is not None
        assert progress.step.value == "wait"
        assert c.node()["spec"]["unschedulable"] is True
        fresh = FlakyKube(c.api.client(retries=False))
        (out,) = make_applier(c, fresh, "next").run(plan()).outcomes
        assert out.result == "applied", out.reason
        assert fresh.label_writes() == []
        assert_applied_once(c, "gpu-a", *base, "lease lost")


def test_two_appliers_at_once_only_one_acts() -> None:
    with running_cluster() as c:
        base = _baseline(c)
        barrier = threading.Barrier(2)
        results: dict[str, Any] = {}

        def go(identity: str) -> None:
            kube = FlakyKube(c.api.client(retries=False))
            applier = make_applier(c, kube, identity)
            barrier.wait()
            try:
                results[identity] = applier.run(plan())
            except LeaseHeld as exc:
                results[identity] = exc

        threads = [threading.Thread(target=go, args=(n,)) for n in ("one", "two")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        held = [r for r in results.values() if isinstance(r, LeaseHeld)]
        done = [r for r in results.values() if isinstance(r, RunReport)]
        assert len(held) == 1, results
        assert len(done) == 1, results
        assert [o.result for o in done[0].outcomes] == ["applied"]
        assert_applied_once(c, "gpu-a", *base, "two at once")
        assert c.mig.overlaps == []


def test_two_appliers_one_waiting_for_the_other() -> None:
    with running_cluster() as c:
        base = _baseline(c)
        c.mig.knobs("gpu-a").delay_s = 0.3
        results: dict[str, Any] = {}
        first = make_applier(c, FlakyKube(c.api.client(retries=False)), "first")
        t = threading.Thread(target=lambda: results.update(first=first.run(plan())))
        t.start()
        c.api.wait_for(
            "coordination.k8s.io/v1",
            "Lease",
            "migscope-applier",
            lambda lease: lease["spec"].get("holderIdentity") == "first",
            namespace=NAMESPACE,
        )
        second = make_applier(c, FlakyKube(c.api.client(retries=False)), "second", lease_wait_s=20)
        results["second"] = second.run(plan())
        t.join(timeout=30)
        assert [o.result for o in results["first"].outcomes] == ["applied"]
        # It waited for the first to finish, then found nothing to do.
        assert [o.result for o in results["second"].outcomes] == ["unchanged"]
        assert_applied_once(c, "gpu-a", *base, "one after the other")


def test_a_partitioned_applier_stops_and_the_taker_finishes_without_a_second_relabel() -> None:
    with running_cluster() as c:
        base = _baseline(c)
        c.mig.knobs("gpu-a").delay_s = 1.0  # pending ~1 s, success ~2 s after the relabel
        a_kube = FlakyKube(c.api.client(retries=False))
        a = make_applier(c, a_kube, "a", lease_duration_s=1)
        result: dict[str, Any] = {}

        def run_a() -> None:
            try:
                result["a"] = a.run(plan())
            except LeaseLost as exc:
                result["a"] = exc

        t = threading.Thread(target=run_a)
        t.start()
        deadline = time.monotonic() + 10
        while not a_kube.label_writes():  # A relabelled (and knows it)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert _step(c.node()) == "wait"
        a_kube.partitioned.set()
        cut_at = len(a_kube.writes)
        b_kube = FlakyKube(c.api.client(retries=False))
        report = make_applier(c, b_kube, "b", lease_wait_s=6).run(plan())
        t.join(timeout=30)
        assert isinstance(result["a"], LeaseLost), result
        (out,) = report.outcomes
        assert out.result == "applied", out.reason
        assert any("resumed a change left at step wait" in x for x in out.actions)
        assert b_kube.label_writes() == []
        # A wrote nothing to the node once cut off; B did the rest.
        assert [w for w in a_kube.writes[cut_at:] if w[0] == "patch_node"] == []
        assert_applied_once(c, "gpu-a", *base, "partition")
        assert c.mig.overlaps == []
        assert c.labels()[STATE_LABEL] == "success"
        assert c.labels()[CONFIG_LABEL] == TARGET
