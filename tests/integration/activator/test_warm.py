"""The activator and the warm tier: sleeping replicas get no requests; a held one wakes them.

Covers:
- once the leading scaler's stats answer lists a replica as sleeping, a request
  is held (not sent to it) and an activation goes out at once; the activation's
  answer (the replica woken) releases it, after about the wake time;
- a follower's answer (no ``leader``) changes nothing.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from tests.integration.activator.helpers import (
    Backend,
    FakeScaler,
    StaticSource,
    running_activator,
    settings,
    spec,
    wait_until,
)


async def test_sleeping_replica_is_held_and_woken() -> None:
    backend = await Backend().start()
    scaler = await FakeScaler(sleeping={"default/llama": [backend.endpoint]}, wake_s=0.3).start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        async with (
            running_activator(source, settings(scaler)) as act,
            aiohttp.ClientSession() as client,
        ):
            gate = act.registry.targets["default/llama"].gate
            await wait_until(lambda: not gate.endpoints.ready)  # the stats answer arrived
            started = time.perf_counter()
            url = f"http://127.0.0.1:{act.data_port}/v1/completions"
            async with client.post(url, json={"prompt": "x"}) as resp:
                assert resp.status == 200
            took = time.perf_counter() - started
            assert [b["target"] for _, b, _ in scaler.activations] == ["default/llama"]
            assert 0.25 <= took < 2.0
            assert len(backend.received) == 1
    finally:
        await scaler.stop()
        await backend.stop()


async def test_a_followers_answer_changes_nothing() -> None:
    backend = await Backend().start()
    scaler = await FakeScaler().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        async with running_activator(source, settings(scaler)) as act:
            await asyncio.wait_for(scaler.reported.get(), 5)
            await asyncio.wait_for(scaler.reported.get(), 5)
            assert act.registry.targets["default/llama"].gate.endpoints.ready
    finally:
        await scaler.stop()
        await backend.stop()
