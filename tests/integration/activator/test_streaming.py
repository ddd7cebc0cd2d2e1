"""Streaming through the activator, both ways.

Covers:
- server-sent events pass through chunk by chunk: the backend produces the
  next chunk only after the client has read the previous one, so any
  buffering in the proxy would deadlock (bounded by a timeout) instead of
  passing;
- the official ``openai`` client streams a chat completion through the
  activator unchanged (routing by the body's ``model``);
- a chunked request body reaches the backend intact, and a large response
  is streamed intact;
- headers: hop-by-hop removed, X-Forwarded-* set, X-Request-Id kept or
  added, X-Tidal-Target stripped.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import openai
from aiohttp import web

from tests.integration.activator.helpers import (
    Backend,
    FakeScaler,
    StaticSource,
    running_activator,
    settings,
    spec,
    sse_events,
)


async def test_sse_chunks_arrive_as_sent(scaler: FakeScaler, client: aiohttp.ClientSession) -> None:
    gate: asyncio.Queue[None] = asyncio.Queue()
    backend = await Backend(sse_chunks=5, sse_gate=gate).start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        async with (
            running_activator(source, settings(scaler)) as act,
            client.get(f"http://127.0.0.1:{act.data_port}/v1/stream") as resp,
        ):
            assert resp.headers["Content-Type"] == "text/event-stream"
            seen: list[str] = []
            buffer = b""
            while len(seen) < 5:
                chunk = await asyncio.wait_for(resp.content.readany(), 5)
                buffer += chunk
                events = sse_events(buffer)
                if len(events) > len(seen):
                    seen = events
                    gate.put_nowait(None)  # let the backend send the next one
            rest = await resp.read()
        assert seen[:5] == [f"chunk-{i}" for i in range(5)]
        assert sse_events(buffer + rest)[-1] == "[DONE]"
    finally:
        await backend.stop()


async def _openai_backend(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    assert body["stream"] is True
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i, word in enumerate(["Hello", " from", " the", " replica"]):
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {"index": 0, "delta": {"content": word}, "finish_reason": None if i < 3 else "stop"}
            ],
        }
        await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await asyncio.sleep(0.01)
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def test_openai_client_streams_through(scaler: FakeScaler) -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _openai_backend)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        source = StaticSource(
            spec("default/llama", f"127.0.0.1:{port}", path_prefix=None, models=("llama-3-8b",))
        )
        async with running_activator(source, settings(scaler)) as act:
            oai = openai.AsyncOpenAI(
                base_url=f"http://127.0.0.1:{act.data_port}/v1", api_key="unused", max_retries=0
            )
            try:
                stream = await oai.chat.completions.create(
                    model="llama-3-8b",
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                )
                words = [c.choices[0].delta.content async for c in stream]
            finally:
                await oai.close()
        assert "".join(w or "" for w in words) == "Hello from the replica"
    finally:
        await runner.cleanup()


async def test_chunked_request_body_and_large_response(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    big = b"x" * 300_000

    async def handler(request: web.Request) -> web.Response:
        got = await request.read()
        return web.Response(
            body=got * 2, headers={"X-Te": request.headers.get("Transfer-Encoding", "")}
        )

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]

    async def body() -> AsyncIterator[bytes]:
        for i in range(0, len(big), 50_000):
            yield big[i : i + 50_000]

    try:
        source = StaticSource(spec("default/llama", f"127.0.0.1:{port}"))
        async with (
            running_activator(source, settings(scaler)) as act,
            client.post(f"http://127.0.0.1:{act.data_port}/up", data=body()) as resp,
        ):
            assert resp.status == 200
            assert resp.headers["X-Te"] == "chunked"
            assert await resp.read() == big * 2
    finally:
        await runner.cleanup()


async def test_header_hygiene(scaler: FakeScaler, client: aiohttp.ClientSession) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        cfg = settings(scaler, allow_target_header=True)
        async with running_activator(source, cfg) as act:
            url = f"http://127.0.0.1:{act.data_port}/x"
            headers = {
                "Connection": "keep-alive, X-Secret-Hop",
                "X-Secret-Hop": "drop me",
                "Proxy-Authorization": "Basic Zm9v",
                "X-Tidal-Target": "default/llama",
                "X-Forwarded-For": "10.0.0.9",
                "X-Request-Id": "abc-123",
                "X-Custom": "kept",
            }
            async with client.get(url, headers=headers) as resp:
                assert resp.status == 200
                assert resp.headers["X-Request-Id"] == "abc-123"
            async with client.get(url) as resp:
                generated = resp.headers["X-Request-Id"]
        first, second = backend.headers
        assert first["X-Custom"] == "kept"
        for gone in ("X-Secret-Hop", "Proxy-Authorization", "X-Tidal-Target"):
            assert gone not in first
        assert first["X-Forwarded-For"] == "10.0.0.9, 127.0.0.1"
        assert first["X-Forwarded-Proto"] == "http"
        assert first["X-Forwarded-Host"] == f"127.0.0.1:{act.data_port}"
        assert first["X-Request-Id"] == "abc-123"
        assert second["X-Request-Id"] == generated
        assert len(generated) == 32
    finally:
        await backend.stop()
