"""Workload right-sizing: the request each workload should make, and the change to make it.

Why (issue 22): the plan turns a ``7g.141gb`` into a ``4g.71gb`` and drains its pod, but the
pod's template still asks for ``nvidia.com/mig-7g.141gb``, which no GPU offers afterwards, so
the pod stays Pending. A layout is only half the fix; the request is the other half, and it
lives in the workload that creates the pod (a Deployment, a StatefulSet, a CronJob...), not in
the pod. This module groups the slices by that workload, recommends one profile per workload
and words the change.

**Who owns a pod**, best first (:class:`Workload` ``source``):

* ``cluster``: the pod's ``ownerReferences`` (its controller), read from the API. A pod of a
  ReplicaSet whose name is ``<deployment>-<pod-template-hash label>`` belongs to that
  Deployment (the Deployment controller names its ReplicaSets so and labels their pods with
  the hash), so no ReplicaSet needs reading;
* ``kube-state-metrics``: ``kube_pod_owner{owner_kind, owner_name}`` and
  ``kube_replicaset_owner`` (ReplicaSet → Deployment) in Prometheus;
* ``guessed``: the pod's name. ``<name>-<ordinal>`` is a StatefulSet's pod,
  ``<name>-<6..10 chars>-<5 chars>`` (the alphabet ``bcdfghjklmnpqrstvwxz2456789`` of
  Kubernetes' generated names) a Deployment's; anything else names no owner (kind ``Pod``).
  A guess is said as one everywhere it is shown.

**Which profile**: the largest of what each of its pods' slices needs
(:attr:`~migscope.analyzer._result.SliceResult.demand_profile`: the policy's right size with
its headroom, the same number the plan counts as demand), by memory then compute slices. One
template asks one profile for all its pods, so a workload whose pods hold different profiles
now (a guess that grouped strangers, a rollout under way), or run on different GPU models
(profile names differ per model), or whose pods are all idle, gets no change: the first two are
listed as skipped with why, the last are idle holders.

**The change**: under the device plugin, ``nvidia.com/mig-<new>`` in place of
``nvidia.com/mig-<old>`` in the container's requests and limits, as a strategic-merge patch
(``null`` removes the old name) per workload, with the ``kubectl patch`` command; under DRA the
claim's device request selects the profile
(:func:`~migscope.analyzer._judge.claims.profile_selector`).
A Job's pod template and a bare pod's resources cannot be changed: the entry says to
re-create them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import yaml

from migscope.analyzer._judge.claims import MIG_DEVICE_CLASS, profile_selector
from migscope.analyzer._judge.classify import Classification, Status
from migscope.analyzer._model import SliceStats
from migscope.core import GpuModel, UnknownProfileError, find_model

REQUEST_CHANGES_FILE = "request-changes.yaml"
"""The patch file ``--out`` writes beside the reports."""

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

OwnerSource = Literal["cluster", "kube-state-metrics", "guessed"]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_DEPLOYMENT_POD = re.compile(rf"^(?P<name>.+)-[{_NAME_CHARS}]{{6,10}}-[{_NAME_CHARS}]{{5}}$")
_STATEFUL_POD = re.compile(r"^(?P<name>.+)-(?:0|[1-9][0-9]*)$")

_TEMPLATE_PATH: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where each patchable kind keeps its pods' spec."""

_API_VERSION = {"CronJob": "batch/v1"}


@dataclass(frozen=True, order=True)
class Workload:
    """The controller that creates a pod, as far as it is known.

    Attributes:
        namespace: Its namespace.
        kind: ``Deployment``, ``StatefulSet``, ``DaemonSet``, ``ReplicaSet``, ``Job``,
            ``CronJob``, another controller's kind, or ``Pod`` (no owner known).
        name: Its name (the pod's own for ``Pod``).
        source: How it was found (module doc).
    """

    namespace: str
    kind: str
    name: str
    source: OwnerSource = "guessed"

    @property
    def ref(self) -> str:
        """``namespace/Kind/name``, as the reports print it."""
        return f"{self.namespace}/{self.kind}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        """The report's ``workload`` object."""
        return {
            "namespace": self.namespace,
            "kind": self.kind,
            "name": self.name,
            "source": self.source,
        }


