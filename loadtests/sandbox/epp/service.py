"""One fake endpoint picker: its parts wired, two listeners, a start and a stop.

:class:`FakeEpp` composes the pool watch (or a fixed view, for tests that
need no API server), the flow controller, the gateway and the metrics
endpoint, in the current event loop. ``tidal sandbox epp`` runs one per
process; tests use it as a library::

    async with FakeEpp(EppConfig(pool="llama", namespace="default"), access=access) as epp:
        epp.gateway_url      # where clients send requests
        epp.metrics_url      # the router's /metrics

Main decision, stopping: every request still held is shed at once (the
router's flow controller does the same on shutdown: ``EvictedOther``, 503),
then the listeners close, letting answers in flight end (up to
``drain_timeout_s``), then the watch and the sweep are cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from types import TracebackType

from aiohttp import web

from groundwork.kube.connection import KubeAccess
from loadtests.sandbox.epp.flow_controller import FlowController
from loadtests.sandbox.epp.gateway import Gateway, metrics_app
from loadtests.sandbox.epp.pool_view import PoolView
from loadtests.sandbox.epp.pool_watch import PoolWatch
from loadtests.sandbox.epp.router_metrics import RouterMetrics
from loadtests.sandbox.epp.waiting_room import FlowControlLimits

__all__ = ["EppConfig", "FakeEpp"]


@dataclass(frozen=True, slots=True)
class EppConfig:
    """What ``tidal sandbox epp`` is told (its flags)."""

    pool: str
    namespace: str
    host: str = "127.0.0.1"
    port: int = 8081  # the gateway clients call (0: any free port)
    metrics_port: int = 9090  # the EPP's metrics port, as the router's default
    limits: FlowControlLimits = field(default_factory=FlowControlLimits)
    max_concurrency: int = 100  # per endpoint: the concurrency detector's default
    sweep_interval_s: float = 1.0
    objectives: tuple[tuple[str, int], ...] = ()  # (objective name, priority)


class FakeEpp:
    """A fake EPP in this event loop: see the module docstring."""

    def __init__(
        self, config: EppConfig, *, access: KubeAccess | None = None, drain_timeout_s: float = 10.0
    ) -> None:
        self.config = config
        self.drain_timeout_s = drain_timeout_s
        self._access = access
        self.controller: FlowController | None = None
        self._runners: list[web.AppRunner] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.gateway_port = 0
        self.metrics_port = 0

    @property
    def gateway_url(self) -> str:
        return f"http://{self.config.host}:{self.gateway_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.config.host}:{self.metrics_port}/metrics"

    def set_view(self, view: PoolView) -> None:
        """Tell the EPP the pool's endpoints (what the watch does when there is one)."""
        assert self.controller is not None, "start() first"
        self.controller.set_view(view)

    async def start(self) -> None:
        config = self.config
        self.controller = FlowController(
            pool=config.pool,
            limits=config.limits,
            metrics=RouterMetrics(),
            max_concurrency=config.max_concurrency,
            sweep_interval_s=config.sweep_interval_s,
        )
        self._tasks.append(asyncio.create_task(self.controller.run(), name="epp-sweep"))
        if self._access is not None:
            watch = PoolWatch(
                self._access,
                namespace=config.namespace,
                name=config.pool,
                on_view=self.controller.set_view,
            )
            self._tasks.append(asyncio.create_task(watch.run(), name="epp-pool-watch"))
        gateway = Gateway(self.controller, objectives=dict(config.objectives))
        try:
            self.gateway_port = await self._listen(gateway.app(), config.port)
            self.metrics_port = await self._listen(
                metrics_app(self.controller), config.metrics_port
            )
        except BaseException:
            await self.stop()  # a port taken: leave nothing running
            raise

    async def _listen(self, app: web.Application, port: int) -> int:
        runner = web.AppRunner(
            app,
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=self.drain_timeout_s,
        )
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, self.config.host, port, reuse_address=True)
        await site.start()
        return int(runner.addresses[-1][1])

    async def stop(self) -> None:
        if self.controller is not None:
            self.controller.shut_down()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def __aenter__(self) -> FakeEpp:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
