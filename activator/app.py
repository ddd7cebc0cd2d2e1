"""Wiring: the data server, the admin server, background work, and draining.

:func:`start` builds one running activator from settings and a target
source and returns an :class:`Activator`; :meth:`Activator.drain` is the
SIGTERM path; :func:`serve` runs one until SIGTERM (a single process, or
one worker of :mod:`activator.workers`). The pieces:

- the **data port** is the byte-level HTTP/1.1 server of
  :mod:`activator.http1`, each connection handing every parsed request to
  ``Proxy.handle`` (by callbacks until a step must wait, then a task runs
  the rest; no router or middleware on the hot path): a client that leaves
  while held frees its place, a raised listen backlog, header and head-time
  limits and an idle-connection timeout;
- the **admin port** (``/healthz``, ``/readyz``, ``/metrics``) is a separate
  server: admin endpoints are never served on the data port. ``/readyz``
  depends on neither the scaler nor any backend, but waits for the target
  source's first snapshot: before it the activator knows no target and
  could only answer 404, which is what an activator started during an API
  server outage would do to every request it was sent;
- one :class:`~activator.http1.UpstreamPool` of keep-alive connections to
  the replicas (no connection limit unless configured: the gates bound
  concurrency), connect and idle-read timeouts only, bodies relayed byte for
  byte; an aiohttp ``ClientSession`` only for the calls to the scaler;
- background tasks: the target source, the prober and the reporter, each
  cancelled on the way out;
- the collaborators are built here and passed in at construction: one
  :class:`~activator.scaler_link.wake_queue.WakeQueue` that the gates put cold targets
  on and the reporter consumes, and the event loop's clock for everything.

Drain (docs/architecture.md): fail ``/readyz`` and keep serving for ``drain_grace_s``:
load balancers and Services take seconds to drop a pod that fails
readiness, and what they still send meanwhile must be served, not refused
(Knative's activator serves through its drain sleep too). Every answer from
then on says ``Connection: close``, so keep-alive clients reconnect to
another replica rather than reuse a connection that will close. After the
grace, close the listener and the idle connections and answer any new
request on a remaining one 503 ``draining``; then wait up to ``drain_s``
for every request in progress, held ones included, to end. Requests still
held then are answered 503 (JSON, ``Retry-After``, code ``draining``):
every request gets an answer. Those
answers (and any response still streaming) then get ``FLUSH_S`` to be
written before the remaining connections are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from activator import http1
from activator.holding.adapter_keeper import AdapterKeeper
from activator.kube.notice_taints import parse_notice_taints
from activator.metrics import Metrics
from activator.proxy import Proxy, ProxyOptions
from activator.replicas.lora_client import HttpAdapterIO
from activator.replicas.probing import Prober
from activator.routing.registry import Registry
from activator.scaler_link.peers import ScalerPeers, parse_scaler_urls
from activator.scaler_link.reporting import Reporter
from activator.scaler_link.wake_queue import WakeQueue
from activator.settings import ActivatorSettings
from activator.targets import TargetSource

__all__ = ["Activator", "activator_name", "admin_app", "make_source", "serve", "start"]

log = logging.getLogger(__name__)

# After the drain: how long the last answers may take to be written before
# what is left (a response still streaming from a replica) is cut.
FLUSH_S = 2.0
# How long one LoRA adapter load may take before the replica counts as refusing it
# (vLLM reads the adapter from disk or the Hub: seconds, not minutes).
ADAPTER_LOAD_TIMEOUT_S = 60.0
# How often the drain looks at the gates' and connections' counts (plain
# integers: no event).
_DRAIN_POLL_S = 0.05


def activator_name(settings: ActivatorSettings) -> str:
    if settings.name:
        return settings.name
    pod = os.environ.get("POD_NAME")
    return pod if pod else f"{socket.gethostname()}:{os.getpid()}"


def make_source(settings: ActivatorSettings) -> TargetSource:
    if settings.routes is not None:
        from activator.routing.routes_file import RoutesFileSource

        source = RoutesFileSource(
            settings.routes, poll_s=settings.routes_poll_s, defaults=settings.defaults
        )
        source.load()  # fail at start, with the file's error, rather than later in a task
        return source
    from activator.kube.source import KubeSource

    return KubeSource(
        label_selector=settings.label_selector,
        namespace=settings.namespace or None,
        kubeconfig=settings.kubeconfig,
        notice_taints=parse_notice_taints(settings.notice_taints),
    )


@dataclass
class Activator:
    """One running activator (one worker)."""

    settings: ActivatorSettings
    registry: Registry
    proxy: Proxy
    metrics: Metrics
    session: aiohttp.ClientSession
    pool: http1.UpstreamPool
    connections: http1.Connections  # the data port's client connections
    reporter: Reporter
    prober: Prober
    admin_runner: web.AppRunner | None
    server_limits: http1.ServerLimits  # what each client connection of the data port may send
    data_server: asyncio.Server | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ready: bool = False
    data_port: int = 0
    admin_port: int = 0

    async def drain(self) -> None:
        """SIGTERM: fail readiness and serve through the grace; then stop accepting, finish
        work up to drain_s, answer the rest."""
        self.ready = False
        self.connections.close_after_answers()
        timeouts = self.settings.timeouts
        if timeouts.drain_grace_s:
            await asyncio.sleep(timeouts.drain_grace_s)
        self.proxy.draining = True
        if self.data_server is not None:
            self.data_server.close()  # stop accepting; open connections stay
        self.connections.close_idle()
        await self.wait_idle(timeouts.drain_s)
        self.registry.end_drain()  # what is still held gets its 503 now
        await self._wait_answered(FLUSH_S)
        await self.close()

    def is_ready(self) -> bool:
        """``/readyz``: serving, not draining, and the targets listed at least once."""
        return self.ready and self.registry.updates > 0

    def requests_in_progress(self) -> int:
        """Held and in-flight requests over all targets."""
        return self.registry.requests_in_progress()

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no request is held or in flight; False when ``timeout_s`` passed first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.requests_in_progress():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(min(_DRAIN_POLL_S, max(0.0, deadline - loop.time())))
        return True

    async def _wait_answered(self, timeout_s: float) -> None:
        """Wait until no connection has a request in progress, at most ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while any(c.current is not None for c in self.connections):
            if loop.time() >= deadline:
                return
            await asyncio.sleep(_DRAIN_POLL_S)

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
        self.registry.end_drain()  # held requests answered, adapter loads stopped
        await self.reporter.close()
        if self.data_server is not None:
            self.data_server.close()
        self.connections.shut(
            http1.ShutAnswer(
                503,
                error_type="unavailable_error",
                code="draining",
                message="the activator is shutting down",
                retry_after_s=self.settings.retry_after_s,
            )
        )
        self.connections.close()
        await self.pool.close()
        if self.data_server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.data_server.wait_closed(), 1.0)
        if self.admin_runner is not None:
            await self.admin_runner.cleanup()
        await self.session.close()


