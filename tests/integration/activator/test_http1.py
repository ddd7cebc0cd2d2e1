"""The byte-level data path (:mod:`activator.http1`) on loopback, with raw-socket peers.

A raw replica (asyncio streams, scripted per test) and a raw client put
exact bytes on the wire, so framing is checked byte for byte. Requests go
through the whole activator, the way every request is served (one target
on every path whose one replica is the raw one), so what is checked here
is what a client of the activator gets.

Covers: a Content-Length answer relayed as is; chunked (SSE) chunks
relayed as they came, each before the next is produced; an HTTP/1.0
client gets the chunks de-chunked and the connection closed; keep-alive
reuse of replica connections; a replica that closes mid-body cuts the
client connection, one that closes before answering gives a 502, a refused
connection a 502 ``all_refused`` once the cold-start timeout passes; a
client that disconnects mid-stream aborts the replica connection and frees
its slot; pipelined requests are answered in order; request bodies
(Content-Length, chunked, ``Expect: 100-continue``) reach the replica; a
stalled body is a 408, an oversized one a 413; an answer to HEAD has no
body; a silent replica fails past the idle timeout; an unparseable request
gets a JSON 400; a close-delimited answer ends the client connection too;
an idle client connection is closed, a slow answer is not cut by that
timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from activator.app import Activator
from tests.integration.activator.helpers import (
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
)

Respond = Callable[[asyncio.StreamWriter, bytes, bytes], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """One request's head and body (Content-Length or chunked), or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lower = head.lower()
    body = b""
    if b"transfer-encoding: chunked" in lower:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.strip(), 16)
            body += size_line + await reader.readexactly(size + 2)
            if size == 0:
                break
    elif b"content-length:" in lower:
        length = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
        body = await reader.readexactly(length)
    return head, body


@dataclass
class RawReplica:
    """A replica on loopback that answers each request with ``respond``."""

    respond: Respond
    port: int = 0
    heads: list[bytes] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    connections: int = 0
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    server: asyncio.Server | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            while (request := await _read_request(reader)) is not None:
                head, body = request
                self.heads.append(head)
                self.bodies.append(body)
                await self.respond(writer, head, body)
                if writer.is_closing():
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.set()
            writer.close()

    async def __aenter__(self) -> RawReplica:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()


async def ok(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
    payload = json.dumps({"len": len(body)}).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
    await writer.drain()


@dataclass
class Proxy:
    """The activator under test, with one target whose one replica is ``replica_port``."""

    port: int
    activator: Activator

    def in_flight(self) -> int:
        return self.activator.registry.requests_in_progress()


@contextlib.asynccontextmanager
async def proxy_to(
    replica_port: int,
    *,
    upstream_idle_s: float = 5.0,
    max_body_bytes: int = 0,
    client_idle_s: float = 75.0,
    client_body_idle_s: float = 60.0,
    **target: Any,
) -> AsyncIterator[Proxy]:
    """A running activator that sends every request to the replica at ``replica_port``."""
    target.setdefault("cold_start_timeout_s", 2.0)
    source = StaticSource(spec("default/raw", f"127.0.0.1:{replica_port}", **target))
    cfg = settings(
        timeouts={
            "drain_grace_s": 0.0,
            "upstream_idle_s": upstream_idle_s,
            "client_idle_s": client_idle_s,
            "client_body_idle_s": client_body_idle_s,
        },
        limits={"max_body_bytes": max_body_bytes},
    )
    async with running_activator(source, cfg) as activator:
        yield Proxy(activator.data_port, activator)


async def read_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One answer's head and raw body bytes (chunk framing included)."""
    head = await reader.readuntil(b"\r\n\r\n")
    body = b""
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.strip(), 16)
            body += size_line + await reader.readexactly(size + 2)
            if size == 0:
                break
    elif b"content-length:" in lower and not head.startswith(b"HTTP/1.1 100"):
        length = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
        body = await reader.readexactly(length)
    return head, body


@contextlib.asynccontextmanager
async def client(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


GET = b"GET /v1/models HTTP/1.1\r\nHost: llama.example.com\r\n\r\n"


async def test_content_length_answer_relayed_as_is() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.write(
            b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-Custom: yes\r\n"
            b"Connection: keep-alive, X-Custom\r\n\r\nhello"
        )

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        head, body = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 201 Created\r\n")
    assert body == b"hello"
    assert b"x-custom" not in head.lower()  # named in Connection: hop-by-hop
    assert b"x-request-id: " in head.lower()
    sent = replica.heads[0].lower()
    assert sent.startswith(b"get /v1/models http/1.1\r\nhost: 127.0.0.1:")
    assert b"x-forwarded-host: llama.example.com" in sent
    assert b"x-forwarded-for: 127.0.0.1" in sent


async def test_chunks_pass_through_each_before_the_next() -> None:
    go_on = asyncio.Queue[None]()
    # Hex sizes in either case, as a replica may send them; an extension.
    chunks = [
        b"5\r\ndata:\r\n",
        b"b;x=1\r\ndata: one\n\n\r\n",
        b"B\r\ndata: two\n\n\r\n",
        b"0\r\n\r\n",
    ]
    # Relayed byte for byte, as they came (the parser only checks them).
    relayed = chunks

    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
            await go_on.get()

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"transfer-encoding: chunked" in head.lower()
        for chunk in relayed:
            # Each chunk arrives while the replica waits.
            assert await reader.readexactly(len(chunk)) == chunk
            go_on.put_nowait(None)


async def test_http10_client_gets_chunks_dechunked_and_a_close() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(b"GET / HTTP/1.0\r\nHost: h\r\n\r\n")
        everything = await reader.read()  # the proxy closes: EOF ends the body
    head, body = everything.split(b"\r\n\r\n", 1)
    assert body == b"abcdefg"
    assert b"transfer-encoding" not in head.lower()
    assert b"connection: close" in head.lower()


async def test_replica_connections_are_reused() -> None:
    async with RawReplica(ok) as replica, proxy_to(replica.port) as proxy:
        async with client(proxy.port) as (reader, writer):
            for _ in range(3):
                writer.write(GET)
                await read_answer(reader)
        async with client(proxy.port) as (reader, writer):
            writer.write(GET)
            await read_answer(reader)
        assert proxy.activator.pool.opened == 1
    assert replica.connections == 1
    assert len(replica.heads) == 4


async def test_replica_closing_mid_body_cuts_the_client() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        writer.close()

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        everything = await reader.read()  # EOF: the proxy closed the connection
    assert everything.startswith(b"HTTP/1.1 200 OK\r\n")
    assert everything.endswith(b"partial")  # the answer began: cut, not a status


async def test_replica_closing_before_answering_is_a_failure_not_started() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.close()

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port, resend_unanswered=False) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        head, body = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 502 ")
    assert json.loads(body)["error"]["code"] == "upstream_failed"


