"""The client side of the data path: one asyncio Protocol per client connection.

One :class:`ClientConnection` per client connection. Its
:class:`~activator.http1.request_reader.RequestReader` turns the bytes into
exchanges (:class:`~activator.http1.exchange.Exchange`); each is handed to
the connection's handler, a plain call that takes it and ends it later
(:meth:`Exchange.finish`) from whatever callback or task completes it: in
the activator, :meth:`activator.proxy.Proxy.handle`, its one entry into the
proxy. Everything else is callbacks: no stream objects, no per-chunk awaits.

Decisions, and why:

- **One request at a time per connection.** A pipelined request (sent
  before the previous answer) is parsed and queued, and reading pauses until
  the connection is idle again, so answers go out in order and a client
  cannot queue unbounded work (RFC 9112 §9.3.2 allows either).
- **Reading pauses for reasons, and resumes when none is left**
  (:mod:`activator.http1.reading`): a body buffered past 64 KiB
  (:mod:`activator.http1.request_body`), a congested replica connection, a
  pipelined request waiting its turn. The other way, a client that reads
  slower than the replica writes pauses the replica connection's relay
  (:class:`~activator.http1.relay.Relay`).
- **A client that disconnects cancels the handler's work** (the exchange's
  ``cancel``): a held request frees its place at once.
- **Timeouts are idle ones**: keep-alive idle and a head that takes too
  long, swept for all connections of a server by one timer
  (:class:`~activator.http1.connections.Connections`); a body's idle timeout
  is its own.
- **Requests that cannot be parsed** (bad syntax, a head over the limits)
  get a JSON answer and the connection closes, lingering so that the client
  reads the answer; so does any connection whose request body was not read
  to its end, since the next request's start would be unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import cast

import httptools

from activator.http1.connections import Connections
from activator.http1.exchange import Exchange, next_request_id
from activator.http1.heads import error_head_and_body
from activator.http1.reading import (
    PAUSE_BUFFER,
    PAUSE_PIPELINED,
    PAUSE_UPGRADE,
    PAUSE_UPSTREAM,
    ServerLimits,
)
from activator.http1.rejections import HeadTooLarge, RequestRejected
from activator.http1.request_reader import RequestReader

__all__ = ["ClientConnection", "Handle"]

# Takes each exchange and ends it later (Exchange.finish), setting Exchange.cancel
# while it works: the proxy's one entry (Proxy.handle).
Handle = Callable[[Exchange], object]

# How long a connection closed after an error answer keeps discarding what the
# client still sends, so the answer is read before the close (nginx: 5 s).
_LINGER_S = 2.0


class ClientConnection(asyncio.Protocol):
    """One client connection: parse, hand each request to the proxy, in order.

    A request is handed on only once the bytes read with its head are
    parsed: llhttp reports a head complete before it checks what the head
    implies (an unsupported ``Transfer-Encoding``, a body that breaks its
    framing in the same read), and a request it then rejects must not have
    gone to a replica already.
    """

    # Slots: thousands of these live at once while requests are held.
    __slots__ = (
        "_connections",
        "_failed",
        "_handing",
        "_handle",
        "_next_due",
        "_paused_for",
        "_pending",
        "_reader",
        "current",
        "cut_by_us",
        "head_began",
        "last_active",
        "limits",
        "loop",
        "must_close",
        "peer",
        "peer_bytes",
        "reading_paused_by_upstream",
        "transport",
    )

    def __init__(self, handle: Handle, *, limits: ServerLimits, connections: Connections) -> None:
        self.loop = asyncio.get_running_loop()
        self._handle = handle
        self.limits = limits
        self._connections = connections
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.peer_bytes = b""  # the peer's address as X-Forwarded-For gets it
        self._reader = RequestReader(self)
        self.head_began = 0.0  # when the first byte of an unfinished head came; 0: none
        self._pending: deque[Exchange] | None = None  # pipelined requests, rarely any
        self.current: Exchange | None = None
        self.must_close = False
        self.cut_by_us = False
        self._paused_for = 0  # a bit per reason reading is paused (PAUSE_*)
        self.reading_paused_by_upstream = False
        self.last_active = 0.0
        self._failed = False
        self._handing = False  # inside the handler's call
        self._next_due = False  # a pipelined request to start once it returns

    # -- transport events ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but are ones.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) else ""
        self.peer_bytes = self.peer.encode("latin-1")
        self.last_active = self.loop.time()
        self._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.cut_by_us:
            self.cancel_handler()
        # The handler's cancellation aborts its replica connection, if any.
        if self.current is not None:
            self.current.body.detach()
        self._pending = None
        self._connections.discard(self)
        self._reader.close()

    def data_received(self, data: bytes) -> None:
        if self._failed:
            return  # lingering after an answer that ends the connection: discarded
        now = self.loop.time()
        self.last_active = now
        reader = self._reader
        if reader.parsing is None:
            reader.head_seen += len(data)
            if not self.head_began:
                self.head_began = now
        try:
            reader.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            rejected = reader.failed(exc)
            if rejected is not None:
                self.reject(rejected)
                return
        parsed = reader.parsed
        if len(parsed) == 1 and self.current is None and self.transport is not None:
            self._start(parsed.pop())  # nearly always: one request per read
        elif parsed:
            self._hand_on()
        if (
            reader.parsing is None
            and reader.head_seen > self.limits.max_head_bytes
            and self.transport is not None
        ):
            self.reject(
                HeadTooLarge(f"more than {self.limits.max_head_bytes} bytes without its end")
            )

    def pause_writing(self) -> None:
        # The client reads slower than the replica writes: stop reading the replica.
        current = self.current
        if current is not None and current.relay is not None:
            current.relay.pause_relay()

    def resume_writing(self) -> None:
        current = self.current
        if current is not None and current.relay is not None:
            current.relay.resume_relay()

    # -- serving -------------------------------------------------------------------

    def _hand_on(self) -> None:
        """Start (or queue behind the one in progress) the requests this read completed."""
        reader = self._reader
        parsed = reader.parsed
        reader.parsed = []
        for exchange in parsed:
            if self.current is None and self.transport is not None:
                self._start(exchange)
            else:
                if self._pending is None:
                    self._pending = deque()
                self._pending.append(exchange)
                self.pause_body(PAUSE_PIPELINED)

    def _start(self, exchange: Exchange) -> None:
        """Hand ``exchange`` to the handler, which takes it and ends it later.

        The handler may end the exchange before it returns (an answer of its
        own): the next pipelined request then starts here, after it
        returned, rather than inside its call, so a client's pipelined
        requests never nest one handler call in another.
        """
        while True:
            self.current = exchange
            self._handing = True
            try:
                self._handle(exchange)
            except Exception:
                exchange.handler_failed()
                exchange.finish()
            finally:
                self._handing = False
            if not self._next_due:
                return
            self._next_due = False
            exchange = self._next_pending()

    def _next_pending(self) -> Exchange:
        pending = self._pending
        assert pending
        exchange = pending.popleft()
        if not pending:
            self.resume_body(PAUSE_PIPELINED)
        return exchange

    def cancel_handler(self) -> None:
        """Stop the handler's work on the request in progress (the client went away, or
        the server shuts): its ``Exchange.cancel``, once."""
        current = self.current
        if current is not None and current.cancel is not None:
            cancel, current.cancel = current.cancel, None
            cancel()

    def end_exchange(self, exchange: Exchange) -> None:
        """``exchange`` is over: serve the next request, or close (:meth:`Exchange.finish`)."""
        self.current = None
        transport = self.transport
        if transport is None:
            return
        if not exchange.body.done:
            self._close_lingering()
            return
        if self.must_close or not exchange.head.keep_alive:
            transport.close()
            return
        if self._pending:
            if self._handing:
                self._next_due = True  # _start starts it once the handler returned
            else:
                self._start(self._next_pending())
            return
        if self._paused_for:
            self.resume_body(PAUSE_PIPELINED)
        self.last_active = self.loop.time()

    def reject(self, exc: RequestRejected) -> None:
        """A request that cannot be served as sent: answer it (unless another answer is
        under way) and close; what was parsed with it is dropped, unsent."""
        self.must_close = True
        self._failed = True
        reader = self._reader
        reader.parsed = []
        self._pending = None
        on_reject = self._connections.on_reject
        if on_reject is not None:
            on_reject(exc)
        parsing, reader.parsing = reader.parsing, None
        current = self.current
        if current is None:
            if self.transport is not None:
                self.transport.write(_rejection(exc))
                self._close_lingering()
        elif parsing is current.body:
            # The body of the request in progress broke its framing: its
            # handler answers (or cuts the answer it began).
            parsing.fail(exc)
        else:
            # A pipelined request behind the one in progress: no more is read.
            self.pause_body(PAUSE_UPGRADE)

    def _close_lingering(self) -> None:
        """Close after an answer the client may still be sending to (a rejection, a 413).

        Closed at once, the unread bytes would make the kernel send a reset,
        which can destroy the answer before the client reads it. So, as
        nginx's lingering close does: end our side, discard what still
        comes, and close at the client's end or after ``_LINGER_S``.
        """
        transport = self.transport
        if transport is None:
            return
        self._failed = True
        self.must_close = True
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self._paused_for = 0
        with contextlib.suppress(RuntimeError):
            transport.resume_reading()
        self.loop.call_later(_LINGER_S, transport.close)

    # -- flow control --------------------------------------------------------------

    def pause_body(self, reason: int = PAUSE_BUFFER) -> None:
        """Stop reading the client for ``reason`` (a ``PAUSE_*`` bit)."""
        if reason == PAUSE_UPSTREAM:
            self.reading_paused_by_upstream = True
        if not self._paused_for and self.transport is not None:
            self.transport.pause_reading()
        self._paused_for |= reason

    def resume_body(self, reason: int = PAUSE_BUFFER) -> None:
        """``reason`` no longer holds reading back; read again when no other does."""
        if reason == PAUSE_UPSTREAM:
            self.reading_paused_by_upstream = False
        if not self._paused_for & reason:
            return
        self._paused_for &= ~reason
        if not self._paused_for and self.transport is not None and not self._failed:
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()


def _rejection(exc: RequestRejected) -> bytes:
    """The JSON answer to a rejected request (the connection closes after it)."""
    detail = str(exc)
    return error_head_and_body(
        exc.status,
        error_type=exc.error_type,
        code=exc.code,
        message=f"{exc.message}: {detail}" if detail else exc.message,
        request_id=next_request_id(),
        retry_after_s=None,
        close=True,
        http10=False,
    )
