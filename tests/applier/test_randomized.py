"""1,000 random plans against the simulated MIG Manager: the safety invariants always hold.

One API test server and one MIG Manager sim serve every round (starting them a thousand
times would take minutes); between rounds every node is reset to a fresh random state. Each
round draws a GPU count (1 to 4 H200s per node) and a pool of node layouts, as a fleet has a
few: a random base (each GPU a valid layout, MIG off, or MIG on and empty) and variants of it
where each GPU is kept or given another layout. Every node takes its current layout and its
target from the pool (so the GPUs a change touches vary from node to node, and some changes
touch none), the label naming the current one's config; pods holding devices on chosen GPUs
(pinned with the sim's :data:`GPU_ANNOTATION`, or not pinned), PodDisruptionBudgets that
allow or forbid evicting them, MIG Manager's failure modes (fail, stuck pending, reboot that
succeeds or fails), a node NotReady or cordoned by someone else. One applier run per round
applies the whole plan, with or without ``--drain``. Each node's change is one plan:
``ROUNDS * NODES`` of them. (The mig-parted ConfigMap holds the pool's configs that some node
uses now; the applier adds the others. Keeping it as small as a real one matters: parsing it
strictly costs milliseconds per config, several times per node.)

Checked after every round, for every node:

(a) MIG Manager never re-created a GPU while a pod held a device on it, and never had to
    refuse a change for a GPU in use (the applier skipped or drained such nodes *before*
    labelling); without ``--drain`` no pod was evicted, with it only pods at risk were;
(b) no node is left cordoned (one cordoned by someone else stays cordoned);
(c) no node is left with a non-terminal ``migscope.io/apply`` step;
(d) every node's ``nvidia.com/mig.config`` is its target with state ``success``, or its
    previous value; and its GPUs are exactly the target's or exactly what they were, never
    half applied;
(e) applied nodes advertise exactly the plan's ``nvidia.com/mig-*`` allocatable;

and the outcome is the one the node's situation calls for (skipped, failed, applied), and
MIG Manager never saw a relabel while it was still busy with a change.

The applier runs in simulated time (:class:`~applier.cluster.SimClock`,
:class:`~applier.cluster.SimTimeKube`): its drain and MIG Manager timeouts count only the
time it waits, and time passes only once MIG Manager has reacted to everything, so a change
times out because the case calls for it (stuck pending, a PDB that forbids the eviction),
never because a loaded machine ran the simulation late, and those waits take no real time.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml
from support.kubeapi import KubeApiServer, config_map, node, pdb, pod
from support.kubeapi.mig_manager import (
    CONFIG_LABEL,
    GPU_ANNOTATION,
    STATE_LABEL,
    Knobs,
    MigManagerSim,
    SimGpu,
)

from applier.cluster import (
    CONFIGMAP,
    EXISTING,
    NAMESPACE,
    SimClock,
    SimTimeKube,
    _Sink,
    cluster_policy,
    provenance,
)
from migscope.applier._applier import Applier
from migscope.applier._audit import Audit
from migscope.applier._plan import ApplyPlan, GpuChange, NodeChange
from migscope.applier._settings import ApplySettings
from migscope.applier._steps import advertised, pods_at_risk, read_progress
from migscope.core._catalogue import model_for_pci
from migscope.core._layout import valid_layouts
from migscope.core._migparted import parse_config

SEED = 20261130
ROUNDS = 40
NODES = 25
PODS_NS = "work"
H200 = model_for_pci("0x233510DE")
assert H200 is not None
LAYOUTS = [layout.as_dict() for layout in valid_layouts(H200)]

Gpu = tuple[bool, tuple[tuple[str, int], ...]]  # (MIG enabled, sorted layout)


def _gpu(mig: bool, layout: Mapping[str, int]) -> Gpu:
    return (mig, tuple(sorted((p, n) for p, n in layout.items() if n)) if mig else ())


def _random_gpu(rng: random.Random) -> Gpu:
    roll = rng.random()
    if roll < 0.1:
        return _gpu(False, {})
    if roll < 0.13:
        return _gpu(True, {})
    return _gpu(True, rng.choice(LAYOUTS))


def _pool(rng: random.Random, rnd: int, size: int = 4) -> list[tuple[str, tuple[Gpu, ...]]]:
    """Named node layouts for one round: a base and variants (names differ, layouts may not)."""
    base = tuple(_random_gpu(rng) for _ in range(rng.randint(1, 4)))
    layouts = [base] + [
        tuple(g if rng.random() < 0.5 else _random_gpu(rng) for g in base) for _ in range(size - 1)
    ]
    return [(f"migscope-r{rnd}-{k}", layout) for k, layout in enumerate(layouts)]


def _entries(gpus: tuple[Gpu, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (mig, layout) in enumerate(gpus):
        entry: dict[str, Any] = {"devices": [i], "mig-enabled": mig}
        if mig:
            entry["mig-devices"] = dict(layout)
        out.append(entry)
    return out


def _resources(gpus: tuple[Gpu, ...]) -> dict[str, str]:
    counts: dict[str, int] = {}
    for mig, layout in gpus:
        if not mig:
            counts["nvidia.com/gpu"] = counts.get("nvidia.com/gpu", 0) + 1
        for p, n in layout:
            counts[f"nvidia.com/mig-{p}"] = counts.get(f"nvidia.com/mig-{p}", 0) + n
    return {k: str(v) for k, v in counts.items()}


@dataclass
class NodeCase:
    """One node's random situation and its plan."""

    name: str
    previous: str
    current: tuple[Gpu, ...]
    config: str
    target: tuple[Gpu, ...]
    ready: bool = True
    cordoned: bool = False
    knobs: Knobs = field(default_factory=Knobs)
    pods: list[dict[str, Any]] = field(default_factory=list)
    blocked: set[str] = field(default_factory=set)  # pods a PDB keeps from eviction

    def change(self) -> NodeChange:
        return NodeChange(
            node=self.name,
            config=self.config,
            gpus=tuple(
                GpuChange(i, dict(cur[1]), dict(tgt[1]), cur[0], tgt[0])
                for i, (cur, tgt) in enumerate(zip(self.current, self.target, strict=True))
            ),
        )

    def node_before(self) -> dict[str, Any]:
        """The node as the applier reads it before the change (its allocatable says mixed)."""
        return {"metadata": {"labels": {}}, "status": {"allocatable": _resources(self.current)}}

    def running(self) -> list[dict[str, Any]]:
        """The pods that may hold devices (finished ones hold nothing)."""
        return [p for p in self.pods if p["status"]["phase"] not in ("Succeeded", "Failed")]

    def expected(self, drain: bool) -> tuple[str, str]:
        """What the applier must do with this node, and why (the path it takes)."""
        if self.previous == self.config:
            return "unchanged", "already labelled so, with success"
        if not self.ready:
            return "skipped", "NotReady"
        if self.cordoned:
            return "skipped", "cordoned by someone else"
        at_risk = pods_at_risk(self.change(), self.running(), self.node_before())
        if at_risk and not drain:
            return "skipped", "pods at risk, no --drain"
        if set(at_risk) & self.blocked:
            return "failed", "a PDB forbids an eviction"
        evicted = " after evictions" if at_risk else ""
        if self.current == self.target:
            return "applied", "no GPU changes (MIG Manager: success at once)"
        k = self.knobs
        if k.stuck_pending:
            return "failed", "stuck pending"
        if k.reboot and k.reboot_outcome == "failed":
            return "failed", "failed after a reboot"
        if k.fail:
            return "failed", "MIG Manager failed"
        if k.reboot:
            return "applied", "after a reboot" + evicted
        return "applied", "GPUs re-created" + evicted


