"""The replica side of the data path: pooled HTTP/1.1 connections that relay answers as bytes.

One :class:`UpstreamConnection` per connection to a replica, lent by the
pool (:mod:`activator.http1.upstream_pool`), which it sees only as
:class:`ConnectionHome`. :meth:`UpstreamConnection.send` sends one client
exchange over it and relays the answer into it, calling the ``on_done`` it
was given once at the end. The exchange is seen only as
:class:`~activator.http1.relay.ClientSide`: the replica side never imports
the client side (:mod:`activator.http1.relay`).

Relaying: the replica's response head is parsed (``httptools``, through the
connection's :class:`~activator.http1.answer.AnswerParser`, which keeps one
answer's state) and rewritten for the client (header hygiene in
:mod:`activator.http1.heads`).
A Content-Length body is written to the client as it arrived, one ``write``
per ``data_received``, counted so that no byte past its length goes out. A
chunked body (server-sent events) is also written as it arrived, one
``write`` per read, but only once the parser has accepted the read: a
malformed chunk cuts the answer before any of its bytes go out, so the
client never gets it as valid framing. The parser only finds where the
answer ends: a read that could hold the end (its last four bytes are always
CRLF CRLF, so a read without them, not starting with CR or LF, cannot) is
parsed up to each place the end could be, and what follows the end stays
behind. Chunk extensions and trailers, checked by the parser, pass as they
came. The exceptions are framed again from the parsed chunks: an answer
whose body came whole with its head (extensions and trailers dropped), and
an answer to an HTTP/1.0 client, de-chunked (its connection then closes).
Why not frame every read again: each server-sent event would be parsed
into pieces and formatted anew in Python, for nothing a client needs. A
body delimited by the replica closing its connection ends the client's
connection too.

Bytes a replica sends past the end of its answer (a second answer nobody
asked for, a body after a 204 or 304) are never relayed: read as the start
of the next answer they would desynchronise the client connection, whose
next request might be someone else's behind a shared ingress. They are
discarded and the replica connection is closed, not reused.

Failures, in the terms of the status table (:mod:`activator.statuses`):

- :class:`NotSent`: the connection could not be opened (refused,
  unreachable, connect timeout). No byte reached the replica, so the request
  may go back to waiting for another.
- :class:`ReplicaFailed`: bytes reached the replica, which then failed
  (reset, closed early, a malformed answer, silent past the idle timeout).
  ``started`` says whether the client already got part of the answer; if it
  did, the client connection has been closed, which is the truth: the
  answer is cut. ``unanswered`` says the replica closed or reset the
  connection before a byte of answer: what a server does to a keep-alive
  connection it closes as idle or at shutdown (uvicorn, so vLLM, closes
  every idle one at SIGTERM), without reading a request that was on its
  way. The proxy may send such a request once more.

Flow control runs both ways: a slow client pauses reading from the replica;
a congested replica connection pauses reading the client's body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

from activator.http1.answer import AnswerParser
from activator.http1.heads import upstream_request_head
from activator.http1.relay import ClientSide

__all__ = [
    "BodyPipe",
    "ConnectionHome",
    "NotSent",
    "OnDone",
    "ReplicaFailed",
    "UpstreamConnection",
]

# How an exchange's end is told: ``(status, None)`` when the answer was
# relayed whole, ``(0, exc)`` when it failed (:class:`ReplicaFailed`, or the
# client's own body error). Called once, synchronously, from the connection's
# callbacks: no future, no task wake-up per request.
OnDone = Callable[[int, BaseException | None], None]


class NotSent(Exception):
    """No byte reached the replica: the connection could not be opened."""


class ReplicaFailed(Exception):
    """The replica failed after bytes were sent to it."""

    def __init__(
        self, message: str, *, started: bool, status: int = 0, unanswered: bool = False
    ) -> None:
        super().__init__(message)
        self.started = started
        self.status = status  # the replica's status when its head was relayed, else 0
        # The replica closed or reset the connection before a byte of answer.
        self.unanswered = unanswered


class BodyPipe:
    """The client's body on its way to the replica as it arrives: each piece written as it
    comes (framed as a chunk when the body is chunked), the last chunk at its end.

    ``sent`` is called when the body went out whole, ``failed`` with the
    client's body error (too large, stalled): the exchange is then abandoned.
    """

    __slots__ = ("_chunked", "_failed", "_sent", "_transport", "_write")

    def __init__(
        self,
        transport: asyncio.Transport,
        *,
        chunked: bool,
        sent: Callable[[], None],
        failed: Callable[[BaseException], None],
    ) -> None:
        self._transport = transport
        self._write = transport.write
        self._chunked = chunked
        self._sent = sent
        self._failed = failed

    def chunk(self, data: bytes) -> None:
        if data:
            self._write(b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data)

    def end(self, exc: BaseException | None) -> None:
        if exc is not None:
            self._failed(exc)
            return
        if self._chunked and not self._transport.is_closing():
            self._write(b"0\r\n\r\n")
        self._sent()


class ConnectionHome(Protocol):
    """What a connection needs of the pool it belongs to."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def write_soon(self, transport: asyncio.Transport, data: bytes) -> None:
        """Write ``data`` once this turn of the event loop has run its callbacks."""

    def forget(self, conn: UpstreamConnection) -> None:
        """``conn`` closed: drop it from the pool."""


