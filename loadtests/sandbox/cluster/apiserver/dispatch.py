"""A request, once past the faults, to its handler: authenticated, authorized, dispatched.

Public paths (``/version``, ``/healthz``...: what a cluster's anonymous user
may read) need no token; everything else is authenticated by bearer token
and, with RBAC on, authorized as the real server authorizes it (the verb,
the resource and subresource, the namespace, and the name, also the one a
``metadata.name`` field selector names). Then: the sandbox's admin endpoint
(admin token only), a non-resource endpoint (:mod:`.endpoints`), or the
resource handler of the request's verb, one module per job (:mod:`.reads`,
:mod:`.watch`, :mod:`.writes`, :mod:`.patch`, :mod:`.delete`...).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from loadtests.sandbox.cluster.apiserver.access_review import access_review
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.delete import delete_collection, delete_object
from loadtests.sandbox.cluster.apiserver.endpoints import PUBLIC_PATHS, non_resource
from loadtests.sandbox.cluster.apiserver.fault_control import FaultControl
from loadtests.sandbox.cluster.apiserver.patch import patch_object
from loadtests.sandbox.cluster.apiserver.pod_log import serve_pod_log
from loadtests.sandbox.cluster.apiserver.port_forward import serve_port_forward
from loadtests.sandbox.cluster.apiserver.reads import get_object, list_objects
from loadtests.sandbox.cluster.apiserver.routing import (
    ResourceRequest,
    parse_resource_path,
    verb_of,
)
from loadtests.sandbox.cluster.apiserver.watch import serve_watch
from loadtests.sandbox.cluster.apiserver.writes import create_object, update_object
from loadtests.sandbox.cluster.auth import TokenRegistry, UserInfo
from loadtests.sandbox.cluster.discovery import Discovery
from loadtests.sandbox.cluster.errors import MethodNotAllowed, NotFound, Unauthorized
from loadtests.sandbox.cluster.openapi import OpenApi
from loadtests.sandbox.cluster.rbac import Attributes, RbacAuthorizer
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.selectors import parse_field_selector

__all__ = ["USER_KEY", "Dispatch"]

# Where the authenticated user's name is kept on a request (the audit log reads it).
USER_KEY = web.RequestKey("tidal_sandbox_user", str)


class Dispatch:
    """The API server's one request handler (the middleware wraps it)."""

    def __init__(
        self,
        ctx: ResourceContext,
        *,
        tokens: TokenRegistry,
        authorizer: RbacAuthorizer,
        rbac: Callable[[], bool],
        resources: tuple[ResourceType, ...],
        faults: FaultControl,
        closing: asyncio.Event,
        log_dir: Callable[[], Path | None],
        address: Callable[[], str],
    ) -> None:
        self._ctx = ctx
        self._tokens = tokens
        self._authorizer = authorizer
        # Whether RBAC is on now (the server's switch, which may change while it runs).
        self._rbac = rbac
        self._resources = resources
        self._discovery = Discovery(resources)
        self._openapi = OpenApi(resources)
        self._faults = faults
        # Set when the server stops: ends the streams that would otherwise run on.
        self._closing = closing
        # Where the kubelet writes containers' output (``pods/log``; None: no logs), now.
        self._log_dir = log_dir
        # Where the listener is (host:port), for the discovery documents.
        self._address = address

    def _authenticate(self, request: web.Request) -> UserInfo:
        user = self._tokens.authenticate(request.headers.get("Authorization"))
        if user is None:
            raise Unauthorized("Unauthorized")
        request[USER_KEY] = user.name
        return user

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in PUBLIC_PATHS and request.method in ("GET", "HEAD"):
            # What a cluster's anonymous user may read (system:public-info-viewer):
            # probes and version checks need no token.
            return self._non_resource(request, path, [])
        user = self._authenticate(request)
        if path.startswith("/_sandbox/"):
            return await self._admin(request, user, path)
        parts = [p for p in path.split("/") if p]
        resource = parse_resource_path(parts, self._resources)
        if resource is None:
            self._authorize_path(user, request.method, path)
            return self._non_resource(request, path, parts)
        return await self._resource(request, user, resource)

    def _authorize_path(self, user: UserInfo, method: str, path: str) -> None:
        if not self._rbac():
            return
        verb = {"GET": "get", "HEAD": "head", "POST": "post", "PUT": "put", "DELETE": "delete"}.get(
            method, method.lower()
        )
        self._authorizer.check(Attributes(user=user, verb=verb, resource_request=False, path=path))

    def _non_resource(self, request: web.Request, path: str, parts: list[str]) -> web.Response:
        return non_resource(
            request,
            path,
            parts,
            discovery=self._discovery,
            openapi=self._openapi,
            host_port=self._address(),
        )

    def _allowed(self, attrs: Attributes) -> bool:
        return not self._rbac() or self._authorizer.allowed(attrs)

    async def _admin(self, request: web.Request, user: UserInfo, path: str) -> web.Response:
        if not user.is_master:
            raise Unauthorized("the sandbox admin endpoints need the admin token")
        if path != "/_sandbox/faults":
            raise NotFound("the server could not find the requested resource")
        return await self._faults.serve(request)

    async def _resource(
        self, request: web.Request, user: UserInfo, req: ResourceRequest
    ) -> web.StreamResponse:
        verb = verb_of(request, req)
        if verb not in req.rtype.verbs:
            raise MethodNotAllowed(
                f'{verb} is not supported on resources of kind "{req.rtype.key}"'
            )
        if self._rbac():
            name = req.name or ""
            if not name and verb in ("list", "watch"):
                name = (
                    parse_field_selector(request.query.get("fieldSelector")).value_of(
                        "metadata.name"
                    )
                    or ""
                )
            namespace = req.namespace or ""
            if req.rtype.plural == "namespaces" and req.name:
                namespace = req.name
            self._authorizer.check(
                Attributes(
                    user=user,
                    verb=verb,
                    resource_request=True,
                    api_group=req.rtype.group,
                    resource=req.rtype.plural,
                    subresource=req.subresource or "",
                    namespace=namespace,
                    name=name,
                )
            )
        if req.subresource == "portforward":
            return await serve_port_forward(self._ctx, request, req, closing=self._closing)
        if req.subresource in req.rtype.streams:
            if verb != "get":
                raise MethodNotAllowed(
                    f"{verb} is not supported on {req.rtype.plural}/{req.subresource}"
                )
            return await serve_pod_log(
                self._ctx, request, req, log_dir=self._log_dir(), closing=self._closing
            )
        if verb == "watch":
            return await serve_watch(self._ctx, request, req)
        if verb == "list":
            return list_objects(self._ctx, request, req)
        if verb == "get":
            return get_object(self._ctx, request, req)
        if verb == "create" and req.rtype.kind == "SelfSubjectAccessReview":
            return await access_review(request, user, req, allowed=self._allowed)
        if verb == "create":
            if req.subresource:
                raise MethodNotAllowed(
                    f"create is not supported on {req.rtype.plural}/{req.subresource}"
                )
            return await create_object(self._ctx, request, req)
        if verb == "update":
            return await update_object(self._ctx, request, req)
        if verb == "patch":
            return await patch_object(self._ctx, request, req)
        if verb == "delete":
            return await delete_object(self._ctx, request, req)
        return await delete_collection(self._ctx, request, req)
