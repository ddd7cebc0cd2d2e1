"""The replica side of the data path: pooled HTTP/1.1 connections that relay answers as bytes.

:class:`UpstreamPool` keeps idle keep-alive connections per replica
address and opens new ones on demand; :func:`send` sends one client
exchange over one of them and relays the answer into it, calling the
``on_done`` it was given once at the end. The exchange is seen only as
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

New connections to one replica are opened at most ``max_opening`` at a
time, each counted until it delivers its first answer byte (proof that the
replica accepted it). A burst of held requests released at once would
otherwise overflow the replica's listen backlog (128 for aiohttp, 100 for
asyncio's default), and with SYN cookies the connections that did not fit
are reset after the request was written: a 502 for a request the replica
never saw. Reused connections need no such slot.

A request head with no body to pipe after it is not written at once but
when the event loop's turn has run its callbacks (:meth:`UpstreamPool.write_soon`):
the requests parsed in one turn go out back to back, so a replica is woken
once for them rather than once each.

Idle connections are closed after ``keepalive_s`` (4 s by default, below
uvicorn's (vLLM's) 5 s, so the proxy closes first and rarely reuses a
connection the replica is closing). A pooled connection the replica closed
is noticed (``connection_lost``) and dropped before reuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import cast

from activator.http1.answer import AnswerParser
from activator.http1.heads import upstream_request_head
from activator.http1.relay import ClientSide

__all__ = [
    "NotSent",
    "OnDone",
    "ReplicaFailed",
    "UpstreamConnection",
    "UpstreamPool",
    "send",
]

log = logging.getLogger(__name__)

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


class UpstreamConnection(asyncio.Protocol):
    """One connection to a replica; relays one exchange at a time."""

    __slots__ = (
        "_answer",
        "_exchange",
        "_heard",
        "_last",
        "_on_done",
        "_relay_paused",
        "_timer",
        "authority",
        "body_sent",
        "idle_since",
        "key",
        "loop",
        "lost",
        "opening",
        "pool",
        "transport",
    )

    def __init__(self, pool: UpstreamPool, key: str) -> None:
        self.pool = pool
        self.key = key
        self.authority = key.encode()  # the Host header the replica gets
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.idle_since = 0.0
        self._answer = AnswerParser()
        self._heard = False  # a byte of this answer arrived
        self.body_sent = True
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
                remaining = answer.remaining
                if remaining >= 0:
                    if len(data) > remaining:
                        data = data[:remaining]
                        answer.excess = True
                    answer.remaining = remaining - len(data)
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
            head = answer.head
            if isinstance(head, bytearray):
                head += data  # a head over several reads grows in place
            else:  # nearly always the whole head in one read: kept, not copied
                answer.head = bytearray(head) + data if head else data
            failed = answer.feed(data)
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

    def begin(
        self, exchange: ClientSide, head: bytes, *, idle_s: float, on_done: OnDone, piped: bool
    ) -> None:
        """Send ``head`` for ``exchange``; ``on_done`` is called once when the answer ended.

        ``piped``: the client's body follows (:meth:`pipe_body`), so the head
        is written now; otherwise at the end of the loop's turn
        (:meth:`UpstreamPool.write_soon`).
        """
        assert self.transport is not None
        self._answer.reset(is_head=exchange.head.method == "HEAD")
        self._heard = False
        self.body_sent = True
        self._exchange = exchange
        self._on_done = on_done
        exchange.relay = self
        self._last = self.loop.time()
        if idle_s and self._timer is None:
            # One timer per connection that re-arms itself from the last
            # activity, kept across exchanges: no timer churn per request.
            self._timer = self.loop.call_at(self._last + idle_s, self._check_idle, idle_s)
        if piped:
            # Body chunks follow with direct writes: the head must not wait behind them.
            self.transport.write(head)
        else:
            self.pool.write_soon(self.transport, head)

    def pipe_body(self, exchange: ClientSide, *, chunked: bool, limit: int) -> None:
        """Stream the client's body to the replica as it arrives (chunks framed when chunked)."""
        self.body_sent = False
        transport = self.transport
        assert transport is not None
        write = transport.write

        def send(chunk: bytes) -> None:
            if chunk:
                write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)

        def on_end(exc: BaseException | None) -> None:
            if exc is not None:
                self.fail_body(exc)
                return
            if chunked and not transport.is_closing():
                write(b"0\r\n\r\n")
            self.body_sent = True

        exchange.body.set_limit(limit)
        exchange.body.pipe(send, on_end)

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
        exchange, on_done = self._exchange, self._on_done
        self._on_done = None
        started = exchange.started if exchange is not None else False
        self._detach()
        self._answer.keep_alive = False
        if self.transport is not None:
            self.transport.abort()
        if started and exchange is not None:
            exchange.cut()
        if on_done is not None:
            failed = ReplicaFailed(
                f"{self.key}: {message}",
                started=started,
                status=self._answer.status,
                unanswered=unanswered and not started,
            )
            on_done(0, failed)

    def fail_body(self, exc: BaseException) -> None:
        """The client's body failed (too large, stalled): abandon this exchange."""
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
            and self.body_sent
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