def admin_app(
    *,
    is_ready: Callable[[], bool],
    metrics_text: Callable[[], Awaitable[bytes]],
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if is_ready():
            return web.Response(text="ready\n")
        return web.Response(status=503, text="not ready\n")

    async def metrics(_: web.Request) -> web.Response:
        body = await metrics_text()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


async def _supervise(name: str, coro: Awaitable[None]) -> None:
    """Run a background job; a crash is logged loudly, never swallowed silently."""
    try:
        await coro
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("background task %s failed", name)
        raise


async def start(
    settings: ActivatorSettings,
    *,
    source: TargetSource,
    registry: CollectorRegistry | None = None,
    reuse_port: bool = False,
    admin_unix_path: str | None = None,
    serve_admin: bool = True,
) -> Activator:
    """Start an activator; the caller drains or closes it."""
    prom = registry if registry is not None else CollectorRegistry()
    activator = _assemble(settings, prom)
    try:
        await _run(activator, source, prom, reuse_port, admin_unix_path, serve_admin)
    except BaseException:
        await activator.close()
        raise
    activator.ready = True
    log.info(
        "activator %s serving on %s:%d (admin %d)",
        activator.reporter.activator,
        settings.host,
        activator.data_port,
        activator.admin_port,
    )
    return activator


def _assemble(settings: ActivatorSettings, prom: CollectorRegistry) -> Activator:
    """The parts of one activator, each handed what it needs; nothing runs yet."""
    wake = WakeQueue()
    # The running loop's clock, bound once: asyncio.get_running_loop() costs a
    # getpid() system call on Python 3.11, and the gates read the clock twice
    # per request.
    clock = asyncio.get_running_loop().time
    timeouts = settings.timeouts
    limits = settings.limits
    # The scaler's client, and the replicas' for LoRA adapters (load, unload, look);
    # requests reach the replicas through the pool.
    session = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None, connect=timeouts.connect_s),
        cookie_jar=aiohttp.DummyCookieJar(),
    )
    adapter_io = HttpAdapterIO(
        session, timeout_s=timeouts.probe_s + 1.0, load_timeout_s=ADAPTER_LOAD_TIMEOUT_S
    )
    targets = Registry(rng=random.Random(), clock=clock, wake=wake.put, adapter_io=adapter_io)
    metrics = Metrics(prom, targets=lambda: targets.targets)
    pool = http1.UpstreamPool(
        connect_timeout_s=timeouts.connect_s, max_connections=limits.upstream_connections
    )
    proxy = Proxy(
        registry=targets,
        pool=pool,
        metrics=metrics,
        options=ProxyOptions(
            allow_target_header=settings.allow_target_header,
            max_model_body_bytes=limits.max_model_body_bytes,
            max_body_bytes=limits.max_body_bytes,
            upstream_idle_s=timeouts.upstream_idle_s,
            retry_after_s=settings.retry_after_s,
            max_held_body_bytes=limits.max_held_body_bytes,
        ),
    )
    token = settings.scaler_token.get_secret_value() if settings.scaler_token else None
    reporter = Reporter(
        registry=targets,
        session=session,
        peers=ScalerPeers(parse_scaler_urls(settings.scaler_url), clock=clock),
        token=token,
        activator=activator_name(settings),
        metrics=metrics,
        period_s=settings.report_period_s,
        timeout_s=timeouts.scaler_s,
        wake=wake,
        clock=clock,
    )
    prober = Prober(
        targets.to_probe,
        targets.probed,
        interval_s=settings.probe_interval_s,
        timeout_s=timeouts.probe_s,
        recheck_ready_s=settings.recheck_ready_s if settings.routes is not None else None,
        clock=clock,
    )
    server_limits = http1.ServerLimits(
        idle_s=timeouts.client_idle_s,
        body_idle_s=timeouts.client_body_idle_s,
        head_s=timeouts.client_head_s,
        max_header_bytes=limits.max_header_bytes,
        max_headers=limits.max_headers,
        max_head_bytes=limits.max_head_bytes,
    )
    return Activator(
        settings=settings,
        registry=targets,
        proxy=proxy,
        metrics=metrics,
        session=session,
        pool=pool,
        connections=http1.Connections(
            idle_s=timeouts.client_idle_s,
            head_s=timeouts.client_head_s,
            on_reject=lambda exc: metrics.reject("", exc.code),
        ),
        reporter=reporter,
        prober=prober,
        admin_runner=None,
        server_limits=server_limits,
    )


