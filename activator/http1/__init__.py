"""The activator's HTTP/1.1 data path: asyncio protocols, the llhttp parser, a pooled client.

Two sides, and the seam between them:

- the **client side** (the HTTP layer): :mod:`~activator.http1.client_connection`
  (one Protocol per client connection: serving order, flow control, closing),
  :mod:`~activator.http1.request_reader` (llhttp's callbacks: heads within
  the limits, framing checks), :mod:`~activator.http1.request_body` (a body
  buffered, read whole or piped), :mod:`~activator.http1.exchange` (one
  request and the writes of its answer), :mod:`~activator.http1.connections`
  (a server's connections: idle sweep, drain, shutdown),
  :mod:`~activator.http1.reading` (limits, reasons reading pauses) and
  :mod:`~activator.http1.rejections` (what is refused as it is parsed);
- the **replica side**: :mod:`~activator.http1.upstream` (pooled keep-alive
  connections to replicas that relay answers as bytes) and
  :mod:`~activator.http1.answer` (a replica's answer, parsed);
- :mod:`~activator.http1.relay`: the interfaces the two sides see each other
  through; neither imports the other. :mod:`~activator.http1.heads` (heads
  as parsed, and all header hygiene) serves both.

What a request means (routing, holding, statuses) is not here: that is
:mod:`activator.proxy`, whose ``Proxy.handle`` each connection hands every
parsed :class:`Exchange` to, and :mod:`activator.forwarding`, which joins an
exchange to a replica connection (:func:`send`).
"""

from activator.http1.client_connection import ClientConnection, Handle
from activator.http1.connections import Connections, ShutAnswer
from activator.http1.exchange import Exchange
from activator.http1.heads import RequestHead
from activator.http1.reading import ServerLimits
from activator.http1.rejections import (
    REJECTIONS,
    BadFraming,
    BodyStalled,
    BodyTooLarge,
    RequestRejected,
)
from activator.http1.request_body import RequestBody
from activator.http1.upstream import (
    NotSent,
    OnDone,
    ReplicaFailed,
    UpstreamConnection,
    UpstreamPool,
    send,
)

__all__ = [
    "REJECTIONS",
    "BadFraming",
    "BodyStalled",
    "BodyTooLarge",
    "ClientConnection",
    "Connections",
    "Exchange",
    "Handle",
    "NotSent",
    "OnDone",
    "ReplicaFailed",
    "RequestBody",
    "RequestHead",
    "RequestRejected",
    "ServerLimits",
    "ShutAnswer",
    "UpstreamConnection",
    "UpstreamPool",
    "send",
]
