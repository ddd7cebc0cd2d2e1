"""Spot capacity in a world: which zones have it, when that changes, when a replica is interrupted.

:class:`~simulator.world.config.SpotModel` says what is modelled (a rate of
interruptions per replica-hour, a preemption trace, zones whose capacity
comes and goes); :class:`SpotMarket` draws it as the run goes and schedules
each zone's next change on the agenda. What a change does to the replicas
(a notice for those in a zone that lost its capacity, a node for those
pending when one comes back) is the fleet's (:mod:`simulator.world.fleet`).

Main decision: **every spot draw comes from one generator, in the order the
run asks for them**, seeded apart from the cold starts' and the balancer's,
so a change elsewhere in the world (another cold start, another pick) never
moves when spot capacity comes and goes.
"""

from __future__ import annotations

import random
from collections import deque

from simulator.world.agenda import MARKET, Agenda
from simulator.world.config import SpotModel

__all__ = ["SpotMarket"]


class SpotMarket:
    """The zones' spot capacity now, its next changes, and the draws of interruptions."""

    def __init__(self, model: SpotModel, *, seed: int, agenda: Agenda) -> None:
        self.model = model
        self._agenda = agenda
        self._rng = random.Random(seed + 2)
        self.available = [True] * model.zones  # per zone: does it have spot capacity now?
        self._trace = deque(sorted(model.times_s))  # the preemption trace's times to come

    def open(self) -> None:
        """Draw each zone's state at time 0 and schedule its first change."""
        if self.model.availability < 1:
            for zone in range(self.model.zones):
                self.available[zone] = self._rng.random() < self.model.availability
                self.schedule(zone)

    def schedule(self, zone: int) -> None:
        """Schedule ``zone``'s next change, an exponential stretch from now."""
        mean = self.model.mean_stretch_s(available=self.available[zone])
        self._agenda.push(self._agenda.now + self._rng.expovariate(1.0 / mean), MARKET, zone)

    def flip(self, zone: int) -> bool:
        """``zone``'s capacity changes: whether it has spot now."""
        self.available[zone] = not self.available[zone]
        return self.available[zone]

    def zone_for(self, spot_per_zone: list[int]) -> int | None:
        """The available zone with the fewest spot replicas (None: no zone has spot)."""
        open_zones = [z for z, ok in enumerate(self.available) if ok]
        return min(open_zones, key=lambda z: (spot_per_zone[z], z), default=None)

    def interruption_in_s(self) -> float | None:
        """Seconds until a spot replica starting now is interrupted (None: no rate)."""
        if self.model.rate_per_hour <= 0:
            return None
        return self._rng.expovariate(self.model.rate_per_hour) * 3600.0

    def trace_due(self) -> int:
        """How many of the preemption trace's notices are due by now (each taken once)."""
        due = 0
        while self._trace and self._trace[0] <= self._agenda.now:
            self._trace.popleft()
            due += 1
        return due
