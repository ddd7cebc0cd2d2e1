"""The activator in a world: a request takes a ready replica, or is held until one has room.

What runs here is the product's own code, not a copy: the balancing is
``activator.balancing.least_loaded.pick`` (least in flight by power of two
choices) over the serving replicas, or the :class:`~simulator.world.plugins.Balancer`
the config's ``balancer`` builds (prefix-aware routing:
:mod:`simulator.prefix_routing`); the hold has the activator's defaults
(``groundwork.rules.routing_keys``: at most ``max-buffered`` requests held,
each for at most ``cold-start-timeout``) and is the Gate's own queue
(``groundwork.fair_hold_queue``).

Main decision: **a request takes a ready replica at once only when nobody
is waiting** and one has room; otherwise it is held, and ready replicas
release the held by class, then across tenants in turns weighted by tokens
(in arrival order when the trace has neither field). At ``max-buffered`` a
newcomer sheds the lowest class held (failure ``shed``) or is refused
(``buffer-full``). A request held while no replica was ready counts its
wait as a cold-start wait.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from activator.balancing.least_loaded import pick
from groundwork.fair_hold_queue import FairHoldQueue
from simulator.traces import TraceRequest
from simulator.world.agenda import Agenda
from simulator.world.config import WorldConfig
from simulator.world.fleet import Fleet, Replica
from simulator.world.requests import Requests

__all__ = ["Hold"]


class Hold:
    """The held requests, the pick of a replica, and the cold-start waits."""

    def __init__(
        self,
        config: WorldConfig,
        *,
        agenda: Agenda,
        requests: Requests,
        fleet: Fleet,
        send: Callable[[int, Replica], None],
    ) -> None:
        self._config = config
        self._agenda = agenda
        self._requests = requests
        self._fleet = fleet
        self._send = send
        self._rng = random.Random(config.seed)
        self._balancer = config.balancer(self._rng) if config.balancer is not None else None
        self._queue: FairHoldQueue[int] = FairHoldQueue()
        self._cold: set[int] = set()  # held while no replica was ready
        self.cold_waits: list[float] = []

    def __len__(self) -> int:
        """Requests held now."""
        return len(self._queue)

    def admit(self, i: int, r: TraceRequest) -> bool:
        """Request ``i`` has arrived: sent to a replica, held, or refused; whether it is held."""
        queue = self._queue
        if not queue:
            replica = self._pick(i)
            if replica is not None:
                self._send(i, replica)
                return False
        if len(queue) >= self._config.max_buffered:
            shed = queue.shed_for(r.priority, r.tenant)
            if shed is None:
                self._requests.fail(i, "buffer-full")
                return False
            self._cold.discard(shed)
            self._requests.fail(shed, "shed")
        # Weighted by the tokens the request may use, as the activator does.
        queue.hold(i, self._agenda.now, r.priority, r.tenant, r.prompt_tokens + r.output_tokens)
        if self._fleet.ready_count == 0:
            self._cold.add(i)
        return True

    def _pick(self, i: int) -> Replica | None:
        serving = self._fleet.serving()
        if not serving:
            return None
        limit = self._config.container_concurrency
        if self._balancer is not None:
            return self._balancer.pick(self._requests.live[i], serving, limit)
        return pick(serving, limit, self._rng)

    def dispatch(self) -> None:
        """Release the held to the replicas with room, in the queue's order."""
        now = self._agenda.now
        for i, since, replica in self._queue.hand_out(self._pick):
            if i in self._cold:
                self._cold.discard(i)
                self.cold_waits.append(now - since)
            self._send(i, replica)

    def expire(self) -> None:
        """Fail the held past the cold-start timeout."""
        for i in self._queue.expire(self._config.cold_start_timeout_s, self._agenda.now):
            self._cold.discard(i)
            self._requests.fail(i, "cold-start-timeout")
