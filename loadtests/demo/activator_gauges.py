"""Read how many requests an activator holds and has in flight, from its ``/metrics``.

The demo shows requests being held through a cold start; the activator
already says so on its admin port (docs/architecture.md and docs/metrics.md), so this reads
``tidal_activator_requests_buffered`` and ``tidal_activator_requests_in_flight``
for one target rather than inferring anything on the client side. Parsing
is pure (:func:`parse_gauges`); :func:`read_gauges` adds one HTTP GET and
turns a failure into ``None``, so a demo whose activator blips shows a gap
instead of stopping.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["HeldRequests", "parse_gauges", "read_gauges"]

BUFFERED = "tidal_activator_requests_buffered"
IN_FLIGHT = "tidal_activator_requests_in_flight"


@dataclass(frozen=True, slots=True)
class HeldRequests:
    buffered: int  # waiting for a ready replica
    in_flight: int  # sent to a replica, not finished


def parse_gauges(text: str, target: str) -> HeldRequests:
    """The two gauges for ``target`` (``namespace/name``); 0 when the target is not listed yet."""
    found = {BUFFERED: 0.0, IN_FLIGHT: 0.0}
    for family in text_string_to_metric_families(text):
        if family.name not in found:
            continue
        for sample in family.samples:
            if sample.labels.get("target") == target:
                found[family.name] += sample.value
    return HeldRequests(buffered=int(found[BUFFERED]), in_flight=int(found[IN_FLIGHT]))


async def read_gauges(
    session: aiohttp.ClientSession, admin_url: str, target: str
) -> HeldRequests | None:
    """GET ``{admin_url}/metrics`` and parse it; None when it cannot be read."""
    try:
        async with session.get(f"{admin_url.rstrip('/')}/metrics") as response:
            if response.status != 200:
                return None
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError):
        return None
    try:
        return parse_gauges(text, target)
    except ValueError:  # not Prometheus text
        return None
