"""Which resource a path names and which verb a request is (``RequestInfo``).

Main decision: a path under ``/api/v1`` or ``/apis/<group>/<version>`` that
names a resource this server does not serve, or a subresource the resource
lacks, is a 404 here, before authorization; any other path is a non-resource
request (discovery, OpenAPI, probes) and gets ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from loadtests.sandbox.cluster.apiserver.wire import truthy
from loadtests.sandbox.cluster.errors import MethodNotAllowed, NotFound
from loadtests.sandbox.cluster.resources import ResourceType, by_group_version_plural

__all__ = ["ResourceRequest", "parse_resource_path", "verb_of"]

# Subresources of a namespace (not resources inside it).
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """What a resource path asks for (``RequestInfo`` in the real server)."""

    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    legacy_watch: bool


def parse_resource_path(
    parts: list[str], resources: tuple[ResourceType, ...]
) -> ResourceRequest | None:
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    legacy_watch = False
    if rest[0] == "watch":
        legacy_watch, rest = True, rest[1:]
    namespace: str | None = None
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return None
    plural = rest[0]
    rtype = by_group_version_plural(group, version, plural)
    if rtype is None or rtype not in resources:
        raise NotFound("the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    known = (*rtype.subresources, *rtype.streams)
    if len(rest) > 3 or (subresource is not None and subresource not in known):
        raise NotFound("the server could not find the requested resource")
    if rtype.plural == "namespaces":
        # /api/v1/namespaces/x names namespace x; it is not scoped by itself.
        namespace = None
    elif not rtype.namespaced:
        namespace = None
    return ResourceRequest(rtype, namespace, name, subresource, legacy_watch)


def verb_of(request: web.Request, req: ResourceRequest) -> str:
    method = request.method
    if method in ("GET", "HEAD"):
        if req.legacy_watch or truthy(request.query.get("watch")):
            return "watch"
        return "get" if req.name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if req.name else "deletecollection"
    raise MethodNotAllowed(f"{method} is not supported")
