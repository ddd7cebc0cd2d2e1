"""The demo's streaming client against the fake vLLM, over real HTTP.

Covers: a streamed chat completion is timed (TTFT before the end) and
succeeds; a refused connection and a server error become failed results,
not exceptions.
"""

from __future__ import annotations

import aiohttp

from loadtests.demo.client import stream_chat
from loadtests.sandbox.servers.server import ModelServer, ServerConfig, free_port


async def test_streamed_chat_is_timed() -> None:
    config = ServerConfig(model="m", port=0, speedup=20.0)
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        result = await stream_chat(session, server.url, model="m", max_tokens=8)
    assert result.ok, result.error
    assert result.ttft_s is not None
    assert 0 < result.ttft_s <= result.total_s


async def test_refused_connection_is_a_failed_result() -> None:
    async with aiohttp.ClientSession() as session:
        result = await stream_chat(session, f"http://127.0.0.1:{free_port()}", model="m")
    assert not result.ok
    assert result.status == 0
    assert "ClientConnectorError" in result.error


async def test_unknown_model_is_a_failed_result() -> None:
    config = ServerConfig(model="m", port=0, speedup=20.0)
    async with ModelServer(config) as server, aiohttp.ClientSession() as session:
        result = await stream_chat(session, server.url, model="other")
    assert not result.ok
    assert result.status == 404
