"""One fake model server's life: start up slowly, serve, drain or crash.

:class:`ModelServer` runs an engine app (vLLM-like or Triton-like) in the
current event loop. Tests use it as a library::

    async with ModelServer(ServerConfig(engine="vllm", port=0)) as server:
        ...  # server.port, server.url

and ``tidal sandbox model-server`` runs one per process (:func:`run_process`).
The configuration and the flavours' shared contract live in ``engine_app``
(re-exported here); the flavours in ``vllm`` and ``triton``.

Main decisions:

- **Cold start.** vLLM does not listen until its model is loaded: during
  ``startup_delay_s`` connections are refused. Triton's HTTP endpoint
  answers at once, ``/v2/health/live`` says yes and ``/v2/health/ready`` says
  no until the model is loaded. Each app says which it is
  (``listen_before_ready``).
- **SIGTERM / stop().** Close the listener first (new connections are
  refused), then let aiohttp's graceful shutdown wait for every running
  handler, queued ones included, up to ``drain_timeout_s``; the engine runs
  until the last one is done. This is what vLLM (under uvicorn) does.
- **Crash.** The ``crash_after_s`` fault: a process exits at once with
  ``crash_exit_code`` (no cleanup, like a segfaulting engine); an in-process
  server resets every connection and stops listening.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import TracebackType

from aiohttp import web

from loadtests.sandbox.servers.engine_app import EngineApp, RuntimeApp, ServerConfig
from loadtests.sandbox.servers.triton import TritonApp
from loadtests.sandbox.servers.vllm import VllmApp

__all__ = ["EngineApp", "ModelServer", "RuntimeApp", "ServerConfig", "run_process"]

log = logging.getLogger(__name__)


def build_engine_app(config: ServerConfig) -> EngineApp:
    if config.engine == "vllm":
        return VllmApp(config)
    return TritonApp(config)


class ModelServer:
    """A fake model server in this event loop; see the module docstring."""

    def __init__(self, config: ServerConfig, *, on_crash: Callable[[], None] | None = None) -> None:
        self.config = config
        self._on_crash = on_crash
        self._engine: EngineApp | None = None
        self._runner: web.AppRunner | None = None
        self._boot_task: asyncio.Task[None] | None = None
        self._crash_task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stopped = asyncio.Event()
        self._port: int | None = None
        self.crashed = False

    # --- properties -----------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server is not listening yet")
        return self._port

    @property
    def url(self) -> str:
        host = self.config.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def engine(self) -> EngineApp:
        if self._engine is None:
            raise RuntimeError("the server has not started")
        return self._engine

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    # --- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Begin starting up; returns at once (listening may come later)."""
        if self._boot_task is not None:
            raise RuntimeError("start() called twice")
        self._engine = build_engine_app(self.config)
        self._boot_task = asyncio.create_task(self._boot(), name="model-server-boot")

    async def wait_ready(self) -> int:
        """Wait until the server is listening and ready; its port."""
        assert self._boot_task is not None, "call start() first"
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait({ready, self._boot_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if self._boot_task.done() and not self._ready.is_set():
            self._boot_task.result()  # re-raise a startup failure
            raise RuntimeError("the server stopped before it became ready")
        return self.port

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def _boot(self) -> None:
        engine = self.engine
        if engine.listen_before_ready:
            await self._listen()
            await asyncio.sleep(self.config.startup_delay_s)
        else:
            await asyncio.sleep(self.config.startup_delay_s)
            await self._listen()
        engine.start_engine()
        engine.mark_ready()
        self._ready.set()
        crash_after = self.config.faults.crash_after_s
        if crash_after is not None:
            self._crash_task = asyncio.create_task(self._crash_later(crash_after))

    async def _listen(self) -> None:
        runner = web.AppRunner(
            self.engine.app,
            handle_signals=False,
            shutdown_timeout=self.config.drain_timeout_s,
            access_log=None,
            handler_cancellation=True,
        )
        await runner.setup()
        # A wide backlog: hundreds of clients may connect at once (aiohttp's default is 128).
        site = web.TCPSite(
            runner, self.config.host, self.config.port, backlog=2048, reuse_address=True
        )
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        sockets = [s for s in runner.addresses if s]
        self._port = int(sockets[0][1])

    async def stop(self) -> None:
        """Graceful stop: refuse new connections, finish every running request, stop."""
        if self._boot_task is not None and not self._boot_task.done():
            self._boot_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._boot_task
        if self._crash_task is not None:
            self._crash_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._crash_task
            self._crash_task = None
        if self._runner is not None:
            await self._runner.cleanup()  # stops listening, then drains handlers
            self._runner = None
        if self._engine is not None:
            await self._engine.stop_engine()
        self._stopped.set()

    async def abort(self) -> None:
        """Die like a crashed process: reset every connection, stop listening."""
        self.crashed = True
        runner = self._runner
        if runner is not None:
            for site in list(runner.sites):
                await site.stop()
            if runner.server is not None:
                for conn in runner.server.connections:
                    if conn.transport is not None:
                        conn.transport.abort()
        if self._crash_task is not None and self._crash_task is not asyncio.current_task():
            self._crash_task.cancel()
        self._crash_task = None
        if runner is not None:
            await runner.shutdown()
            await runner.cleanup()
            self._runner = None
        if self._engine is not None:
            await self._engine.stop_engine()
        self._stopped.set()

    async def _crash_later(self, after_s: float) -> None:
        await asyncio.sleep(after_s)
        log.warning("fault injection: crashing now (crash_after_s=%s)", after_s)
        if self._on_crash is not None:
            self._on_crash()
        await self.abort()

    async def __aenter__(self) -> ModelServer:
        await self.start()
        try:
            await self.wait_ready()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (to know a port before the server listens)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def run_process(config: ServerConfig) -> int:
    """Run one server until SIGTERM/SIGINT (drain, exit 0) or a crash fault (exit at once)."""
    exit_code = config.faults.crash_exit_code

    def crash_now() -> None:
        # A real crash does no cleanup: leave without flushing or closing anything.
        os._exit(exit_code)

    server = ModelServer(config, on_crash=crash_now)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    stopping = asyncio.create_task(stop.wait())
    ready = asyncio.create_task(server.wait_ready())
    try:
        await asyncio.wait({stopping, ready}, return_when=asyncio.FIRST_COMPLETED)
        if ready.done() and ready.exception() is not None:
            print(f"model server could not start: {ready.exception()}", file=sys.stderr)
            return 1
        if ready.done():
            print(
                f"fake {config.engine} {config.model!r} ready on {config.host}:{server.port} "
                f"(pid {os.getpid()}, max_num_seqs={config.llm.max_num_seqs}, "
                f"speedup={config.speedup:g})",
                file=sys.stderr,
                flush=True,
            )
        await stopping
    finally:
        stopping.cancel()
        ready.cancel()
        await server.stop()
    return 0
