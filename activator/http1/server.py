"""The client side of the data path: an asyncio Protocol that parses HTTP/1.1 with llhttp.

One :class:`ClientConnection` per client connection. ``httptools`` (the
llhttp parser with a callback API, which uvicorn uses) turns the bytes into
a :class:`~activator.http1.heads.RequestHead` and body chunks; each request
becomes an :class:`Exchange` handed to a *fast handler*, a plain call that
takes it and ends it later (:meth:`Exchange.finish`) from whatever callback
or task completes it; the activator's is :meth:`activator.proxy.Proxy.handle`,
its one entry into the proxy. A connection may be given a *handler*
coroutine instead (or for what the fast handler leaves), which serves each
exchange in a task of its own. Everything else is callbacks: no stream
objects, no per-chunk awaits.

Decisions, and why:

- **One request at a time per connection.** A pipelined request (sent
  before the previous answer) is parsed and queued, and reading pauses until
  the connection is idle again, so answers go out in order and a client
  cannot queue unbounded work (RFC 9112 §9.3.2 allows either).
- **Request bodies flow by callback.** A :class:`RequestBody` buffers
  chunks until the handler reads them whole (routing by ``model``,
  bounded) or pipes them to a replica; then each chunk is written straight
  through. Reading pauses above 64 KiB buffered and while the replica's
  connection is congested: memory per request stays bounded.
- **A piped body can be sent again** while the replica has not answered
  (:meth:`RequestBody.rewind`): the chunks piped so far are kept, up to
  64 KiB in all, until its first answer byte
  (:meth:`RequestBody.keep_no_more`). A replica that closes a keep-alive
  connection as the request goes out never read it, and the proxy sends it
  once more; a larger body is not kept, and its request is not sent again.
- **Client disconnect cancels the handler** (its task, or the fast handler's
  ``Exchange.cancel``): a held request frees its place at once.
- **Timeouts are idle ones**: keep-alive idle (no request in progress),
  swept for all connections of a server by one timer (:class:`Connections`),
  and body idle (the client stops sending its body: 408), checked by one
  timer per body read that re-arms itself from a "last activity" time rather
  than being cancelled and re-created per chunk.
- **Requests that cannot be parsed** (bad syntax, a head over the limits)
  get a JSON 400 and the connection closes; so does any connection
  whose request body was not read to its end, since the next request's
  start would be unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, cast

import httptools

from activator.http1.heads import (
    REQUEST_SKIP,
    RequestHead,
    client_response_head,
    error_head_and_body,
)

__all__ = [
    "PAUSE_BUFFER",
    "PAUSE_UPSTREAM",
    "REJECTIONS",
    "BadFraming",
    "BodyStalled",
    "BodyTooLarge",
    "ClientConnection",
    "Connections",
    "Exchange",
    "FastHandler",
    "Handler",
    "HeadTimeout",
    "HeadTooLarge",
    "Relay",
    "RequestBody",
    "RequestReader",
    "RequestRejected",
    "ServerLimits",
    "ShutAnswer",
    "UnsupportedTransferEncoding",
    "UnsupportedVersion",
]

log = logging.getLogger(__name__)

# X-Request-Id when the client sent none: 8 random bytes per process, then a
# counter. Unique like a random id, without a getrandom() call per request.
_ID_PREFIX = os.urandom(8).hex()
_ID_FORMAT = _ID_PREFIX.encode() + b"%016x"
_id_counter = itertools.count(1)

# Request body bytes buffered (a held request's, say) before reading pauses:
# about what aiohttp's request stream held before it paused, so a held body
# costs no more than it did.
_PAUSE_ABOVE = 64 * 1024

# A piped body up to this size is kept until the replica's first answer byte,
# so the request can be sent again (most prompts are a few KiB; 64 KiB is
# some 16k tokens of text). Kept for at most one answer's wait per request.
_KEEP_AT_MOST = 64 * 1024

# How long a connection closed after an error answer keeps discarding what the
# client still sends, so the answer is read before the close (nginx: 5 s).
_LINGER_S = 2.0

# Why reading a client connection is paused; it resumes when no reason is left.
PAUSE_BUFFER = 1  # a request body buffered past _PAUSE_ABOVE
PAUSE_UPSTREAM = 2  # the replica connection the body goes to is congested
_PAUSE_PIPELINED = 4  # a pipelined request waits for the one before it
_PAUSE_UPGRADE = 8  # an upgrade request: nothing after it is read


class BodyTooLarge(Exception):
    """The request body is over the limit (413)."""


class BodyStalled(Exception):
    """The client stopped sending its body for longer than the idle timeout (408)."""


class RequestRejected(Exception):
    """A request the data path refuses as it parses it: no byte of it reaches a replica.

    Each subclass states its answer (:mod:`activator.statuses` lists them in
    its table); the exception's text is the detail the client is told.
    """

    status = 400
    error_type = "invalid_request_error"
    code = "bad_request"
    message = "the request is not valid HTTP/1.1"


class BadFraming(RequestRejected):
    """Where the request (or its body) ends is in doubt: the connection closes after the answer."""

    code = "bad_framing"
    message = "the request's framing is invalid"


class HeadTooLarge(RequestRejected):
    status = 431
    code = "head_too_large"
    message = "the request head is over the limit"


class HeadTimeout(RequestRejected):
    status = 408
    error_type = "timeout_error"
    code = "head_timeout"
    message = "the request head was not complete within the head timeout"


class UnsupportedTransferEncoding(RequestRejected):
    status = 501
    code = "unsupported_transfer_encoding"
    message = "only Transfer-Encoding: chunked is supported"


class UnsupportedVersion(RequestRejected):
    status = 505
    code = "unsupported_http_version"
    message = "only HTTP/1.1 and HTTP/1.0 are supported"


# Every rejection, for the status table.
REJECTIONS: tuple[type[RequestRejected], ...] = (
    RequestRejected,
    BadFraming,
    HeadTooLarge,
    HeadTimeout,
    UnsupportedTransferEncoding,
    UnsupportedVersion,
)


class ServerLimits:
    """What one client may send, and how long a connection may idle.

    ``max_header_bytes`` bounds one line (the request line or a header
    line), ``max_head_bytes`` the whole head; the latter is counted as the
    bytes arrive, since the parser reports a header line only once it has
    ended: a header that never ends would otherwise grow without bound.
    ``head_s`` bounds the time from a head's first byte to its end
    (slowloris: a byte a minute keeps an idle timeout from ever firing).
    """

    __slots__ = (
        "body_idle_s",
        "head_s",
        "idle_s",
        "max_head_bytes",
        "max_header_bytes",
        "max_headers",
    )

    def __init__(
        self,
        *,
        idle_s: float = 75.0,
        body_idle_s: float = 60.0,
        head_s: float = 60.0,
        max_header_bytes: int = 8190,
        max_headers: int = 128,
        max_head_bytes: int = 64 * 1024,
    ) -> None:
        if idle_s <= 0 or body_idle_s <= 0 or head_s <= 0:
            raise ValueError(
                f"idle_s, body_idle_s and head_s must be > 0, got {idle_s}, {body_idle_s}, {head_s}"
            )
        if max_header_bytes < 1 or max_headers < 1 or max_head_bytes < max_header_bytes:
            raise ValueError(
                "max_header_bytes and max_headers must be >= 1 and max_head_bytes >= "
                f"max_header_bytes, got {max_header_bytes}, {max_headers}, {max_head_bytes}"
            )
        self.idle_s = idle_s
        self.body_idle_s = body_idle_s
        self.head_s = head_s
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers
        self.max_head_bytes = max_head_bytes


class RequestBody:
    """A request's body as it arrives: buffered, read whole, or piped to a replica.

    The parser calls :meth:`feed` and :meth:`finish`; the handler either
    awaits :meth:`read_all` or calls :meth:`pipe`, after which chunks go to
    the sink as they arrive. What was piped is kept (up to ``_KEEP_AT_MOST``)
    for :meth:`rewind` until :meth:`keep_no_more`.
    """

    __slots__ = (
        "_buffered",
        "_chunks",
        "_conn",
        "_expects_continue",
        "_kept",
        "_last",
        "_limit",
        "_on_end",
        "_sink",
        "_timer",
        "_waiter",
        "done",
        "error",
        "received",
    )

    def __init__(self, conn: ClientConnection, *, expects_continue: bool = False) -> None:
        self._conn = conn
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._sink: Callable[[bytes], None] | None = None
        self._on_end: Callable[[BaseException | None], None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0
        self._limit = 0
        self._expects_continue = expects_continue
        # The chunks piped so far, for a second attempt; None once they cannot be.
        self._kept: list[bytes] | None = []
        self.received = 0
        self.done = False
        self.error: BaseException | None = None

    # -- parser side -------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        self._last = self._conn.loop.time()
        if self._limit and self.received > self._limit:
            self.fail(BodyTooLarge())
            return
        if self._sink is not None:
            if self._kept is not None:
                self._keep((chunk,))
            self._sink(chunk)
            return
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        if self._buffered > _PAUSE_ABOVE:
            self._conn.pause_body()
        self._wake()

    def finish(self) -> None:
        self.done = True
        if self._timer is not None:
            self._cancel_timer()
        if self._sink is not None and self._on_end is not None:
            on_end, self._on_end = self._on_end, None
            on_end(None)
        if self._waiter is not None:
            self._wake()

    def fail(self, exc: BaseException) -> None:
        """The body cannot be had: too large, stalled, or its framing broke."""
        if self.error is not None:
            return
        self.error = exc
        self._cancel_timer()
        self._conn.must_close = True
        if self._on_end is not None:
            on_end, self._on_end = self._on_end, None
            on_end(exc)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- handler side ------------------------------------------------------------

    def _send_continue(self) -> None:
        # A client that sent "Expect: 100-continue" waits for this before its body.
        if self._expects_continue and not self.done and self.received == 0:
            self._expects_continue = False
            transport = self._conn.transport
            if transport is not None:
                transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def set_limit(self, limit: int) -> None:
        """Fail with :class:`BodyTooLarge` past ``limit`` bytes (0: no limit)."""
        self._limit = limit
        if limit and self.received > limit:
            # Also when the whole body is in already: it is over the limit all the same.
            self.fail(BodyTooLarge())

    async def read_all(self, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes; each pause bounded by the idle timeout."""
        self.set_limit(limit)
        self._send_continue()
        self._arm_idle()
        try:
            while not self.done and self.error is None:
                # Each chunk past _PAUSE_ABOVE paused reading again (what a held
                # body needs); a body read whole is bounded by ``limit`` instead.
                self._conn.resume_body()
                self._waiter = self._conn.loop.create_future()
                await self._waiter
                self._waiter = None
        finally:
            self._cancel_timer()
        if self.error is not None:
            raise self.error
        data = b"".join(self._chunks)
        self._chunks = []
        self._buffered = 0
        return data

    def pipe(
        self, sink: Callable[[bytes], None], on_end: Callable[[BaseException | None], None]
    ) -> None:
        """Send what is buffered and every later chunk to ``sink``; ``on_end`` at the end.

        ``on_end(None)`` when the body is complete, ``on_end(exc)`` with
        :class:`BodyTooLarge` or :class:`BodyStalled` when it fails.
        """
        if self.error is not None:
            on_end(self.error)  # over the limit already: nothing of it goes out
            return
        chunks = self._chunks
        if self._kept is not None:
            self._keep(chunks)
        for chunk in chunks:
            sink(chunk)
        self._chunks = []
        self._buffered = 0
        if self.done:
            on_end(None)
            return
        self._sink, self._on_end = sink, on_end
        self._send_continue()
        self._arm_idle()
        self._conn.resume_body()

    def detach(self) -> None:
        """The exchange is over: no more chunks to the sink, no timer."""
        self._sink = None
        self._on_end = None
        if self._timer is not None:
            self._cancel_timer()

    def _keep(self, chunks: Iterable[bytes]) -> None:
        """Keep ``chunks`` (piped now) for :meth:`rewind`, or give up past ``_KEEP_AT_MOST``."""
        if self.received > _KEEP_AT_MOST:
            self._kept = None
        elif self._kept is not None:
            self._kept.extend(chunks)

    def keep_no_more(self) -> None:
        """The replica began its answer: the request will not be sent again."""
        self._kept = None

    def rewind(self) -> bool:
        """Make the body pipe again from its first byte, for a second attempt; False if it cannot.

        It cannot when more than ``_KEEP_AT_MOST`` bytes were piped, when an
        answer began (:meth:`keep_no_more`), or when the body failed. After
        a rewind the kept chunks are buffered again, ahead of any that
        arrived since; the next :meth:`pipe` sends them all.
        """
        kept = self._kept
        if kept is None or self.error is not None:
            return False
        self.detach()
        if kept:
            self._chunks = kept + self._chunks
            self._buffered = sum(len(chunk) for chunk in self._chunks)
        self._kept = []
        return True

    def _arm_idle(self) -> None:
        if self.done or self.error is not None or self._timer is not None:
            return
        loop = self._conn.loop
        self._last = loop.time()
        self._timer = loop.call_at(self._last + self._conn.limits.body_idle_s, self._check_idle)

    def _check_idle(self) -> None:
        loop = self._conn.loop
        due = self._last + self._conn.limits.body_idle_s
        if self._conn.reading_paused_by_upstream:
            # Waiting on the replica, not on the client: not the client's stall.
            due = loop.time() + self._conn.limits.body_idle_s
        if loop.time() < due:
            self._timer = loop.call_at(due, self._check_idle)
            return
        self._timer = None
        self.fail(BodyStalled())

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Exchange:
    """One request on one client connection, and the writes of its answer."""

    __slots__ = ("body", "cancel", "conn", "head", "relay", "request_id", "started")

    def __init__(self, conn: ClientConnection, head: RequestHead, body: RequestBody) -> None:
        self.conn = conn
        self.head = head
        self.body = body
        rid = head.index.get(b"x-request-id")
        self.request_id = rid if rid else _ID_FORMAT % next(_id_counter)
        self.started = False  # a byte of the answer went to the client
        # The replica connection relaying into this exchange (pauses with the client).
        self.relay: Relay | None = None
        # Set by a fast handler that took the exchange: what stops it when the
        # client goes away (a task-served exchange is cancelled with its task).
        self.cancel: Callable[[], object] | None = None

    @property
    def http10(self) -> bool:
        return self.head.version == "1.0"

    def write(self, data: bytes) -> None:
        self.started = True
        transport = self.conn.transport
        if transport is not None:
            transport.write(data)

    def answer_error(
        self,
        status: int,
        *,
        error_type: str,
        code: str,
        message: str,
        retry_after_s: int | None = None,
        close: bool = False,
    ) -> None:
        """One of the activator's own JSON answers (the table of :mod:`activator.statuses`)."""
        conn = self.conn
        close = close or conn.must_close or not self.head.keep_alive or not self.body.done
        if close:
            conn.must_close = True
        self.write(
            error_head_and_body(
                status,
                error_type=error_type,
                code=code,
                message=message,
                request_id=self.request_id,
                retry_after_s=retry_after_s,
                close=close,
                http10=self.http10,
            )
        )

    def answer(self, status: int, reason: bytes, content_type: bytes, body: bytes) -> None:
        """A whole answer the handler writes itself (not an error): head and body at once."""
        conn = self.conn
        close = conn.must_close or not self.head.keep_alive or not self.body.done
        if close:
            conn.must_close = True
        head = client_response_head(
            status,
            reason,
            [(b"Content-Type", content_type)],
            request_id=self.request_id,
            content_length=len(body),
            chunked=False,
            close=close,
            http10=self.http10,
        )
        self.write(head if self.head.method == "HEAD" else head + body)

    def finish(self) -> None:
        """A fast handler is done with this exchange: the connection serves the next request."""
        self.cancel = None
        self.body.detach()
        self.conn.end_exchange(self)

    def handler_failed(self) -> None:
        """The handler raised: a 500 if nothing was answered yet, and the connection closes."""
        log.exception("handler failed for %s %s", self.head.method, self.head.target)
        if not self.started:
            self.answer_error(
                500,
                error_type="internal_error",
                code="internal_error",
                message="the activator failed",
                close=True,
            )
        self.conn.must_close = True

    def cut(self) -> None:
        """End the client connection now: an answer already begun cannot be completed."""
        self.conn.must_close = True
        self.conn.cut_by_us = True  # the handler is failing already: let it finish
        transport = self.conn.transport
        if transport is not None:
            transport.close()


