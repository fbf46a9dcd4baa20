"""The resource types the API test server serves, and how their URLs look (test fake).

Each type is described the way kube-apiserver's discovery describes it (group, version, kind,
plural, scope) plus the few storage-strategy facts the applier can observe:

* whether ``status`` is a subresource (then a write to the main resource keeps the old status
  and a write to ``/status`` changes nothing else, as the real strategies' PrepareForUpdate do);
* whether DELETE answers with the deleted object (pods, custom resources) or with a
  ``Status`` of ``Success`` (everything else), as the registry's ``ReturnDeletedObject`` says;
* which field selectors the type accepts beyond ``metadata.name``/``metadata.namespace``
  (upstream's ``GetAttrs``/field label conversion functions; anything else is a 400);
* whether PUT may create a missing object (``AllowCreateOnUpdate``: leases and events);
* whether it is built in (strategic-merge patches allowed, list items without ``kind``) or a
  custom resource (strategic merge is refused with 415, list items keep ``kind``).

Types not listed here can be added with :meth:`support.kubeapi.KubeApiServer.register`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BUILTIN_TYPES", "ResourceType"]


@dataclass(frozen=True)
class ResourceType:
    """One served resource type.

    Attributes:
        group: API group, ``""`` for the core group.
        version: API version within the group.
        kind: Kind of one object (``Node``).
        plural: The resource name in URLs (``nodes``).
        namespaced: Whether objects live in a namespace.
        status_subresource: Whether ``/status`` is a separate subresource.
        builtin: Built-in (strategic merge allowed) rather than a custom resource.
        return_deleted_object: DELETE answers with the object rather than a Status.
        field_labels: Field selectors accepted besides ``metadata.name``/``.namespace``.
        allow_create_on_update: PUT of a missing object creates it (leases, events).
        short_names: Discovery short names (``no`` for nodes); informational.
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool = False
    builtin: bool = True
    return_deleted_object: bool = False
    field_labels: tuple[str, ...] = ()
    allow_create_on_update: bool = False
    short_names: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        """``v1`` or ``group/version``, as in an object's ``apiVersion``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """``(group, plural)``: how the store files objects of this type."""
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        """Kind of a list response (``NodeList``)."""
        return f"{self.kind}List"

    @property
    def base_path(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        """The URL path of the collection, or of one object when ``name`` is given."""
        parts = [self.base_path]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        return "/".join(parts)


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)

_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

#: What every :class:`~support.kubeapi.KubeApiServer` serves from the start.
BUILTIN_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "Node",
        "nodes",
        namespaced=False,
        status_subresource=True,
        field_labels=("spec.unschedulable",),
        short_names=("no",),
    ),
    ResourceType(
        "",
        "v1",
        "Pod",
        "pods",
        namespaced=True,
        status_subresource=True,
        return_deleted_object=True,
        field_labels=_POD_FIELDS,
        short_names=("po",),
    ),
    ResourceType(
        "",
        "v1",
        "Namespace",
        "namespaces",
        namespaced=False,
        status_subresource=True,
        field_labels=("status.phase",),
        short_names=("ns",),
    ),
    ResourceType("", "v1", "ConfigMap", "configmaps", namespaced=True, short_names=("cm",)),
    ResourceType(
        "",
        "v1",
        "Event",
        "events",
        namespaced=True,
        field_labels=_EVENT_FIELDS,
        allow_create_on_update=True,
        short_names=("ev",),
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        namespaced=True,
        field_labels=(
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "type",
            "reportingController",
        ),
        allow_create_on_update=True,
        short_names=("ev",),
    ),
    ResourceType(
        "coordination.k8s.io", "v1", "Lease", "leases", namespaced=True, allow_create_on_update=True
    ),
    ResourceType(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        namespaced=True,
        status_subresource=True,
        short_names=("pdb",),
    ),
    # Dynamic Resource Allocation (resource.k8s.io/v1, GA in 1.34). ResourceSlices are
    # cluster-scoped and select on spec.nodeName and spec.driver (upstream's
    # resourceslice.GetAttrs); ResourceClaims have a status subresource (the scheduler writes
    # the allocation, the kubelet reservedFor).
    ResourceType(
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        namespaced=False,
        field_labels=("spec.nodeName", "spec.driver"),
    ),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        namespaced=True,
        status_subresource=True,
    ),
    ResourceType(
        "resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", namespaced=True
    ),
    # GPU Operator 26.7's GPUCluster CRD (gpuclusters.nvidia.com, v1alpha1, cluster-scoped):
    # the DRA driver without MIG Manager.
    ResourceType(
        "nvidia.com",
        "v1alpha1",
        "GPUCluster",
        "gpuclusters",
        namespaced=False,
        status_subresource=True,
        builtin=False,
        return_deleted_object=True,
    ),
    # The NVIDIA GPU Operator's CRD (nvidia.com_clusterpolicies.yaml): cluster-scoped, with a
    # status subresource; served like any CRD, so strategic merge patches are refused.
    ResourceType(
        "nvidia.com",
        "v1",
        "ClusterPolicy",
        "clusterpolicies",
        namespaced=False,
        status_subresource=True,
        builtin=False,
        return_deleted_object=True,
    ),
)
