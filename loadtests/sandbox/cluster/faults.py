"""Fault injection state for the emulated API server.

Three faults, each for a while (times on the event loop's clock):

- **unavailable**: every request gets 503 ``ServiceUnavailable`` (with
  ``Retry-After``), or, with ``refuse_connections``, the listener is closed
  so new connections are refused and requests on open connections are cut;
- **slow**: every request waits ``latency_s`` before it is handled;
- **watch cut** (instant): open watch streams end, as when a real API server
  restarts; with ``compact`` the history is dropped too, so clients that
  resume from their last version get 410 Gone and must re-list.

The admin paths (``/_sandbox/...``) are exempt, so a fault can always be
lifted over HTTP. This module holds only the state and the decisions; the
server acts on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Faults"]


@dataclass(slots=True)
class Faults:
    unavailable_until: float = 0.0
    refuse_connections: bool = False
    latency_s: float = 0.0
    slow_until: float = 0.0

    def make_unavailable(self, *, now: float, duration_s: float, refuse: bool) -> None:
        if duration_s <= 0:
            raise ValueError(f"duration_s must be > 0, got {duration_s}")
        self.unavailable_until = now + duration_s
        self.refuse_connections = refuse

    def slow_down(self, *, now: float, latency_s: float, duration_s: float) -> None:
        if latency_s < 0 or duration_s <= 0:
            raise ValueError(
                f"latency_s must be >= 0 and duration_s > 0, got {latency_s} and {duration_s}"
            )
        self.latency_s = latency_s
        self.slow_until = now + duration_s

    def clear(self) -> None:
        self.unavailable_until = 0.0
        self.refuse_connections = False
        self.latency_s = 0.0
        self.slow_until = 0.0

    def unavailable(self, now: float) -> bool:
        return now < self.unavailable_until

    def delay_s(self, now: float) -> float:
        return self.latency_s if now < self.slow_until else 0.0

    def describe(self, now: float) -> dict[str, Any]:
        return {
            "unavailable_for_s": max(0.0, self.unavailable_until - now),
            "refuse_connections": self.refuse_connections and self.unavailable(now),
            "latency_s": self.delay_s(now),
            "slow_for_s": max(0.0, self.slow_until - now),
        }
