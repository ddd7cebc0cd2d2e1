"""Requests the proxy sends at once over a pooled connection, served by callbacks alone.

:meth:`activator.proxy.Proxy.handle` sends a request at once when nothing
in it needs waiting (routed without the body, an endpoint with room, an idle
pooled connection); it then has no task. These tests check that it is
sent so, and that what docs/architecture.md promises still holds on that
path: the answer and its metrics, and a client that leaves mid-answer
aborting the replica's connection and freeing its place.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from activator.app import Activator
from activator.http1.connections import OpenConnection
from tests.integration.activator.helpers import (
    Backend,
    StaticSource,
    running_activator,
    settings,
    spec,
    wait_until,
)


def _serving(act: Activator) -> list[OpenConnection]:
    return [c for c in act.connections if c.current is not None]


async def test_pooled_requests_are_served_without_a_task_and_counted() -> None:
    backend = await Backend().start()
    try:
        async with (
            running_activator(
                StaticSource(spec("default/llama", backend.endpoint)), settings()
            ) as act,
            aiohttp.ClientSession() as client,
        ):
            url = f"http://127.0.0.1:{act.data_port}/v1/x"
            for _ in range(5):
                async with client.get(url) as resp:
                    assert resp.status == 200
                    assert (await resp.json())["path"] == "/v1/x"
            assert act.pool.opened == 1  # one replica connection, reused
            total = act.metrics.registry.get_sample_value(
                "tidal_activator_requests_total", {"target": "default/llama", "code": "2xx"}
            )
            assert total == 5
            gate = act.registry.targets["default/llama"].gate
            assert gate.in_flight == 0
    finally:
        await backend.stop()


async def test_client_leaving_a_pooled_request_aborts_the_replica_and_frees_its_place() -> None:
    backend = Backend(sse_chunks=3, sse_gate=asyncio.Queue())
    await backend.start()
    try:
        async with running_activator(
            StaticSource(spec("default/llama", backend.endpoint)), settings()
        ) as act:
            url = f"http://127.0.0.1:{act.data_port}/v1/stream"
            gate = act.registry.targets["default/llama"].gate
            # Opens and pools the replica connection.
            async with aiohttp.ClientSession() as warm, warm.get(url) as resp:
                assert resp.status == 200
                for _ in range(2):
                    backend.sse_gate.put_nowait(None)  # type: ignore[union-attr]
                await resp.read()
            assert act.pool.opened == 1
            loop = asyncio.get_running_loop()
            tasks: list[str] = []

            def counting(
                loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
            ) -> asyncio.Task[Any]:
                tasks.append(coro.__qualname__)
                return asyncio.Task(coro, loop=loop, **kwargs)

            loop.set_task_factory(counting)
            try:
                async with aiohttp.ClientSession() as leaving, leaving.get(url) as resp:
                    await resp.content.readuntil(b"chunk-0")
                    [conn] = _serving(act)
                    # Sent from Proxy.handle at once: no task at all.
                    assert conn.current is not None
                    assert not any(name.startswith("_guarded") for name in tasks), tasks
                    assert gate.in_flight == 1 and backend.in_flight == 1
            finally:
                loop.set_task_factory(None)
            # The session closed the connection mid-answer: the replica's
            # connection is aborted (not pooled) and the place is free.
            await wait_until(lambda: gate.in_flight == 0 and not act.pool._open, timeout_s=5)
            assert not _serving(act)
            assert act.pool.take_idle("127.0.0.1", backend.port) is None
            total = act.metrics.registry.get_sample_value(
                "tidal_activator_requests_total", {"target": "default/llama", "code": "2xx"}
            )
            assert total == 1  # the abandoned answer is not counted, as on the task path
    finally:
        for _ in range(3):  # let the backend's handler finish its stream
            backend.sse_gate.put_nowait(None)  # type: ignore[union-attr]
        await backend.stop()
