"""The fake endpoint picker's flow control: who waits, who goes next, who is shed and why.

The rules of llm-d's router (``pkg/epp/flowcontrol``, llm-d/llm-d-router at
ebab687927f5), in the small:

1. **Admission.** A request joins the band of its priority unless that band
   already holds ``band_max_requests`` requests or ``band_max_bytes`` bytes
   (the router's defaults: 5000 and 1 GB). Refused, it leaves at once with
   ``RejectedNoEndpoints`` when the pool has no endpoint (answered 503: no
   capacity exists) or ``RejectedCapacity`` when it has some (429:
   backpressure).
2. **Order.** The highest band goes first; inside a band the fairness
   flows take turns (:mod:`groundwork.fair_hold_queue`, the activator's own
   hold queue). The request whose turn it is goes when the caller finds it
   room; when there is none, nothing behind it goes either (the router's
   dispatch cycle stops at a saturated item rather than let lower priority
   overtake).
3. **The budget.** A held request is shed once it has waited the budget of
   the regime in force: ``no_endpoint_request_ttl_s`` while the pool has no
   endpoint (outcome ``EvictedNoEndpoints``: the pool's scale-from-zero
   waiting room ran out), ``default_request_ttl_s`` while it has some
   (``EvictedTTL``). Time is charged from the later of the request's arrival
   and the last change of regime, so a request that an endpoint's arrival
   makes dispatchable is never shed at that instant; a budget of 0 disables
   shedding in its regime.
4. **Leaving.** A request whose client went away is dropped where it waits
   (``EvictedContextCancelled``) and no longer counts against its band; on
   shutdown every request still held leaves (``EvictedOther``).

Main decision: no clock, no event loop, no I/O: times are passed in, and
what is held (a future, in the proxy) and what room means (an endpoint
under its concurrency limit) are the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from groundwork.fair_hold_queue import FairHoldQueue
from scaler.signals.epp_metrics import (
    EVICTED_NO_ENDPOINTS,
    EVICTED_TTL,
    REJECTED_CAPACITY,
    REJECTED_NO_ENDPOINTS,
)

__all__ = ["FlowControlLimits", "Ticket", "WaitingRoom"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class FlowControlLimits:
    """The router's flow-control knobs (``flowControl:`` in its config), its defaults."""

    default_request_ttl_s: float = 60.0
    no_endpoint_request_ttl_s: float = 60.0
    band_max_requests: int = 5000
    band_max_bytes: int = 1_000_000_000

    def __post_init__(self) -> None:
        for name in ("default_request_ttl_s", "no_endpoint_request_ttl_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0 (0 disables shedding), got {value}")
        for name in ("band_max_requests", "band_max_bytes"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")


@dataclass(eq=False, slots=True)
class Ticket(Generic[T]):
    """One held request: what it carries for the caller, and what flow control reads."""

    payload: T
    priority: int
    fairness: str
    size_bytes: int
    arrived_at: float
    waiting: bool = True


@dataclass(slots=True)
class _Band:
    requests: int = 0
    bytes: int = 0


@dataclass(slots=True)
class _Regime:
    empty: bool
    since: float


class WaitingRoom(Generic[T]):
    """Held requests of one pool (see the module docstring for the rules)."""

    def __init__(self, limits: FlowControlLimits, *, now: float) -> None:
        self.limits = limits
        self._queue: FairHoldQueue[Ticket[T]] = FairHoldQueue(alive=lambda t: t.waiting)
        self._bands: dict[int, _Band] = {}
        # Until told otherwise the pool has no endpoint: requests wait.
        self._regime = _Regime(empty=True, since=now)

    @property
    def pool_empty(self) -> bool:
        return self._regime.empty

    def held(self) -> int:
        return sum(band.requests for band in self._bands.values())

    def set_pool_empty(self, empty: bool, now: float) -> None:
        """The pool gained its first endpoint or lost its last one (rule 3's regime)."""
        if empty != self._regime.empty:
            self._regime = _Regime(empty, now)

    def admit(
        self, payload: T, *, priority: int, fairness: str, size_bytes: int, now: float
    ) -> Ticket[T] | str:
        """Hold a request, or say why not (the refusal's outcome; rule 1)."""
        band = self._bands.setdefault(priority, _Band())
        if (
            band.requests + 1 > self.limits.band_max_requests
            or band.bytes + size_bytes > self.limits.band_max_bytes
        ):
            return REJECTED_NO_ENDPOINTS if self._regime.empty else REJECTED_CAPACITY
        ticket = Ticket(payload, priority, fairness, size_bytes, now)
        band.requests += 1
        band.bytes += size_bytes
        self._queue.hold(ticket, now, priority, fairness)
        return ticket

    def _release(self, ticket: Ticket[T]) -> None:
        ticket.waiting = False
        band = self._bands[ticket.priority]
        band.requests -= 1
        band.bytes -= ticket.size_bytes

    def leave(self, ticket: Ticket[T]) -> bool:
        """The client went away (rule 4); False when the ticket no longer waited."""
        if not ticket.waiting:
            return False
        self._release(ticket)
        return True

    def dispatch(self, room: Callable[[Ticket[T]], R | None]) -> Iterator[tuple[Ticket[T], R]]:
        """The requests that go now, in order (rule 2), each with the room ``room`` found.

        ``room`` is asked again only after the caller has taken the previous
        request's room (the loop body runs in between), so it sees it taken.
        """
        for ticket, _since, found in self._queue.hand_out(room):
            self._release(ticket)
            yield ticket, found

    def drain(self) -> list[Ticket[T]]:
        """Remove and return every request still waiting, oldest first (shutting down)."""
        drained = self._queue.drain()
        for ticket in drained:
            self._release(ticket)
        return drained

    def expire(self, now: float) -> list[tuple[Ticket[T], str]]:
        """Shed what has waited out its budget (rule 3), oldest first, with the outcome."""
        empty, since = self._regime.empty, self._regime.since
        budget = (
            self.limits.no_endpoint_request_ttl_s if empty else self.limits.default_request_ttl_s
        )
        if budget <= 0 or now - since < budget:
            return []
        outcome = EVICTED_NO_ENDPOINTS if empty else EVICTED_TTL
        shed = self._queue.expire(budget, now)
        for ticket in shed:
            self._release(ticket)
        return [(ticket, outcome) for ticket in shed]