def _random_case(
    rng: random.Random, name: str, serial: int, pool: list[tuple[str, tuple[Gpu, ...]]]
) -> NodeCase:
    now = rng.randrange(len(pool))
    later = now if rng.random() < 0.1 else rng.choice([k for k in range(len(pool)) if k != now])
    case = NodeCase(name, *pool[now], *pool[later])
    current = case.current
    roll = rng.random()
    if roll < 0.02:
        case.ready = False
    elif roll < 0.04:
        case.cordoned = True
    roll = rng.random()
    if roll < 0.05:
        case.knobs.fail = True
    elif roll < 0.06:  # rare: each runs to the applier's timeout (simulated time)
        case.knobs.stuck_pending = True
    elif roll < 0.10:
        case.knobs.reboot = True
        case.knobs.reboot_seconds = 0.02
    elif roll < 0.12:
        case.knobs.reboot = True
        case.knobs.reboot_seconds = 0.02
        case.knobs.reboot_outcome = "failed"
    for k in range(rng.choice((0, 0, 1, 1, 2, 3))):
        gpu = rng.randrange(len(current))
        mig, layout = current[gpu]
        pod_name = f"p{serial}-{k}"
        requests: dict[str, Any] = {"cpu": "1"}
        # Time-slicing and MPS replicas ask for the same device as ``<name>.shared``.
        shared = ".shared" if rng.random() < 0.3 else ""
        if not mig:
            requests[f"nvidia.com/gpu{shared}"] = 1
        elif layout and rng.random() < 0.85:
            requests[f"nvidia.com/mig-{rng.choice(layout)[0]}{shared}"] = 1
        pinned = rng.random() < 0.8 and len(requests) > 1
        phase = "Succeeded" if rng.random() < 0.05 else "Running"
        obj = pod(
            pod_name,
            PODS_NS,
            node_name=name,
            labels={"app": pod_name},
            annotations={GPU_ANNOTATION: str(gpu)} if pinned else None,
            requests=requests,
            phase=phase,
        )
        case.pods.append(obj)
        if rng.random() < 0.06:
            case.blocked.add(f"{PODS_NS}/{pod_name}")
    return case


