"""The warm tier's replica calls over loopback HTTP: what a failure carries.

Covers: a server without sleep mode (``/sleep`` not served) fails the call
with status 404, which the warm tier reads as "no sleep mode"; an out-of-
memory answer is marked as such; a served call returns normally.
"""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from scaler.warm.tier import HttpReplicaCalls, ReplicaCallFailed


async def test_failures_carry_the_status_and_out_of_memory() -> None:
    async def wake_up(request: web.Request) -> web.Response:
        return web.Response(status=500, text="CUDA out of memory")

    async def is_sleeping(request: web.Request) -> web.Response:
        return web.json_response({"is_sleeping": False})

    app = web.Application()
    app.router.add_post("/wake_up", wake_up)
    app.router.add_get("/is_sleeping", is_sleeping)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            calls = HttpReplicaCalls(session, timeout_s=5.0)
            base = str(server.make_url("")).rstrip("/")
            with pytest.raises(ReplicaCallFailed) as no_sleep:
                await calls.sleep(base, 1)
            assert no_sleep.value.status == 404 and not no_sleep.value.out_of_memory
            with pytest.raises(ReplicaCallFailed) as oom:
                await calls.wake_up(base)
            assert oom.value.status == 500 and oom.value.out_of_memory
            assert await calls.is_sleeping(base) is False
    finally:
        await server.close()
