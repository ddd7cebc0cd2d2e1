"""The activator is never an open proxy, and one client cannot exhaust it.

Covers (raw sockets where an HTTP client would not send the request):
- an absolute-form request target (``GET http://elsewhere/``) is refused
  with 400 and nothing is dialled;
- ``CONNECT`` is refused with 405;
- an over-long header line gets 400 from the server's parser;
- routing by ``model``: a body over the limit -> 413, a body that is not a
  JSON object -> 400, an unknown model -> 404, a known one is forwarded;
- ``X-Tidal-Target`` routes only when allowed, and an unknown one is 404;
- an idle client connection is closed after ``client_idle_s``;
- admin endpoints are not served on the data port;
- vLLM's development endpoints (sleep, wake, collective_rpc...) are refused
  with 403 however the path is spelt, and never reach a replica.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from tests.integration.activator.helpers import (
    Backend,
    FakeScaler,
    StaticSource,
    running_activator,
    settings,
    spec,
)


async def _raw(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        pytest.param(
            b"GET http://127.0.0.1:1/secret HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
            b"400",
            id="absolute-form",
        ),
        pytest.param(
            b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n", b"405", id="connect"
        ),
        pytest.param(b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", b"400", id="asterisk-form"),
        pytest.param(
            b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n",
            b"431",
            id="header-too-long",
        ),
    ],
)
async def test_refused_requests(scaler: FakeScaler, request_bytes: bytes, status: bytes) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        async with running_activator(source, settings(scaler)) as act:
            answer = await _raw(act.data_port, request_bytes)
        status_line = answer.split(b"\r\n", 1)[0]
        assert status_line.startswith(b"HTTP/1."), answer[:80]
        assert status_line[9:].startswith(status), answer[:80]
        assert backend.received == []
    finally:
        await backend.stop()


async def test_model_routing_limits(scaler: FakeScaler, client: aiohttp.ClientSession) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(
            spec("default/llama", backend.endpoint, path_prefix=None, models=("llama",))
        )
        cfg = settings(scaler, limits={"max_model_body_bytes": 2048})
        async with running_activator(source, cfg) as act:
            url = f"http://127.0.0.1:{act.data_port}/v1/completions"
            cases = [
                (b'{"model": "llama", "prompt": "' + b"a" * 4000 + b'"}', 413, "body_too_large"),
                (b"not json", 400, "invalid_json"),
                (b'["model"]', 400, "body_not_object"),
                (b'{"model": "other"}', 404, "no_target"),
            ]
            for body, status, code in cases:
                async with client.post(url, data=body) as resp:
                    assert resp.status == status, body[:20]
                    assert (await resp.json())["error"]["code"] == code
            async with client.post(url, data=b'{"model": "llama", "prompt": "hi"}') as resp:
                assert resp.status == 200
            # Only POST bodies route by model: GET /v1/models is not forwarded
            # to a replica; the activator lists the models itself (issue 15).
            async with client.get(f"http://127.0.0.1:{act.data_port}/v1/models") as resp:
                assert resp.status == 200
                assert [m["id"] for m in (await resp.json())["data"]] == ["llama"]
        assert backend.bodies == [b'{"model": "llama", "prompt": "hi"}']
    finally:
        await backend.stop()


@pytest.mark.parametrize(
    ("allowed", "header", "status"),
    [
        pytest.param(False, "default/llama", 404, id="header-ignored-when-not-allowed"),
        pytest.param(True, "default/llama", 200, id="header-routes-when-allowed"),
        pytest.param(True, "default/nope", 404, id="unknown-target"),
    ],
)
async def test_target_header(
    scaler: FakeScaler, client: aiohttp.ClientSession, allowed: bool, header: str, status: int
) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint, path_prefix="/only-here"))
        async with running_activator(source, settings(scaler, allow_target_header=allowed)) as act:
            url = f"http://127.0.0.1:{act.data_port}/elsewhere"
            async with client.get(url, headers={"X-Tidal-Target": header}) as resp:
                assert resp.status == status
    finally:
        await backend.stop()


async def test_idle_client_connection_closed(scaler: FakeScaler) -> None:
    source = StaticSource(spec("default/llama"))
    async with running_activator(source, settings(scaler, timeouts={"client_idle_s": 0.3})) as act:
        reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
        try:
            # Says nothing: the server closes the connection on its own.
            assert await asyncio.wait_for(reader.read(), 5) == b""
        finally:
            writer.close()
            await writer.wait_closed()


async def test_admin_endpoints_only_on_admin_port(
    scaler: FakeScaler, client: aiohttp.ClientSession
) -> None:
    source = StaticSource(spec("default/llama", path_prefix="/v1"))
    async with running_activator(source, settings(scaler)) as act:
        for path in ("/healthz", "/readyz", "/metrics"):
            async with client.get(f"http://127.0.0.1:{act.data_port}{path}") as resp:
                assert resp.status == 404
            async with client.get(f"http://127.0.0.1:{act.admin_port}{path}") as resp:
                assert resp.status == 200
        async with client.get(f"http://127.0.0.1:{act.admin_port}/metrics") as resp:
            text = await resp.text()
        assert 'tidal_activator_requests_total{code="4xx",target=""} 3.0' in text
        assert 'tidal_activator_requests_buffered{target="default/llama"} 0.0' in text


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/sleep?level=1"),
        ("POST", "/wake_up?tags=weights"),
        ("GET", "/is_sleeping"),
        ("POST", "/collective_rpc"),
        ("POST", "/reset_prefix_cache"),
        ("POST", "/v1/load_lora_adapter"),
        ("POST", "/%73leep"),  # percent-encoded
        ("POST", "//sleep/"),  # repeated and trailing slashes
        ("POST", "/v1/../SLEEP"),  # dot segments, case
        ("POST", "/llama/wake_up"),  # behind a path-prefix route
    ],
)
async def test_vllm_development_endpoints_are_refused(
    scaler: FakeScaler, method: str, path: str
) -> None:
    backend = await Backend().start()
    try:
        source = StaticSource(spec("default/llama", backend.endpoint))
        async with (
            running_activator(source, settings(scaler)) as act,
            aiohttp.ClientSession() as client,
        ):
            url = f"http://127.0.0.1:{act.data_port}{path}"
            async with client.request(method, url, json={"method": "reload_weights"}) as resp:
                assert resp.status == 403
                body = await resp.json()
            assert body["error"]["type"] == "permission_error"
            assert body["error"]["code"] == "denied_endpoint"
            # A model request still goes through, and nothing else reached the replica.
            ok = f"http://127.0.0.1:{act.data_port}/llama/v1/completions"
            async with client.post(ok, json={"prompt": "x"}) as resp:
                assert resp.status == 200
            assert len(backend.received) == 1
    finally:
        await backend.stop()
