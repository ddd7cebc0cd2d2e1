"""What reading one client connection is bound by: its limits, and why reading pauses.

:class:`ServerLimits` is what one client may send (a line, a head, its
headers) and how long it may idle or take over a head or a body. A
connection stops reading its client for one of several reasons at once
(the ``PAUSE_*`` bits below) and reads again only when none is left: a body
buffered past what a held request may keep, a congested replica connection
the body goes to, a pipelined request waiting for the one before it, a
request after which nothing more is read.
"""

from __future__ import annotations

__all__ = ["PAUSE_BUFFER", "PAUSE_PIPELINED", "PAUSE_UPGRADE", "PAUSE_UPSTREAM", "ServerLimits"]

# Why reading a client connection is paused; it resumes when no reason is left.
PAUSE_BUFFER = 1  # a request body buffered past what a held one keeps (request_body)
PAUSE_UPSTREAM = 2  # the replica connection the body goes to is congested
PAUSE_PIPELINED = 4  # a pipelined request waits for the one before it
PAUSE_UPGRADE = 8  # an upgrade request: nothing after it is read


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