async def _run(
    activator: Activator,
    source: TargetSource,
    prom: CollectorRegistry,
    reuse_port: bool,
    admin_unix_path: str | None,
    serve_admin: bool,
) -> None:
    """Start the background tasks and the data and admin servers."""
    settings, targets, proxy = activator.settings, activator.registry, activator.proxy
    loop = asyncio.get_running_loop()
    activator.tasks.append(loop.create_task(_supervise("source", source.run(targets))))
    activator.tasks.append(loop.create_task(_supervise("prober", activator.prober.run())))
    keeper = AdapterKeeper(targets.refresh_adapters, interval_s=settings.adapter_refresh_s)
    activator.tasks.append(loop.create_task(_supervise("adapters", keeper.run())))
    activator.tasks.append(loop.create_task(_supervise("reporter", activator.reporter.run())))
    connections, server_limits = activator.connections, activator.server_limits
    activator.data_server = await loop.create_server(
        lambda: http1.ClientConnection(proxy.handle, limits=server_limits, connections=connections),
        settings.host,
        settings.port,
        backlog=settings.limits.backlog,
        reuse_port=reuse_port or None,
    )
    activator.data_port = activator.data_server.sockets[0].getsockname()[1]

    async def metrics_text() -> bytes:
        return generate_latest(prom)

    if serve_admin or admin_unix_path:
        admin = web.AppRunner(
            admin_app(is_ready=activator.is_ready, metrics_text=metrics_text),
            access_log=None,
        )
        await admin.setup()
        activator.admin_runner = admin
        if admin_unix_path is not None:
            await web.UnixSite(admin, admin_unix_path).start()
        if serve_admin:
            await web.TCPSite(admin, settings.admin_host, settings.admin_port).start()
            activator.admin_port = next(a[1] for a in admin.addresses if isinstance(a, tuple))


async def serve(
    settings: ActivatorSettings,
    *,
    reuse_port: bool = False,
    admin_unix_path: str | None = None,
    serve_admin: bool = True,
) -> int:
    """Run one activator until SIGTERM/SIGINT, then drain. Exit status."""
    activator = await start(
        settings,
        source=make_source(settings),
        reuse_port=reuse_port,
        admin_unix_path=admin_unix_path,
        serve_admin=serve_admin,
    )
    # Everything allocated so far (imported modules, settings, the Kubernetes
    # client's models, Prometheus) lives as long as the process. Frozen, the
    # collector stops re-scanning it: a full collection over those ~10^5
    # objects takes milliseconds and would land in some request's p99.
    gc.freeze()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopper = loop.create_task(stop.wait(), name="wait for SIGTERM")
    done, _ = await asyncio.wait([stopper, *activator.tasks], return_when=asyncio.FIRST_COMPLETED)
    if stopper not in done:
        stopper.cancel()
        log.error("a background task ended; shutting down")
        await activator.close()
        return 1
    log.info("SIGTERM: draining")
    await activator.drain()
    log.info("drained; exiting")
    return 0
