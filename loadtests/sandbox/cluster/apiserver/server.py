"""The emulated API server's process-facing side: lifecycle, credentials, faults, dispatch.

:class:`ApiServer` owns the listener (HTTPS with its own CA), the token
registry, the fault switches and the audit log; every request passes its
middleware (faults, errors as ``Status``, audit of writes) and is dispatched
to a non-resource endpoint, the admin endpoint, or a resource handler after
authentication and (when on) RBAC. The handlers live beside it, one module per
job.

Main decision: the middleware answers 503 (or aborts the connection) while
the server is made unavailable, before authentication, so a fault looks to a
client exactly like an API server that is down; the audit log records the
status the client actually got.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from loadtests.sandbox.cluster import defaults
from loadtests.sandbox.cluster.apiserver.access_review import access_review
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.delete import delete_collection, delete_object
from loadtests.sandbox.cluster.apiserver.endpoints import PUBLIC_PATHS, non_resource
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
from loadtests.sandbox.cluster.apiserver.wire import Obj, error_response, json_response
from loadtests.sandbox.cluster.apiserver.writes import create_object, update_object
from loadtests.sandbox.cluster.auth import (
    TokenRegistry,
    UserInfo,
    in_cluster_files,
    kubeconfig_document,
)
from loadtests.sandbox.cluster.certs import ServingCertificates, make_certificates
from loadtests.sandbox.cluster.discovery import Discovery
from loadtests.sandbox.cluster.errors import (
    ApiError,
    BadRequest,
    MethodNotAllowed,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
)
from loadtests.sandbox.cluster.faults import Faults
from loadtests.sandbox.cluster.openapi import OpenApi
from loadtests.sandbox.cluster.rbac import Attributes, RbacAuthorizer
from loadtests.sandbox.cluster.resources import RESOURCES, ResourceType, by_group_version_plural
from loadtests.sandbox.cluster.schemas import definitions
from loadtests.sandbox.cluster.selectors import parse_field_selector
from loadtests.sandbox.cluster.store import Store

__all__ = ["ApiServer", "AuditRecord"]

_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_USER_KEY = web.RequestKey("tidal_sandbox_user", str)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One write request as the server answered it."""

    at: float  # the server's event-loop time
    user: str  # the authenticated user ("" when authentication failed)
    method: str
    path: str
    query: str
    status: int


