"""One request on one client connection, and the writes of its answer.

An :class:`Exchange` is what the HTTP layer hands the proxy for each parsed
request: its head, its body (:class:`~activator.http1.request_body.RequestBody`),
its request id (the client's ``X-Request-Id``, else one made here), and the
ways its answer goes out: an answer of the activator's own
(:meth:`Exchange.answer_error`, :meth:`Exchange.answer`), the replica's
answer relayed through it (:meth:`Exchange.write`, by the replica side, which
sees it only as :class:`~activator.http1.relay.ClientSide`), or a cut when an
answer already begun cannot be completed. :meth:`Exchange.finish` ends it,
and its connection serves the next request.

What it needs of its connection is :class:`ExchangeOwner`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable
from typing import Protocol

from activator.http1.heads import RequestHead, client_response_head, error_head_and_body
from activator.http1.reading import PAUSE_BUFFER, PAUSE_UPSTREAM
from activator.http1.relay import Relay
from activator.http1.request_body import RequestBody

__all__ = ["Exchange", "ExchangeOwner", "next_request_id"]

log = logging.getLogger(__name__)

# X-Request-Id when the client sent none: 8 random bytes per process, then a
# counter. Unique like a random id, without a getrandom() call per request.
_ID_PREFIX = os.urandom(8).hex()
_ID_FORMAT = _ID_PREFIX.encode() + b"%016x"
_id_counter = itertools.count(1)


def next_request_id() -> bytes:
    """A request id for a request that brought none."""
    return _ID_FORMAT % next(_id_counter)


class ExchangeOwner(Protocol):
    """The client connection an exchange belongs to, as the exchange sees it."""

    transport: asyncio.Transport | None
    must_close: bool
    cut_by_us: bool

    def end_exchange(self, exchange: Exchange) -> None: ...

    def pause_body(self, reason: int = PAUSE_BUFFER) -> None: ...

    def resume_body(self, reason: int = PAUSE_BUFFER) -> None: ...


class Exchange:
    """One request on one client connection, and the writes of its answer."""

    __slots__ = ("body", "cancel", "conn", "head", "relay", "request_id", "started")

    def __init__(self, conn: ExchangeOwner, head: RequestHead, body: RequestBody) -> None:
        self.conn = conn
        self.head = head
        self.body = body
        rid = head.index.get(b"x-request-id")
        # next_request_id(), written out: one call less for every request.
        self.request_id = rid if rid else _ID_FORMAT % next(_id_counter)
        self.started = False  # a byte of the answer went to the client
        # The replica connection relaying into this exchange (pauses with the client).
        self.relay: Relay | None = None
        # Set by the handler while it works on the exchange: what stops that work
        # when the client goes away (a task's cancel, or the relay's abandon).
        self.cancel: Callable[[], object] | None = None

    @property
    def http10(self) -> bool:
        return self.head.version == "1.0"

    def replica_congested(self) -> None:
        """The replica connection the body goes to is full: stop reading the client."""
        self.conn.pause_body(PAUSE_UPSTREAM)

    def replica_drained(self) -> None:
        """It took what was written: read the client again."""
        self.conn.resume_body(PAUSE_UPSTREAM)

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
        """The handler is done with this exchange: the connection serves the next request."""
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
