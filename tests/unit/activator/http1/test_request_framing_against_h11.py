"""Request framing, differentially: the data path's parser against h11 as an independent oracle.

Hypothesis builds requests from parts that decide where a request ends
(versions, ``Host``, ``Content-Length`` and ``Transfer-Encoding`` in many
spellings and combinations, chunk sizes in either case with leading zeros,
extensions and trailers, bare LF line ends, odd bytes in a header value)
and feeds the same bytes to a :class:`~activator.http1.ClientConnection`
(over a fake transport, no network) and to ``h11``. The properties:

- the data path never accepts what h11 rejects: it is at least as strict;
- where both accept, they agree on method, target and body bytes;
- where h11 accepts, the data path accepts too, except for the refusals it
  makes on purpose and h11 does not (listed in ``_STRICTER``, each with
  its reason), so a disagreement is never an accident.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import h11
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activator.http1 import ClientConnection, Connections, Exchange, ServerLimits


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default


@dataclass
class _Outcome:
    accepted: list[tuple[str, str, bytes]] = field(default_factory=list)
    rejected: bool = False


def _ours(data: bytes) -> _Outcome:
    """What the data path makes of ``data``: the requests it serves, or a refusal."""
    outcome = _Outcome()

    async def run() -> None:
        def take(exchange: Exchange) -> None:
            chunks: list[bytes] = []

            def end(exc: BaseException | None) -> None:
                if exc is None:
                    head = exchange.head
                    outcome.accepted.append((head.method, head.target, b"".join(chunks)))
                else:
                    outcome.rejected = True
                exchange.finish()

            exchange.body.pipe(chunks.append, end)

        connections = Connections(idle_s=60)
        conn = ClientConnection(take, limits=ServerLimits(), connections=connections)
        transport = _Transport()
        conn.connection_made(transport)
        conn.data_received(data)
        if transport.written.startswith((b"HTTP/1.1 4", b"HTTP/1.1 5")):
            outcome.rejected = True
        conn.connection_lost(None)
        connections.close()

    asyncio.run(run())
    return outcome


def _h11(data: bytes) -> _Outcome:
    outcome = _Outcome()
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    method, target, body = "", "", b""
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return outcome
            if isinstance(event, h11.Request):
                method, target, body = event.method.decode(), event.target.decode(), b""
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                outcome.accepted.append((method, target, body))
                return outcome  # one request per example
    except h11.RemoteProtocolError:
        outcome.rejected = True
    return outcome


TE_SPELLINGS = [
    "chunked",
    "Chunked",
    "CHUNKED",
    "chunked ",
    "gzip",
    "identity",
    "gzip, chunked",
    "chunked, chunked",
    '"chunked"',
    "xchunked",
    "",
]
CL_SPELLINGS = ["{n}", "0{n}", "+{n}", "-{n}", "{n}, {n}", "{n} ", "0x{n}", "9223372036854775808"]


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, set[str]]:
    """A request's bytes and the names of the features it uses (for ``_STRICTER``)."""
    features: set[str] = set()
    eol = b"\r\n"
    if draw(st.integers(0, 15)) == 0:
        eol = b"\n"
        features.add("bare-lf")
    version = draw(st.sampled_from(["1.1", "1.1", "1.0"]))
    method = draw(st.sampled_from(["GET", "POST", "PUT"]))
    lines = [f"{method} /p HTTP/{version}".encode()]
    hosts = draw(st.sampled_from([1, 1, 1, 0, 2]))
    lines += [b"Host: x"] * hosts
    if hosts == 2:
        features.add("two-hosts")
    payload = draw(st.binary(max_size=40))
    chunks = draw(st.lists(st.binary(min_size=1, max_size=20), max_size=3))
    framing = draw(st.sampled_from(["none", "cl", "te", "te", "cl+te", "cl+cl", "te+te"]))
    te_value = draw(st.sampled_from(TE_SPELLINGS))
    cl_spelling = draw(st.sampled_from(CL_SPELLINGS))
    cl_value = cl_spelling.format(n=len(payload)).encode()
    if "," in cl_spelling and "cl" in framing:
        features.add("cl-list")
    if "cl" in framing:
        lines.append(b"Content-Length: " + cl_value)
    if framing == "cl+cl":
        lines.append(b"Content-Length: " + cl_value)
        features.add("cl-twice")
    if "te" in framing:
        lines.append(b"Transfer-Encoding: " + te_value.encode())
        if "cl" in framing:
            features.add("cl-and-te")
        if version == "1.0":
            features.add("te-in-1.0")
    if framing == "te+te":
        lines.append(b"Transfer-Encoding: " + te_value.encode())
    value = draw(st.sampled_from([b"v", b"a b", b"a\tb", b"a\x00b", b"a\rb", b"\xff"]))
    lines.append(b"X-Value: " + value)
    if draw(st.integers(0, 9)) == 0:
        lines.append(b" folded")
        features.add("obs-fold")
    head = eol.join(lines) + eol + eol
    if "te" in framing:
        body = b""
        for chunk in chunks:
            size = draw(st.sampled_from(["{:x}", "{:X}", "00{:x}"])).format(len(chunk))
            ext = draw(st.sampled_from(["", "", ";a=b", ';q="x y"']))
            body += f"{size}{ext}".encode() + b"\r\n" + chunk + b"\r\n"
        trailer = draw(st.sampled_from([b"", b"", b"T: 1\r\n"]))
        body += b"0\r\n" + trailer + b"\r\n"
    elif "cl" in framing:
        body = payload
    else:
        body = b""
    return head + body, features


# Refusals the data path makes on purpose where h11 accepts, and why.
_STRICTER = {
    # Line ends other than CRLF and folded header lines (RFC 9112 §2.2, §5.2
    # let a server refuse both): llhttp refuses them, h11 reads them.
    "bare-lf",
    "obs-fold",
    # RFC 9112 §6.1: a 1.0 request with Transfer-Encoding has faulty framing
    # (nginx refuses it too); h11 reads it as chunked.
    "te-in-1.0",
    # A list of equal Content-Length values (RFC 9110 §8.6 lets a recipient
    # take it as one; nginx refuses it, and a proxy should not guess).
    "cl-list",
    # Content-Length beside Transfer-Encoding: RFC 9112 §6.1 says a proxy
    # ought to treat it as an error (the classic smuggling shape); h11 lets
    # chunked win.
    "cl-and-te",
    # Two Content-Length lines, even equal, are two readings of one request
    # (llhttp refuses them; h11 merges equal ones).
    "cl-twice",
}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_request_framing_agrees_with_h11(request: tuple[bytes, set[str]]) -> None:
    data, features = request
    ours, theirs = _ours(data), _h11(data)
    if theirs.rejected:
        assert not ours.accepted, (data, ours)
        assert ours.rejected, (data, ours)
    elif theirs.accepted:
        if ours.rejected and features & _STRICTER:
            return
        assert not ours.rejected, (data, features)
        assert ours.accepted == theirs.accepted, data
    else:
        assert not ours.accepted, (data, ours)
