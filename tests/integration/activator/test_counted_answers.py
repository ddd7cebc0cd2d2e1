"""Each request counted by what happened to its answer; the routes clients probe.

Covers:
- a client that closes its connection at ``data: [DONE]``, before the
  replica's chunked body has ended (as GuideLLM and ``vllm bench serve``
  do), is a completed request: 100 sent, 100 counted 2xx, none cut, 100 in
  the duration histogram, and the replica connection kept for reuse;
- a client that closes mid-stream is counted ``cut`` with reason
  ``client_closed`` (after the grace, the replica's connection cut), and
  logged; one whose replica dies mid-stream is ``cut`` with
  ``replica_failed``; one that leaves while held is ``cut`` too;
- ``/health``, ``/ping`` and ``/version`` at zero replicas, in vLLM's shapes,
  with nothing sent to a replica; a target whose route claims ``/health``
  gets it; the model cards carry vLLM's fields.
"""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.activator.helpers import (
    Backend,
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
    wait_until,
)

REQUEST = (
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 2\r\n\r\n{}"
)


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


async def _metrics(client: aiohttp.ClientSession, admin_port: int) -> str:
    async with client.get(f"http://127.0.0.1:{admin_port}/metrics") as resp:
        return await resp.text()


async def _read_until(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    got = b""
    while marker not in got:
        chunk = await reader.read(65536)
        assert chunk, f"connection closed before {marker!r}: {got!r}"
        got += chunk
    return got


async def _close_at(port: int, marker: bytes) -> None:
    """One request on a fresh connection, closed as soon as ``marker`` arrived."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(REQUEST)
    await _read_until(reader, marker)
    writer.close()
    await writer.wait_closed()


async def test_clients_closing_at_done_are_counted_as_completed(
    client: aiohttp.ClientSession,
) -> None:
    # The replica's last chunk comes 50 ms after [DONE]: every client's close beats it.
    backend = await Backend(sse_chunks=3, sse_end_delay_s=0.05).start()
    try:
        async with running_activator(
            StaticSource(spec("default/llama", backend.endpoint)), settings()
        ) as act:
            for _ in range(5):  # 100 requests, 20 at a time
                await asyncio.gather(*(_close_at(act.data_port, b"[DONE]") for _ in range(20)))
            gate = act.registry.targets["default/llama"].gate
            await wait_until(lambda: gate.in_flight == 0)
            text = await _metrics(client, act.admin_port)
        target = (("target", "default/llama"),)
        assert _samples(text, "tidal_activator_requests_total") == {
            (("code", "2xx"), *target): 100.0
        }
        assert _samples(text, "tidal_activator_requests_cut_total") == {}
        assert _samples(text, "tidal_activator_request_duration_seconds_count") == {target: 100.0}
        assert len(backend.received) == 100
    finally:
        await backend.stop()


async def test_cuts_are_counted_with_their_reason_and_logged(
    client: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="activator.forwarding")
    endless = await Backend(sse_chunks=1000, sse_gap_s=0.05).start()
    dying = await Backend(sse_chunks=1000, sse_gap_s=0.05).start()
    source = StaticSource(
        spec("default/endless", endless.endpoint, path_prefix="/endless"),
        spec("default/dying", dying.endpoint, path_prefix="/dying"),
        spec("default/asleep", f"127.0.0.1:{free_port()}", ready=False, path_prefix="/asleep"),
    )
    try:
        async with running_activator(source, settings()) as act:
            base = f"http://127.0.0.1:{act.data_port}"
            # Leaves after the first event: not ended within the grace, so cut.
            reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
            writer.write(REQUEST.replace(b"/v1/completions", b"/endless/v1/completions"))
            await _read_until(reader, b"chunk-0")
            writer.close()
            # The replica dies mid-stream.
            async with client.post(f"{base}/dying/v1/completions", data=b"{}") as resp:
                await resp.content.readuntil(b"chunk-1")
                await dying.kill()
                with pytest.raises(aiohttp.ClientPayloadError):
                    await resp.read()
            # Leaves while held.
            held = asyncio.create_task(client.get(f"{base}/asleep/x"))
            asleep = act.registry.targets["default/asleep"].gate
            await wait_until(lambda: asleep.buffered == 1)
            held.cancel()
            await wait_until(lambda: asleep.buffered == 0)
            gate = act.registry.targets["default/endless"].gate
            await wait_until(lambda: gate.in_flight == 0, timeout_s=5.0)
            text = await _metrics(client, act.admin_port)
        cut = _samples(text, "tidal_activator_requests_cut_total")
        assert cut == {
            (("reason", "client_closed"), ("target", "default/endless")): 1.0,
            (("reason", "replica_failed"), ("target", "default/dying")): 1.0,
            (("reason", "client_closed"), ("target", "default/asleep")): 1.0,
        }
        requests = _samples(text, "tidal_activator_requests_total")
        for name in ("endless", "dying", "asleep"):
            assert requests[(("code", "cut"), ("target", f"default/{name}"))] == 1.0
        assert "cut client_closed (target default/endless): mid-answer" in caplog.text
    finally:
        await endless.stop()
        await dying.stop()


async def test_probe_routes_are_answered_at_zero_as_vllm_does(
    client: aiohttp.ClientSession,
) -> None:
    claimed = await Backend(name="claimed").start()
    source = StaticSource(
        spec(
            "ml/llama",
            f"127.0.0.1:{free_port()}",
            ready=False,
            models=("llama-3-8b",),
            path_prefix=None,
        ),
        spec("ml/own", claimed.endpoint, path_prefix=None, hosts=("own.example",)),
    )
    try:
        async with running_activator(source, settings()) as act:
            base = f"http://127.0.0.1:{act.data_port}"
            for method, path in (("GET", "/health"), ("GET", "/ping"), ("POST", "/ping")):
                async with client.request(method, f"{base}{path}") as resp:
                    assert (resp.status, await resp.read()) == (200, b""), path
            async with client.get(f"{base}/version") as resp:
                version = await resp.json()
            assert version["server"] == "tidal-activator" and version["version"]
            async with client.get(f"{base}/v1/models") as resp:
                (card,) = (await resp.json())["data"]
            assert card["root"] == "llama-3-8b" and card["max_model_len"] is None
            assert card["parent"] is None and card["permission"][0]["object"] == "model_permission"
            async with client.get(f"{base}/health", headers={"Host": "own.example"}) as resp:
                assert json.loads(await resp.read())["backend"] == "claimed"
            async with client.delete(f"{base}/health") as resp:
                assert resp.status == 404  # not a probe: no target claims it
        assert claimed.received and len(claimed.received) == 1
    finally:
        await claimed.stop()