Handler = Callable[[Exchange], Awaitable[None]]
# Serves an exchange by callbacks and tasks of its own: True when it took it
# (and will call ``Exchange.finish``, with ``Exchange.cancel`` set while it
# works), False to leave it to the handler's task.
FastHandler = Callable[[Exchange], bool]


class Relay(Protocol):
    """What relays a replica's answer into an exchange: paused while the client is slow."""

    def pause_relay(self) -> None: ...

    def resume_relay(self) -> None: ...


class Connections:
    """The open client connections of one server; closes idle and slow ones with one timer.

    One sweep every ``min(idle_s, head_s) / 4`` closes each connection that
    has had no request in progress since ``idle_s`` ago, so an idle
    connection lives between ``idle_s`` and ``1.25 idle_s``, and answers 408
    to each whose request head began more than ``head_s`` ago. A timer per
    connection instead costs about half a KiB for each of 10,000 held
    requests, and a schedule and a cancel per request.
    """

    def __init__(
        self,
        *,
        idle_s: float,
        head_s: float = 60.0,
        on_reject: Callable[[RequestRejected], None] | None = None,
    ) -> None:
        if idle_s <= 0 or head_s <= 0:
            raise ValueError(f"idle_s and head_s must be > 0, got {idle_s}, {head_s}")
        # Told of each request refused as it was parsed (the metrics count them).
        self.on_reject = on_reject
        self.idle_s = idle_s
        self.head_s = head_s
        self._every_s = min(idle_s, head_s) / 4
        self._open: set[ClientConnection] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.closing = False

    def close_after_answers(self) -> None:
        """From now on every connection, open or new, closes after its next answer (draining)."""
        self.closing = True
        for conn in self._open:
            conn.must_close = True

    def add(self, conn: ClientConnection) -> None:
        if self.closing:
            conn.must_close = True
        self._open.add(conn)
        if self._timer is None:
            self._timer = conn.loop.call_later(self._every_s, self._sweep, conn.loop)

    def discard(self, conn: ClientConnection) -> None:
        self._open.discard(conn)

    def __iter__(self) -> Iterator[ClientConnection]:
        return iter(list(self._open))

    def __len__(self) -> int:
        return len(self._open)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        cutoff = now - self.idle_s
        head_cutoff = now - self.head_s
        for conn in list(self._open):
            if conn.transport is None:
                continue
            began = conn.head_began
            if began and began <= head_cutoff:
                self._head_timed_out(conn)
            elif conn.current is None and conn.last_active <= cutoff:
                conn.transport.close()
        if self._open:
            self._timer = loop.call_later(self._every_s, self._sweep, loop)

    def _head_timed_out(self, conn: ClientConnection) -> None:
        """``conn``'s request head began ``head_s`` ago and has not ended: 408, then close."""
        conn.head_began = 0.0
        if conn.current is None:
            conn.reject(HeadTimeout(f"not complete within {self.head_s:g}s"))
        else:
            # A pipelined head trickling in behind a request in progress.
            conn.must_close = True
            conn.pause_body(_PAUSE_UPGRADE)

    def close_idle(self) -> None:
        """Close every connection with no request in progress now; the others close after
        their answer (draining)."""
        for conn in list(self._open):
            if conn.current is None and conn.transport is not None:
                conn.transport.close()
            else:
                conn.must_close = True

    def shut(self, answer: ShutAnswer) -> None:
        """Close every connection now (shutdown): an unanswered request gets ``answer``; a
        started one is cut."""
        for conn in list(self._open):
            conn.cancel_handler()
            current = conn.current
            transport = conn.transport
            if transport is None:
                continue
            if current is not None and not current.started:
                current.answer_error(
                    answer.status,
                    error_type=answer.error_type,
                    code=answer.code,
                    message=answer.message,
                    retry_after_s=answer.retry_after_s,
                    close=True,
                )
            transport.close()

    def close(self) -> None:
        """Stop sweeping (the server is going away)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class RequestReader:
    """A client connection's bytes, parsed into exchanges: llhttp's callbacks, within the limits.

    One per :class:`ClientConnection`. It builds each request head as its
    lines come (a header index by lower-cased name, repeated headers
    combined or refused), checks the head's framing, and makes an
    :class:`Exchange` with its :class:`RequestBody`, which it feeds until the
    body ends. The exchanges a read completed wait in ``parsed`` until the
    connection hands them on.
    """

    __slots__ = (
        "conn",
        "forward",
        "head_bytes",
        "head_seen",
        "headers",
        "index",
        "parsed",
        "parser",
        "parsing",
        "url",
    )

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.index: dict[bytes, bytes] = {}  # lower-cased name -> value, built as they come
        # The lines the replica gets, as pieces (RequestHead.forward): the
        # name is lower-cased here once, not again when the head is written.
        self.forward: list[bytes] = []
        self.head_bytes = 0  # of the header lines parsed so far
        self.head_seen = 0  # bytes read since the head began (a bound on its size)
        self.parsing: RequestBody | None = None  # the body being read
        self.parsed: list[Exchange] = []  # heads parsed in this read, not handed on yet

    def failed(self, exc: Exception) -> RequestRejected | None:
        """What the parser's ``exc`` means: the rejection when a request cannot be
        served as sent, None for an upgrade (served as a plain request, then closed).

        The connection calls the parser itself (``parser.feed_data``): a read
        that parses costs no call of this reader's.
        """
        if isinstance(exc, httptools.HttpParserUpgrade):
            # Upgrade is hop-by-hop and never passed on: the request is served
            # as a plain one and the connection closes after it.
            conn = self.conn
            conn.must_close = True
            if self.parsing is not None:
                self.parsing.finish()
                self.parsing = None
            conn.pause_body(_PAUSE_UPGRADE)
            return None
        if isinstance(exc, httptools.HttpParserCallbackError):
            cause = exc.__context__
            if isinstance(cause, RequestRejected):
                return cause
            log.error("request parsing failed in a callback", exc_info=cause)
            return RequestRejected("the request could not be read")
        # Mid-body (a malformed chunk), where the request ends is in doubt.
        rejected = BadFraming if self.parsing is not None else RequestRejected
        return rejected(str(exc))

    def close(self) -> None:
        """The connection is gone: nothing more is parsed."""
        self.parsed = []
        # The parser refers back to this reader (its callbacks), and this reader
        # to its connection: without this, what they hold waits for the cyclic
        # collector.
        self.parser = _CLOSED
        del self.conn

    # No on_message_begin (a callback per request saved): the head's buffers
    # start empty, and on_headers_complete and on_message_complete (trailers)
    # empty them for the next one.

    def on_url(self, url: bytes) -> None:
        self.url += url
        if len(self.url) > self.conn.limits.max_header_bytes:
            raise HeadTooLarge(
                f"the request line is over {self.conn.limits.max_header_bytes} bytes"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        headers = self.headers
        headers.append((name, value))
        lower = name.lower()
        index = self.index
        if lower in index:
            _repeated(index, lower, value)
        else:
            index[lower] = value
        if lower not in REQUEST_SKIP:
            self.forward += (name, b": ", value, b"\r\n")
        limits = self.conn.limits
        if len(headers) > limits.max_headers:
            raise HeadTooLarge(f"more than {limits.max_headers} header lines")
        line = len(name) + len(value) + 4  # with ": " and CRLF
        if line - 2 > limits.max_header_bytes:
            raise HeadTooLarge(f"a header line is over {limits.max_header_bytes} bytes")
        # Lines that came whole in one read (data_received counts the others).
        self.head_bytes += line
        if self.head_bytes > limits.max_head_bytes:
            raise HeadTooLarge(f"the head is over {limits.max_head_bytes} bytes")

    def on_headers_complete(self) -> None:
        conn = self.conn
        parser = self.parser
        index = self.index
        version = parser.get_http_version()
        if (
            version != "1.1"
            or b"host" not in index
            or b"content-length" in index
            or b"transfer-encoding" in index
        ):
            _check_framing(version, index)  # else nothing in it to check: no call
        method = parser.get_method()
        url = self.url
        head = RequestHead(
            method=method.decode("latin-1"),
            target=url.decode("latin-1"),
            version=version,
            headers=self.headers,
            peer=conn.peer,
            keep_alive=parser.should_keep_alive(),
            index=index,
            raw_method=method,
            raw_target=url,
            peer_bytes=conn.peer_bytes,
            forward=self.forward,
        )
        self.url = b""
        self.headers = []
        self.forward = []
        self.index = {}
        self.head_bytes = 0
        self.head_seen = 0
        conn.head_began = 0.0
        expect = index.get(b"expect")
        body = RequestBody(
            conn, expects_continue=expect is not None and expect.lower() == b"100-continue"
        )
        self.parsing = body
        self.parsed.append(Exchange(conn, head, body))

    def on_body(self, body: bytes) -> None:
        parsing = self.parsing
        if parsing is not None:
            parsing.feed(body)

    def on_message_complete(self) -> None:
        if self.headers:
            # Trailer fields of a chunked body: not passed on, and not the
            # next request's headers.
            self.headers = []
            self.index = {}
            self.forward = []
        parsing = self.parsing
        self.parsing = None
        if parsing is not None:
            parsing.finish()


class ClientConnection(asyncio.Protocol):
    """One client connection: parse, hand each request to the handler, in order.

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
        "_fast",
        "_handing",
        "_next_due",
        "_paused_for",
        "_pending",
        "_reader",
        "current",
        "cut_by_us",
        "handler",
        "head_began",
        "last_active",
        "limits",
        "loop",
        "must_close",
        "peer",
        "peer_bytes",
        "reading_paused_by_upstream",
        "task",
        "transport",
    )

    def __init__(
        self,
        handler: Handler | None,
        *,
        limits: ServerLimits,
        connections: Connections,
        fast: FastHandler | None = None,
    ) -> None:
        if handler is None and fast is None:
            raise ValueError("a connection needs a handler, a fast handler, or both")
        self.loop = asyncio.get_running_loop()
        self.handler = handler
        self._fast = fast
        self.limits = limits
        self._connections = connections
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.peer_bytes = b""  # the peer's address as X-Forwarded-For gets it
        self._reader = RequestReader(self)
        self.head_began = 0.0  # when the first byte of an unfinished head came; 0: none
        self._pending: deque[Exchange] | None = None  # pipelined requests, rarely any
        self.current: Exchange | None = None
        self.task: asyncio.Task[None] | None = None
        self.must_close = False
        self.cut_by_us = False
        self._paused_for = 0  # a bit per reason reading is paused (_PAUSE_*)
        self.reading_paused_by_upstream = False
        self.last_active = 0.0
        self._failed = False
        self._handing = False  # inside the fast handler's call
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
                self.pause_body(_PAUSE_PIPELINED)

    def _start(self, exchange: Exchange) -> None:
        """Hand ``exchange`` to the fast handler, else to the handler's task.

        A fast handler may end the exchange before it returns (an answer of
        its own): the next pipelined request then starts here, after it
        returned, rather than inside its call, so a client's pipelined
        requests never nest one handler call in another.
        """
        while True:
            self.current = exchange
            fast = self._fast
            taken = False
            if fast is not None:
                self._handing = True
                try:
                    taken = fast(exchange)
                except Exception:
                    exchange.handler_failed()
                    exchange.finish()
                    taken = True
                finally:
                    self._handing = False
            if not taken:
                self.task = self.loop.create_task(self._serve(exchange))
                return
            if not self._next_due:
                return
            self._next_due = False
            exchange = self._next_pending()

    def _next_pending(self) -> Exchange:
        pending = self._pending
        assert pending
        exchange = pending.popleft()
        if not pending:
            self.resume_body(_PAUSE_PIPELINED)
        return exchange

    def cancel_handler(self) -> None:
        """Stop the handler of the request in progress (its task, or a fast handler's work)."""
        task = self.task
        if task is not None:
            if not task.done():
                task.cancel()
            return
        current = self.current
        if current is not None and current.cancel is not None:
            cancel, current.cancel = current.cancel, None
            cancel()

    async def _serve(self, exchange: Exchange) -> None:
        handler = self.handler
        assert handler is not None
        try:
            await handler(exchange)
        except asyncio.CancelledError:
            return
        except Exception:
            exchange.handler_failed()
        finally:
            exchange.body.detach()
        self.end_exchange(exchange)

    def end_exchange(self, exchange: Exchange) -> None:
        """``exchange`` is over: serve the next request, or close (:meth:`Exchange.finish`)."""
        self.current = None
        self.task = None
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
            self.resume_body(_PAUSE_PIPELINED)
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
            self.pause_body(_PAUSE_UPGRADE)

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


