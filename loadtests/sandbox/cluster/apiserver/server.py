"""The emulated API server's process-facing side: lifecycle, credentials, faults, the audit log.

:class:`ApiServer` owns the runner and its listener (HTTPS with its own CA,
:mod:`.listener`), the token registry, the faults (:mod:`.fault_control`)
and the audit log; every request passes its middleware (faults, errors as
``Status``, audit of writes) and goes on to the one handler,
:class:`~.dispatch.Dispatch` (authentication, RBAC, and the handlers, one
module per job).

Main decision: the middleware answers 503 (or aborts the connection) while
the server is made unavailable, before authentication, so a fault looks to a
client exactly like an API server that is down; the audit log records the
status the client actually got.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from loadtests.sandbox.cluster import defaults
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.dispatch import USER_KEY, Dispatch
from loadtests.sandbox.cluster.apiserver.fault_control import FaultControl
from loadtests.sandbox.cluster.apiserver.listener import Listener
from loadtests.sandbox.cluster.apiserver.open_watches import OpenWatches
from loadtests.sandbox.cluster.apiserver.wire import Obj, error_response
from loadtests.sandbox.cluster.auth import TokenRegistry, in_cluster_files, kubeconfig_document
from loadtests.sandbox.cluster.certs import ServingCertificates, make_certificates
from loadtests.sandbox.cluster.errors import ApiError, ServiceUnavailable
from loadtests.sandbox.cluster.rbac import RbacAuthorizer
from loadtests.sandbox.cluster.resources import RESOURCES, ResourceType, by_group_version_plural
from loadtests.sandbox.cluster.schemas import definitions
from loadtests.sandbox.cluster.store import Store

__all__ = ["ApiServer", "AuditRecord"]

_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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
        self._watches = OpenWatches()
        self._ctx = ResourceContext(store, self._watches, bookmark_interval_s=bookmark_interval_s)
        self.host = host
        self._port = port
        self.rbac = rbac
        self.certs_dir = certs_dir
        self.bookmark_interval_s = bookmark_interval_s
        self.tokens = TokenRegistry()
        self.faults = FaultControl(store, self._watches)
        self._certs: ServingCertificates | None = None
        self._runner: web.AppRunner | None = None
        self._listener: Listener | None = None
        self.audit: deque[AuditRecord] = deque(maxlen=audit_max_records)
        # Where the kubelet writes containers' output (``pods/log``); None: no logs.
        self.log_dir = log_dir
        # Set on stop: ends the streams that would otherwise run on (log follows).
        self._closing = asyncio.Event()
        self._dispatch = Dispatch(
            self._ctx,
            tokens=self.tokens,
            authorizer=RbacAuthorizer(store),
            rbac=lambda: self.rbac,
            resources=resources,
            faults=self.faults,
            closing=self._closing,
            log_dir=lambda: self.log_dir,
            address=lambda: f"{self.host}:{self.port}",
        )

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._listener.port if self._listener is not None else self._port

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

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
        return len(self._watches)

    @property
    def admin_token(self) -> str:
        return self.tokens.admin_token

    async def start(self) -> None:
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
        app.router.add_route("*", "/{tail:.*}", self._dispatch.handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        self._listener = Listener(self._runner, self._certs, host=self.host, port=self.port)
        await self._listener.open()
        self.faults.serve_on(self._listener)

    async def stop(self) -> None:
        if self._listener is not None:
            self._port = self._listener.port
        await self.faults.stop()
        self._closing.set()
        self._watches.cut()
        self._listener = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

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
        return {"KUBERNETES_SERVICE_HOST": self.host, "KUBERNETES_SERVICE_PORT": str(self.port)}

    # --- faults (:mod:`.fault_control`) -------------------------------------------------

    async def make_unavailable(
        self, duration_s: float, *, refuse_connections: bool = False
    ) -> None:
        """503 to every request (or refuse connections) for ``duration_s``; cuts watches."""
        await self.faults.make_unavailable(duration_s, refuse_connections=refuse_connections)

    async def restore(self) -> None:
        """Lift every fault now (and reopen the listener if it was closed)."""
        await self.faults.restore()

    def slow_down(self, *, latency_s: float, duration_s: float) -> None:
        self.faults.slow_down(latency_s=latency_s, duration_s=duration_s)

    def cut_watches(self, *, compact: bool = False) -> int:
        """End every watch stream this server serves; ``compact`` also drops history."""
        return self.faults.cut_watches(compact=compact)

    # --- request plumbing ----------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        switches = self.faults.switches
        if not request.path.startswith("/_sandbox/"):
            now = self.faults.now()
            if switches.unavailable(now):
                if switches.refuse_connections and request.transport is not None:
                    request.transport.abort()
                return error_response(
                    ServiceUnavailable("the server is currently unable to handle the request")
                )
            delay = switches.delay_s(now)
            if delay > 0:
                await asyncio.sleep(delay)
        try:
            response = await handler(request)
        except ApiError as error:
            response = error_response(error)
        if request.method in _WRITE_METHODS and not request.path.startswith("/_sandbox/"):
            self.audit.append(
                AuditRecord(
                    at=self.faults.now(),
                    user=request.get(USER_KEY, ""),
                    method=request.method,
                    path=request.path,
                    query=request.query_string,
                    status=response.status,
                )
            )
        return response
