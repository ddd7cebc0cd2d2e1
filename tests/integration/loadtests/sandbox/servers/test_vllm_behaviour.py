"""How the fake vLLM behaves over time: cold start, queueing, drain, faults.

Covers:
- during the startup delay the port refuses connections; after it, /health is 200;
- requests past max_num_seqs queue and show in vllm:num_requests_waiting
  (running capped at max_num_seqs); a client that leaves frees its place;
- stop() (what SIGTERM does) refuses new connections and finishes every running
  and queued request;
- faults: a share of requests fails with a 5xx, a stream is cut mid-way, the
  server crashes after a time (connections reset, port closed).
"""

from __future__ import annotations

import asyncio
import dataclasses

import aiohttp
import openai
import pytest

from loadtests.sandbox.servers.faults import Faults
from loadtests.sandbox.servers.server import ModelServer, free_port
from tests.integration.loadtests.sandbox.servers.conftest import scrape, vllm_config

LABEL = '{model_name="m"}'


async def _stream_all(session: aiohttp.ClientSession, url: str, max_tokens: int) -> bytes:
    body = {"prompt": "hi", "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
    async with session.post(f"{url}/v1/completions", json=body) as resp:
        assert resp.status == 200
        return await resp.read()


async def _until_accepted(session: aiohttp.ClientSession, url: str, count: int) -> None:
    """Return once the engine has taken ``count`` requests (running, waiting or finished)."""
    for _ in range(500):
        samples = await scrape(session, url)
        accepted = sum(
            samples[f"vllm:{name}{LABEL}"]
            for name in ("num_requests_running", "num_requests_waiting", "request_success_total")
        )
        if accepted >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the server did not accept {count} requests; saw {accepted}")


async def test_refuses_connections_while_starting_then_ready() -> None:
    port = free_port()
    server = ModelServer(vllm_config(port=port, startup_delay_s=0.5))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorError):
                await session.get(f"http://127.0.0.1:{port}/health")
            assert not server.ready
            assert await server.wait_ready() == port
            async with session.get(f"http://127.0.0.1:{port}/health") as resp:
                assert resp.status == 200
    finally:
        await server.stop()


async def test_queueing_past_the_batch_limit_shows_as_waiting() -> None:
    config = vllm_config(speedup=1.0, llm={"max_num_seqs": 2})
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        # Five long generations (seconds at speedup 1): two run, three wait.
        tasks = [asyncio.create_task(_stream_all(session, server.url, 2000)) for _ in range(5)]
        try:
            for _ in range(200):
                samples = await scrape(session, server.url)
                if samples[f"vllm:num_requests_waiting{LABEL}"] == 3:
                    break
                await asyncio.sleep(0.01)
            assert samples[f"vllm:num_requests_waiting{LABEL}"] == 3
            assert samples[f"vllm:num_requests_running{LABEL}"] == 2
            assert samples[f"vllm:kv_cache_usage_perc{LABEL}"] > 0
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        # The clients left: their places are freed.
        for _ in range(200):
            samples = await scrape(session, server.url)
            running = samples[f"vllm:num_requests_running{LABEL}"]
            if running == 0 and samples[f"vllm:num_requests_waiting{LABEL}"] == 0:
                break
            await asyncio.sleep(0.01)
        assert running == 0


async def test_stop_finishes_running_and_queued_requests_and_refuses_new_ones() -> None:
    config = vllm_config(speedup=10.0, llm={"max_num_seqs": 3})
    server = ModelServer(config)
    await server.start()
    await server.wait_ready()
    url = server.url
    try:
        async with aiohttp.ClientSession() as session:
            tasks = [asyncio.create_task(_stream_all(session, url, 150)) for _ in range(5)]
            await _until_accepted(session, url, 5)  # three running, two queued (or done)
            stopping = asyncio.create_task(server.stop())
            await asyncio.sleep(0.02)
            with pytest.raises(aiohttp.ClientConnectorError):
                async with aiohttp.ClientSession() as fresh:
                    await fresh.get(f"{url}/health")
            bodies = await asyncio.gather(*tasks)
            await stopping
    finally:
        await server.stop()
    for body in bodies:
        assert body.endswith(b"data: [DONE]\n\n")
        assert body.count(b'"text":') == 150


async def test_fail_rate_answers_5xx() -> None:
    config = vllm_config(faults=Faults(fail_rate=1.0, fail_status=503, seed=1))
    async with ModelServer(config) as server:
        c = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        try:
            with pytest.raises(openai.APIStatusError) as caught:
                await c.completions.create(model="m", prompt="x", max_tokens=2)
        finally:
            await c.close()
    assert caught.value.status_code == 503


async def test_fail_rate_is_a_share() -> None:
    config = vllm_config(faults=Faults(fail_rate=0.5, seed=3))
    statuses = []
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        for _ in range(40):
            body = {"prompt": "x", "max_tokens": 1}
            async with session.post(f"{server.url}/v1/completions", json=body) as resp:
                statuses.append(resp.status)
    assert set(statuses) == {200, 500}
    assert 8 <= statuses.count(500) <= 32


async def test_break_stream_cuts_the_connection_midway() -> None:
    config = vllm_config(faults=Faults(break_stream_rate=1.0, seed=1))
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        body = {"prompt": "x", "max_tokens": 20, "ignore_eos": True, "stream": True}
        received: list[bytes] = []

        async def read_stream() -> None:
            async with session.post(f"{server.url}/v1/completions", json=body) as resp:
                async for chunk in resp.content.iter_any():
                    received.append(chunk)

        with pytest.raises(aiohttp.ClientError):
            await read_stream()
        assert b'"text":' in b"".join(received)  # some tokens came first
        assert b"[DONE]" not in b"".join(received)


async def test_crash_after_resets_connections_and_closes_the_port() -> None:
    config = vllm_config(speedup=1.0, faults=Faults(crash_after_s=0.3))
    server = ModelServer(config)
    await server.start()
    try:
        await server.wait_ready()
        url = server.url
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientError):
                await _stream_all(session, url, 5000)
            await asyncio.wait_for(server.wait_stopped(), timeout=5)
            assert server.crashed
            with pytest.raises(aiohttp.ClientConnectorError):
                await session.get(f"{url}/health")
    finally:
        await server.stop()


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="speedup"):
        dataclasses.replace(vllm_config(), speedup=0.0)
    with pytest.raises(ValueError, match="fail_rate"):
        Faults(fail_rate=1.5)
