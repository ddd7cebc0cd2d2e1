"""Every request the activator accepts gets an answer ("Working rules" in docs/architecture.md).

Covers (raw sockets where a client must misbehave):
- a replica whose listen backlog is full makes the connect time out: the
  request goes back to waiting and is served by the next ready replica,
  not answered 502;
- a client that stalls its body while the activator reads it to route by
  ``model`` gets a JSON 408 (not a bare 504);
- a client that stalls a body being streamed to a replica gets a JSON 408,
  and a chunked body that passes ``max_body_bytes`` on the way a JSON 413
  (not 502);
- the held-body cap: a request whose body would pass it is answered 503
  with ``Retry-After`` at once, while one that fits is held.
(Requests still held at the end of a drain: ``test_holding.py``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator
from typing import Any

import aiohttp

from tests.integration.activator.helpers import (
    Backend,
    FakeScaler,
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
    wait_until,
)


@contextlib.contextmanager
def full_backlog() -> Iterator[int]:
    """A port that listens but never accepts, its backlog full: new connects hang."""
    server = socket.socket()
    clients: list[socket.socket] = []
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = int(server.getsockname()[1])
        for _ in range(4):
            client = socket.socket()
            client.setblocking(False)
            clients.append(client)
            with contextlib.suppress(BlockingIOError):
                client.connect(("127.0.0.1", port))
        yield port
    finally:
        for client in clients:
            client.close()
        server.close()


async def _answer(port: int, head: bytes, body: bytes = b"", *, then_wait_s: float = 5) -> bytes:
    """Send ``head`` and a partial ``body``, keep the connection open, read the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), then_wait_s)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def _parse(answer: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


async def test_connect_timeout_goes_back_to_waiting(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    live = await Backend(name="live").start()
    try:
        with full_backlog() as stalled_port:
            stalled = f"127.0.0.1:{stalled_port}"
            source = StaticSource(spec("default/llama", stalled))
            cfg = settings(scaler, timeouts={"connect_s": 0.2, "probe_s": 0.2})
            async with running_activator(source, cfg) as act:
                gate = act.registry.targets["default/llama"].gate
                pending = asyncio.create_task(client.get(f"http://127.0.0.1:{act.data_port}/x"))
                # The only replica timed out on connect: out of rotation, request held.
                await wait_until(lambda: not gate.endpoints.ready and gate.buffered == 1)
                assert not pending.done()
                source.set(spec("default/llama", stalled, live.endpoint))
                async with await asyncio.wait_for(pending, 5) as resp:
                    assert resp.status == 200
                    assert (await resp.json())["backend"] == "live"
                assert [t.key for t in gate.endpoints.ready] == [live.endpoint]
    finally:
        await live.stop()


async def test_stalled_body_read_for_model_gets_json_408(scaler: FakeScaler) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(
            spec("default/llama", backend.endpoint, path_prefix=None, models=("llama",))
        )
        cfg = settings(scaler, timeouts={"client_body_idle_s": 0.2})
        async with running_activator(source, cfg) as act:
            head = (
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            )
            status, headers, body = _parse(await _answer(act.data_port, head, b'{"model": '))
        assert status == 408
        assert headers["Content-Type"].startswith("application/json")
        assert body["error"]["code"] == "body_timeout"
        assert backend.received == []
    finally:
        await backend.stop()


async def test_stalled_streamed_body_gets_json_408(scaler: FakeScaler) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        cfg = settings(scaler, timeouts={"client_body_idle_s": 0.2})
        async with running_activator(source, cfg) as act:
            head = b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
            status, _, body = _parse(await _answer(act.data_port, head, b"x" * 10))
        assert status == 408
        assert body["error"]["code"] == "body_timeout"
    finally:
        await backend.stop()


async def test_chunked_body_over_the_limit_gets_json_413(scaler: FakeScaler) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        cfg = settings(scaler, limits={"max_body_bytes": 1024})
        async with running_activator(source, cfg) as act:
            head = b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            chunks = b"".join(b"400\r\n" + b"x" * 1024 + b"\r\n" for _ in range(3))
            status, _, body = _parse(await _answer(act.data_port, head, chunks))
        assert status == 413
        assert body["error"]["code"] == "body_too_large"
    finally:
        await backend.stop()


async def test_held_bodies_are_capped_per_activator(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    # Two targets, so the per-target max_buffered is no help: only the cap is.
    source = StaticSource(
        spec("default/a", f"127.0.0.1:{free_port()}", ready=False, path_prefix=None, models=("a",)),
        spec("default/b", f"127.0.0.1:{free_port()}", ready=False, path_prefix=None, models=("b",)),
    )
    cfg = settings(scaler, retry_after_s=4, limits={"max_held_body_bytes": 1500})
    async with running_activator(source, cfg) as act:
        url = f"http://127.0.0.1:{act.data_port}/v1/completions"

        def body(model: str) -> bytes:
            return json.dumps({"model": model, "prompt": "p" * 900}).encode()

        held = asyncio.create_task(client.post(url, data=body("a")))
        await wait_until(lambda: act.registry.targets["default/a"].gate.buffered == 1)
        async with client.post(url, data=body("b")) as resp:
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "4"
            assert (await resp.json())["error"]["code"] == "held_bodies_full"
        assert act.registry.targets["default/b"].gate.buffered == 0
        assert act.proxy.held_bodies.held_bytes == len(body("a"))
        held.cancel()
        await asyncio.gather(held, return_exceptions=True)
        await wait_until(lambda: act.proxy.held_bodies.held_bytes == 0)
