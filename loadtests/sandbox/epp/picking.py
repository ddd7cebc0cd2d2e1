"""Which endpoint a request goes to, and how saturated the pool is: in-flight load, counted here.

The fake endpoint picker counts what it has sent each endpoint and not yet
seen answered (requests, and their estimated prompt tokens), as llm-d's
in-flight load producer does, and decides with it as the router's
concurrency saturation detector (``concurrency-detector``, requests mode)
and its load scorers do:

- an endpoint has room while it has fewer than ``max_concurrency``
  requests in flight (the detector's per-endpoint limit, no headroom);
- of those with room, the one with the fewest requests in flight goes
  first, then the fewest tokens in flight, then the name (so a test can
  tell which);
- the pool's saturation is its requests in flight over its endpoints'
  combined limit; a pool with no endpoint reads 1.0, as the router's does
  (its gating set point).

Main decision: no scraping of the model servers. The router's default
detector reads their queue depth and KV cache instead; counting in-flight
requests needs no metrics path and reacts at once, which is what a test of
holding and forwarding needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loadtests.sandbox.epp.pool_view import Endpoint

__all__ = ["InFlight", "pick", "saturation"]


@dataclass(slots=True)
class InFlight:
    """Requests and estimated prompt tokens in flight to one endpoint."""

    requests: int = 0
    tokens: int = 0


def pick(
    endpoints: Sequence[Endpoint], loads: dict[str, InFlight], *, max_concurrency: int
) -> Endpoint | None:
    """The endpoint the next request goes to, or None when none has room."""
    best: tuple[int, int, str] | None = None
    chosen: Endpoint | None = None
    for endpoint in endpoints:
        load = loads.get(endpoint.name) or InFlight()
        if load.requests >= max_concurrency:
            continue
        key = (load.requests, load.tokens, endpoint.name)
        if best is None or key < best:
            best, chosen = key, endpoint
    return chosen


def saturation(
    endpoints: Sequence[Endpoint], loads: dict[str, InFlight], *, max_concurrency: int
) -> float:
    """Requests in flight over the pool's capacity (1.0 for a pool with no endpoint)."""
    if not endpoints:
        return 1.0
    in_flight = sum((loads.get(e.name) or InFlight()).requests for e in endpoints)
    return in_flight / (len(endpoints) * max_concurrency)
