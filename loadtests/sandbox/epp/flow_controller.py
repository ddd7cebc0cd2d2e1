"""The fake endpoint picker's one owner of what changes: held requests, endpoints, load.

:class:`FlowController` is what the HTTP side calls, once per request
(``enqueue_and_wait``, then ``done`` when the answer ended), and what the
pool watch tells about endpoints (``set_view``). It holds requests in a
:class:`~loadtests.sandbox.epp.waiting_room.WaitingRoom` (the rules of the
router's flow control), sends them as endpoints get room
(:mod:`~loadtests.sandbox.epp.picking`), and writes the router's series
(:class:`~loadtests.sandbox.epp.router_metrics.RouterMetrics`) as each
request enters, leaves and is answered.

When things happen:

- a request is dispatched as soon as it can be: on arrival, when an
  endpoint appears, and when an answer ends and frees room;
- held requests are shed by a sweep every ``sweep_interval_s`` (the
  router's ``ExpiryCleanupInterval``, 1 s), so a request outlives its budget
  by up to one interval, as with the router;
- a client that disconnects while held leaves at once
  (``EvictedContextCancelled``).

Main decision: every outcome resolves the request's future exactly once,
from the event loop; the HTTP side answers from the outcome and never sees
the queue.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from loadtests.sandbox.epp.picking import InFlight, pick, saturation
from loadtests.sandbox.epp.pool_view import Endpoint, PoolView
from loadtests.sandbox.epp.router_metrics import RequestLabels, RouterMetrics
from loadtests.sandbox.epp.waiting_room import FlowControlLimits, Ticket, WaitingRoom
from scaler.signals.epp_metrics import DISPATCHED, EVICTED_CONTEXT_CANCELLED, EVICTED_OTHER

__all__ = ["Admission", "FlowController"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Admission:
    """How a request left flow control: its outcome, and the endpoint when dispatched."""

    outcome: str
    endpoint: Endpoint | None
    labels: RequestLabels
    tokens: int
    waited_s: float


@dataclass(slots=True)
class _Held:
    labels: RequestLabels
    tokens: int
    future: asyncio.Future[tuple[str, Endpoint | None]]


class FlowController:
    """Held requests, the pool's endpoints and their load, for one InferencePool."""

    def __init__(
        self,
        *,
        pool: str,
        limits: FlowControlLimits,
        metrics: RouterMetrics,
        max_concurrency: int = 100,
        sweep_interval_s: float = 1.0,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if not sweep_interval_s > 0:
            raise ValueError(f"sweep_interval_s must be > 0, got {sweep_interval_s}")
        self.pool = pool
        self.metrics = metrics
        self.max_concurrency = max_concurrency
        self.sweep_interval_s = sweep_interval_s
        self._loop = asyncio.get_running_loop()
        self._room: WaitingRoom[_Held] = WaitingRoom(limits, now=self._loop.time())
        self._endpoints: tuple[Endpoint, ...] = ()
        self._loads: dict[str, InFlight] = {}
        self.view = PoolView("", pool, problem="the pool has not been read yet")
        self._publish()

    @property
    def held(self) -> int:
        return self._room.held()

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return self._endpoints

    async def run(self) -> None:
        """Shed what has waited out its budget, every ``sweep_interval_s``, until cancelled."""
        while True:
            await asyncio.sleep(self.sweep_interval_s)
            self.sweep()

    def sweep(self) -> None:
        for ticket, outcome in self._room.expire(self._loop.time()):
            self._resolve(ticket, outcome, None)

    def shut_down(self) -> None:
        """Shed every request still held (``EvictedOther``), as the router does on shutdown."""
        for ticket in self._room.drain():
            self._resolve(ticket, EVICTED_OTHER, None)

    def set_view(self, view: PoolView) -> None:
        """The pool's endpoints changed (or its object did)."""
        if view.problem and view.problem != self.view.problem:
            log.warning("InferencePool %s/%s: %s", view.namespace, view.name, view.problem)
        self.view = view
        self._endpoints = view.endpoints
        self._room.set_pool_empty(not view.endpoints, self._loop.time())
        self._dispatch()

    async def enqueue_and_wait(
        self, labels: RequestLabels, *, size_bytes: int, tokens: int
    ) -> Admission:
        """Hold the request until it is dispatched or shed; its admission."""
        arrived = self._loop.time()
        self.metrics.entered(labels, size_bytes)
        future: asyncio.Future[tuple[str, Endpoint | None]] = self._loop.create_future()
        held = _Held(labels, tokens, future)
        ticket = self._room.admit(
            held,
            priority=labels.priority,
            fairness=labels.fairness_id,
            size_bytes=size_bytes,
            now=arrived,
        )
        if isinstance(ticket, str):
            self.metrics.left(labels, size_bytes, outcome=ticket, waited_s=0.0)
            return Admission(ticket, None, labels, tokens, 0.0)
        self._dispatch()
        try:
            outcome, endpoint = await future
        except asyncio.CancelledError:
            if self._room.leave(ticket):
                self._left(ticket, EVICTED_CONTEXT_CANCELLED)
            elif future.done() and not future.cancelled() and future.result()[1] is not None:
                # Dispatched in the same turn the client left: give the room back.
                self.done(Admission(DISPATCHED, future.result()[1], labels, tokens, 0.0))
            raise
        return Admission(outcome, endpoint, labels, tokens, self._loop.time() - arrived)

    def done(self, admission: Admission) -> None:
        """A dispatched request's answer ended (or failed): its room is free again."""
        endpoint = admission.endpoint
        if endpoint is None:
            return
        load = self._loads.get(endpoint.name)
        if load is not None:
            load.requests -= 1
            load.tokens -= admission.tokens
            if load.requests <= 0:
                del self._loads[endpoint.name]
        self.metrics.answered(admission.labels, endpoint.name, endpoint.namespace, admission.tokens)
        self._dispatch()

    # --- inside ------------------------------------------------------------------------

    def _room_for(self, ticket: Ticket[_Held]) -> Endpoint | None:
        return pick(self._endpoints, self._loads, max_concurrency=self.max_concurrency)

    def _dispatch(self) -> None:
        for ticket, endpoint in self._room.dispatch(self._room_for):
            load = self._loads.setdefault(endpoint.name, InFlight())
            load.requests += 1
            load.tokens += ticket.payload.tokens
            labels = ticket.payload.labels
            self.metrics.sent(labels, endpoint.name, endpoint.namespace, ticket.payload.tokens)
            self._resolve(ticket, DISPATCHED, endpoint)
        self._publish()

    def _resolve(self, ticket: Ticket[_Held], outcome: str, endpoint: Endpoint | None) -> None:
        self._left(ticket, outcome)
        if not ticket.payload.future.done():
            ticket.payload.future.set_result((outcome, endpoint))

    def _left(self, ticket: Ticket[_Held], outcome: str) -> None:
        waited = self._loop.time() - ticket.arrived_at
        self.metrics.left(
            ticket.payload.labels, ticket.size_bytes, outcome=outcome, waited_s=waited
        )

    def _publish(self) -> None:
        self.metrics.pool(
            self.pool,
            ready_endpoints=len(self._endpoints),
            saturation=saturation(
                self._endpoints, self._loads, max_concurrency=self.max_concurrency
            ),
        )
