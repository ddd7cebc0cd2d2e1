"""The open client connections of one server: idle and slow ones closed, drained, shut.

One :class:`Connections` per data server: every client connection joins it
when it opens and leaves when it closes. One timer sweeps them all, closing
the idle and answering 408 to a head that takes too long, rather than a
timer per connection; draining and shutdown act on all of them at once
(:meth:`Connections.close_after_answers`, :meth:`Connections.close_idle`,
:meth:`Connections.shut`). What it needs of a connection is
:class:`OpenConnection`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from activator.http1.exchange import Exchange
from activator.http1.reading import PAUSE_BUFFER, PAUSE_UPGRADE
from activator.http1.rejections import HeadTimeout, RequestRejected

__all__ = ["Connections", "OpenConnection", "ShutAnswer"]


class OpenConnection(Protocol):
    """A client connection, as the server's set of them sees it."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport | None
    current: Exchange | None
    head_began: float
    last_active: float
    must_close: bool

    def reject(self, exc: RequestRejected) -> None: ...

    def pause_body(self, reason: int = PAUSE_BUFFER) -> None: ...

    def cancel_handler(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ShutAnswer:
    """The answer requests still unanswered get when the server shuts down."""

    status: int
    error_type: str
    code: str
    message: str
    retry_after_s: int | None = None


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
        self._open: set[OpenConnection] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.closing = False

    def close_after_answers(self) -> None:
        """From now on every connection, open or new, closes after its next answer (draining)."""
        self.closing = True
        for conn in self._open:
            conn.must_close = True

    def add(self, conn: OpenConnection) -> None:
        if self.closing:
            conn.must_close = True
        self._open.add(conn)
        if self._timer is None:
            self._timer = conn.loop.call_later(self._every_s, self._sweep, conn.loop)

    def discard(self, conn: OpenConnection) -> None:
        self._open.discard(conn)

    def __iter__(self) -> Iterator[OpenConnection]:
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

    def _head_timed_out(self, conn: OpenConnection) -> None:
        """``conn``'s request head began ``head_s`` ago and has not ended: 408, then close."""
        conn.head_began = 0.0
        if conn.current is None:
            conn.reject(HeadTimeout(f"not complete within {self.head_s:g}s"))
        else:
            # A pipelined head trickling in behind a request in progress.
            conn.must_close = True
            conn.pause_body(PAUSE_UPGRADE)

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