class UpstreamConnection(asyncio.Protocol):
    """One connection to a replica; relays one exchange at a time."""

    __slots__ = (
        "_answer",
        "_body_sent",
        "_exchange",
        "_heard",
        "_last",
        "_on_done",
        "_relay_paused",
        "_timer",
        "authority",
        "key",
        "loop",
        "lost",
        "opening",
        "pool",
        "transport",
    )

    def __init__(self, pool: ConnectionHome, key: str) -> None:
        self.pool = pool
        self.key = key
        self.authority = key.encode()  # the Host header the replica gets
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._answer = AnswerParser()
        self._heard = False  # a byte of this answer arrived
        self._body_sent = True
        self._exchange: ClientSide | None = None
        self._on_done: OnDone | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0
        self._relay_paused = False
        # Held from connect until the first answer byte (see the module docstring).
        self.opening: asyncio.Semaphore | None = None

    # -- transport events ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but are ones.
        self.transport = cast(asyncio.Transport, transport)

    def _opened(self) -> None:
        if self.opening is not None:
            self.opening.release()
            self.opening = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._opened()
        self.lost = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.transport = None
        self.pool.forget(self)
        answer = self._answer
        if self._exchange is not None:
            if answer.head_done and answer.close_delimited and exc is None:
                answer.complete = True  # the replica's close ends this answer
                self._finish()
            else:
                self._fail(
                    f"the replica closed the connection ({exc or 'EOF'})",
                    unanswered=not self._heard,
                )
        answer.close()

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        exchange = self._exchange
        if exchange is None:
            # Bytes nobody asked for on an idle connection: it cannot be reused.
            if self.transport is not None:
                self.transport.close()
            return
        if not self._heard:
            # The first byte of an answer: the replica took the connection and
            # the request; from now on the request is not sent again.
            self._heard = True
            if self.opening is not None:
                self._opened()
            exchange.body.keep_no_more()
        answer = self._answer
        if answer.head_sent:  # the head went out in the read that completed it
            if answer.chunks:
                if data[0] not in b"\r\n" and data.find(b"\r\n\r\n") < 0:
                    # An event: the answer cannot end in this read (no CRLF CRLF,
                    # no CR or LF first to end one begun before): out once parsed.
                    failed = answer.feed(data)
                    if failed is None:
                        exchange.write(data)
                    else:
                        self._fail(failed)
                    return
                # The read may hold the answer's end: what follows it is held back.
                data, failed = answer.up_to_end(data)
                if failed is not None:
                    self._fail(failed)
                    return
                if data:
                    exchange.write(data)
            elif answer.raw:
                data = answer.counted(data)
                if data:
                    exchange.write(data)
                if not self._feed(data):
                    return
            else:
                if not self._feed(data):
                    return
                if answer.pieces or answer.complete:
                    exchange.write(answer.take_pieces())
        else:
            failed = answer.read_head(data)
            if failed is not None:
                self._fail(failed)
                return
            if not answer.head_done:  # set by the parser's callbacks in feed
                return
            exchange.write(answer.client_head(exchange))
        if answer.complete:
            self._finish()

    def _feed(self, data: bytes | memoryview) -> bool:
        """Parse ``data``; False when the answer failed (the exchange is over)."""
        failed = self._answer.feed(data)
        if failed is None:
            return True
        self._fail(failed)
        return False

    def pause_writing(self) -> None:
        exchange = self._exchange
        if exchange is not None:
            exchange.replica_congested()

    def resume_writing(self) -> None:
        exchange = self._exchange
        if exchange is not None:
            exchange.replica_drained()

    # -- the client's flow control (Relay) -----------------------------------------

    def pause_relay(self) -> None:
        if self.transport is not None and not self._relay_paused:
            self._relay_paused = True
            self.transport.pause_reading()

    def resume_relay(self) -> None:
        if self.transport is not None and self._relay_paused:
            self._relay_paused = False
            self._last = self.loop.time()
            self.transport.resume_reading()

    # -- one exchange --------------------------------------------------------------

    def send(
        self,
        exchange: ClientSide,
        *,
        body: bytes | None,
        max_body_bytes: int,
        idle_s: float,
        strip: frozenset[bytes],
        on_done: OnDone,
    ) -> None:
        """Send ``exchange`` over this connection (taken from the pool) and relay its answer
        by callbacks.

        ``on_done`` is called once when the answer ended (see :data:`OnDone`),
        unless the connection is aborted first. The caller gives the
        connection back to the pool
        (:meth:`~activator.http1.upstream_pool.UpstreamPool.release`) and
        detaches the client's body. ``body``: the client's body, read whole;
        None when it is piped as it arrives (:class:`BodyPipe`), in which
        case the head is written now, else at the end of the loop's turn
        (:meth:`~activator.http1.upstream_pool.UpstreamPool.write_soon`).
        """
        assert self.transport is not None
        request = exchange.head
        if body is None:
            # Read from the index: the parser checked both headers' values.
            index = request.index
            chunked = b"transfer-encoding" in index and request.chunked
            value = index.get(b"content-length")
            length = int(value) if value is not None else None
        else:
            chunked = False
            length = len(body)
        head = upstream_request_head(
            request,
            authority=self.authority,
            request_id=exchange.request_id,
            body_length=length,
            chunked=chunked,
            strip=strip,
        )
        if body:
            head += body
        self._answer.reset(is_head=request.method == "HEAD")
        self._heard = False
        self._body_sent = True
        self._exchange = exchange
        self._on_done = on_done
        exchange.relay = self
        self._last = self.loop.time()
        if idle_s and self._timer is None:
            # One timer per connection that re-arms itself from the last
            # activity, kept across exchanges: no timer churn per request.
            self._timer = self.loop.call_at(self._last + idle_s, self._check_idle, idle_s)
        if body is None and (chunked or length):
            # Body chunks follow with direct writes: the head must not wait behind them.
            self.transport.write(head)
            self._body_sent = False
            pipe = BodyPipe(self.transport, chunked=chunked, sent=self._piped, failed=self._abandon)
            exchange.body.set_limit(max_body_bytes)
            exchange.body.pipe(pipe.chunk, pipe.end)
        else:
            self.pool.write_soon(self.transport, head)

    def _piped(self) -> None:
        """The client's body, piped, reached its end and went out whole."""
        self._body_sent = True

    def _check_idle(self, idle_s: float) -> None:
        self._timer = None
        if self._exchange is None:
            return  # idle in the pool: the pool's keep-alive limit applies
        now = self.loop.time()
        if self._relay_paused:
            self._last = now  # waiting on the client, not on the replica
        due = self._last + idle_s
        if now < due:
            self._timer = self.loop.call_at(due, self._check_idle, idle_s)
            return
        self._fail(f"the replica sent nothing for {idle_s:g}s")

    def _finish(self) -> None:
        on_done, self._on_done = self._on_done, None
        self._detach()
        if on_done is not None:
            on_done(self._answer.status, None)

    def _fail(self, message: str, *, unanswered: bool = False) -> None:
        exchange = self._exchange
        started = exchange.started if exchange is not None else False
        failed = ReplicaFailed(
            f"{self.key}: {message}",
            started=started,
            status=self._answer.status,
            unanswered=unanswered and not started,
        )
        self._abandon(failed)

    def _abandon(self, exc: BaseException) -> None:
        """End this exchange in failure: the connection closes, an answer begun is cut."""
        exchange, on_done = self._exchange, self._on_done
        self._on_done = None
        self._detach()
        self._answer.keep_alive = False
        if self.transport is not None:
            self.transport.abort()
        if exchange is not None and exchange.started:
            exchange.cut()
        if on_done is not None:
            on_done(0, exc)

    def _detach(self) -> None:
        if self._exchange is not None:
            self._exchange.relay = None
        self._exchange = None
        if self._relay_paused and self.transport is not None:
            self._relay_paused = False
            self.transport.resume_reading()

    @property
    def reusable(self) -> bool:
        return (
            not self.lost
            and self.transport is not None
            and not self.transport.is_closing()
            and self._answer.complete
            and self._answer.keep_alive
            and not self._answer.excess
            and self._body_sent
            and self._exchange is None
        )

    def abort(self) -> None:
        self._on_done = None  # the exchange is abandoned: nobody waits for its end
        self._detach()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.abort()
