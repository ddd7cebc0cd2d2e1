"""Non-resource endpoints: version, health probes, discovery and OpenAPI v3.

Main decision: discovery answers in the aggregated form when the client asks
for it in ``Accept`` (kubectl 1.32 does) and in the legacy lists otherwise;
``/openapi/v2`` is a 404 (kubectl asks for it in protobuf only and falls back).
"""

from __future__ import annotations

from aiohttp import web

from loadtests.sandbox.cluster.apiserver.wire import json_response
from loadtests.sandbox.cluster.discovery import AGGREGATED_CONTENT_TYPE, Discovery, wants_aggregated
from loadtests.sandbox.cluster.errors import MethodNotAllowed, NotFound
from loadtests.sandbox.cluster.openapi import OpenApi

__all__ = ["PUBLIC_PATHS", "SERVER_VERSION", "non_resource"]

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4",
    "gitCommit": "tidal-sandbox",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# What a cluster's anonymous user may read (system:public-info-viewer).
PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})


def non_resource(
    request: web.Request,
    path: str,
    parts: list[str],
    *,
    discovery: Discovery,
    openapi: OpenApi,
    host_port: str,
) -> web.Response:
    if request.method not in ("GET", "HEAD"):
        raise MethodNotAllowed("the server does not allow this method on the requested resource")
    accept = request.headers.get("Accept", "")
    if path == "/version":
        return json_response(SERVER_VERSION)
    if path in ("/healthz", "/livez", "/readyz"):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/api":
        if wants_aggregated(accept):
            return json_response(
                discovery.aggregated(core=True), content_type=AGGREGATED_CONTENT_TYPE
            )
        return json_response(discovery.api_versions(host_port))
    if path == "/apis":
        if wants_aggregated(accept):
            return json_response(
                discovery.aggregated(core=False), content_type=AGGREGATED_CONTENT_TYPE
            )
        return json_response(discovery.api_group_list())
    if path == "/api/v1":
        found = discovery.resource_list("", "v1")
        if found is not None:
            return json_response(found)
    if len(parts) == 2 and parts[0] == "apis":
        group = discovery.api_group(parts[1])
        if group is not None:
            return json_response(group)
    if len(parts) == 3 and parts[0] == "apis":
        found = discovery.resource_list(parts[1], parts[2])
        if found is not None:
            return json_response(found)
    if path == "/openapi/v3":
        return json_response(openapi.root())
    if path.startswith("/openapi/v3/"):
        doc = openapi.document(path[len("/openapi/v3/") :])
        if doc is not None:
            body, digest = doc
            response = web.Response(body=body, content_type="application/json")
            response.headers["Etag"] = f'"{digest}"'
            return response
    raise NotFound("the server could not find the requested resource")
