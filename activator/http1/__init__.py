"""The activator's HTTP/1.1 data path: asyncio protocols, the llhttp parser, a pooled client.

- :mod:`activator.http1.heads`: request heads as parsed, and the heads the
  proxy writes (all header hygiene);
- :mod:`activator.http1.server`: the client connection (parsing, request
  bodies, keep-alive, pipelining, flow control);
- :mod:`activator.http1.upstream`: pooled keep-alive connections to replicas
  that relay answers as bytes;
- :mod:`activator.http1.answer`: a replica's answer, parsed: where it ends
  and what of it the client gets.

What a request means (routing, holding, statuses) is not here: that is
:mod:`activator.proxy`, whose ``Proxy.handle`` each connection hands every
parsed :class:`Exchange` to, and :mod:`activator.forwarding`.
"""

from activator.http1.heads import RequestHead
from activator.http1.server import (
    REJECTIONS,
    BadFraming,
    BodyStalled,
    BodyTooLarge,
    ClientConnection,
    Connections,
    Exchange,
    FastHandler,
    Handler,
    RequestBody,
    RequestRejected,
    ServerLimits,
    ShutAnswer,
)
from activator.http1.upstream import (
    NotSent,
    OnDone,
    ReplicaFailed,
    UpstreamConnection,
    UpstreamPool,
    forward,
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
    "FastHandler",
    "Handler",
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
    "forward",
    "send",
]
