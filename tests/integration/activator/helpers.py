"""Small real servers for the activator's tests: model backends, a fake scaler, a source.

- :class:`Backend`: an aiohttp app on 127.0.0.1 that can start late (a cold
  start), answer slowly, stream server-sent events, fail with 5xx, and be
  *killed* (listener closed and every connection aborted at once). It
  records every request it received and its peak concurrency.
- :class:`FakeScaler`: records ``/v1/activate`` and ``/v1/stats`` calls with
  their arrival times and bearer tokens; answers ``{"activators": n}``.
- :class:`StaticSource`: a TargetSource whose snapshot the test replaces.
- :func:`running_activator`: an activator on loopback ports, closed after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from activator.app import Activator, start
from activator.settings import ActivatorSettings
from activator.targets import Discovered, Endpoint, TargetSink, TargetSpec


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait for a state change in the activator that has no event of its own to await."""
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - the state lives in plain counters
            await asyncio.sleep(0.005)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Backend:
    """A fake model server; behaviour knobs are plain attributes tests set."""

    port: int = 0
    name: str = "b"
    delay_s: float = 0.0
    status: int = 200
    sse_chunks: int = 0
    sse_gap_s: float = 0.0
    # Between ``data: [DONE]`` and the end of the chunked body (its terminator).
    sse_end_delay_s: float = 0.0
    # When set, each SSE chunk after the first waits for this event (tests
    # prove a chunk reached the client before the next one is produced).
    sse_gate: asyncio.Queue[None] | None = None
    received: list[str] = field(default_factory=list)
    headers: list[Mapping[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    first_byte_at: float | None = None
    _runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.first_byte_at is None:
            self.first_byte_at = time.perf_counter()
        rid = request.headers.get("X-Request-Id", "")
        self.received.append(rid)
        self.headers.append(CIMultiDict(request.headers))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            body = await request.read()
            self.bodies.append(body)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            if self.sse_chunks:
                resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                await resp.prepare(request)
                for i in range(self.sse_chunks):
                    if i and self.sse_gate is not None:
                        await self.sse_gate.get()
                    elif i and self.sse_gap_s:
                        await asyncio.sleep(self.sse_gap_s)
                    await resp.write(f"data: chunk-{i}\n\n".encode())
                await resp.write(b"data: [DONE]\n\n")
                if self.sse_end_delay_s:
                    await asyncio.sleep(self.sse_end_delay_s)
                await resp.write_eof()
                return resp
            payload = {"backend": self.name, "path": request.path_qs, "len": len(body)}
            return web.json_response(payload, status=self.status)
        finally:
            self.in_flight -= 1

    async def start(self, port: int | None = None) -> Backend:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port if port is not None else self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def kill(self) -> None:
        """Like SIGKILL: stop listening and reset every open connection now."""
        runner = self._runner
        if runner is None:
            return
        self._runner = None
        for site in list(runner.sites):
            await site.stop()
        server = runner.server
        if server is not None:
            for conn in list(server.connections):
                if conn.transport is not None:
                    conn.transport.abort()
        await runner.cleanup()

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


@dataclass
class FakeScaler:
    activators: int = 1
    activations: list[tuple[float, dict[str, Any], str]] = field(default_factory=list)
    stats: list[tuple[float, dict[str, Any], str]] = field(default_factory=list)
    activated: asyncio.Event = field(default_factory=asyncio.Event)
    reported: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    url: str = ""
    # The warm tier: when set, answers as the leader listing these sleeping endpoints;
    # an activation then "wakes" its target after wake_s (drops it from the list).
    sleeping: dict[str, list[str]] | None = None
    wake_s: float = 0.0
    _runner: web.AppRunner | None = None

    def _warm(self) -> dict[str, Any]:
        return {} if self.sleeping is None else {"leader": True, "sleeping": self.sleeping}

    async def _activate(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.activations.append(
            (time.perf_counter(), body, request.headers.get("Authorization", ""))
        )
        self.activated.set()
        if self.sleeping is not None and self.sleeping.get(body.get("target")):
            await asyncio.sleep(self.wake_s)
            self.sleeping = {k: v for k, v in self.sleeping.items() if k != body.get("target")}
        return web.json_response(self._warm(), status=202)

    async def _stats(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.stats.append((time.perf_counter(), body, request.headers.get("Authorization", "")))
        self.reported.put_nowait(body)
        return web.json_response({"activators": self.activators, **self._warm()})

    async def start(self) -> FakeScaler:
        app = web.Application()
        app.router.add_post("/v1/activate", self._activate)
        app.router.add_post("/v1/stats", self._stats)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class StaticSource:
    """A TargetSource whose targets the test sets (endpoints carry their readiness)."""

    def __init__(self, *targets: Discovered) -> None:
        self.specs = {t.spec.name: t for t in targets}
        self.sink: TargetSink | None = None

    async def run(self, sink: TargetSink) -> None:
        self.sink = sink
        sink.apply(self.specs)
        await asyncio.Event().wait()

    def set(self, *targets: Discovered) -> None:
        self.specs = {t.spec.name: t for t in targets}
        assert self.sink is not None
        self.sink.apply(self.specs)


def spec(
    name: str = "default/llama",
    *endpoints: str,
    ready: bool = True,
    **kwargs: Any,
) -> Discovered:
    """A target as a source lists it: its spec (``kwargs``) and its endpoints (``host:port``)."""
    eps = tuple(
        Endpoint(host=e.split(":")[0], port=int(e.split(":")[1]), ready=ready) for e in endpoints
    )
    kwargs.setdefault("path_prefix", "/")
    return Discovered(TargetSpec(name=name, **kwargs), eps)


def settings(scaler: FakeScaler | None = None, **overrides: Any) -> ActivatorSettings:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "admin_host": "127.0.0.1",
        "admin_port": 0,
        "scaler_url": scaler.url if scaler else "http://127.0.0.1:9",
        "scaler_token": "s3cret",
        "probe_interval_s": 0.05,
        "report_period_s": 0.2,
        "name": "test-activator",
        # No drain grace unless a test wants one: drains end at once.
        "timeouts": {"drain_grace_s": 0.0},
    }
    values.update(overrides)
    return ActivatorSettings(**values)


@contextlib.asynccontextmanager
async def running_activator(source: Any, cfg: ActivatorSettings) -> AsyncIterator[Activator]:
    activator = await start(cfg, source=source)
    try:
        # Let the source push its first snapshot.
        await wait_until(lambda: bool(activator.registry.updates))
        yield activator
    finally:
        await activator.close()


def sse_events(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()
