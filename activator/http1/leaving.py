"""A client that leaves while its request is served: why its answer ends, and the grace.

A request is counted by what happened to its answer (:mod:`activator.forwarding`,
which asks this module when a client leaves).
When its client's connection goes while the request is held or relayed, the
reason is ``client_closed``; when the activator itself cancels what it still
serves as it shuts down, ``shutdown``: the client's connection is still
there then (:func:`leaving_reason`).

An answer whose client left after receiving part of it may be complete but
for its last bytes: benchmark clients close at ``data: [DONE]``, and that
close can reach the activator before the replica's chunked terminator.
:class:`EndGrace` lets such an answer run on, read and dropped, for
:data:`END_GRACE_S`; the forwarding counts it completed if it ends within
it, cut if not.
"""

from __future__ import annotations

from collections.abc import Callable

from activator.http1.exchange import Exchange
from activator.http1.upstream import UpstreamConnection

__all__ = ["END_GRACE_S", "EndGrace", "leaving_reason", "on_leaving"]

#: How long an answer whose client left may run on, unread, to end as completed.
#: Its end is usually a read or two behind the last chunk the client got
#: (microseconds on loopback, milliseconds across a node); a client that really
#: left mid-stream costs its replica at most this much more generation before
#: the connection is cut, which vLLM takes as an abort.
END_GRACE_S = 1.0


def leaving_reason(exchange: Exchange) -> str:
    """``client_closed`` when the client's connection is gone, else ``shutdown``."""
    return "client_closed" if exchange.conn.transport is None else "shutdown"


class EndGrace:
    """The grace an answer whose client left gets to end (module docstring)."""

    __slots__ = ("_timer",)

    def __init__(self, conn: UpstreamConnection, expired: Callable[[], None]) -> None:
        conn.resume_relay()  # nobody reads it now: read the replica to its end
        self._timer = conn.loop.call_later(END_GRACE_S, expired)

    def cancel(self) -> None:
        """The answer ended (or failed) within the grace."""
        self._timer.cancel()


def on_leaving(
    exchange: Exchange,
    conn: UpstreamConnection | None,
    *,
    cut: Callable[[str, str], None],
    expired: Callable[[], None],
) -> EndGrace | None:
    """What a request's client leaving (or the shutdown) does to its answer: one begun
    runs on for the grace (returned; ``expired`` when it ends first); anything else is
    cut at once (``cut(reason, detail)``)."""
    exchange.body.detach()
    if conn is not None and exchange.started and exchange.conn.transport is None:
        return EndGrace(conn, expired)
    cut(leaving_reason(exchange), "mid-answer" if exchange.started else "before the answer began")
    return None