@dataclass(frozen=True, slots=True)
class ShutAnswer:
    """The answer requests still unanswered get when the server shuts down."""

    status: int
    error_type: str
    code: str
    message: str
    retry_after_s: int | None = None


def _rejection(exc: RequestRejected) -> bytes:
    """The JSON answer to a rejected request (the connection closes after it)."""
    detail = str(exc)
    return error_head_and_body(
        exc.status,
        error_type=exc.error_type,
        code=exc.code,
        message=f"{exc.message}: {detail}" if detail else exc.message,
        request_id=_ID_FORMAT % next(_id_counter),
        retry_after_s=None,
        close=True,
        http10=False,
    )


def _repeated(index: dict[bytes, bytes], lower: bytes, value: bytes) -> None:
    """A header name seen twice in one head: combine, refuse, or keep the last."""
    if lower in _COMBINED:
        # Lists (RFC 9110 §5.3): a second Connection header's tokens count too.
        index[lower] = index[lower] + b", " + value
    elif lower in _ONCE:
        raise BadFraming(f"{lower.decode('latin-1')} sent more than once")
    else:
        index[lower] = value


_COMBINED = frozenset({b"connection", b"x-forwarded-for"})
# Headers that decide where the request goes or where it ends: two of them
# are two readings of one request (RFC 9112 §3.2, §6.3).
_ONCE = frozenset({b"host", b"content-length", b"transfer-encoding"})
# Content-Length digits: 18 fit in 63 bits, and 10^18 bytes is no body anyone sends.
_MAX_LENGTH_DIGITS = 18