class UpstreamPool:
    """Keep-alive connections to replicas, by ``host:port``."""

    def __init__(
        self,
        *,
        connect_timeout_s: float = 5.0,
        keepalive_s: float = 4.0,
        max_connections: int = 0,
        max_opening: int = 64,
    ) -> None:
        if connect_timeout_s <= 0 or keepalive_s <= 0 or max_connections < 0 or max_opening < 1:
            raise ValueError(
                "connect_timeout_s and keepalive_s must be > 0, max_connections >= 0 and "
                f"max_opening >= 1, got {connect_timeout_s}, {keepalive_s}, {max_connections}, "
                f"{max_opening}"
            )
        self.max_opening = max_opening
        self._opening: dict[str, asyncio.Semaphore] = {}
        self._keys: dict[tuple[str, int], str] = {}
        self.loop = asyncio.get_running_loop()
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self._idle: dict[str, deque[UpstreamConnection]] = {}
        self._limit = asyncio.Semaphore(max_connections) if max_connections else None
        self._open: set[UpstreamConnection] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self.opened = 0  # connections opened, ever (tests check reuse with it)
        # Request heads to write when the loop's callbacks of this turn are done.
        self._writes: dict[asyncio.Transport, bytes] = {}

    def write_soon(self, transport: asyncio.Transport, data: bytes) -> None:
        """Write ``data`` to ``transport`` once this turn of the event loop has run its callbacks.

        The requests parsed in one turn then go out back to back, as they did
        when a task per request wrote them: a replica woken by the first finds
        the next ones while it is still awake, rather than being woken for
        each (on loopback, waking the reader is the costliest part of a send).
        """
        writes = self._writes
        if not writes:
            self.loop.call_soon(self._flush)
        queued = writes.get(transport)
        writes[transport] = data if queued is None else queued + data

    def _flush(self) -> None:
        writes, self._writes = self._writes, {}
        for transport, data in writes.items():
            if not transport.is_closing():
                transport.write(data)

    async def acquire(self, host: str, port: int) -> UpstreamConnection:
        """An idle connection to ``host:port``, else a new one; :class:`NotSent` if none opens."""
        key = self._key(host, port)
        conn = self._take_idle(key)
        if conn is not None:
            return conn
        opening = self._opening.get(key)
        if opening is None:
            opening = self._opening[key] = asyncio.Semaphore(self.max_opening)
        await opening.acquire()
        conn = self._take_idle(key)  # one may have come back while we waited
        if conn is not None:
            opening.release()
            return conn
        try:
            conn = await self._connect(host, port, key)
        except BaseException:
            opening.release()
            raise
        conn.opening = opening
        return conn

    def _key(self, host: str, port: int) -> str:
        key = self._keys.get((host, port))
        if key is None:
            if len(self._keys) >= 4096:  # replicas come and go: keep the cache bounded
                self._keys.clear()
            key = self._keys[(host, port)] = f"{host}:{port}"
        return key

    def take_idle(self, host: str, port: int) -> UpstreamConnection | None:
        """An idle pooled connection to ``host:port`` ready for a request, if there is one."""
        key = self._keys.get((host, port))
        return self._take_idle(key if key is not None else self._key(host, port))

    def _take_idle(self, key: str) -> UpstreamConnection | None:
        idle = self._idle.get(key)
        now = self.loop.time()
        while idle:
            conn = idle.pop()  # the most recently used: warm, and least likely closed
            if conn.reusable and now - conn.idle_since < self.keepalive_s:
                return conn
            conn.abort()
        return None

    async def _connect(self, host: str, port: int, key: str) -> UpstreamConnection:
        if self._limit is not None:
            await self._limit.acquire()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await self.loop.create_connection(
                    lambda: UpstreamConnection(self, key), host, port
                )
        except (OSError, TimeoutError) as exc:
            if self._limit is not None:
                self._limit.release()
            raise NotSent(f"{key}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            if self._limit is not None:
                self._limit.release()
            raise
        self._open.add(conn)
        self.opened += 1
        return conn

    def release(self, conn: UpstreamConnection) -> None:
        """Back to the pool when it can carry another request, else closed."""
        if not conn.reusable:
            conn.abort()
            return
        conn.idle_since = self.loop.time()
        idle = self._idle.get(conn.key)
        if idle is None:
            idle = self._idle[conn.key] = deque()
        idle.append(conn)
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self.keepalive_s, self._sweep)

    def drop_idle(self, host: str, port: int) -> None:
        """Close the idle connections to ``host:port``: the replica may be closing them too.

        After a replica closed one connection unasked (shutting down, most
        often), the next request there opens a new one, which is refused at
        once if it is gone, rather than finding another closing one.
        """
        idle = self._idle.pop(self._key(host, port), None)
        while idle:
            idle.pop().abort()

    def forget(self, conn: UpstreamConnection) -> None:
        """``conn`` closed: drop it from the pool and free its slot."""
        if conn in self._open:
            self._open.discard(conn)
            if self._limit is not None:
                self._limit.release()
        idle = self._idle.get(conn.key)
        if idle is not None:
            with contextlib.suppress(ValueError):
                idle.remove(conn)

    def _sweep(self) -> None:
        """Close connections idle past ``keepalive_s``; run again while any are idle."""
        self._sweeper = None
        cutoff = self.loop.time() - self.keepalive_s
        for idle in self._idle.values():
            while idle and idle[0].idle_since <= cutoff:
                idle.popleft().abort()
        if any(self._idle.values()):
            self._sweeper = self.loop.call_later(self.keepalive_s, self._sweep)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._open):
            conn.abort()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports run their connection_lost


def send(
    conn: UpstreamConnection,
    exchange: ClientSide,
    *,
    body: bytes | None,
    max_body_bytes: int,
    idle_s: float,
    strip: frozenset[bytes],
    on_done: OnDone,
) -> None:
    """Send ``exchange`` over ``conn`` (taken from the pool) and relay its answer by callbacks.

    ``on_done`` is called once when the answer ended (see :data:`OnDone`),
    unless ``conn`` is aborted first. The caller gives ``conn`` back to the
    pool (:meth:`UpstreamPool.release`) and detaches the client's body.
    """
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
        authority=conn.authority,
        request_id=exchange.request_id,
        body_length=length,
        chunked=chunked,
        strip=strip,
    )
    if body:
        head += body
    piped = body is None and bool(chunked or length)
    conn.begin(exchange, head, idle_s=idle_s, on_done=on_done, piped=piped)
    if piped:
        conn.pipe_body(exchange, chunked=chunked, limit=max_body_bytes)
