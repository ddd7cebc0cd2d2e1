"""Hostile and unlucky input on the data path, through a whole activator, as one table.

Each case puts exact bytes on the wire from a raw client and checks two
things: what the client gets (status, body, whether the connection closes)
and the exact bytes a raw replica (an asyncio server on 127.0.0.1 that
records every byte) receives, per connection. Before each case one request
warms the pool, so the case's request takes the path most warm traffic
takes (:meth:`activator.proxy.Proxy.begin`); a rejected request must
not reach the replica on it either.

The rows, by group:
- framing: Content-Length and Transfer-Encoding in every combination and
  spelling, chunk sizes and extensions, bare LF, obs-fold, NUL and CR in
  values, versions, Host;
- limits: head size, header count, URI length, header line, body limits,
  body deadline, held-body cap (the head deadline is its own test below:
  it needs a client that trickles);
- replica misbehaviour: early close, bytes past the answer, bad framing,
  1xx, 101, 204/304 with a body, a close-delimited answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import h11
import pytest

from activator.app import Activator
from tests.integration.activator.helpers import (
    StaticSource,
    running_activator,
    settings,
    spec,
)

CLOSE = b"<close>"  # a replica script ending in this closes the connection after
PAUSE = b"<pause>"  # the replica waits 50 ms here, so what follows comes in a later read
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK"


class _ReplicaConnection(asyncio.Protocol):
    def __init__(self, replica: RecordingReplica) -> None:
        self.replica = replica
        self.received = bytearray()
        self.parser = h11.Connection(h11.SERVER)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.replica.connections.append(self.received)

    def data_received(self, data: bytes) -> None:
        self.received += data
        self.parser.receive_data(data)
        while self.transport is not None:
            try:
                event = self.parser.next_event()
            except h11.RemoteProtocolError:
                self.transport.close()
                return
            if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return
            if isinstance(event, h11.EndOfMessage):
                self._answer()

    def _answer(self) -> None:
        assert self.transport is not None
        answer = self.replica.scripts.pop(0) if self.replica.scripts else OK
        first, *later = answer.split(PAUSE)
        self._write(first)
        loop = asyncio.get_running_loop()
        for n, part in enumerate(later, 1):
            loop.call_later(0.05 * n, self._write, part)
        if first.endswith(CLOSE):
            return
        # A fresh parser for the next request, fed what followed this one.
        trailing, _ = self.parser.trailing_data
        self.parser = h11.Connection(h11.SERVER)
        if trailing:  # (receiving b"" would mean the end of the stream)
            self.parser.receive_data(bytes(trailing))

    def _write(self, part: bytes) -> None:
        if self.transport is None:
            return
        self.transport.write(part.removesuffix(CLOSE))
        if part.endswith(CLOSE):
            self.transport.close()
            self.transport = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.replica.lost += 1


@dataclass
class RecordingReplica:
    """Answers each request with the next script (then ``OK``); records every byte."""

    scripts: list[bytes] = field(default_factory=list)
    connections: list[bytearray] = field(default_factory=list)
    lost: int = 0  # connections closed (by either end)
    port: int = 0
    _server: asyncio.Server | None = None
    _mark: list[int] = field(default_factory=list)

    async def start(self) -> RecordingReplica:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ReplicaConnection(self), "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    def mark(self) -> None:
        self._mark = [len(c) for c in self.connections]

    def since_mark(self) -> list[bytes]:
        """Bytes each connection received since :meth:`mark`, connections with none left out."""
        marks = self._mark + [0] * (len(self.connections) - len(self._mark))
        out = [bytes(c[m:]) for c, m in zip(self.connections, marks, strict=True)]
        return [b for b in out if b]


def req(
    extra: bytes = b"",
    body: bytes = b"",
    *,
    method: bytes = b"POST",
    target: bytes = b"/v1/completions",
    version: bytes = b"1.1",
    host: bytes | None = b"x",
) -> bytes:
    """A client request: ``Host: x`` (unless None), ``X-Request-Id: t``, then ``extra``."""
    head = b"%s %s HTTP/%s\r\n" % (method, target, version)
    if host is not None:
        head += b"Host: " + host + b"\r\n"
    return head + b"X-Request-Id: t\r\n" + extra + b"\r\n" + body


@dataclass(frozen=True)
class Fwd:
    """What the replica should receive for one request of the client's."""

    framing: bytes = b""  # "Content-Length: 5\r\n" or "Transfer-Encoding: chunked\r\n"
    body: bytes = b""
    extra: bytes = b""  # client headers passed on, in order
    method: bytes = b"POST"
    target: bytes = b"/v1/completions"
    host: bytes | None = b"x"

    def render(self, port: int) -> bytes:
        forwarded_host = b"X-Forwarded-Host: " + self.host + b"\r\n" if self.host else b""
        return (
            b"%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (self.method, self.target, port)
            + self.extra
            + b"X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n"
            + forwarded_host
            + b"X-Request-Id: t\r\n"
            + self.framing
            + b"\r\n"
            + self.body
        )


