"""Requests held for a model Tidal will not wake are answered at once, over loopback.

Covers, with a real activator and scaler replicas faked on loopback: a scaler
that refuses an activation (422 ``not_woken``: the target's annotations are
invalid) gets the held request answered within a second with a 503 whose
OpenAI-shaped error names the Deployment and the annotation, although a
second scaler replica never answers; a request that arrives later asks again
and is answered the same; once the scaler stops refusing (the annotation was
fixed), requests are held for the wake again. Unrefused activation errors
(a 500) keep the request held, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from tests.integration.activator.helpers import (
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
)

PROBLEM = 'autoscaling.tidal.dev/window: "5x" is not allowed; allowed: 6s..1h'


@dataclass
class Scaler:
    """A scaler replica: refuses (``refusal``), fails (``status``) or hangs."""

    refusal: str | None = None
    status: int = 202
    hang: bool = False
    activations: int = 0
    _release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        if request.path == "/v1/stats":
            return web.json_response({"activators": 1})
        self.activations += 1
        if self.hang:
            await self._release.wait()
        if self.refusal is not None:
            error = {"message": self.refusal, "type": "not_woken", "code": 422}
            return web.json_response({"error": error}, status=422)
        return web.json_response({}, status=self.status)


@contextlib.asynccontextmanager
async def serving(scaler: Scaler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/{what}", scaler.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        scaler._release.set()
        await runner.cleanup()


async def ask(url: str, timeout_s: float) -> tuple[int, dict[str, object], float]:
    started = time.perf_counter()
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
        session.post(url, json={"model": "llama", "prompt": "hi"}) as resp,
    ):
        body = await resp.json(content_type=None)
        return resp.status, body, time.perf_counter() - started


async def test_held_requests_get_the_scalers_reason_at_once() -> None:
    refusing = Scaler(refusal=f"Deployment default/llama: {PROBLEM}")
    hanging = Scaler(hang=True)
    source = StaticSource(spec("default/llama", f"127.0.0.1:{free_port()}", ready=False))
    async with serving(refusing) as one, serving(hanging) as two:
        cfg = settings(scaler_url=f"{one},{two}")
        async with running_activator(source, cfg) as act:
            url = f"http://127.0.0.1:{act.data_port}/v1/completions"
            for asked in (1, 2):  # the second, later, asks the scaler again
                status, body, took = await ask(url, timeout_s=10)
                assert status == 503
                error = body["error"]
                assert isinstance(error, dict)
                assert error["code"] == "not_woken" and error["type"] == "unavailable_error"
                assert "default/llama" in error["message"]
                assert 'autoscaling.tidal.dev/window: "5x"' in error["message"]
                assert took < 2.0
                assert refusing.activations == asked

            # Fixed: the scaler takes the activation, and the request waits for a replica.
            refusing.refusal = None
            waiting = asyncio.create_task(ask(url, timeout_s=10))
            await asyncio.sleep(0.5)
            assert not waiting.done()
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)


async def test_a_failed_activation_keeps_the_request_held() -> None:
    failing = Scaler(status=500)
    source = StaticSource(spec("default/llama", f"127.0.0.1:{free_port()}", ready=False))
    async with serving(failing) as url_of_scaler:
        cfg = settings(scaler_url=url_of_scaler)
        async with running_activator(source, cfg) as act:
            url = f"http://127.0.0.1:{act.data_port}/v1/completions"
            waiting = asyncio.create_task(ask(url, timeout_s=10))
            await asyncio.sleep(1.0)
            assert failing.activations >= 2  # retried with backoff
            assert not waiting.done()
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
