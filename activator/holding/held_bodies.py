"""A cap on the request-body bytes one activator keeps while requests are held.

A body read to route by ``model`` (up to ``max_model_body_bytes``, 8 MiB by
default) stays in memory for as long as its request is held, and the
per-target ``max_buffered`` bounds only the count of held requests: with
many targets, many large bodies could be held at once. :class:`HeldBodies`
bounds their sum over the whole activator (per worker). The proxy takes a
body's bytes just before the request starts to wait and gives them back
when it stops waiting (handed an endpoint, failed or cancelled); a body that
would pass the cap is refused at once (503 ``held_bodies_full``), so memory
stays bounded however the load is spread over targets.
"""

from __future__ import annotations

from activator.holding.hold_errors import HoldError

__all__ = ["HeldBodies", "HeldBodiesFull"]


class HeldBodiesFull(HoldError):
    """Holding this body would pass the activator's cap on held body bytes."""


class HeldBodies:
    """Bytes of held request bodies, against a cap (0: no cap)."""

    def __init__(self, cap_bytes: int) -> None:
        if cap_bytes < 0:
            raise ValueError(f"the held body cap must be >= 0 bytes (0: no cap), got {cap_bytes}")
        self.cap_bytes = cap_bytes
        self.held_bytes = 0

    def take(self, size: int) -> bool:
        """Count ``size`` more bytes as held; False (and nothing counted) past the cap."""
        if self.cap_bytes and self.held_bytes + size > self.cap_bytes:
            return False
        self.held_bytes += size
        return True

    def give_back(self, size: int) -> None:
        self.held_bytes -= size
