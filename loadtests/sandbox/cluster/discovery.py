"""API discovery documents, built from the resource table.

Clients learn what a server serves before they ask for anything: kubectl maps
``deploy`` to ``deployments.apps``, finds ``deployments/scale`` and its kind
(``autoscaling/v1 Scale``), and learns which verbs each resource takes. Two
shapes exist and kubectl 1.32 asks for both in one Accept header, preferring
the first:

- aggregated discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``)
  at ``/api`` and ``/apis``: every group, version and resource in one answer;
- the classic chain: ``APIVersions`` at ``/api``, ``APIGroupList`` at
  ``/apis``, then an ``APIResourceList`` per group version.

Both are served; the documents are built once per server (they never change).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loadtests.sandbox.cluster.resources import ResourceType

__all__ = [
    "AGGREGATED_CONTENT_TYPE",
    "Discovery",
    "wants_aggregated",
]

AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_SUBRESOURCE_VERBS = ["get", "patch", "update"]


def wants_aggregated(accept: str) -> bool:
    """Does the Accept header ask for aggregated discovery v2 (kubectl's first choice)?"""
    for clause in accept.split(","):
        params = {p.strip() for p in clause.split(";")[1:]}
        if {"g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"} <= params:
            return True
    return False


def _subresource_kind(rtype: ResourceType, sub: str) -> dict[str, str]:
    if sub == "scale":
        return {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    return {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}


class Discovery:
    def __init__(self, resources: Iterable[ResourceType]) -> None:
        self.resources = tuple(resources)
        self.group_versions: dict[tuple[str, str], list[ResourceType]] = {}
        for r in self.resources:
            self.group_versions.setdefault((r.group, r.version), []).append(r)
        self.groups = sorted({g for g, _ in self.group_versions if g})

    def versions_of(self, group: str) -> list[str]:
        return sorted(v for g, v in self.group_versions if g == group)

    # --- classic -----------------------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": self.versions_of(""),
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }

    def _group(self, group: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self.versions_of(group)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def api_group_list(self) -> dict[str, Any]:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [self._group(g) for g in self.groups],
        }

    def api_group(self, group: str) -> dict[str, Any] | None:
        if group not in self.groups:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group)}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = self.group_versions.get((group, version))
        if types is None:
            return None
        resources: list[dict[str, Any]] = []
        for r in sorted(types, key=lambda t: t.plural):
            entry: dict[str, Any] = {
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(r.verbs),
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.categories:
                entry["categories"] = list(r.categories)
            resources.append(entry)
            for sub in r.subresources:
                sub_entry: dict[str, Any] = {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": _subresource_kind(r, sub)["kind"],
                    "verbs": list(_SUBRESOURCE_VERBS),
                }
                if sub == "scale":
                    sub_entry["group"] = "autoscaling"
                    sub_entry["version"] = "v1"
                resources.append(sub_entry)
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    # --- aggregated (apidiscovery.k8s.io/v2) ----------------------------------------

    def _aggregated_group(self, group: str) -> dict[str, Any]:
        versions = []
        for version in self.versions_of(group):
            resources = []
            for r in sorted(self.group_versions[(group, version)], key=lambda t: t.plural):
                entry: dict[str, Any] = {
                    "resource": r.plural,
                    "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                    "scope": "Namespaced" if r.namespaced else "Cluster",
                    "singularResource": r.singular,
                    "verbs": list(r.verbs),
                }
                if r.short_names:
                    entry["shortNames"] = list(r.short_names)
                if r.categories:
                    entry["categories"] = list(r.categories)
                if r.subresources:
                    entry["subresources"] = [
                        {
                            "subresource": sub,
                            "responseKind": _subresource_kind(r, sub),
                            "verbs": list(_SUBRESOURCE_VERBS),
                        }
                        for sub in r.subresources
                    ]
                resources.append(entry)
            versions.append({"version": version, "resources": resources, "freshness": "Current"})
        metadata: dict[str, Any] = {"creationTimestamp": None}
        if group:
            metadata["name"] = group
        return {"metadata": metadata, "versions": versions}

    def aggregated(self, *, core: bool) -> dict[str, Any]:
        groups = [""] if core else self.groups
        return {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": [self._aggregated_group(g) for g in groups],
        }