async def test_refused_connection_is_not_sent() -> None:
    async with (
        proxy_to(free_port(), cold_start_timeout_s=1.0) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        head, body = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 502 ")
    assert json.loads(body)["error"]["code"] == "all_refused"


async def test_client_leaving_mid_stream_aborts_the_replica_connection() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while True:
            writer.write(b"6\r\ndata:\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)

    async with RawReplica(respond) as replica, proxy_to(replica.port) as proxy:
        async with client(proxy.port) as (reader, writer):
            writer.write(GET)
            await reader.readuntil(b"data:")
        async with asyncio.timeout(5):
            await replica.closed.wait()
        assert proxy.in_flight() == 0  # its slot given back


async def test_pipelined_requests_are_answered_in_order() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        path = head.split(b" ")[1]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(path), path))

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(
            b"GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
            b"POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
            b"GET /three HTTP/1.1\r\nHost: h\r\n\r\n"
        )
        bodies = [(await read_answer(reader))[1] for _ in range(3)]
    assert bodies == [b"/one", b"/two", b"/three"]
    assert replica.bodies == [b"", b"abc", b""]


@pytest.mark.parametrize(
    ("request_bytes", "expected_body"),
    [
        pytest.param(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world",
            b"hello world",
            id="content-length",
        ),
        pytest.param(
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            id="chunked",
        ),
    ],
)
async def test_request_bodies_reach_the_replica(request_bytes: bytes, expected_body: bytes) -> None:
    async with (
        RawReplica(ok) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(request_bytes)
        head, _ = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert replica.bodies == [expected_body]


async def test_trailers_of_a_chunked_body_are_not_the_next_requests_headers() -> None:
    async with (
        RawReplica(ok) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(
            b"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n"
            b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
        )
        for _ in range(2):
            head, _ = await read_answer(reader)
            assert head.startswith(b"HTTP/1.1 200 ")
    assert [h.split(b" ")[1] for h in replica.heads] == [b"/a", b"/b"]
    assert all(b"x-trailer" not in h.lower() for h in replica.heads)


async def test_expect_100_continue_is_answered_by_the_proxy() -> None:
    async with (
        RawReplica(ok) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        interim = await reader.readuntil(b"\r\n\r\n")
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"body")
        head, _ = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert replica.bodies == [b"body"]
    assert b"expect" not in replica.heads[0].lower()


async def test_stalled_body_fails() -> None:
    async with (
        RawReplica(ok) as replica,
        proxy_to(replica.port, client_body_idle_s=0.2) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
        head, body = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["error"]["code"] == "body_timeout"


async def test_oversized_body_fails() -> None:
    async with (
        RawReplica(ok) as replica,
        proxy_to(replica.port, max_body_bytes=1024) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"400\r\n" + b"x" * 1024 + b"\r\n6\r\n world\r\n0\r\n\r\n"
        )
        head, body = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 413 ")
    assert json.loads(body)["error"]["code"] == "body_too_large"


async def test_answer_to_head_has_no_body() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n")

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        for _ in range(2):
            writer.write(b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            assert b"content-length: 42" in head.lower()
    assert len(replica.heads) == 2


async def test_silent_replica_fails_past_the_idle_timeout() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        await asyncio.sleep(30)

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port, upstream_idle_s=0.2) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        head, body = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 502 ")
    assert "sent nothing for 0.2s" in json.loads(body)["error"]["message"]


async def test_unparseable_request_gets_a_json_400() -> None:
    async with (
        RawReplica(ok) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(b"GET / HTTP/1.1\nHost: bare-lf\n\n")
        head, body = await read_answer(reader)
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body)["error"]["code"] == "bad_request"
    assert replica.heads == []


async def test_close_delimited_answer_closes_the_client_too() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        await writer.drain()
        writer.close()

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        everything = await reader.read()
    head, body = everything.split(b"\r\n\r\n", 1)
    assert body == b"until the end"
    assert b"connection: close" in head.lower()


async def test_idle_client_connection_closes_but_a_slow_answer_is_not_cut() -> None:
    async def respond(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
        await asyncio.sleep(0.5)  # longer than the client idle timeout: busy is not idle
        await ok(writer, head, body)

    async with (
        RawReplica(respond) as replica,
        proxy_to(replica.port, client_idle_s=0.2) as proxy,
        client(proxy.port) as (reader, writer),
    ):
        writer.write(GET)
        head, _ = await read_answer(reader)
        assert head.startswith(b"HTTP/1.1 200 ")
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # then idle: closed by the proxy