CL5 = b"Content-Length: 5\r\n"
TE = b"Transfer-Encoding: chunked\r\n"
CHUNKED_HELLO = b"5\r\nhello\r\n0\r\n\r\n"


@dataclass(frozen=True)
class Case:
    request: bytes
    status: int
    replica: tuple[Any, ...] = ()  # per replica connection: a Fwd, or several joined
    body: bytes | None = None  # the body the client gets (de-chunked), when checked
    closes: bool = False  # the client connection closes after the answer
    code: str = ""  # the JSON error code, for the activator's own answers
    scripts: tuple[bytes, ...] = ()
    then: bool = False  # a second request on the same client connection gets a clean 200
    no_header: bytes = b""  # a header the client must not get
    settings: dict[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)
    no_replica: bool = False  # the target's one endpoint refuses connections


def _framing_rows() -> list[Any]:
    P = pytest.param
    # Codings the activator does not decode: 501, as nginx answers.
    unsupported_te = [
        (b"identity", "identity"),
        (b"gzip", "gzip"),
        (b"gzip, chunked", "gzip-chunked"),
        (b'"chunked"', "quoted"),
        (b"xchunked", "xchunked"),
        (b"chunked;q=1", "with-parameter"),
    ]
    return [
        P(Case(req(CL5, b"hello"), 200, (Fwd(CL5, b"hello"),), b"OK"), id="cl"),
        P(Case(req(TE, CHUNKED_HELLO), 200, (Fwd(TE, CHUNKED_HELLO),), b"OK"), id="te"),
        P(
            Case(
                req(b"Transfer-Encoding: ChUnKeD\r\n", CHUNKED_HELLO),
                200,
                (Fwd(TE, CHUNKED_HELLO),),
            ),
            id="te-mixed-case",
        ),
        P(
            Case(
                req(b"Transfer-Encoding:\tchunked \r\n", CHUNKED_HELLO),
                200,
                (Fwd(TE, CHUNKED_HELLO),),
            ),
            id="te-whitespace",
        ),
        P(
            Case(
                req(TE, b'A;ext=1;q="x y"\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n'),
                200,
                (Fwd(TE, b"a\r\n0123456789\r\n0\r\n\r\n"),),
            ),
            id="te-chunk-extensions-and-trailers-dropped",
        ),
        P(
            Case(req(TE, b"000002\r\nhi\r\n0\r\n\r\n"), 200, (Fwd(TE, b"2\r\nhi\r\n0\r\n\r\n"),)),
            id="te-leading-zeros",
        ),
        *[
            P(
                Case(
                    req(b"Transfer-Encoding: " + value + b"\r\n", CHUNKED_HELLO),
                    501,
                    closes=True,
                    code="unsupported_transfer_encoding",
                ),
                id=f"te-{name}",
            )
            for value, name in unsupported_te
        ],
        # Framing llhttp itself refuses as it reads the headers.
        *[
            P(Case(req(te, CHUNKED_HELLO), 400, closes=True), id=name)
            for te, name in [
                (b"Transfer-Encoding: chunked, chunked\r\n", "te-chunked-twice-in-one"),
                (b"Transfer-Encoding: \r\n", "te-empty"),
                (TE + TE, "te-two-headers"),
                (TE + CL5, "te-then-cl"),
                (CL5 + TE, "cl-then-te"),
            ]
        ],
        P(
            Case(req(TE, CHUNKED_HELLO, version=b"1.0"), 400, closes=True, code="bad_framing"),
            id="te-in-http10",
        ),
        P(
            Case(req(CL5 + CL5, b"hello"), 400, closes=True),
            id="cl-twice-same",
        ),
        P(
            Case(req(CL5 + b"Content-Length: 6\r\n", b"hello!"), 400, closes=True),
            id="cl-twice-different",
        ),
        *[
            P(Case(req(b"Content-Length: " + value + b"\r\n", b"hello"), 400, closes=True), id=name)
            for value, name in [
                (b"+5", "cl-plus"),
                (b"-5", "cl-negative"),
                (b"0x5", "cl-hex"),
                (b"5, 5", "cl-list"),
                (b"5 5", "cl-two-numbers"),
                (b"9223372036854775808", "cl-2-to-63"),
                (b"99999999999999999999999", "cl-huge"),
            ]
        ],
        *[
            P(Case(req(TE, chunks), 400, closes=True, code="bad_framing"), id=name)
            for chunks, name in [
                (b"zz\r\nhello\r\n0\r\n\r\n", "chunk-size-not-hex"),
                (b"fffffffffffffffff\r\nhello\r\n0\r\n\r\n", "chunk-size-overflow"),
                (b"5\nhello\r\n0\r\n\r\n", "chunk-size-bare-lf"),
                (b"3\r\nhello\r\n0\r\n\r\n", "chunk-longer-than-its-size"),
                (b"-5\r\nhello\r\n0\r\n\r\n", "chunk-size-negative"),
                (b" 5\r\nhello\r\n0\r\n\r\n", "chunk-size-leading-space"),
            ]
        ],
        *[
            P(Case(request, 400, closes=True), id=name)
            for request, name in [
                (b"GET / HTTP/1.1\nHost: x\n\n", "bare-lf-head"),
                (b"GET / HTTP/1.1\r\nHost: x\nX-A: 1\r\n\r\n", "bare-lf-header"),
                (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n", "obs-fold"),
                (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\x002\r\n\r\n", "nul-in-value"),
                (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r2\r\n\r\n", "cr-in-value"),
                (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", "space-before-colon"),
                (b"GET / HTTP/1.2\r\nHost: x\r\n\r\n", "http-1.2"),
            ]
        ],
        P(
            Case(
                b"GET  /v1/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: t\r\n\r\n",
                200,
                (Fwd(method=b"GET"),),
            ),
            id="two-spaces-in-request-line-normalised",
        ),
        P(Case(req(method=b"GET", version=b"2.0"), 505, closes=True), id="http-2.0"),
        P(Case(req(method=b"GET", version=b"0.9"), 505, closes=True), id="http-0.9"),
        P(Case(req(method=b"GET", host=None), 400, closes=True, code="bad_request"), id="no-host"),
        P(
            Case(req(b"Host: y\r\n", method=b"GET"), 400, closes=True, code="bad_framing"),
            id="two-hosts",
        ),
        P(
            Case(
                req(method=b"GET", version=b"1.0", host=None),
                200,
                (Fwd(method=b"GET", host=None),),
                b"OK",
                closes=True,
            ),
            id="http10-without-host",
        ),
        P(
            Case(
                req(
                    b"Connection: X-Secret\r\nConnection: keep-alive\r\n"
                    b"X-Secret: 1\r\nX-Kept: 2\r\n",
                    method=b"GET",
                ),
                200,
                (Fwd(method=b"GET", extra=b"X-Kept: 2\r\n"),),
            ),
            id="second-connection-header-tokens",
        ),
    ]


def _limit_rows() -> list[Any]:
    P = pytest.param
    many = b"".join(b"X-H%d: 1\r\n" % i for i in range(129))
    big = b"".join(b"X-B%d: %s\r\n" % (i, b"b" * 8000) for i in range(9))
    model_body = json.dumps({"model": "m", "prompt": "p" * 1500}).encode()
    model_spec = {"models": ("m",), "path_prefix": None}
    return [
        P(Case(req(big, method=b"GET"), 431, closes=True, code="head_too_large"), id="head-size"),
        P(
            Case(req(many, method=b"GET"), 431, closes=True, code="head_too_large"),
            id="header-count",
        ),
        P(
            Case(req(method=b"GET", target=b"/" + b"u" * 9000), 431, closes=True),
            id="uri-length",
        ),
        P(
            Case(req(b"X-Long: " + b"l" * 9000 + b"\r\n", method=b"GET"), 431, closes=True),
            id="header-line",
        ),
        P(
            Case(
                req(b"Content-Length: 200000\r\n", b"[" * 200_000, target=b"/v1/x"),
                400,
                code="invalid_json",
                spec=model_spec,
            ),
            id="model-body-nested-too-deep",
        ),
        P(
            Case(
                req(CL5, b"hello"),
                413,
                closes=True,
                code="body_too_large",
                settings={"limits": {"max_body_bytes": 4}},
            ),
            id="body-limit-content-length",
        ),
        P(
            Case(
                req(TE, CHUNKED_HELLO),
                413,
                closes=True,
                code="body_too_large",
                settings={"limits": {"max_body_bytes": 4}},
            ),
            id="body-limit-chunked",
        ),
        P(
            Case(
                req(b"Content-Length: %d\r\n" % len(model_body), model_body, target=b"/v1/x"),
                413,
                closes=True,
                code="body_too_large",
                settings={"limits": {"max_model_body_bytes": 1024}},
                spec=model_spec,
            ),
            id="model-body-limit",
        ),
        P(
            Case(
                req(b"Content-Length: 10\r\n", b"hello"),
                408,
                (Fwd(b"Content-Length: 10\r\n", b"hello"),),
                closes=True,
                code="body_timeout",
                settings={"timeouts": {"client_body_idle_s": 0.3}},
            ),
            id="body-deadline",
        ),
        P(
            Case(
                req(b"Content-Length: %d\r\n" % len(model_body), model_body, target=b"/v1/x"),
                503,
                code="held_bodies_full",
                settings={"limits": {"max_held_body_bytes": 1024}},
                spec=model_spec,
                no_replica=True,
            ),
            id="held-body-cap",
        ),
    ]


def _replica_rows() -> list[Any]:
    P = pytest.param
    get = Fwd(method=b"GET")
    smuggled = b"HTTP/1.1 200 OK\r\nX-Smuggled: 1\r\nContent-Length: 3\r\n\r\nBAD"
    chunked_head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    return [
        P(
            Case(req(method=b"GET"), 200, (get, get), b"OK", scripts=(CLOSE,)),
            id="early-close-sent-again",
        ),
        P(
            Case(
                req(method=b"GET"),
                502,
                (get,),
                code="upstream_failed",
                scripts=(CLOSE,),
                spec={"resend_unanswered": False},
            ),
            id="early-close-not-sent-again-when-the-model-says-not",
        ),
        P(
            Case(
                req(method=b"GET"),
                200,
                (get, get),
                b"OK",
                scripts=(OK + smuggled,),
                then=True,
                no_header=b"x-smuggled",
            ),
            id="extra-after-content-length",
        ),
        P(
            Case(
                req(method=b"GET"),
                200,
                (get, get),
                b"OK",
                scripts=(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nOK\r\n0\r\n\r\n"
                    + smuggled,
                ),
                then=True,
                no_header=b"x-smuggled",
            ),
            id="extra-after-chunked",
        ),
        P(
            Case(
                req(method=b"GET"),
                200,
                (get, get),
                b"OKOK",
                scripts=(
                    chunked_head + b"2\r\nOK\r\n" + PAUSE + b"2\r\nOK\r\n0\r\n\r\n" + smuggled,
                ),
                then=True,
                no_header=b"x-smuggled",
            ),
            id="extra-after-chunked-in-a-later-read",
        ),
        P(
            Case(
                req(method=b"GET"),
                200,
                (get, get),
                b"OK",
                scripts=(chunked_head + b"2\r\nOK\r\n0\r\n\r" + PAUSE + b"\n" + smuggled,),
                then=True,
                no_header=b"x-smuggled",
            ),
            id="extra-after-chunked-whose-end-is-split",
        ),
        P(
            Case(
                req(method=b"GET"),
                200,
                ((get, get),),  # one connection: reused after a clean end
                b"OKOK",
                scripts=(
                    chunked_head
                    + b"2;x=y\r\nOK\r\n"
                    + PAUSE
                    + b"2\r\nOK\r\n0\r\nX-Trailer: t\r"
                    + PAUSE
                    + b"\n\r\n",
                ),
                then=True,
            ),
            id="chunked-in-pieces-with-extension-and-trailer",
        ),
        P(
            Case(
                req(method=b"GET"),
                204,
                (get, get),
                b"",
                scripts=(b"HTTP/1.1 204 No Content\r\n\r\n" + smuggled,),
                then=True,
                no_header=b"x-smuggled",
            ),
            id="204-with-a-body",
        ),
        P(
            Case(
                req(method=b"GET"),
                304,
                (get, get),
                b"",
                scripts=(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhello",),
                then=True,
            ),
            id="304-with-a-body",
        ),
        P(
            Case(
                req(method=b"GET"),
                502,
                (get,),
                code="upstream_failed",
                scripts=(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nOK",),
            ),
            id="replica-bad-content-length",
        ),
        P(
            Case(
                req(method=b"GET"),
                502,
                (get,),
                code="upstream_failed",
                scripts=(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nOK\r\n",),
            ),
            id="replica-bad-chunk",
        ),
        P(
            Case(
                req(method=b"GET"),
                200,
                (get,),
                b"OK",
                scripts=(
                    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                    + OK,
                ),
                no_header=b"link",
            ),
            id="replica-1xx-dropped",
        ),
        P(
            Case(
                req(method=b"GET"),
                502,
                (get,),
                code="upstream_failed",
                scripts=(
                    b"HTTP/1.1 101 Switching Protocols\r\n"
                    b"Upgrade: x\r\nConnection: upgrade\r\n\r\n",
                ),
            ),
            id="replica-101-unasked",
        ),
        P(
            Case(
                req(method=b"GET"),
                200,
                (get,),
                b"OK",
                closes=True,
                scripts=(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nOK" + CLOSE,),
            ),
            id="replica-close-delimited",
        ),
    ]


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bytes]:
    """Status, head and de-chunked body of one response (h11 as the client's parser)."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    status, head, body = 0, b"", b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await reader.read(65536))
            continue
        if isinstance(event, h11.Response):
            status = event.status_code
            head = b"".join(n + b": " + v + b"\r\n" for n, v in event.headers)
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            # Nothing may follow an answer before the next request is sent.
            assert client.trailing_data[0] == b"", client.trailing_data
            return status, head, body


@contextlib.asynccontextmanager
async def activator_and_replica(case: Case) -> AsyncIterator[tuple[Activator, RecordingReplica]]:
    replica = await RecordingReplica().start()
    endpoint = "127.0.0.1:9" if case.no_replica else f"127.0.0.1:{replica.port}"
    source = StaticSource(spec("default/llama", endpoint, **case.spec))
    try:
        async with running_activator(source, settings(**case.settings)) as act:
            yield act, replica
    finally:
        await replica.stop()


def _rejections(act: Activator, reason: str) -> float:
    """``tidal_activator_rejections_total`` for ``reason``, over all targets."""
    return sum(
        sample.value
        for family in act.metrics.registry.collect()
        for sample in family.samples
        if sample.name == "tidal_activator_rejections_total"
        and sample.labels.get("reason") == reason
    )


async def _warm(port: int) -> None:
    """One request that leaves an idle pooled connection to the replica."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 200
    writer.close()


@pytest.mark.parametrize("case", _framing_rows() + _limit_rows() + _replica_rows())
async def test_hostile_input(case: Case) -> None:
    async with activator_and_replica(case) as (act, replica):
        if not case.no_replica and "models" not in case.spec:
            await _warm(act.data_port)
        replica.mark()
        replica.scripts = list(case.scripts)
        reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
        try:
            writer.write(case.request)
            status, head, body = await asyncio.wait_for(read_response(reader), 10)
            assert status == case.status, (head, body)
            if case.body is not None:
                assert body == case.body
            if case.code:
                assert json.loads(body)["error"]["code"] == case.code
                assert _rejections(act, case.code) == 1  # every own answer counted by why
            if case.no_header:
                assert case.no_header not in head.lower()
            if case.closes:
                assert await asyncio.wait_for(reader.read(), 5) == b""
            if case.then:
                writer.write(req(method=b"GET"))
                assert await asyncio.wait_for(read_response(reader), 5) == (
                    200,
                    b"x-request-id: t\r\ncontent-length: 2\r\n",
                    b"OK",
                )
        finally:
            writer.close()
        await asyncio.sleep(0.05)  # time for a stray forward to arrive, were there one
        expected = [
            b"".join(f.render(replica.port) for f in (c if isinstance(c, tuple) else (c,)))
            for c in case.replica
        ]
        assert replica.since_mark() == expected


async def test_a_head_trickled_in_gets_408_at_its_deadline() -> None:
    # One byte every 50 ms keeps an idle timeout from ever firing (slowloris);
    # the head deadline counts from its first byte.
    case = Case(b"", 408, settings={"timeouts": {"client_head_s": 0.4}})
    async with activator_and_replica(case) as (act, replica):
        reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
        started = time.monotonic()
        answer = asyncio.ensure_future(read_response(reader))
        try:
            for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 100:
                if answer.done():
                    break
                writer.write(bytes([byte]))
                await asyncio.sleep(0.05)
            status, _, body = await asyncio.wait_for(answer, 5)
        finally:
            writer.close()
        assert status == 408
        assert json.loads(body)["error"]["code"] == "head_timeout"
        assert time.monotonic() - started < 1.5
        assert replica.connections == []


async def test_a_header_without_end_costs_little_and_stalls_nobody() -> None:
    # 64 MB of one header value with no line end, in 64 KiB writes, while
    # another client sends small requests: the head is refused past its
    # limit (not accumulated), and nobody else waits behind it.
    case = Case(b"", 431)
    piece = b"v" * 65536
    async with activator_and_replica(case) as (act, _):
        tracemalloc.start()
        try:
            baseline = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
            answer = asyncio.ensure_future(read_response(reader))
            waits: list[float] = []

            async def others() -> None:
                r, w = await asyncio.open_connection("127.0.0.1", act.data_port)
                while not answer.done() or len(waits) < 5:
                    sent = time.perf_counter()
                    w.write(req(method=b"GET"))
                    assert (await read_response(r))[0] == 200
                    waits.append(time.perf_counter() - sent)
                w.close()

            other = asyncio.ensure_future(others())
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
            with contextlib.suppress(ConnectionError):
                for _ in range(1024):
                    if answer.done():
                        break
                    writer.write(piece)
                    await writer.drain()
            status, _, body = await asyncio.wait_for(answer, 10)
            await asyncio.wait_for(other, 10)
            writer.close()
            peak = tracemalloc.get_traced_memory()[1] - baseline
        finally:
            tracemalloc.stop()
    assert status == 431
    assert json.loads(body)["error"]["code"] == "head_too_large"
    assert peak < 1_000_000
    assert waits
    assert max(waits) < 0.05


@pytest.mark.parametrize("size", [100_000, 1_000_000])
async def test_a_model_routed_body_sent_in_pieces_is_answered(size: int) -> None:
    # Bodies routed by "model" are read whole; a body over 64 KiB arriving in
    # many reads must not wait for the body timeout.
    body = json.dumps({"model": "m", "prompt": "p" * size}).encode()
    case = Case(b"", 200, spec={"models": ("m",), "path_prefix": None})
    async with activator_and_replica(case) as (act, replica):
        reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
        writer.write(req(b"Content-Length: %d\r\n" % len(body), target=b"/v1/chat/completions"))
        for start in range(0, len(body), 16384):
            writer.write(body[start : start + 16384])
            await writer.drain()
            await asyncio.sleep(0.001)
        last = time.monotonic()
        status, _, answer = await asyncio.wait_for(read_response(reader), 10)
        writer.close()
    assert (status, answer) == (200, b"OK")
    assert time.monotonic() - last < 1.0
    assert len(replica.connections) == 1
    assert replica.connections[0].endswith(body)


async def test_a_model_routed_body_over_the_limit_gets_413_as_it_crosses_it() -> None:
    # 20 MB chunked against the 8 MiB default: 413 once the limit is crossed,
    # read by the client although it is still sending, and nothing forwarded.
    case = Case(b"", 413, spec={"models": ("m",), "path_prefix": None})
    piece = b"4000\r\n" + b"p" * 0x4000 + b"\r\n"
    async with activator_and_replica(case) as (act, replica):
        reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
        answer = asyncio.ensure_future(read_response(reader))
        writer.write(req(TE, b'4\r\n{"mo\r\n', target=b"/v1/chat/completions"))
        sent = 0
        crossed_at = 0.0
        with contextlib.suppress(ConnectionError):
            while sent < 20_000_000 and not answer.done():
                writer.write(piece)
                sent += 0x4000
                if sent > 8 * 1024 * 1024 and not crossed_at:
                    crossed_at = time.monotonic()
                await writer.drain()
        status, _, body = await asyncio.wait_for(answer, 10)
        writer.close()
    assert status == 413
    assert json.loads(body)["error"]["code"] == "body_too_large"
    assert crossed_at and time.monotonic() - crossed_at < 2.0
    assert replica.connections == []


async def test_a_bad_chunk_in_a_later_read_cuts_the_answer_before_it() -> None:
    # The head and the first chunk went out already; the malformed chunk that
    # follows must not: the client gets the valid part and the connection
    # closes, so it never reads a complete answer.
    case = Case(b"", 200)
    async with activator_and_replica(case) as (act, replica):
        replica.scripts = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nOK\r\n"
            + PAUSE
            + b"zz\r\nOK\r\n0\r\n\r\n"
        ]
        reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
        try:
            writer.write(req(method=b"GET"))
            received = await asyncio.wait_for(reader.read(-1), 5)
        finally:
            writer.close()
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b"\r\n\r\n2\r\nOK\r\n")
    assert replica.since_mark() == [Fwd(method=b"GET").render(replica.port)]


async def test_a_chunk_that_breaks_in_a_later_read_leaves_the_replica_a_cut_request() -> None:
    # A streamed body is on its way when its broken chunk arrives: the client
    # gets 400, the replica the head and the valid chunk, then its connection
    # is aborted before a last chunk, so it never sees a whole request (what
    # nginx does with proxy_request_buffering off).
    case = Case(b"", 400)
    async with activator_and_replica(case) as (act, replica):
        await _warm(act.data_port)
        replica.mark()
        lost = replica.lost
        reader, writer = await asyncio.open_connection("127.0.0.1", act.data_port)
        try:
            writer.write(req(TE, b"5\r\nhello\r\n"))
            await asyncio.sleep(0.1)
            writer.write(b"zz\r\nbad\r\n0\r\n\r\n")
            status, _, body = await asyncio.wait_for(read_response(reader), 5)
            assert await asyncio.wait_for(reader.read(), 5) == b""
        finally:
            writer.close()
        for _ in range(100):
            if replica.lost > lost:
                break
            await asyncio.sleep(0.01)
    assert status == 400
    assert json.loads(body)["error"]["code"] == "bad_framing"
    assert replica.since_mark() == [Fwd(TE, b"5\r\nhello\r\n").render(replica.port)]
    assert replica.lost == lost + 1
