"""The seam between the client side and the replica side of the data path.

The replica side (:mod:`activator.http1.upstream`, :mod:`activator.http1.answer`)
relays a replica's answer into the client's exchange, and the client side
(:mod:`activator.http1.client_connection`) slows the relay when its client
reads slowly. Neither imports the other: each sees the other only through
the interface here, and the proxy, which holds both, joins them
(:func:`activator.http1.upstream.send`). So the replica side never turns
back into the HTTP layer (an import contract in ``pyproject.toml`` keeps
it so):

- :class:`ClientSide`: what the replica side needs of an exchange: the
  request's head and body, the request id, and the writes of the answer;
- :class:`Relay`: what the client side needs of the connection relaying
  into it: pause and resume.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from activator.http1.heads import RequestHead

__all__ = ["ClientBody", "ClientFlags", "ClientSide", "Relay"]


class Relay(Protocol):
    """What relays a replica's answer into an exchange: paused while the client is slow."""

    def pause_relay(self) -> None: ...

    def resume_relay(self) -> None: ...


class ClientBody(Protocol):
    """The client's request body, as the replica side sends it."""

    def set_limit(self, limit: int) -> None: ...

    def pipe(
        self, sink: Callable[[bytes], None], on_end: Callable[[BaseException | None], None]
    ) -> None: ...

    def keep_no_more(self) -> None: ...


class ClientFlags(Protocol):
    """The client connection, as far as the replica side may know it."""

    # The connection closes after this answer (the replica side may also decide so:
    # a close-delimited answer, an HTTP/1.0 client that cannot read chunks).
    must_close: bool


class ClientSide(Protocol):
    """One client exchange, as the replica side relays an answer into it."""

    head: RequestHead
    request_id: bytes
    started: bool
    relay: Relay | None

    @property
    def body(self) -> ClientBody: ...

    @property
    def conn(self) -> ClientFlags: ...

    def write(self, data: bytes) -> None:
        """Bytes of the answer, to the client now."""

    def cut(self) -> None:
        """End the client connection: an answer begun cannot be completed."""

    def replica_congested(self) -> None:
        """The replica connection the body goes to is full: stop reading the client."""

    def replica_drained(self) -> None:
        """It took what was written: read the client again."""
