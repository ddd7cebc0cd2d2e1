"""A request's body as it arrives: buffered, read whole, or piped to a replica, by callback.

The parser feeds each chunk (:meth:`RequestBody.feed`); the proxy either
awaits :meth:`RequestBody.read_all` (to route by ``model``, bounded) or calls
:meth:`RequestBody.pipe`, after which each chunk is written straight
through. Reading the client pauses above 64 KiB buffered and while the
replica's connection is congested, so memory per request stays bounded.

- **A piped body can be sent again** while the replica has not answered
  (:meth:`RequestBody.rewind`): the chunks piped so far are kept, up to
  64 KiB in all, until its first answer byte (:meth:`RequestBody.keep_no_more`).
  A replica that closes a keep-alive connection as the request goes out
  never read it, and the proxy sends it once more; a larger body is not
  kept, and its request is not sent again.
- **Its idle timeout** (the client stops sending: 408) is one timer per body
  read that re-arms itself from a "last activity" time rather than being
  cancelled and re-created per chunk; time spent waiting on a congested
  replica is not the client's stall.

What it needs of its connection is :class:`BodySource` (the client
connection is one): a body never reaches into the connection's parser or
its other requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol

from activator.http1.reading import PAUSE_BUFFER, ServerLimits
from activator.http1.rejections import BodyStalled, BodyTooLarge

__all__ = ["BodySource", "RequestBody"]

# Request body bytes buffered (a held request's, say) before reading pauses:
# about what aiohttp's request stream held before it paused, so a held body
# costs no more than it did.
_PAUSE_ABOVE = 64 * 1024

# A piped body up to this size is kept until the replica's first answer byte,
# so the request can be sent again (most prompts are a few KiB; 64 KiB is
# some 16k tokens of text). Kept for at most one answer's wait per request.
_KEEP_AT_MOST = 64 * 1024


class BodySource(Protocol):
    """The client connection a body is read from, as the body sees it."""

    loop: asyncio.AbstractEventLoop
    limits: ServerLimits
    transport: asyncio.Transport | None
    must_close: bool
    reading_paused_by_upstream: bool

    def pause_body(self, reason: int = PAUSE_BUFFER) -> None: ...

    def resume_body(self, reason: int = PAUSE_BUFFER) -> None: ...


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

    def __init__(self, conn: BodySource, *, expects_continue: bool = False) -> None:
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