@contextmanager
def _fleet(names: list[str]) -> Iterator[tuple[KubeApiServer, MigManagerSim]]:
    with KubeApiServer(history=200_000) as api:
        api.create(cluster_policy(CONFIGMAP))
        api.create(config_map(CONFIGMAP, NAMESPACE, {"config.yaml": EXISTING}))
        for name in names:
            api.create(node(name, labels={CONFIG_LABEL: "all-disabled", STATE_LABEL: "success"}))
        with MigManagerSim(
            api,
            {n: [SimGpu()] for n in names},
            config_namespace=NAMESPACE,
            config_name=CONFIGMAP,
        ) as mig:
            yield api, mig


def _settle(api: KubeApiServer, mig: MigManagerSim, names: list[str]) -> None:
    """Wait until MIG Manager handled every version of every node written so far.

    The wait is in real time and its bound generous: a loaded machine only makes it longer.
    """
    for name in names:
        for _ in range(100):
            rv = api.get("v1", "Node", name)["metadata"]["resourceVersion"]
            mig.wait_until_seen(name, rv, timeout=60)
            if api.get("v1", "Node", name)["metadata"]["resourceVersion"] == rv:
                break
        else:
            raise AssertionError(f"{name} kept changing")


def _settler(
    api: KubeApiServer, mig: MigManagerSim, names: list[str]
) -> Callable[[str | None], None]:
    """The :class:`SimClock`'s ``settle``: :func:`_settle` on one node, or on every node.

    Only a write gives MIG Manager something to do, so when nothing was written since the
    last check of the same nodes passed, the check is skipped (the drain polls often).
    """
    passed: dict[str | None, int] = {}

    def settle(name: str | None) -> None:
        version = api.resource_version
        if passed.get(name) != version:
            _settle(api, mig, [name] if name else names)
            passed[name] = version

    return settle