def _check_framing(version: str, index: dict[bytes, bytes]) -> None:
    """Refuse a head whose version or body framing the activator will not pass on.

    As nginx does: HTTP/1.1 needs ``Host``; ``Transfer-Encoding`` is allowed
    only as exactly ``chunked``, only in HTTP/1.1, and never beside
    ``Content-Length`` (a request two parsers may read two ways is how
    requests are smuggled); ``Content-Length`` is digits that fit in 63 bits.
    """
    if version != "1.1" and version != "1.0":
        raise UnsupportedVersion(f"got HTTP/{version}")
    if b"host" not in index and version == "1.1":
        raise RequestRejected("an HTTP/1.1 request needs a Host header")
    coding = index.get(b"transfer-encoding")
    if coding is not None:
        if version == "1.0":
            raise BadFraming("Transfer-Encoding in an HTTP/1.0 request")
        if coding.strip().lower() != b"chunked":
            raise UnsupportedTransferEncoding(f"got {coding.decode('latin-1')!r}")
        if b"content-length" in index:
            raise BadFraming("both Content-Length and Transfer-Encoding")
    length = index.get(b"content-length")
    if length is not None:
        length = length.strip(b" \t")  # llhttp leaves trailing whitespace in a value
    if length is not None and (not length.isdigit() or len(length) > _MAX_LENGTH_DIGITS):
        raise BadFraming(f"Content-Length {length.decode('latin-1')!r} is not a byte count")


class _ClosedParser:
    """What a closed connection holds instead of its parser."""

    def feed_data(self, data: bytes) -> None:
        raise httptools.HttpParserError("the connection is closed")


_CLOSED = cast(httptools.HttpRequestParser, _ClosedParser())