@dataclass(frozen=True)
class ContainerRequest:
    """A container of a pod that asks for a MIG device plugin resource (from the cluster)."""

    container: str
    resource: str
    count: int


@dataclass(frozen=True)
class PodOwners:
    """What a lookup learned about the fleet's pods: owners, MIG containers, notes.

    Attributes:
        workloads: ``(namespace, pod)`` → its workload.
        containers: ``(namespace, pod)`` → its containers asking for ``nvidia.com/mig-*``
            (only from the cluster).
        notes: What the report should say about the lookup (not reachable, partial).
    """

    workloads: Mapping[tuple[str, str], Workload] = field(default_factory=dict)
    containers: Mapping[tuple[str, str], tuple[ContainerRequest, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def workload_of(self, namespace: str, pod: str) -> Workload:
        """The pod's workload: looked up, else guessed from its name."""
        return self.workloads.get((namespace, pod)) or guess_workload(namespace, pod)


OwnerLookup = Callable[[Sequence[tuple[str, str]], Sequence[str], tuple[float, float]], PodOwners]
"""``(pods as (namespace, pod), nodes, window) -> PodOwners``: how ``run`` asks a cluster or
a server who owns the pods seen on the fleet's slices."""


def guess_workload(namespace: str, pod: str) -> Workload:
    """The workload a pod's name suggests (``source`` ``guessed``; module doc)."""
    deployment = _DEPLOYMENT_POD.match(pod)
    if deployment:
        return Workload(namespace, "Deployment", deployment["name"])
    stateful = _STATEFUL_POD.match(pod)
    if stateful:
        return Workload(namespace, "StatefulSet", stateful["name"])
    return Workload(namespace, "Pod", pod)


def _controller(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
    return next((r for r in refs if r.get("controller")), refs[0] if refs else None)


def _mig_containers(spec: Mapping[str, Any]) -> tuple[ContainerRequest, ...]:
    out = []
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in asked.items():
            if str(name).startswith(MIG_RESOURCE_PREFIX):
                try:
                    count = int(float(str(value)))
                except ValueError:
                    count = 1
                out.append(ContainerRequest(str(container.get("name", "")), str(name), count))
    return tuple(out)


def owners_from_pods(pods: Iterable[Mapping[str, Any]]) -> PodOwners:
    """Owners and MIG containers of pods as the API returns them (``source`` ``cluster``).

    A ReplicaSet's pod whose ``pod-template-hash`` label ends the ReplicaSet's name belongs to
    the Deployment of the name before it (the Deployment controller's naming).
    """
    workloads: dict[tuple[str, str], Workload] = {}
    containers: dict[tuple[str, str], tuple[ContainerRequest, ...]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        ref = _controller(meta)
        if ref is None:
            workload = Workload(namespace, "Pod", name, "cluster")
        else:
            kind, owner = str(ref.get("kind", "")), str(ref.get("name", ""))
            suffix = "-" + str((meta.get("labels") or {}).get("pod-template-hash", ""))
            if kind == "ReplicaSet" and len(suffix) > 1 and owner.endswith(suffix):
                kind, owner = "Deployment", owner[: -len(suffix)]
            workload = Workload(namespace, kind, owner, "cluster")
        workloads[(namespace, name)] = workload
        found = _mig_containers(pod.get("spec") or {})
        if found:
            containers[(namespace, name)] = found
    return PodOwners(workloads, containers)


def merge_owners(first: PodOwners, then: PodOwners) -> PodOwners:
    """``first``'s owners and containers, ``then``'s for the pods ``first`` lacks; both notes."""
    return PodOwners(
        {**then.workloads, **first.workloads},
        {**then.containers, **first.containers},
        (*first.notes, *then.notes),
    )


def owners_from_kube_state_metrics(
    pod_owner: Iterable[Mapping[str, str]], replicaset_owner: Iterable[Mapping[str, str]] = ()
) -> PodOwners:
    """Owners from kube-state-metrics' label sets (``source`` ``kube-state-metrics``).

    Args:
        pod_owner: ``kube_pod_owner`` labels: ``namespace``, ``pod``, ``owner_kind``,
            ``owner_name`` (``<none>`` for a bare pod).
        replicaset_owner: ``kube_replicaset_owner`` labels: ``namespace``, ``replicaset``,
            ``owner_kind``, ``owner_name``: a ReplicaSet's Deployment.
    """
    rs_owner = {
        (r.get("namespace", ""), r.get("replicaset", "")): (
            r.get("owner_kind", ""),
            r["owner_name"],
        )
        for r in replicaset_owner
        if r.get("owner_name") and r.get("owner_name") != "<none>"
    }
    workloads: dict[tuple[str, str], Workload] = {}
    for row in pod_owner:
        namespace, pod = row.get("namespace", ""), row.get("pod", "")
        kind, name = row.get("owner_kind", ""), row.get("owner_name", "")
        if not pod:
            continue
        if not name or name == "<none>" or kind == "<none>":
            kind, name = "Pod", pod
        elif kind == "ReplicaSet" and (namespace, name) in rs_owner:
            kind, name = rs_owner[(namespace, name)]
        workloads[(namespace, pod)] = Workload(namespace, kind, name, "kube-state-metrics")
    return PodOwners(workloads)


class _SliceLike(Protocol):
    """What :func:`advise` reads of a slice (:class:`~migscope.analyzer._result.SliceResult`)."""

    @property
    def stats(self) -> SliceStats: ...
    @property
    def verdict(self) -> Classification: ...
    @property
    def demand_profile(self) -> str | None: ...
    @property
    def current(self) -> bool: ...
    @property
    def held(self) -> bool: ...


@dataclass(frozen=True)
class RequestChange:
    """One workload's request change.

    Attributes:
        workload: The workload.
        model: The GPU model its pods run on.
        pods: ``namespace/pod`` of its pods seen on slices.
        current_profile: The profile its pods hold (and so ask for) now.
        profile: The profile it should ask for: the largest its pods need.
        needs: ``pod → profile`` each pod's slice needs.
        mechanism: ``device-plugin`` (``nvidia.com/mig-*``) or ``dra`` (a ResourceClaim).
        containers: The containers asking for the resource (from the cluster), or empty.
        claims: The claims held, under DRA.
    """

    workload: Workload
    model: str
    pods: tuple[str, ...]
    current_profile: str
    profile: str
    needs: Mapping[str, str]
    mechanism: Literal["device-plugin", "dra"]
    containers: tuple[ContainerRequest, ...] = ()
    claims: tuple[str, ...] = ()

    @property
    def old_resource(self) -> str:
        """The resource name its pods ask for now."""
        return MIG_RESOURCE_PREFIX + self.current_profile

    @property
    def new_resource(self) -> str:
        """The resource name to ask for."""
        return MIG_RESOURCE_PREFIX + self.profile

    @property
    def patchable(self) -> bool:
        """Whether the workload's pod template can be patched (a Job's, a pod's cannot)."""
        return self.mechanism == "device-plugin" and self.workload.kind in _TEMPLATE_PATH

    def patch(self) -> dict[str, Any] | None:
        """The strategic-merge patch of the workload, or None when it cannot be patched.

        Each container keeps its count; ``null`` removes the old resource name. A container
        whose name is unknown (owner not read from the cluster) is written ``<container>``,
        which the API server refuses, so that the patch is edited before it is applied.
        """
        if not self.patchable:
            return None
        mine = [c for c in self.containers if c.resource == self.old_resource]
        entries = mine or [ContainerRequest("<container>", self.old_resource, 1)]
        containers = []
        for c in entries:
            resources = {self.new_resource: str(c.count), self.old_resource: None}
            containers.append(
                {
                    "name": c.container,
                    "resources": {"limits": resources, "requests": dict(resources)},
                }
            )
        spec: dict[str, Any] = {"containers": containers}
        for key in reversed(_TEMPLATE_PATH[self.workload.kind]):
            spec = {key: spec}
        return spec

    def command(self) -> str:
        """The ``kubectl`` command that makes the change, or what to do instead."""
        w = self.workload
        if self.mechanism == "dra":
            return (
                f"# {w.ref}: the device request of its ResourceClaimTemplate (or claim) "
                f'should select {self.profile}: selectors: [cel: {{expression: "'
                f'{profile_selector(self.profile)}"}}] (deviceClassName {MIG_DEVICE_CLASS})'
            )
        patch = self.patch()
        if patch is None:
            what = (
                "a Job's pod template cannot be changed"
                if w.kind == "Job"
                else ("a pod's resources cannot be changed")
            )
            return (
                f"# {w.ref}: {what}: re-create it asking for {self.new_resource} "
                f"instead of {self.old_resource}"
            )
        text = json.dumps(patch, separators=(",", ":"), sort_keys=False)
        return (
            f"kubectl -n {shlex.quote(w.namespace)} patch {w.kind.lower()} "
            f"{shlex.quote(w.name)} --type strategic -p {shlex.quote(text)}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The report's ``request_changes.workloads[]`` entry (docs/report-schema.md)."""
        patch = self.patch()
        return {
            "workload": self.workload.to_dict(),
            "model": self.model,
            "pods": list(self.pods),
            "current_profile": self.current_profile,
            "profile": self.profile,
            "needs": dict(self.needs),
            "mechanism": self.mechanism,
            "resource_from": self.old_resource if self.mechanism == "device-plugin" else None,
            "resource_to": self.new_resource if self.mechanism == "device-plugin" else None,
            "selector": profile_selector(self.profile) if self.mechanism == "dra" else None,
            "containers": sorted({c.container for c in self.containers}),
            "claims": list(self.claims),
            "patch": patch,
            "command": self.command(),
        }


@dataclass(frozen=True)
class IdleHolder:
    """A workload whose pods hold idle slices: scale it down or drop its request first.

    Evicted by a re-partition, its pods come back and take a slice the plan made for someone
    else, so they are named next to the request changes.
    """

    workload: Workload
    pods: tuple[str, ...]
    profiles: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The report's ``request_changes.idle_holders[]`` entry."""
        return {
            "workload": self.workload.to_dict(),
            "pods": list(self.pods),
            "profiles": list(self.profiles),
        }


@dataclass(frozen=True)
class WorkloadAdvice:
    """Every workload's request change, the idle holders, and what was skipped and why."""

    changes: tuple[RequestChange, ...] = ()
    idle_holders: tuple[IdleHolder, ...] = ()
    skipped: tuple[str, ...] = ()

    def to_dict(self, moving: Iterable[str] = ()) -> dict[str, Any]:
        """The report's ``request_changes`` object.

        Args:
            moving: ``namespace/pod`` the plan's recommendations evict: an idle holder with
                a pod among them is marked ``evicted_by_plan``.
        """
        evicted = set(moving)
        holders = []
        for h in self.idle_holders:
            entry = h.to_dict()
            entry["evicted_by_plan"] = any(p in evicted for p in h.pods)
            holders.append(entry)
        return {
            "file": REQUEST_CHANGES_FILE,
            "workloads": [c.to_dict() for c in self.changes],
            "idle_holders": holders,
            "skipped": list(self.skipped),
        }


def _size(model: GpuModel | None, profile: str) -> tuple[int, int]:
    if model is None:
        return (0, 0)
    try:
        gi = model.profile(profile)
    except UnknownProfileError:
        return (0, 0)
    return (gi.memory_slices, gi.compute_slices)


def _model(key: str | None) -> GpuModel | None:
    if key is None:
        return None
    try:
        return find_model(key)
    except ValueError:
        return None


def _claim(s: _SliceLike) -> str:
    owner = s.stats.main_owner
    return owner.claim if owner is not None else ""


def advise(slices: Iterable[_SliceLike], owners: PodOwners | None = None) -> WorkloadAdvice:
    """Group the current held slices by workload and recommend one profile per workload.

    Args:
        slices: The analysis' slices.
        owners: What a lookup found (None: every owner is guessed from the pod's name).
    """
    owners = owners or PodOwners()
    groups: dict[Workload, list[tuple[str, _SliceLike]]] = defaultdict(list)
    for s in slices:
        owner = s.stats.main_owner
        if not s.current or not s.held or owner is None or not owner.pod:
            continue
        groups[owners.workload_of(owner.namespace, owner.pod)].append((owner.pod, s))
    changes: list[RequestChange] = []
    idle: list[IdleHolder] = []
    skipped: list[str] = []
    for workload in sorted(groups):
        members = groups[workload]
        ns = workload.namespace
        pods = tuple(sorted({f"{ns}/{pod}" for pod, _ in members}))
        held = sorted({m.stats.info.profile for _, m in members})
        busy = [(pod, m) for pod, m in members if m.verdict.status is not Status.IDLE]
        if not busy:
            idle.append(IdleHolder(workload, pods, tuple(held)))
            continue
        models = sorted({m.stats.info.model or "?" for _, m in members})
        label = workload.ref + (" (guessed)" if workload.source == "guessed" else "")
        if len(models) > 1:
            skipped.append(f"{label}: its pods run on {', '.join(models)}: no one profile name")
            continue
        if len(held) > 1:
            skipped.append(
                f"{label}: its pods hold {', '.join(held)}: one template asks one profile "
                "(a rollout under way, or pods that are not one workload)"
            )
            continue
        model = _model(models[0])
        needs = {f"{ns}/{pod}": m.demand_profile for pod, m in busy}
        if model is None or any(p is None for p in needs.values()):
            continue  # an uncatalogued model, or a busy slice with no known need
        known = {k: str(v) for k, v in needs.items()}
        target = max(known.values(), key=lambda p: (_size(model, p), p))
        if target == held[0]:
            continue
        claims = tuple(sorted({_claim(m) for _, m in members if _claim(m)}))
        containers = tuple(c for pod, _ in members for c in owners.containers.get((ns, pod), ()))
        changes.append(
            RequestChange(
                workload,
                models[0],
                pods,
                held[0],
                target,
                known,
                "dra" if claims else "device-plugin",
                tuple(dict.fromkeys(containers)),
                claims,
            )
        )
    return WorkloadAdvice(tuple(changes), tuple(idle), tuple(skipped))


def patch_documents(changes: Iterable[Mapping[str, Any]]) -> str:
    """``request-changes.yaml``: one strategic-merge patch per workload, as YAML documents.

    Each document names its target (``apiVersion``, ``kind``, ``metadata``), the form
    kustomize's ``patches`` take; the comment above it is the ``kubectl`` command. Changes
    that cannot be patched (a Job, a bare pod, a DRA claim) are comments only.

    Args:
        changes: The report's ``request_changes.workloads[]`` entries.
    """
    out = [
        "# Generated by migscope analyze: the MIG requests to change before the plan is applied.\n"
        "# One strategic-merge patch per workload (null removes the old resource name).\n"
    ]
    for c in changes:
        w = c["workload"]
        guessed = " (owner guessed from the pod names)" if w["source"] == "guessed" else ""
        head = (
            f"# {w['namespace']}/{w['kind']}/{w['name']}{guessed}: "
            f"{c['current_profile']} -> {c['profile']}\n# {c['command']}\n"
        )
        if c.get("patch") is None:
            out.append(head)
            continue
        body = {
            "apiVersion": _API_VERSION.get(w["kind"], "apps/v1"),
            "kind": w["kind"],
            "metadata": {"name": w["name"], "namespace": w["namespace"]},
            **c["patch"],
        }
        out.append("---\n" + head + yaml.safe_dump(body, sort_keys=False))
    return "".join(out)
