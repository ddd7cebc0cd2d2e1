"""A replica that closes the connection before a byte of answer: the request goes out once more.

This is what a server does to a keep-alive connection it closes as idle, or
at shutdown (uvicorn, so vLLM, closes every idle one at SIGTERM): a request
written as it closes is never read. The "no request dropped without
an answer" needs a second attempt, on a new connection; ``activator.statuses``
says why that is safe for inference and why only once.

The replica here is a raw asyncio server on loopback, so a test decides,
request by request, whether it is answered, closed unanswered, or answered
in part. Covers:
- a pooled request (the fast path) and a first request (a task), each
  closed unanswered once: 200, the replica saw it twice, counted in
  ``tidal_activator_resent_total``;
- a body streamed to the replica is sent again whole;
- only once: a replica that never answers gives a 502 after two attempts;
- not when the body was too large to keep, nor when the answer had begun;
- the pool's other idle connections to that replica are dropped;
- a SIGKILLed replica: the requests it had not begun to answer are served
  by the other one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest

from activator.app import Activator
from tests.integration.activator.helpers import (
    Backend,
    StaticSource,
    running_activator,
    settings,
    spec,
    wait_until,
)

TARGET = "default/llama"

# What the replica does with its n-th request (0-based): answer it, close the
# connection without a byte of answer, or send half a head and close.
ANSWER, CLOSE, HALF = "answer", "close", "half"


@dataclass
class RawReplica:
    """A keep-alive HTTP/1.1 server that does to each request what ``plan`` says."""

    plan: Callable[[int], str] = lambda n: ANSWER
    requests: list[tuple[str, bytes]] = field(default_factory=list)  # (X-Request-Id, body)
    connections: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> RawReplica:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ids(self) -> list[str]:
        return [rid for rid, _ in self.requests]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                headers = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                n = len(self.requests)
                self.requests.append((headers.get("x-request-id", ""), body))
                action = self.plan(n)
                if action == CLOSE:
                    return
                if action == HALF:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-")
                    await writer.drain()
                    return
                payload = json.dumps({"n": n, "len": len(body)}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload)
                )
                await writer.drain()
        finally:
            self._writers.discard(writer)
            writer.close()


def _resent(act: Activator) -> float:
    value = act.metrics.registry.get_sample_value(
        "tidal_activator_resent_total", {"target": TARGET}
    )
    return value or 0.0


@contextlib.asynccontextmanager
async def _serving(
    *replicas: RawReplica | Backend,
) -> AsyncIterator[tuple[Activator, aiohttp.ClientSession, str]]:
    try:
        async with (
            running_activator(
                StaticSource(spec(TARGET, *(r.endpoint for r in replicas))), settings()
            ) as act,
            aiohttp.ClientSession() as client,
        ):
            yield act, client, f"http://127.0.0.1:{act.data_port}/v1/completions"
    finally:
        for replica in replicas:
            await replica.stop()


async def test_a_pooled_request_closed_unanswered_is_sent_again() -> None:
    replica = await RawReplica(plan=lambda n: CLOSE if n == 1 else ANSWER).start()
    async with _serving(replica) as (act, client, url):
        async with client.get(url, headers={"X-Request-Id": "first"}) as resp:
            assert resp.status == 200
        # The second goes over the pooled connection (sent at once), which the
        # replica closes on reading it.
        async with client.get(url, headers={"X-Request-Id": "second"}) as resp:
            assert resp.status == 200, await resp.text()
            assert (await resp.json())["n"] == 2
        assert replica.ids == ["first", "second", "second"]
        assert replica.connections == 2  # sent again on a new connection
        assert _resent(act) == 1
        assert act.registry.targets[TARGET].gate.in_flight == 0


async def test_a_first_request_closed_unanswered_is_sent_again() -> None:
    # No pooled connection yet: the task path opens one, and the replica
    # closes it unanswered (a fresh connection it was closing at shutdown).
    replica = await RawReplica(plan=lambda n: CLOSE if n == 0 else ANSWER).start()
    async with _serving(replica) as (act, client, url):
        async with client.get(url, headers={"X-Request-Id": "only"}) as resp:
            assert resp.status == 200, await resp.text()
        assert replica.ids == ["only", "only"]
        assert _resent(act) == 1


async def test_a_streamed_body_is_sent_again_whole() -> None:
    replica = await RawReplica(plan=lambda n: CLOSE if n == 1 else ANSWER).start()
    body = json.dumps({"prompt": "x" * 20_000, "max_tokens": 8}).encode()
    async with _serving(replica) as (act, client, url):
        async with client.post(url, data=b"{}") as resp:
            assert resp.status == 200
        async with client.post(url, data=body) as resp:
            assert resp.status == 200, await resp.text()
            assert (await resp.json())["len"] == len(body)
        assert [b for _, b in replica.requests[1:]] == [body, body]
        assert _resent(act) == 1


async def test_only_once_a_replica_that_never_answers_gives_a_502() -> None:
    replica = await RawReplica(plan=lambda n: CLOSE).start()
    async with _serving(replica) as (act, client, url):
        async with client.get(url, headers={"X-Request-Id": "doomed"}) as resp:
            assert resp.status == 502
            error = (await resp.json())["error"]
            assert error["code"] == "upstream_failed"
            assert "closed the connection" in error["message"]
        assert replica.ids == ["doomed", "doomed"]
        assert _resent(act) == 1


@pytest.mark.parametrize(
    ("failure", "body"),
    [
        # Over the 64 KiB kept for a second attempt.
        pytest.param(CLOSE, b"x" * (200 * 1024), id="body-too-large-to-keep"),
        pytest.param(HALF, b"{}", id="answer-begun"),
    ],
)
async def test_not_sent_again(failure: str, body: bytes) -> None:
    replica = await RawReplica(plan=lambda n: failure if n == 1 else ANSWER).start()
    async with _serving(replica) as (act, client, url):
        async with client.post(url, data=b"{}") as resp:
            assert resp.status == 200
        async with client.post(url, data=body) as resp:
            assert resp.status == 502
        assert len(replica.requests) == 2
        assert _resent(act) == 0


async def test_the_other_idle_connections_to_that_replica_are_dropped() -> None:
    replica = await RawReplica(plan=lambda n: CLOSE if n == 3 else ANSWER).start()
    async with _serving(replica) as (act, client, url):
        # Three requests at once: three pooled connections.
        async with asyncio.TaskGroup() as tasks:
            for _ in range(3):
                tasks.create_task(_get_ok(client, url))
        opened = act.pool.opened
        assert opened == 3
        async with client.get(url) as resp:
            assert resp.status == 200
        # The two idle ones went with the closed one; the answer came on a new one.
        assert act.pool.opened == opened + 1
        idle = act.pool._idle.get(replica.endpoint)
        assert idle is not None and len(idle) == 1


async def _get_ok(client: aiohttp.ClientSession, url: str) -> None:
    async with client.get(url) as resp:
        assert resp.status == 200
        await resp.read()


async def test_a_killed_replica_s_unanswered_requests_go_to_the_other() -> None:
    victim = await Backend(name="victim", delay_s=1.0).start()
    survivor = await Backend(name="survivor").start()
    async with _serving(victim, survivor) as (act, client, url):

        async def one(i: int) -> tuple[int, str]:
            async with client.get(url, headers={"X-Request-Id": f"r{i}"}) as resp:
                return resp.status, (await resp.json())["backend"]

        tasks = [asyncio.create_task(one(i)) for i in range(10)]
        async with asyncio.timeout(4):
            while not victim.received:  # noqa: ASYNC110 - the backend's plain list
                await asyncio.sleep(0.005)
        await victim.kill()  # none of its requests had a byte of answer (1 s delay)
        results = await asyncio.gather(*tasks)
        assert results == [(200, "survivor")] * 10
        assert set(victim.received) <= set(survivor.received)
        assert _resent(act) >= len(set(victim.received))
        await wait_until(lambda: victim.in_flight == 0)  # its handlers sleep on, unheard