def _reset(api: KubeApiServer, mig: MigManagerSim, cases: list[NodeCase]) -> None:
    for obj in api.list("v1", "Pod", namespace=PODS_NS):
        api.delete("v1", "Pod", obj["metadata"]["name"], namespace=PODS_NS)
    for obj in api.list("policy/v1", "PodDisruptionBudget", namespace=PODS_NS):
        api.delete("policy/v1", "PodDisruptionBudget", obj["metadata"]["name"], namespace=PODS_NS)
    configs = yaml.safe_load(EXISTING)
    for case in cases:  # the configs in use now; the applier adds the targets
        configs["mig-configs"][case.previous] = _entries(case.current)
    api.patch(
        "v1",
        "ConfigMap",
        CONFIGMAP,
        {"data": {"config.yaml": yaml.safe_dump(configs, sort_keys=False)}},
        namespace=NAMESPACE,
    )
    for case in cases:
        knobs = mig.knobs(case.name)
        for attr, value in vars(case.knobs).items():
            setattr(knobs, attr, value)
        mig._set_gpus(
            case.name, [SimGpu(mig_enabled=m, instances=dict(layout)) for m, layout in case.current]
        )
        old = api.get("v1", "Node", case.name)
        resources = _resources(case.current)
        alloc = {k: "0" for k in old["status"]["allocatable"] if k.startswith("nvidia.com/")}
        alloc.update({"cpu": "64", **resources})
        ready = "True" if case.ready else "False"
        api.patch(
            "v1",
            "Node",
            case.name,
            {
                "status": {
                    "allocatable": alloc,
                    "capacity": alloc,
                    "conditions": [{"type": "Ready", "status": ready}],
                }
            },
            subresource="status",
        )
        api.patch(
            "v1",
            "Node",
            case.name,
            {
                "metadata": {
                    "labels": {CONFIG_LABEL: case.previous, STATE_LABEL: "success"},
                    "annotations": {"migscope.io/apply": None, "migscope.io/changes": None},
                },
                "spec": {"unschedulable": True if case.cordoned else None},
            },
        )
        for obj in case.pods:
            api.create(obj)
            key = f"{PODS_NS}/{obj['metadata']['name']}"
            guard = {"min_available": 1} if key in case.blocked else {"max_unavailable": 1}
            if key in case.blocked or obj["metadata"]["name"].endswith("1"):
                api.create(
                    pdb(
                        obj["metadata"]["name"],
                        PODS_NS,
                        match_labels=obj["metadata"]["labels"],
                        **guard,
                    )
                )
    _settle(api, mig, [c.name for c in cases])


def _check(
    api: KubeApiServer,
    mig: MigManagerSim,
    cases: list[NodeCase],
    outcomes: dict[str, Any],
    drain: bool,
    seen: tuple[int, int, int],
    where: str,
) -> None:
    recreated = mig.recreated[seen[0] :]
    assert mig.refused_in_use[seen[1] :] == [], where  # (a) never asked to touch a GPU in use
    assert [r for r in recreated if r.holders] == [], where  # (a) nor did it, holders present
    assert mig.overlaps[seen[2] :] == [], where  # never relabelled while busy
    pods_left = {p["metadata"]["name"] for p in api.list("v1", "Pod", namespace=PODS_NS)}
    for case in cases:
        w = f"{where} {case.name} {case}"
        out = outcomes[case.name]
        node_obj = api.get("v1", "Node", case.name)
        labels = node_obj["metadata"].get("labels") or {}
        progress = read_progress(node_obj)
        # (b) never left cordoned by us; someone else's cordon stays.
        assert bool(node_obj["spec"].get("unschedulable")) == case.cordoned, w
        # (c) nothing half recorded.
        assert progress is None or progress.step.terminal, f"{w}: {progress}"
        want, path = case.expected(drain)
        assert out.result == want, f"{w}: {out.result} ({out.reason}), wanted {want} ({path})"
        gpus = tuple(_gpu(g.mig_enabled, g.instances) for g in mig.gpus(case.name))
        if out.result in ("applied", "unchanged"):
            # (d) + (e): the target, answered success, advertised exactly.
            assert labels.get(CONFIG_LABEL) == case.config, w
            assert labels.get(STATE_LABEL) == "success", w
            assert gpus == case.target, w
            assert advertised(node_obj) == case.change().expected_resources(), w
        else:
            # (d) the previous label, the GPUs as they were: not half applied.
            assert labels.get(CONFIG_LABEL) == case.previous, f"{w}: {out.reason}"
            assert gpus == case.current, w
            assert advertised(node_obj) == {
                k: int(v) for k, v in _resources(case.current).items() if k != "nvidia.com/gpu"
            }, w
        # (a) pods: none evicted without drain; with it, only those at risk of a change tried.
        at_risk = set(pods_at_risk(case.change(), case.running(), case.node_before()))
        for obj in case.pods:
            key = f"{PODS_NS}/{obj['metadata']['name']}"
            if obj["metadata"]["name"] not in pods_left:
                assert drain, f"{w}: {key} evicted without --drain"
                assert key in at_risk, f"{w}: {key} evicted but not at risk"
                assert key not in case.blocked, w
                assert out.result in ("applied", "failed"), w