class ApiServer:
    """The emulated API server over ``store``; see the module docstring."""

    def __init__(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        rbac: bool = False,
        certs_dir: Path,
        bookmark_interval_s: float = 5.0,
        resources: tuple[ResourceType, ...] = RESOURCES,
        audit_max_records: int = 100_000,
        log_dir: Path | None = None,
    ) -> None:
        if bookmark_interval_s <= 0:
            raise ValueError(f"bookmark_interval_s must be > 0, got {bookmark_interval_s}")
        self.store = store
        self._ctx = ResourceContext(store, bookmark_interval_s=bookmark_interval_s)
        self.host = host
        self._port = port
        self.rbac = rbac
        self.certs_dir = certs_dir
        self.bookmark_interval_s = bookmark_interval_s
        self.tokens = TokenRegistry()
        self.faults = Faults()
        self._resources = resources
        self._discovery = Discovery(resources)
        self._openapi = OpenApi(resources)
        self._authorizer = RbacAuthorizer(store)
        self._certs: ServingCertificates | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._reopen_task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.audit: deque[AuditRecord] = deque(maxlen=audit_max_records)
        # Where the kubelet writes containers' output (``pods/log``); None: no logs.
        self.log_dir = log_dir
        # Set on stop: ends the streams that would otherwise run on (log follows).
        self._closing = asyncio.Event()

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self._port}"

    @property
    def ca_path(self) -> Path:
        if self._certs is None:
            raise RuntimeError("the API server has not been started")
        return self._certs.ca_path

    @property
    def certificates(self) -> ServingCertificates:
        if self._certs is None:
            raise RuntimeError("the API server has not been started")
        return self._certs

    @property
    def open_watches(self) -> int:
        """How many watch streams this server is serving now."""
        return len(self._ctx.watchers)

    @property
    def admin_token(self) -> str:
        return self.tokens.admin_token

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._closing.clear()
        self._certs = make_certificates(self.certs_dir, hosts=(self.host,))
        ns_type = by_group_version_plural("", "v1", "namespaces")
        for name in _DEFAULT_NAMESPACES:
            if ns_type is not None and self.store.peek(ns_type, None, name) is None:
                obj: Obj = {"metadata": {"name": name}}
                defaults.apply_defaults(obj, "Namespace", creating=True)
                self.store.create(ns_type, obj)
        # Warm the schema caches so the first kubectl call is not the slow one.
        definitions(strict=True)
        app = web.Application(middlewares=[self._middleware], client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        await self._open_listener()

    async def _open_listener(self) -> None:
        assert self._runner is not None
        assert self._certs is not None
        self._site = web.TCPSite(
            self._runner,
            self.host,
            self._port,
            ssl_context=self._certs.server_context(),
            reuse_address=True,
            backlog=1024,
        )
        await self._site.start()
        if self._port == 0:
            self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._reopen_task is not None:
            self._reopen_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reopen_task
            self._reopen_task = None
        self._closing.set()
        for watcher in list(self._ctx.watchers):
            watcher.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._site = None

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- credentials ---------------------------------------------------------------------

    def mint_token(self, namespace: str, service_account: str) -> str:
        """A bearer token for ServiceAccount ``namespace/service_account``."""
        return self.tokens.mint_service_account_token(namespace, service_account)

    def mint_user_token(self, name: str, *, groups: tuple[str, ...] = ()) -> str:
        return self.tokens.mint_user_token(name, groups=groups)

    def write_kubeconfig(
        self, path: Path, *, token: str | None = None, namespace: str = "default"
    ) -> Path:
        """Write a kubeconfig for this server (admin unless ``token`` is given)."""
        token = token or self.admin_token
        user = self.tokens.authenticate(f"Bearer {token}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            kubeconfig_document(
                server_url=self.url,
                ca_pem=self.ca_path.read_bytes(),
                token=token,
                user=(user.name if user else "user").replace(":", "-"),
                namespace=namespace,
            )
        )
        path.chmod(0o600)
        return path

    def write_in_cluster_dir(
        self, directory: Path, *, namespace: str, service_account: str
    ) -> dict[str, str]:
        """Write a pod's ServiceAccount mount (token, ca.crt, namespace) for a new token.

        Returns the environment a pod would have (``KUBERNETES_SERVICE_HOST``
        and ``_PORT``); with the files, clients' in-cluster loaders work.
        """
        token = self.mint_token(namespace, service_account)
        in_cluster_files(
            directory, token=token, ca_pem=self.ca_path.read_bytes(), namespace=namespace
        )
        return {"KUBERNETES_SERVICE_HOST": self.host, "KUBERNETES_SERVICE_PORT": str(self._port)}

    # --- faults --------------------------------------------------------------------------

    def _now(self) -> float:
        return (self._loop or asyncio.get_running_loop()).time()

    async def make_unavailable(
        self, duration_s: float, *, refuse_connections: bool = False
    ) -> None:
        """503 to every request (or refuse connections) for ``duration_s``; cuts watches."""
        self.faults.make_unavailable(
            now=self._now(), duration_s=duration_s, refuse=refuse_connections
        )
        self.cut_watches()
        if refuse_connections and self._site is not None:
            await self._site.stop()
            self._site = None
            if self._reopen_task is not None:
                self._reopen_task.cancel()
            self._reopen_task = asyncio.create_task(
                self._reopen_after(duration_s), name="apiserver-reopen"
            )

    async def _reopen_after(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._reopen_task = None
        await self.restore()

    async def restore(self) -> None:
        """Lift every fault now (and reopen the listener if it was closed)."""
        self.faults.clear()
        if self._reopen_task is not None and self._reopen_task is not asyncio.current_task():
            self._reopen_task.cancel()
            self._reopen_task = None
        if self._site is None and self._runner is not None:
            await self._open_listener()

    def slow_down(self, *, latency_s: float, duration_s: float) -> None:
        self.faults.slow_down(now=self._now(), latency_s=latency_s, duration_s=duration_s)

    def cut_watches(self, *, compact: bool = False) -> int:
        """End every watch stream this server serves; ``compact`` also drops history."""
        if compact:
            self.store.compact()
        victims = list(self._ctx.watchers)
        for watcher in victims:
            watcher.close()
        return len(victims)

    # --- request plumbing ----------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not request.path.startswith("/_sandbox/"):
            now = self._now()
            if self.faults.unavailable(now):
                if self.faults.refuse_connections and request.transport is not None:
                    request.transport.abort()
                return error_response(
                    ServiceUnavailable("the server is currently unable to handle the request")
                )
            delay = self.faults.delay_s(now)
            if delay > 0:
                await asyncio.sleep(delay)
        try:
            response = await handler(request)
        except ApiError as error:
            response = error_response(error)
        if request.method in _WRITE_METHODS and not request.path.startswith("/_sandbox/"):
            self.audit.append(
                AuditRecord(
                    at=self._now(),
                    user=request.get(_USER_KEY, ""),
                    method=request.method,
                    path=request.path,
                    query=request.query_string,
                    status=response.status,
                )
            )
        return response

    def _authenticate(self, request: web.Request) -> UserInfo:
        user = self.tokens.authenticate(request.headers.get("Authorization"))
        if user is None:
            raise Unauthorized("Unauthorized")
        request[_USER_KEY] = user.name
        return user

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
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
        if not self.rbac:
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
            host_port=f"{self.host}:{self._port}",
        )

    def _allowed(self, attrs: Attributes) -> bool:
        return not self.rbac or self._authorizer.allowed(attrs)

    # --- admin (fault injection) -------------------------------------------------------------

    async def _admin(self, request: web.Request, user: UserInfo, path: str) -> web.Response:
        if not user.is_master:
            raise Unauthorized("the sandbox admin endpoints need the admin token")
        if path != "/_sandbox/faults":
            raise NotFound("the server could not find the requested resource")
        if request.method == "DELETE":
            await self.restore()
        elif request.method == "POST":
            try:
                body = await request.json()
            except ValueError as error:
                raise BadRequest(f"the faults body must be JSON: {error}") from None
            if not isinstance(body, dict):
                raise BadRequest("the faults body must be a JSON object")
            allowed = {
                "unavailable_s",
                "refuse_connections",
                "latency_s",
                "slow_s",
                "cut_watches",
                "compact",
            }
            unknown = set(body) - allowed
            if unknown:
                raise BadRequest(
                    f"unknown fault settings {sorted(unknown)}; allowed: {sorted(allowed)}"
                )
            try:
                if body.get("latency_s") is not None:
                    self.slow_down(
                        latency_s=float(body["latency_s"]), duration_s=float(body.get("slow_s", 60))
                    )
                if body.get("cut_watches") or body.get("compact"):
                    self.cut_watches(compact=bool(body.get("compact")))
                if body.get("unavailable_s") is not None:
                    await self.make_unavailable(
                        float(body["unavailable_s"]),
                        refuse_connections=bool(body.get("refuse_connections")),
                    )
            except (TypeError, ValueError) as error:
                raise BadRequest(f"bad fault settings: {error}") from None
        elif request.method != "GET":
            raise MethodNotAllowed("GET, POST or DELETE /_sandbox/faults")
        return json_response(self.faults.describe(self._now()))

    # --- resources -----------------------------------------------------------------------

    async def _resource(
        self, request: web.Request, user: UserInfo, req: ResourceRequest
    ) -> web.StreamResponse:
        verb = verb_of(request, req)
        if verb not in req.rtype.verbs:
            raise MethodNotAllowed(
                f'{verb} is not supported on resources of kind "{req.rtype.key}"'
            )
        if self.rbac:
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
                self._ctx, request, req, log_dir=self.log_dir, closing=self._closing
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
