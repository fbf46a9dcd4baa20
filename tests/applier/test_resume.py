"""The applier killed after every single write, then a fresh applier: the end is consistent.

A process can die between any two requests (a CronJob deadline, the applier's own pod
evicted, OOM). :class:`DyingKube` plays that: it lets the applier's first ``N - 1`` writes
through, and at the ``N``-th it dies, either just before sending it or just after it landed
(the response lost with the process). From then on every call fails, so nothing the dead
applier's ``finally`` blocks try (releasing the Lease) reaches the cluster. The sweep runs
N = 1, 2, ... until a run completes without reaching N; after each kill the dead applier's
Lease is made to expire and a fresh applier (another identity, the same plan) must take it
over and leave the node consistent: the target applied (label, ``success``, uncordoned,
recorded ``done``), never a cordon or a non-terminal step left behind, the change counted
once, and MIG Manager asked once, never while it was still busy with the node.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from support.kubeapi import pod
from support.kubeapi.mig_manager import CONFIG_LABEL, GPU_ANNOTATION, STATE_LABEL

from applier.cluster import (
    BALANCED,
    EXISTING,
    NAMESPACE,
    TARGET,
    TWO_3G,
    Cluster,
    _Sink,
    plan,
    provenance,
    running_cluster,
)
from migscope.applier._applier import Applier, RunReport
from migscope.applier._audit import Audit
from migscope.applier._clock import SYSTEM_CLOCK, Clock
from migscope.applier._lease import LeaseHeld
from migscope.applier._plan import ApplyPlan, GpuChange, NodeChange
from migscope.applier._settings import ApplySettings
from migscope.applier._steps import CHANGES_ANNOTATION, read_progress
from migscope.core._migparted import parse_config
from migscope.kube import ApiError, Kube

LEASE = "migscope-applier"
READS = (
    "get_node",
    "list_nodes",
    "watch_node",
    "pods_on_node",
    "get_pod",
    "get_configmap",
    "cluster_policies",
    "get_lease",
)
WRITES = (
    "patch_node",
    "evict",
    "create_configmap",
    "replace_configmap",
    "create_event",
    "create_lease",
    "replace_lease",
)


class Died(BaseException):
    """The applier's process is gone (a BaseException: no ``except Exception`` stops it)."""


