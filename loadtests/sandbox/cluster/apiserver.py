"""The emulated Kubernetes API server: HTTPS over the object store.

Real clients talk to it unmodified: ``kubectl`` 1.32, the official
``kubernetes`` client and kubernetes-asyncio, through a generated kubeconfig
(its own CA, a bearer token) or an in-cluster token directory. It serves:

- ``/version`` (v1.32.x: kubectl's dispatcher picks its binary from it),
  ``/healthz``, ``/livez``, ``/readyz``;
- discovery (``discovery``), ``/openapi/v3`` (``openapi``), and 404 for
  ``/openapi/v2``, which kubectl asks for in protobuf only;
- every resource of ``resources.RESOURCES`` with get, list (label and field
  selectors, ``limit``/``continue``), watch (replay from a version, bookmarks,
  ``timeoutSeconds``, 410 as an ``ERROR`` event), create (``generateName``,
  ``dryRun``), update (409 on a stale version), the four patch types
  (``patching``), delete (propagation, grace period, preconditions) and
  deletecollection; subresources ``status`` and ``scale``;
- server-side Tables for ``kubectl get`` (``tables``); answers are JSON even
  when protobuf is preferred, as kubectl accepts;
- ``events.k8s.io/v1`` Events over the core Events (``events_conversion``);
- validation against the official schemas with ``fieldValidation``
  (``validation``), and defaulting (``defaults``);
- bearer-token authentication (``auth``) and, when switched on, RBAC
  (``rbac``);
- fault injection (``faults``) through ``make_unavailable``, ``slow_down``,
  ``cut_watches`` or the admin endpoint ``/_sandbox/faults``.

Composing it::

    server = ApiServer(store, certs_dir=tmp / "pki", rbac=True)
    await server.start()
    server.url                     # "https://127.0.0.1:<port>"
    server.ca_path                 # the CA clients trust
    server.admin_token             # system:masters
    token = server.mint_token("tidal", "tidal-scaler")     # a ServiceAccount's
    server.write_kubeconfig(tmp / "kubeconfig")            # admin unless token=
    env = server.write_in_cluster_dir(tmp / "sa", namespace="tidal",
                                      service_account="tidal-scaler")
    await server.make_unavailable(5.0)        # 503 for 5 s (refuse_connections=True: refused)
    server.slow_down(latency_s=0.2, duration_s=10.0)
    server.cut_watches(compact=True)          # watchers re-list after 410
    await server.stop()

Every write (POST, PUT, PATCH, DELETE; not the admin endpoint) is kept in
``server.audit``, a bounded audit log of :class:`AuditRecord` (time, user,
verb, path, status), as a real API server's audit log at level Metadata: the
way a test tells which client wrote what (two scalers, one leader).

The admin endpoint takes the admin token: ``GET /_sandbox/faults`` shows the
faults, ``POST`` with ``{"unavailable_s": 5, "refuse_connections": false,
"latency_s": 0.2, "slow_s": 10, "cut_watches": true, "compact": false}`` sets
them, ``DELETE`` lifts them.

Everything runs on the event loop of the store; no handler awaits between
reading and writing the store, so each request's read-modify-write is atomic.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from loadtests.sandbox.cluster import (
    defaults,
    events_conversion,
    patching,
    protobuf,
    tables,
    validation,
)
from loadtests.sandbox.cluster.auth import (
    TokenRegistry,
    UserInfo,
    in_cluster_files,
    kubeconfig_document,
)
from loadtests.sandbox.cluster.certs import ServingCertificates, make_certificates
from loadtests.sandbox.cluster.discovery import AGGREGATED_CONTENT_TYPE, Discovery, wants_aggregated
from loadtests.sandbox.cluster.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    MethodNotAllowed,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
    UnsupportedMediaType,
)
from loadtests.sandbox.cluster.faults import Faults
from loadtests.sandbox.cluster.openapi import OpenApi
from loadtests.sandbox.cluster.rbac import Attributes, RbacAuthorizer
from loadtests.sandbox.cluster.resources import RESOURCES, ResourceType, by_group_version_plural
from loadtests.sandbox.cluster.schemas import definitions
from loadtests.sandbox.cluster.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
    selector_string,
)
from loadtests.sandbox.cluster.store import Store, Watcher, WatchEvent, copy_object, rfc3339

__all__ = ["SERVER_VERSION", "ApiServer", "AuditRecord"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

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
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
_PUBLIC_PATHS = {"/version", "/healthz", "/livez", "/readyz"}
_JSON = "application/json"
_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_EVENTS_GROUP = "events.k8s.io"


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _json_response(
    value: Any, *, status: int = 200, content_type: str = _JSON, warnings: list[str] | None = None
) -> web.Response:
    response = web.Response(body=_dumps(value), status=status, content_type="application/json")
    if content_type != _JSON:
        response.headers["Content-Type"] = content_type
    for warning in warnings or ():
        escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response


def _error_response(error: ApiError) -> web.Response:
    response = _json_response(error.status(), status=error.code)
    if isinstance(error, ServiceUnavailable):
        response.headers["Retry-After"] = "1"
    return response


@dataclass(frozen=True, slots=True)
class _Request:
    """What a resource path asks for (``RequestInfo`` in the real server)."""

    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    legacy_watch: bool


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


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
    ) -> None:
        if bookmark_interval_s <= 0:
            raise ValueError(f"bookmark_interval_s must be > 0, got {bookmark_interval_s}")
        self.store = store
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
        self._watchers: set[Watcher] = set()
        self._reopen_task: asyncio.Task[None] | None = None
        self._core_events = by_group_version_plural("", "v1", "events")
        self._loop: asyncio.AbstractEventLoop | None = None
        self.audit: deque[AuditRecord] = deque(maxlen=audit_max_records)

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
    def admin_token(self) -> str:
        return self.tokens.admin_token

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
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
        server = self._site._server
        if self._port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self._port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._reopen_task is not None:
            self._reopen_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reopen_task
            self._reopen_task = None
        for watcher in list(self._watchers):
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
        victims = list(self._watchers)
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
                return _error_response(
                    ServiceUnavailable("the server is currently unable to handle the request")
                )
            delay = self.faults.delay_s(now)
            if delay > 0:
                await asyncio.sleep(delay)
        try:
            response = await handler(request)
        except ApiError as error:
            response = _error_response(error)
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
        if path in _PUBLIC_PATHS and request.method in ("GET", "HEAD"):
            # What a cluster's anonymous user may read (system:public-info-viewer):
            # probes and version checks need no token.
            return self._non_resource(request, path, [])
        user = self._authenticate(request)
        if path.startswith("/_sandbox/"):
            return await self._admin(request, user, path)
        parts = [p for p in path.split("/") if p]
        resource = self._parse_resource_path(parts)
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

    def _parse_resource_path(self, parts: list[str]) -> _Request | None:
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
        if rtype is None or rtype not in self._resources:
            raise NotFound("the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if len(rest) > 3 or (subresource is not None and subresource not in rtype.subresources):
            raise NotFound("the server could not find the requested resource")
        if rtype.plural == "namespaces":
            # /api/v1/namespaces/x names namespace x; it is not scoped by itself.
            namespace = None
        elif not rtype.namespaced:
            namespace = None
        return _Request(rtype, namespace, name, subresource, legacy_watch)

    # --- non-resource endpoints ------------------------------------------------------------

    def _non_resource(self, request: web.Request, path: str, parts: list[str]) -> web.Response:
        if request.method not in ("GET", "HEAD"):
            raise MethodNotAllowed(
                "the server does not allow this method on the requested resource"
            )
        accept = request.headers.get("Accept", "")
        if path == "/version":
            return _json_response(SERVER_VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/api":
            if wants_aggregated(accept):
                return _json_response(
                    self._discovery.aggregated(core=True), content_type=AGGREGATED_CONTENT_TYPE
                )
            return _json_response(self._discovery.api_versions(f"{self.host}:{self._port}"))
        if path == "/apis":
            if wants_aggregated(accept):
                return _json_response(
                    self._discovery.aggregated(core=False), content_type=AGGREGATED_CONTENT_TYPE
                )
            return _json_response(self._discovery.api_group_list())
        if path == "/api/v1":
            found = self._discovery.resource_list("", "v1")
            if found is not None:
                return _json_response(found)
        if len(parts) == 2 and parts[0] == "apis":
            group = self._discovery.api_group(parts[1])
            if group is not None:
                return _json_response(group)
        if len(parts) == 3 and parts[0] == "apis":
            found = self._discovery.resource_list(parts[1], parts[2])
            if found is not None:
                return _json_response(found)
        if path == "/openapi/v3":
            return _json_response(self._openapi.root())
        if path.startswith("/openapi/v3/"):
            doc = self._openapi.document(path[len("/openapi/v3/") :])
            if doc is not None:
                body, digest = doc
                response = web.Response(body=body, content_type="application/json")
                response.headers["Etag"] = f'"{digest}"'
                return response
        raise NotFound("the server could not find the requested resource")

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
        return _json_response(self.faults.describe(self._now()))

    # --- resources -----------------------------------------------------------------------

    def _storage_type(self, rtype: ResourceType) -> ResourceType:
        if self._is_events_group(rtype) and self._core_events:
            return self._core_events
        return rtype

    @staticmethod
    def _is_events_group(rtype: ResourceType) -> bool:
        return rtype.group == _EVENTS_GROUP and rtype.plural == "events"

    def _to_wire(self, rtype: ResourceType, obj: Obj) -> Obj:
        if self._is_events_group(rtype):
            return events_conversion.core_to_events(obj)
        return obj

    def _from_wire(self, rtype: ResourceType, obj: Obj) -> Obj:
        if self._is_events_group(rtype):
            return events_conversion.events_to_core(obj)
        return obj

    def _verb(self, request: web.Request, req: _Request) -> str:
        method = request.method
        if method in ("GET", "HEAD"):
            if req.legacy_watch or _truthy(request.query.get("watch")):
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

    async def _resource(
        self, request: web.Request, user: UserInfo, req: _Request
    ) -> web.StreamResponse:
        verb = self._verb(request, req)
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
        if verb == "watch":
            return await self._watch(request, req)
        if verb == "list":
            return self._list(request, req)
        if verb == "get":
            return self._get(request, req)
        if verb == "create" and req.rtype.kind == "SelfSubjectAccessReview":
            return await self._access_review(request, user, req)
        if verb == "create":
            if req.subresource:
                raise MethodNotAllowed(
                    f"create is not supported on {req.rtype.plural}/{req.subresource}"
                )
            return await self._create(request, req)
        if verb == "update":
            return await self._update(request, req)
        if verb == "patch":
            return await self._patch(request, req)
        if verb == "delete":
            return await self._delete(request, req)
        return await self._delete_collection(request, req)

    async def _access_review(
        self, request: web.Request, user: UserInfo, req: _Request
    ) -> web.Response:
        """``SelfSubjectAccessReview``: may the caller do this? (``kubectl auth can-i``)."""
        if "protobuf" in request.headers.get("Content-Type", ""):
            try:
                body: Any = protobuf.decode_self_subject_access_review(await request.read())
            except protobuf.ProtobufError as error:
                raise BadRequest(f"cannot decode the protobuf body: {error}") from None
        else:
            body = await self._read_body(request)
        review = self._check_kind(req.rtype, body)
        spec = review.get("spec") or {}
        resource = spec.get("resourceAttributes")
        non_resource = spec.get("nonResourceAttributes")
        if isinstance(resource, dict):
            attrs = Attributes(
                user=user,
                verb=str(resource.get("verb", "")),
                resource_request=True,
                api_group=str(resource.get("group", "")),
                resource=str(resource.get("resource", "")),
                subresource=str(resource.get("subresource", "")),
                namespace=str(resource.get("namespace", "")),
                name=str(resource.get("name", "")),
            )
        elif isinstance(non_resource, dict):
            attrs = Attributes(
                user=user,
                verb=str(non_resource.get("verb", "")),
                resource_request=False,
                path=str(non_resource.get("path", "")),
            )
        else:
            raise Invalid.of(
                kind="SelfSubjectAccessReview",
                group="authorization.k8s.io",
                name="",
                causes=[
                    (
                        "spec.resourceAttributes",
                        "Required value: exactly one of nonResourceAttributes or "
                        "resourceAttributes must be specified",
                    )
                ],
            )
        allowed = not self.rbac or self._authorizer.allowed(attrs)
        review["status"] = {"allowed": allowed}
        review.setdefault("metadata", {})["creationTimestamp"] = None
        return _json_response(review, status=201)

    # --- reads ---------------------------------------------------------------------------

    def _render(self, request: web.Request, req: _Request, obj: Obj) -> web.Response:
        accept = request.headers.get("Accept", "")
        if tables.wants_table(accept):
            table = tables.table_for(
                req.rtype,
                [obj],
                resource_version=str(obj.get("metadata", {}).get("resourceVersion", "")),
                include_object=request.query.get("includeObject", "Metadata"),
                row_source=self._printed_form(req.rtype),
            )
            return _json_response(
                table, content_type="application/json;as=Table;v=v1;g=meta.k8s.io"
            )
        if "as=PartialObjectMetadata" in accept:
            return _json_response(
                {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata", {}),
                }
            )
        return _json_response(obj)

    def _printed_form(self, rtype: ResourceType) -> Callable[[Obj], Obj] | None:
        if self._is_events_group(rtype):
            return events_conversion.events_to_core
        return None

    def _get(self, request: web.Request, req: _Request) -> web.Response:
        assert req.name is not None
        stored = self.store.get(self._storage_type(req.rtype), req.namespace, req.name)
        if req.subresource == "scale":
            return _json_response(self._scale_of(req.rtype, stored))
        return self._render(request, req, self._to_wire(req.rtype, stored))

    def _selectors(
        self, request: web.Request, rtype: ResourceType
    ) -> tuple[LabelSelector, FieldSelector]:
        labels = parse_label_selector(request.query.get("labelSelector"))
        field_text = request.query.get("fieldSelector")
        if self._is_events_group(rtype):
            field_text = events_conversion.events_field_selector(field_text)
        return labels, parse_field_selector(field_text)

    def _list(self, request: web.Request, req: _Request) -> web.Response:
        rtype = req.rtype
        labels, fields = self._selectors(request, rtype)
        items, rv = self.store.list(
            self._storage_type(rtype),
            namespace=req.namespace,
            labels=labels,
            fields=fields,
            copy=False,
        )
        token = request.query.get("continue")
        if token:
            # The list goes on from the last key it returned, at the current
            # state (the store keeps no snapshots to serve the first page's).
            start_ns, start_name, _first_rv = self._decode_continue(token)
            start_after = (start_ns, start_name)
            items = [
                o
                for o in items
                if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start_after
            ]
        limit_text = request.query.get("limit")
        next_token: str | None = None
        remaining: int | None = None
        if limit_text:
            try:
                limit = int(limit_text)
            except ValueError:
                raise BadRequest(f"limit must be an integer, got {limit_text!r}") from None
            if 0 < limit < len(items):
                remaining = len(items) - limit
                items = items[:limit]
                last = items[-1]["metadata"]
                next_token = self._encode_continue(last.get("namespace", ""), last["name"], rv)
        wire = [self._to_wire(rtype, copy_object(o)) for o in items]
        if tables.wants_table(request.headers.get("Accept", "")):
            table = tables.table_for(
                rtype,
                wire,
                resource_version=rv,
                include_object=request.query.get("includeObject", "Metadata"),
                continue_token=next_token,
                remaining=remaining,
                row_source=self._printed_form(rtype),
            )
            return _json_response(
                table, content_type="application/json;as=Table;v=v1;g=meta.k8s.io"
            )
        metadata: Obj = {"resourceVersion": rv}
        if next_token:
            metadata["continue"] = next_token
            metadata["remainingItemCount"] = remaining
        if "as=PartialObjectMetadataList" in request.headers.get("Accept", ""):
            return _json_response(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                    "items": [
                        {
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": o["metadata"],
                        }
                        for o in wire
                    ],
                }
            )
        return _json_response(
            {
                "kind": f"{rtype.kind}List",
                "apiVersion": rtype.api_version,
                "metadata": metadata,
                "items": wire,
            }
        )

    @staticmethod
    def _encode_continue(namespace: str, name: str, rv: str) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": int(rv), "start": f"{namespace}\x00{name}"})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token: str) -> tuple[str, str, str]:
        try:
            padded = token + "=" * (-len(token) % 4)
            data = json.loads(base64.urlsafe_b64decode(padded))
            namespace, name = str(data["start"]).split("\x00", 1)
            return namespace, name, str(data["rv"])
        except (ValueError, KeyError, TypeError):
            raise BadRequest(f"invalid continue token {token!r}") from None

    # --- watch ---------------------------------------------------------------------------

    async def _watch(self, request: web.Request, req: _Request) -> web.StreamResponse:
        rtype = req.rtype
        labels, fields = self._selectors(request, rtype)
        if req.name:
            fields = FieldSelector(
                (
                    *fields.requirements,
                    *parse_field_selector(f"metadata.name={req.name}").requirements,
                )
            )
        query = request.query
        send_initial = _truthy(query.get("sendInitialEvents"))
        resource_version = None if send_initial else query.get("resourceVersion")
        timeout_s: float | None = None
        if query.get("timeoutSeconds"):
            try:
                timeout_s = float(query["timeoutSeconds"])
            except ValueError:
                raise BadRequest(
                    f"timeoutSeconds must be a number, got {query['timeoutSeconds']!r}"
                ) from None
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        accept = request.headers.get("Accept", "")
        as_table = tables.wants_table(accept)
        response = web.StreamResponse(status=200)
        response.content_type = "application/json"
        if as_table:
            response.headers["Content-Type"] = "application/json;as=Table;v=v1;g=meta.k8s.io"
        response.headers["Transfer-Encoding"] = "chunked"
        try:
            watcher = self.store.watch(
                self._storage_type(rtype),
                namespace=req.namespace,
                resource_version=resource_version,
                labels=labels,
                fields=fields,
            )
        except Gone as gone:
            # The real server accepts the watch, then sends the 410 as an ERROR event.
            await response.prepare(request)
            await response.write(_dumps({"type": "ERROR", "object": gone.status()}) + b"\n")
            await response.write_eof()
            return response
        self._watchers.add(watcher)
        initial_left = watcher.pending() if send_initial else -1
        include = query.get("includeObject", "Metadata")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s if timeout_s else None
        headers_sent = False
        try:
            await response.prepare(request)
            if initial_left == 0:
                await response.write(self._bookmark_line(rtype, watcher, initial_end=True))
                initial_left = -1
            while True:
                wait_s = self.bookmark_interval_s if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    wait_s = min(wait_s, left) if wait_s is not None else left
                event = await watcher.next(wait_s)
                if event is None:
                    if watcher.closed:
                        break
                    if bookmarks and not as_table and (deadline is None or loop.time() < deadline):
                        await response.write(self._bookmark_line(rtype, watcher))
                    continue
                if as_table:
                    line = self._table_event_line(rtype, event, include, headers=not headers_sent)
                    headers_sent = True
                else:
                    obj = self._to_wire(rtype, event.object)
                    line = _dumps({"type": event.type, "object": obj}) + b"\n"
                await response.write(line)
                if initial_left > 0:
                    initial_left -= 1
                    if initial_left == 0:
                        await response.write(self._bookmark_line(rtype, watcher, initial_end=True))
                        initial_left = -1
        except ConnectionResetError:
            return response  # the client went away mid-write: nothing left to say
        finally:
            watcher.close()
            self._watchers.discard(watcher)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    def _bookmark_line(
        self, rtype: ResourceType, watcher: Watcher, *, initial_end: bool = False
    ) -> bytes:
        metadata: Obj = {"resourceVersion": str(max(watcher.last_rv, 1))}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        return (
            _dumps(
                {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": rtype.kind,
                        "apiVersion": rtype.api_version,
                        "metadata": metadata,
                    },
                }
            )
            + b"\n"
        )

    def _table_event_line(
        self, rtype: ResourceType, event: WatchEvent, include: str, *, headers: bool
    ) -> bytes:
        wire = self._to_wire(rtype, event.object)
        table = tables.table_for(
            rtype,
            [wire],
            resource_version=str(wire.get("metadata", {}).get("resourceVersion", "")),
            include_object=include,
            headers=headers,
            row_source=self._printed_form(rtype),
        )
        return _dumps({"type": event.type, "object": table}) + b"\n"

    # --- writes --------------------------------------------------------------------------

    async def _read_body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            raise BadRequest("the request body is empty")
        content_type = request.headers.get("Content-Type", _JSON).split(";")[0].strip()
        if "protobuf" in content_type:
            raise UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types "
                f"include: application/json, application/yaml (got {content_type})"
            )
        try:
            if content_type.endswith("yaml"):
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise BadRequest(f"the request body is not valid JSON or YAML: {error}") from None

    def _check_kind(
        self,
        rtype: ResourceType,
        body: Any,
        *,
        expected_kind: str | None = None,
        expected_api_version: str | None = None,
    ) -> Obj:
        if not isinstance(body, dict):
            raise BadRequest(f"the body must be a JSON object describing a {rtype.kind}")
        kind = expected_kind or rtype.kind
        api_version = expected_api_version or rtype.api_version
        got_version = body.get("apiVersion")
        got_kind = body.get("kind")
        if got_version and got_version != api_version:
            raise BadRequest(
                f"the API version in the data ({got_version}) does not match the expected API "
                f"version ({api_version})"
            )
        if got_kind and got_kind != kind:
            raise BadRequest(
                f'{got_kind} in version "{got_version or api_version.split("/")[-1]}" cannot be '
                f'handled as a {kind}: no kind "{got_kind}" is registered for version '
                f'"{api_version}"'
            )
        body["apiVersion"] = api_version
        body["kind"] = kind
        return body

    def _validate(self, rtype: ResourceType, obj: Obj, request: web.Request) -> list[str]:
        return validation.validate_object(
            obj,
            group=rtype.group,
            version=rtype.version,
            kind=rtype.kind,
            namespaced=rtype.namespaced,
            field_validation=request.query.get("fieldValidation", "Warn"),
        )

    @staticmethod
    def _dry_run(request: web.Request) -> bool:
        values = request.query.getall("dryRun", [])
        for value in values:
            if value != "All":
                raise BadRequest(f"Invalid dry run value {value!r}: only 'All' is supported")
        return bool(values)

    async def _create(self, request: web.Request, req: _Request) -> web.Response:
        rtype = req.rtype
        body = self._check_kind(rtype, await self._read_body(request))
        warnings = self._validate(rtype, body, request)
        obj = self._from_wire(rtype, body)
        meta = obj.setdefault("metadata", {})
        for key in (
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
        ):
            meta.pop(key, None)
        if rtype.has_status:
            obj.pop("status", None)
        defaults.apply_defaults(obj, rtype.kind, creating=True)
        self._record_manager(obj, request, operation="Update")
        storage = self._storage_type(rtype)
        if self._dry_run(request):
            created = self._dry_run_create(storage, obj, req.namespace)
        else:
            created = self.store.create(storage, obj, namespace=req.namespace)
        return _json_response(self._to_wire(rtype, created), status=201, warnings=warnings)

    def _dry_run_create(self, storage: ResourceType, obj: Obj, namespace: str | None) -> Obj:
        meta = obj["metadata"]
        if storage.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        if not meta.get("name") and not meta.get("generateName"):
            raise Invalid.of(
                kind=storage.kind,
                group=storage.group,
                name="",
                causes=[("metadata.name", "Required value: name or generateName is required")],
            )
        if (
            meta.get("name")
            and self.store.peek(storage, meta.get("namespace"), meta["name"]) is not None
        ):
            raise AlreadyExists.of(storage.group, storage.plural, meta["name"])
        meta.setdefault("name", meta.get("generateName", "") + "dryrun")
        meta["creationTimestamp"] = rfc3339(self.store.now())
        obj["apiVersion"], obj["kind"] = storage.api_version, storage.kind
        return obj

    def _record_manager(self, obj: Obj, request: web.Request, *, operation: str) -> None:
        manager = request.query.get("fieldManager")
        if not manager and operation != "Apply":
            return
        meta = obj.setdefault("metadata", {})
        entries = [
            e
            for e in meta.get("managedFields") or []
            if not (e.get("manager") == manager and e.get("operation") == operation)
        ]
        entries.append(
            {
                "manager": manager or "unknown",
                "operation": operation,
                "apiVersion": obj.get("apiVersion", ""),
                "time": rfc3339(self.store.now()),
                "fieldsType": "FieldsV1",
                "fieldsV1": {},
            }
        )
        meta["managedFields"] = entries

    async def _update(self, request: web.Request, req: _Request) -> web.Response:
        assert req.name is not None
        rtype = req.rtype
        if req.subresource == "scale":
            body = await self._read_body(request)
            return self._write_scale(
                req,
                self._check_kind(
                    rtype, body, expected_kind="Scale", expected_api_version="autoscaling/v1"
                ),
            )
        body = self._check_kind(rtype, await self._read_body(request))
        meta = body.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != req.name:
            raise BadRequest(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({req.name})"
            )
        meta["name"] = req.name
        if req.namespace and meta.get("namespace") not in (None, "", req.namespace):
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        warnings = self._validate(rtype, body, request)
        obj = self._from_wire(rtype, body)
        defaults.apply_defaults(obj, rtype.kind, creating=False)
        self._record_manager(obj, request, operation="Update")
        storage = self._storage_type(rtype)
        if self._dry_run(request):
            current = self.store.get(storage, req.namespace, req.name)
            rv = obj["metadata"].get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise Conflict.stale(rtype.group, rtype.plural, req.name)
            return _json_response(self._to_wire(rtype, obj), warnings=warnings)
        updated = self.store.update(
            storage, obj, namespace=req.namespace, subresource=req.subresource
        )
        return _json_response(self._to_wire(rtype, updated), warnings=warnings)

    # --- scale ---------------------------------------------------------------------------

    @staticmethod
    def _scale_of(rtype: ResourceType, obj: Obj) -> Obj:
        meta = obj["metadata"]
        selector = (obj.get("spec") or {}).get("selector")
        scale_meta = {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        }
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": scale_meta,
            "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 0))},
            "status": {
                "replicas": int((obj.get("status") or {}).get("replicas", 0)),
                "selector": selector_string(selector),
            },
        }

    def _write_scale(self, req: _Request, scale: Obj) -> web.Response:
        assert req.name is not None
        rtype = req.rtype
        validation.validate_object(
            scale,
            group="autoscaling",
            version="v1",
            kind="Scale",
            namespaced=True,
            field_validation="Ignore",
        )
        current = self.store.get(rtype, req.namespace, req.name)
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise Conflict.stale(rtype.group, rtype.plural, req.name)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            replicas = 0
        current.setdefault("spec", {})["replicas"] = replicas
        updated = self.store.update(rtype, current, namespace=req.namespace)
        return _json_response(self._scale_of(rtype, updated))

    # --- patch ---------------------------------------------------------------------------

    async def _patch(self, request: web.Request, req: _Request) -> web.Response:
        assert req.name is not None
        rtype = req.rtype
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type not in patching.PATCH_TYPES:
            raise UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(patching.PATCH_TYPES)}"
            )
        patch = await self._read_body(request)
        storage = self._storage_type(rtype)
        defs = definitions(strict=False)
        if req.subresource == "scale":
            current_obj = self.store.get(storage, req.namespace, req.name)
            scale = self._scale_of(rtype, current_obj)
            schema = defs.kind_schema("autoscaling", "v1", "Scale")
            patched = self._apply_patch(content_type, scale, patch, defs, schema)
            return self._write_scale(req, patched)
        existing = self.store.peek(storage, req.namespace, req.name)
        if existing is None:
            if content_type == patching.APPLY and not req.subresource:
                return await self._apply_create(request, req, patch)
            raise NotFound.of(rtype.group, rtype.plural, req.name)
        current = self._to_wire(rtype, copy_object(existing))
        schema = defs.kind_schema(rtype.group, rtype.version, rtype.kind)
        patched = self._apply_patch(content_type, current, patch, defs, schema)
        if not isinstance(patched, dict):
            raise BadRequest("the patched object is not a JSON object")
        meta = patched.setdefault("metadata", {})
        if meta.get("name") != req.name:
            raise BadRequest("metadata.name cannot be changed by a patch")
        # Without a version in the patch, a patch applies to whatever is stored now.
        if not _patch_sets_version(patch, content_type):
            meta["resourceVersion"] = existing["metadata"]["resourceVersion"]
        patched["apiVersion"], patched["kind"] = rtype.api_version, rtype.kind
        try:
            warnings = self._validate(rtype, patched, request)
        except BadRequest as error:
            if "strict decoding error" in error.message:
                raise BadRequest(error.message.split(": ", 1)[1]) from None
            raise
        obj = self._from_wire(rtype, patched)
        defaults.apply_defaults(obj, rtype.kind, creating=False)
        self._record_manager(
            obj, request, operation="Apply" if content_type == patching.APPLY else "Update"
        )
        if self._dry_run(request):
            return _json_response(self._to_wire(rtype, obj), warnings=warnings)
        updated = self.store.update(
            storage, obj, namespace=req.namespace, subresource=req.subresource
        )
        return _json_response(self._to_wire(rtype, updated), warnings=warnings)

    def _apply_patch(
        self, content_type: str, current: Obj, patch: Any, defs: Any, schema: Any
    ) -> Any:
        if content_type == patching.JSON_PATCH:
            return patching.apply_json_patch(current, patch)
        if content_type == patching.MERGE:
            if not isinstance(patch, dict):
                raise BadRequest("a merge patch must be a JSON object")
            return patching.apply_merge_patch(current, patch)
        return patching.apply_strategic_merge_patch(current, patch, defs=defs, schema=schema)

    async def _apply_create(self, request: web.Request, req: _Request, patch: Any) -> web.Response:
        rtype = req.rtype
        if request.query.get("fieldManager") is None:
            raise BadRequest("PATCH, fieldManager: Required value: is required for apply patch")
        body = self._check_kind(rtype, copy_object(patch))
        body.setdefault("metadata", {})["name"] = req.name
        warnings = self._validate(rtype, body, request)
        obj = self._from_wire(rtype, body)
        if rtype.has_status:
            obj.pop("status", None)
        defaults.apply_defaults(obj, rtype.kind, creating=True)
        self._record_manager(obj, request, operation="Apply")
        if self._dry_run(request):
            return _json_response(self._to_wire(rtype, obj), status=201, warnings=warnings)
        created = self.store.create(self._storage_type(rtype), obj, namespace=req.namespace)
        return _json_response(self._to_wire(rtype, created), status=201, warnings=warnings)

    # --- delete --------------------------------------------------------------------------

    async def _delete_options(self, request: web.Request) -> Obj:
        options: Obj = {}
        if request.can_read_body:
            raw = await request.read()
            if raw.strip():
                try:
                    body = json.loads(raw)
                except ValueError as error:
                    raise BadRequest(f"the DeleteOptions body is not JSON: {error}") from None
                if isinstance(body, dict):
                    options.update(body)
        query = request.query
        if "gracePeriodSeconds" in query:
            options["gracePeriodSeconds"] = query["gracePeriodSeconds"]
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in query:
            options["orphanDependents"] = _truthy(query["orphanDependents"])
        if "dryRun" in query:
            options["dryRun"] = query.getall("dryRun")
        return options

    def _delete_one(
        self, rtype: ResourceType, namespace: str | None, name: str, options: Obj
    ) -> Obj:
        grace = options.get("gracePeriodSeconds")
        try:
            grace_s = int(grace) if grace is not None else None
        except (TypeError, ValueError):
            raise BadRequest(f"gracePeriodSeconds must be an integer, got {grace!r}") from None
        propagation = options.get("propagationPolicy")
        if propagation is None and options.get("orphanDependents") is True:
            propagation = "Orphan"
        preconditions = options.get("preconditions") or {}
        return self.store.delete(
            self._storage_type(rtype),
            namespace,
            name,
            grace_period_s=grace_s,
            propagation=propagation,
            precondition_uid=preconditions.get("uid"),
            precondition_rv=preconditions.get("resourceVersion"),
        )

    async def _delete(self, request: web.Request, req: _Request) -> web.Response:
        assert req.name is not None
        rtype = req.rtype
        if req.subresource:
            raise MethodNotAllowed(f"delete is not supported on {rtype.plural}/{req.subresource}")
        options = await self._delete_options(request)
        if options.get("dryRun"):
            stored = self.store.get(self._storage_type(rtype), req.namespace, req.name)
            return _json_response(self._to_wire(rtype, stored))
        result = self._delete_one(rtype, req.namespace, req.name, options)
        pending = (
            bool(result["metadata"].get("deletionTimestamp"))
            and self.store.peek(self._storage_type(rtype), req.namespace, req.name) is not None
        )
        if rtype.plural in ("pods", "namespaces") or pending:
            return _json_response(
                self._to_wire(rtype, result),
                status=202 if pending and rtype.plural != "pods" else 200,
            )
        details: Obj = {
            "name": req.name,
            "kind": rtype.plural,
            "uid": result["metadata"].get("uid"),
        }
        if rtype.group:
            details["group"] = rtype.group
        return _json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
        )

    async def _delete_collection(self, request: web.Request, req: _Request) -> web.Response:
        rtype = req.rtype
        options = await self._delete_options(request)
        labels, fields = self._selectors(request, rtype)
        items, _ = self.store.list(
            self._storage_type(rtype), namespace=req.namespace, labels=labels, fields=fields
        )
        deleted = []
        if not options.get("dryRun"):
            for obj in items:
                meta = obj["metadata"]
                with contextlib.suppress(NotFound):
                    deleted.append(
                        self._delete_one(rtype, meta.get("namespace"), meta["name"], options)
                    )
        else:
            deleted = items
        return _json_response(
            {
                "kind": f"{rtype.kind}List",
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": [self._to_wire(rtype, o) for o in deleted],
            }
        )


def _patch_sets_version(patch: Any, content_type: str) -> bool:
    if content_type == patching.JSON_PATCH:
        return isinstance(patch, list) and any(
            isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" for op in patch
        )
    return isinstance(patch, dict) and bool((patch.get("metadata") or {}).get("resourceVersion"))