def test_random_plans_keep_every_invariant() -> None:
    rng = random.Random(SEED)
    names = [f"n{i:02d}" for i in range(NODES)]
    started = time.monotonic()
    paths: Counter[str] = Counter()
    with _fleet(names) as (api, mig):
        clock = SimClock(_settler(api, mig, names))
        # Real seconds per request: generous, so that a loaded machine only makes it slower.
        kube = SimTimeKube(api, clock, timeout_s=30.0)
        for rnd in range(ROUNDS):
            pool = _pool(rng, rnd)
            cases = [_random_case(rng, n, rnd * NODES + i, pool) for i, n in enumerate(names)]
            drain = rng.random() < 0.5
            _settle(api, mig, names)
            _reset(api, mig, cases)
            seen = (len(mig.recreated), len(mig.refused_in_use), len(mig.overlaps))
            configs = {c.config: _entries(c.target) for c in cases}
            plan = ApplyPlan(
                f"round {rnd}",
                tuple(c.change() for c in cases),
                parse_config(yaml.safe_dump({"version": "v1", "mig-configs": configs})),
                provenance(),
            )
            settings = ApplySettings(
                apply=True,
                drain=drain,
                namespace=NAMESPACE,
                max_nodes=NODES,
                max_changes_per_day=100_000,
                # Simulated seconds: they pass only while the applier waits, once MIG
                # Manager has reacted, so they hold however slowly the machine runs it.
                node_timeout_s=3.0,
                drain_timeout_s=0.3,
                verify_timeout_s=2.0,
                poll_s=0.01,
                identity=f"round-{rnd}",
            )
            audit = Audit(kube, actor=f"round-{rnd}", out=_Sink())
            report = Applier(kube, settings, audit=audit, clock=clock).run(plan)
            outcomes = {o.node: o for o in report.outcomes}
            assert set(outcomes) == set(names)
            _settle(api, mig, names)
            _check(api, mig, cases, outcomes, drain, seen, f"round {rnd} (drain={drain})")
            paths.update(" / ".join(c.expected(drain)) for c in cases)
    took = time.monotonic() - started
    print(f"\n{ROUNDS * NODES} plans in {took:.1f} s:")
    for path, n in sorted(paths.items()):
        print(f"  {n:4d}  {path}")
    assert sum(paths.values()) == 1000
    # Every path was taken, the rare ones a few times, the main one hundreds of times.
    assert len(paths) == 13, sorted(paths)
    assert min(paths.values()) >= 3, paths
    assert paths["applied / GPUs re-created"] >= 200, paths
    assert paths["applied / GPUs re-created after evictions"] >= 20, paths
