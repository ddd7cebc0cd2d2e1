"""The resource types the emulated API server serves.

One table drives discovery, routing, the store's per-type behaviour (is it
namespaced, does it have a ``status`` subresource whose writes are kept apart
from the main resource's) and kubectl's short names. Adding a type here is
all it takes for the store to hold it; the API server serves what is listed.
The kinds of the CRDs bundled in ``crds/`` are listed from their manifests.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtests.sandbox.cluster.custom_resources import bundled_kinds

__all__ = ["RESOURCES", "ResourceType", "by_group_version_plural", "by_kind"]

# What a pod streams from what runs it: its output, and connections to its ports.
STREAMS = ("log", "portforward")

READ_WRITE = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "scale"
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = READ_WRITE
    # Subresources that are not the object in another form but a stream from
    # what runs it (``pods/log``): no schema, served by their own handlers.
    streams: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> str:
        """The store's key: ``plural.group`` (``pods`` for the core group)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "Namespace", "namespaces", False, ("ns",), ("status",)),
    ResourceType("", "v1", "Node", "nodes", False, ("no",), ("status",)),
    ResourceType("", "v1", "Pod", "pods", True, ("po",), ("status",), ("all",), streams=STREAMS),
    ResourceType("", "v1", "Service", "services", True, ("svc",), ("status",), ("all",)),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",)),
    ResourceType("", "v1", "Event", "events", True, ("ev",)),
    ResourceType("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    ResourceType("", "v1", "Secret", "secrets", True),
    ResourceType(
        "apps", "v1", "Deployment", "deployments", True, ("deploy",), ("status", "scale"), ("all",)
    ),
    ResourceType(
        "apps", "v1", "ReplicaSet", "replicasets", True, ("rs",), ("status", "scale"), ("all",)
    ),
    ResourceType("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    # Stored and validated, never enforced: deploy/ carries them, and a sandbox
    # has one machine and no disruptions to budget.
    ResourceType("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, ("netpol",)),
    ResourceType(
        "policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), ("status",)
    ),
    ResourceType("events.k8s.io", "v1", "Event", "events", True, ("ev",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False
    ),
    # Answered, never stored: ``kubectl auth can-i`` asks the authorizer through it.
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        False,
        verbs=("create",),
    ),
    # The kinds of the bundled CustomResourceDefinitions (custom_resources).
    *(
        ResourceType(
            c.group,
            c.version,
            c.kind,
            c.plural,
            c.namespaced,
            c.short_names,
            c.subresources,
            c.categories,
        )
        for c in bundled_kinds()
    ),
)

_BY_GVP = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND = {(r.api_version, r.kind): r for r in RESOURCES}


def by_group_version_plural(group: str, version: str, plural: str) -> ResourceType | None:
    return _BY_GVP.get((group, version, plural))


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    return _BY_KIND.get((api_version, kind))
