"""What SLO-first scaling remembers of one target between decisions.

Its own module, apart from :mod:`scaler.policy.slo`, because the policy's
state (:class:`~scaler.policy.decide.PolicyState`) carries it, and the SLO
decision builds on :mod:`scaler.policy.decide`: kept here, the state depends
on neither decision and the two modules do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scaler.policy.api import LoadTotals, Observation
from scaler.policy.keep_warm import IdleGaps
from scaler.policy.slo_load import Capacity, LoadHistory, Sizing, learn_capacity, with_interval

__all__ = ["SloState"]


@dataclass(frozen=True, slots=True)
class SloState:
    """What SLO-first scaling remembers of one target between decisions."""

    gaps: IdleGaps
    history: LoadHistory = field(default_factory=LoadHistory)
    capacity: Capacity = field(default_factory=Capacity)
    totals: LoadTotals | None = None  # the counters at the last decision
    at_s: float | None = None  # the last decision's time
    ready: int = 0  # ready replicas at the last decision
    sizing: Sizing | None = None  # the last sizing (also for /v1/targets)

    @classmethod
    def start(cls, now: float) -> SloState:
        return cls(gaps=IdleGaps(started_s=now))

    def learn(self, observation: Observation, *, busy: bool, now: float) -> SloState:
        """Step 1: the history, the capacity and the idle gaps, with this observation."""
        gaps = self.gaps.observe(busy=busy, now=now)
        totals = observation.load
        if totals is None:
            return replace(self, gaps=gaps, at_s=now, ready=observation.ready_replicas)
        # The hub's counters start at zero when it starts tracking the target,
        # as this state does: the first reading's counts belong to its interval.
        before = LoadTotals() if self.totals is None else self.totals
        start = self.gaps.started_s if self.at_s is None else self.at_s
        history = with_interval(self.history, before, totals, start, now)
        capacity = learn_capacity(
            self.capacity,
            self.totals,
            totals,
            interval_s=now - start,
            ready_before=self.ready,
            ready=observation.ready_replicas,
        )
        return replace(
            self,
            gaps=gaps,
            history=history,
            capacity=capacity,
            totals=totals,
            at_s=now,
            ready=observation.ready_replicas,
        )
