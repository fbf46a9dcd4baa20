"""Who owns the pods seen on the fleet's slices: the cluster's pods, or kube-state-metrics.

Why a source: the owner of a pod (its Deployment, StatefulSet, Job...) is where its MIG
request lives, and what a right-sizing must change (:mod:`migscope.analyzer._judge.workloads`). Two
readers, best first:

* :func:`cluster_owners`: the pods of the fleet's nodes through :class:`migscope.kube.Kube`
  (the client ``--pending-pods`` uses; ``list`` on ``pods``, the same RBAC), one paginated
  list per node: ``ownerReferences``, labels and the containers' MIG requests;
* :func:`kube_state_metrics_owners`: ``kube_pod_owner`` and ``kube_replicaset_owner`` over
  the window from a Prometheus-compatible server, for pods the cluster no longer has (or
  without cluster credentials).

Neither decides anything: they return :class:`~migscope.analyzer._judge.workloads.PodOwners`.
"""

from __future__ import annotations

from collections.abc import Sequence

from migscope.analyzer._intake.prometheus import PrometheusClient, PrometheusError
from migscope.analyzer._intake.promql import duration, selector
from migscope.analyzer._judge.workloads import (
    PodOwners,
    owners_from_kube_state_metrics,
    owners_from_pods,
)
from migscope.kube import Kube

PAGE_SIZE = 500


def cluster_owners(kube: Kube, nodes: Sequence[str]) -> PodOwners:
    """Owners and MIG containers of every pod on ``nodes``, read from the cluster.

    Raises:
        KubeError: the API refused or could not be reached.
    """
    pods = [
        pod
        for node in nodes
        for pod in kube.list_pods(field_selector=f"spec.nodeName={node}", page_size=PAGE_SIZE)
    ]
    return owners_from_pods(pods)


def kube_state_metrics_owners(
    client: PrometheusClient, pods: Sequence[tuple[str, str]], window: tuple[float, float]
) -> PodOwners:
    """Owners of ``pods`` from kube-state-metrics' series over ``window``.

    The latest owner each pod had in the window (``last_over_time``), for the pods' namespaces
    only; a ReplicaSet's Deployment from ``kube_replicaset_owner``. A server without
    kube-state-metrics answers nothing: every owner is then guessed, and a note says so.
    """
    namespaces = sorted({ns for ns, _ in pods if ns})
    if not namespaces:
        return PodOwners()
    span = duration(max(60.0, window[1] - window[0]))
    pod_q = (
        "max by (namespace, pod, owner_kind, owner_name) "
        f"(last_over_time({selector('kube_pod_owner', namespace=namespaces)}[{span}]))"
    )
    rs_q = (
        "max by (namespace, replicaset, owner_kind, owner_name) "
        f"(last_over_time({selector('kube_replicaset_owner', namespace=namespaces)}[{span}]))"
    )
    try:
        pod_rows = [dict(s.labels) for s in client.query(pod_q, at=window[1])]
        rs_rows = [dict(s.labels) for s in client.query(rs_q, at=window[1])] if pod_rows else []
    except PrometheusError as exc:
        return PodOwners(notes=(f"workload owners: kube_pod_owner not read: {exc}",))
    if not pod_rows:
        return PodOwners(
            notes=(
                "workload owners: no kube_pod_owner series (kube-state-metrics) for the pods' "
                "namespaces: owners are guessed from pod names",
            )
        )
    return owners_from_kube_state_metrics(pod_rows, rs_rows)
