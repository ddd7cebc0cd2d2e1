"""``--workers N``: N activator processes on one port, one admin port in front.

Each worker is a full activator (its own gates, session, reporter) started
with the *spawn* method, so no event loop or socket state is inherited. The
workers bind the data port with ``SO_REUSEPORT`` and the kernel spreads
connections across them. Each reports to the scaler under its own name
(``host:pid``, or ``NAME-wN``), so the scaler counts N activators and each
worker enforces its share of ``container-concurrency``.

The supervising process serves the admin port: ``/metrics`` fetches every
worker's exposition over its Unix socket and sums them
(:func:`activator.metrics.merge_expositions`, the "one serving process"
option of docs/metrics.md); ``/readyz`` is ready only while every worker is.
SIGTERM/SIGINT is passed on to the workers, which drain; the supervisor
exits when they have. A worker that dies on its own takes the whole pod down
(exit 1), so Kubernetes restarts it instead of running short of capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import tempfile
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path

import aiohttp
import uvloop
from aiohttp import web

from activator.app import admin_app, serve
from activator.metrics import merge_expositions
from activator.settings import ActivatorSettings

__all__ = ["run_workers"]

log = logging.getLogger(__name__)


def _worker_main(settings: ActivatorSettings, index: int, admin_path: str) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s w{index} %(name)s: %(message)s",
    )
    if settings.name:
        settings = settings.model_copy(update={"name": f"{settings.name}-w{index}"})
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        code = runner.run(
            serve(settings, reuse_port=True, admin_unix_path=admin_path, serve_admin=False)
        )
    raise SystemExit(code)


def _reserve_port(host: str, port: int) -> tuple[int, socket.socket]:
    """Bind (not listen) a SO_REUSEPORT socket so that port 0 becomes one shared port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock.getsockname()[1], sock


def run_workers(settings: ActivatorSettings) -> int:
    port, reservation = _reserve_port(settings.host, settings.port)
    settings = settings.model_copy(update={"port": port})
    with tempfile.TemporaryDirectory(prefix="tidal-activator-") as tmp:
        ctx = multiprocessing.get_context("spawn")
        paths = [str(Path(tmp) / f"worker-{i}.sock") for i in range(settings.workers)]
        procs = [
            ctx.Process(target=_worker_main, args=(settings, i, p), name=f"activator-w{i}")
            for i, p in enumerate(paths)
        ]
        for proc in procs:
            proc.start()
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(_supervise(settings, procs, paths, reservation))
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
                proc.join(5)


async def _supervise(
    settings: ActivatorSettings,
    procs: Sequence[BaseProcess],
    paths: list[str],
    reservation: socket.socket,
) -> int:
    loop = asyncio.get_running_loop()
    stopping = False

    async def fetch(path: str, what: str) -> tuple[int, str]:
        connector = aiohttp.UnixConnector(path=path)
        async with (
            aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=5)
            ) as session,
            session.get(f"http://worker{what}") as resp,
        ):
            return resp.status, await resp.text()

    async def worker_ready(path: str) -> bool:
        try:
            status, _ = await fetch(path, "/readyz")
        except (OSError, aiohttp.ClientError, TimeoutError):
            return False
        return status == 200

    async def metrics_text() -> bytes:
        texts = []
        for path in paths:
            try:
                status, text = await fetch(path, "/metrics")
            except (OSError, aiohttp.ClientError, TimeoutError):
                continue
            if status == 200:
                texts.append(text)
        return merge_expositions(texts).encode()

    ready_cache = {"ready": False}

    async def watch_ready() -> None:
        while True:
            states = await asyncio.gather(*(worker_ready(p) for p in paths))
            ready_cache["ready"] = all(states) and not stopping
            if all(states):
                reservation.close()  # every worker listens now: the port stays ours
            await asyncio.sleep(0.5)

    admin = web.AppRunner(
        admin_app(
            is_ready=lambda: ready_cache["ready"] and not stopping, metrics_text=metrics_text
        ),
        access_log=None,
    )
    await admin.setup()
    await web.TCPSite(admin, settings.admin_host, settings.admin_port).start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = loop.create_task(watch_ready())
    log.info("supervising %d workers on port %d", len(procs), settings.port)
    code = 0
    try:
        while not stop.is_set():
            if any(not p.is_alive() for p in procs):
                log.error("a worker exited on its own; stopping all")
                code = 1
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
        stopping = True
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)
        deadline = loop.time() + settings.timeouts.drain_s + settings.timeouts.drain_grace_s + 10
        while any(p.is_alive() for p in procs) and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)  # processes have no awaitable exit here
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await admin.cleanup()
        reservation.close()
    return code