class DyingKube(Kube):
    """A :class:`Kube` whose process dies at its ``die_at``-th write (see the module doc).

    Only the calling thread's writes count (the Lease's renewal thread is timing, not a
    step). After the death the calling thread gets :class:`Died` and any other thread an
    :class:`ApiError`, as a dead process's threads would get nothing at all.
    """

    def __init__(
        self,
        api: Any,
        *,
        die_at: int | None = None,
        after: bool = True,
        timeout_s: float = 5.0,
    ) -> None:
        super().__init__(api, timeout_s=timeout_s)
        self.die_at = die_at
        self.after = after
        self.owner = threading.get_ident()
        self.writes: list[tuple[str, Any]] = []
        self.died_at: str | None = None

    def _call(self, name: str, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        mine = threading.get_ident() == self.owner
        if self.died_at is not None:
            if mine:
                raise Died(self.died_at)
            raise ApiError(f"{name}: the process is gone")
        if name not in WRITES or not mine:
            return fn(self, *args, **kwargs)
        self.writes.append((name, args))
        what = f"write {len(self.writes)} ({name} {args[0]!r})"
        if len(self.writes) == self.die_at:
            if not self.after:
                self.died_at = f"before {what}"
                raise Died(self.died_at)
            fn(self, *args, **kwargs)
            self.died_at = f"after {what}"
            raise Died(self.died_at)
        return fn(self, *args, **kwargs)

    def label_writes(self) -> list[Any]:
        """The node patches that set ``nvidia.com/mig.config``."""
        return [
            args
            for name, args in self.writes
            if name == "patch_node"
            and CONFIG_LABEL in (args[1].get("metadata") or {}).get("labels", {})
        ]


def _guard(name: str) -> Callable[..., Any]:
    base = getattr(Kube, name)

    def method(self: DyingKube, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, base, args, kwargs)

    method.__name__ = name
    return method


for _name in READS + WRITES:
    setattr(DyingKube, _name, _guard(_name))


def make_applier(
    c: Cluster,
    kube: Kube,
    identity: str,
    *,
    lease_duration_s: int = 30,
    clock: Clock = SYSTEM_CLOCK,
    **overrides: Any,
) -> Applier:
    settings = ApplySettings(
        **{
            "apply": True,
            "namespace": NAMESPACE,
            "node_timeout_s": 5.0,
            "drain_timeout_s": 2.0,
            "verify_timeout_s": 2.0,
            "poll_s": 0.02,
            "max_nodes": 10,
            "max_changes_per_day": 100,
            "identity": identity,
            "lease_duration_s": lease_duration_s,
            **overrides,
        }
    )
    return Applier(kube, settings, audit=Audit(kube, actor=identity, out=_Sink()), clock=clock)


def expire_lease(c: Cluster) -> None:
    """Make the Lease's last renewal an hour old: what waiting out its duration achieves."""
    old = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    c.api.patch(
        "coordination.k8s.io/v1",
        "Lease",
        LEASE,
        {"spec": {"renewTime": old}},
        namespace=NAMESPACE,
    )


def lease_holder(c: Cluster) -> str | None:
    try:
        lease = c.api.get("coordination.k8s.io/v1", "Lease", LEASE, NAMESPACE)
    except Exception:
        return None
    return (lease.get("spec") or {}).get("holderIdentity")


def assert_consistent(c: Cluster, name: str = "gpu-a", *, previous: str = "all-balanced") -> str:
    """Label at the target with success, or restored; never cordoned or mid-step."""
    node = c.node(name)
    labels = node["metadata"].get("labels") or {}
    progress = read_progress(node)
    assert not node["spec"].get("unschedulable"), f"{name} left cordoned: {progress}"
    assert progress is None or progress.step.terminal, f"{name} left mid-change: {progress}"
    if labels.get(CONFIG_LABEL) == TARGET:
        assert labels.get(STATE_LABEL) == "success", labels
        assert progress is not None
        assert progress.step.value == "done", progress
        return "applied"
    assert labels.get(CONFIG_LABEL) == previous, labels
    return "restored"


def settle(c: Cluster, name: str = "gpu-a") -> None:
    """Wait until MIG Manager has handled every version of the node written so far."""
    for _ in range(50):
        rv = c.node(name)["metadata"]["resourceVersion"]
        c.mig.wait_until_seen(name, rv)
        if c.node(name)["metadata"]["resourceVersion"] == rv:
            return
    raise AssertionError(f"{name} kept changing")


def assert_applied_once(c: Cluster, name: str, base: int, states: int, where: str) -> None:
    """The target is on the node's GPUs and advertised; MIG Manager was asked once."""
    assert assert_consistent(c, name) == "applied", where
    node = c.node(name)
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.71gb"] == "3", where
    assert c.mig.gpus(name)[1].instances == TWO_3G, where
    assert c.mig.reconciles(name) == base + 1, f"{where}: {c.mig.states(name)}"
    assert c.mig.states(name)[states:] == ["pending", "success"], where
    # One change recorded for the daily limit.
    assert len(json.loads(node["metadata"]["annotations"][CHANGES_ANNOTATION])) == 1, where


def _sweep(*, after: bool, drain: bool, nodes: tuple[str, ...] = ("gpu-a",)) -> list[str]:
    """Kill at write 1, 2, ... and resume each time; returns where each kill happened."""
    kills: list[str] = []
    for n in range(1, 60):
        with running_cluster() as c:
            if drain:
                c.api.create(
                    pod(
                        "train",
                        "ml",
                        node_name="gpu-a",
                        requests={"nvidia.com/mig-2g.35gb": 1},
                        annotations={GPU_ANNOTATION: "1"},
                    )
                )
            base = {m: (c.mig.reconciles(m), len(c.mig.states(m))) for m in nodes}
            dying = DyingKube(c.api.client(retries=False), die_at=n, after=after)
            try:
                report = make_applier(c, dying, f"dead-{n}", drain=drain).run(plan(*nodes))
            except Died:
                report = None
            if report is not None:  # the run had fewer than n writes: the sweep is complete
                assert [o.result for o in report.outcomes] == ["applied"] * len(nodes)
                assert n > 1
                for m in nodes:
                    assert_consistent(c, m)
                return kills
            assert dying.died_at is not None
            kills.append(dying.died_at)
            relabelled = {m for m in nodes if c.labels(m)[CONFIG_LABEL] == TARGET}
            where = f"killed {dying.died_at} (relabelled: {sorted(relabelled)})"
            if lease_holder(c) == f"dead-{n}":
                # Held by a dead applier: nobody else may act until it expires.
                with pytest.raises(LeaseHeld, match=f"dead-{n}"):
                    make_applier(c, Kube(c.api.client(retries=False)), "too-early").run(plan())
                expire_lease(c)
            fresh = DyingKube(c.api.client(retries=False))
            report = make_applier(c, fresh, f"fresh-{n}", drain=drain).run(plan(*nodes))
            results = {o.node: (o.result, o.reason) for o in report.outcomes}
            for m in nodes:
                settle(c, m)
                # The second run finished the change, whatever step the first one died at.
                assert results[m][0] in ("applied", "unchanged"), f"{where}: {m} {results[m]}"
                assert_applied_once(c, m, *base[m], where)
            # A change the dead run had relabelled for was resumed, not relabelled again.
            relabels = {args[0] for args in fresh.label_writes()}
            assert not relabels & relabelled, where
            # MIG Manager never saw a relabel while busy, nor a GPU in use.
            assert c.mig.overlaps == [], where
            assert c.mig.refused_in_use == [], where
            assert [r.holders for r in c.mig.recreated] == [()] * len(nodes), where
            assert lease_holder(c) is None, where  # released by the run that finished
            for other in {"gpu-a", "gpu-b"} - set(nodes):
                assert c.labels(other)[CONFIG_LABEL] == "all-balanced"
            if drain:
                assert c.api.list("v1", "Pod", namespace="ml") == [], where
    raise AssertionError("the run never completed")


@pytest.mark.parametrize("after", [True, False], ids=["after-write", "before-write"])
def test_killed_at_every_write_then_resumed(after: bool) -> None:
    kills = _sweep(after=after, drain=False)
    # Every write of a run was a kill point: the Lease, intent, ConfigMap, cordon, label...
    assert len(kills) >= 8, kills
    assert any("replace_configmap" in k for k in kills)
    assert sum("patch_node" in k for k in kills) == 4, kills  # intent, cordon, label, done


@pytest.mark.parametrize("after", [True, False], ids=["after-write", "before-write"])
def test_killed_at_every_write_with_drain_then_resumed(after: bool) -> None:
    kills = _sweep(after=after, drain=True)
    assert any("evict" in k for k in kills), kills


def test_killed_at_every_write_of_a_two_node_plan_then_resumed() -> None:
    kills = _sweep(after=True, drain=False, nodes=("gpu-a", "gpu-b"))
    assert sum("patch_node 'gpu-b'" in k for k in kills) == 4, kills


@pytest.mark.parametrize("every", [3, 4, 6])
def test_killed_again_and_again_still_converges(every: int) -> None:
    """Each applier dies at its ``every``-th write; the next one goes on from there."""
    with running_cluster() as c:
        base = {m: (c.mig.reconciles(m), len(c.mig.states(m))) for m in ("gpu-a", "gpu-b")}
        runs = 0
        while True:
            runs += 1
            assert runs <= 20, "no progress"
            dying = DyingKube(c.api.client(retries=False), die_at=every, after=True)
            try:
                report = make_applier(c, dying, f"run-{runs}").run(plan("gpu-a", "gpu-b"))
            except Died:
                for m in ("gpu-a", "gpu-b"):
                    progress = read_progress(c.node(m))
                    if progress is not None and progress.step.value == "wait":
                        settle(c, m)  # MIG Manager works on while no applier is alive
                if lease_holder(c) == f"run-{runs}":
                    expire_lease(c)
                continue
            break
        assert report.ok, report.as_dict()
        assert runs >= 3  # it did die, more than once
        for m in ("gpu-a", "gpu-b"):
            assert_applied_once(c, m, *base[m], f"every {every}")
        assert c.mig.overlaps == []


def test_a_dead_appliers_lease_is_taken_over_once_it_expires() -> None:
    with running_cluster() as c:
        base = c.mig.reconciles("gpu-a")
        # Killed just after the relabel: MIG Manager goes on, the applier is gone.
        dying = DyingKube(c.api.client(retries=False), die_at=5, after=True)
        with pytest.raises(Died, match="patch_node"):
            make_applier(c, dying, "dead", lease_duration_s=1).run(plan())
        assert c.labels()[CONFIG_LABEL] == TARGET
        assert c.node()["spec"]["unschedulable"] is True
        assert lease_holder(c) == "dead"
        started = time.monotonic()
        fresh = DyingKube(c.api.client(retries=False))
        report: RunReport = make_applier(c, fresh, "fresh", lease_wait_s=5.0).run(plan())
        waited = time.monotonic() - started
        (out,) = report.outcomes
        assert out.result == "applied", out.reason
        assert any("resumed a change left at step wait" in a for a in out.actions)
        assert fresh.label_writes() == []
        assert assert_consistent(c) == "applied"
        assert c.mig.reconciles("gpu-a") == base + 1
        assert waited < 4.5  # it took the Lease over once expired, not at the wait's end


def test_a_change_left_by_a_dead_run_is_finished_even_if_the_new_plan_wants_another() -> None:
    """The dead run cordoned the node for TARGET; the next plan names another config."""
    with running_cluster() as c:
        dying = DyingKube(c.api.client(retries=False), die_at=4, after=True)  # after cordon
        with pytest.raises(Died, match="write 4 \\(patch_node"):
            make_applier(c, dying, "dead").run(plan())
        expire_lease(c)
        other = ApplyPlan(
            "other",
            (
                NodeChange(
                    "gpu-a",
                    "team-special",  # already in the ConfigMap: 7g on every GPU
                    gpus=(
                        GpuChange(0, BALANCED, {"7g.141gb": 1}),
                        GpuChange(1, BALANCED, {"7g.141gb": 1}),
                    ),
                ),
            ),
            parse_config(EXISTING),
            provenance(),
        )
        fresh = DyingKube(c.api.client(retries=False))
        (out,) = make_applier(c, fresh, "fresh").run(other).outcomes
        # What was started is finished (no half-applied node), the new wish waits for a run.
        assert out.target == TARGET
        assert out.result == "applied", out.reason
        assert assert_consistent(c) == "applied"
        assert c.mig.overlaps == []
        assert c.mig.refused_in_use == []
