"""What SLO-first scaling remembers of one target between decisions.

Its own module, apart from :mod:`scaler.policy.slo`, because the policy's
state (:class:`~scaler.policy.decide.PolicyState`) carries it, and the SLO
decision builds on :mod:`scaler.policy.decide`: kept here, the state depends
on neither decision and the two modules do not import each other.

It also keeps the attainment *measured* (:class:`MeasuredAttainment`): the
servers' first tokens within the objective over the last ten minutes (the
sizing's own horizon, :data:`~scaler.policy.slo_load.LOOKBACK_S`), shown
beside the goal in ``/v1/targets`` and ``tidal status``. It is a report, not
an input: sizing acts on the load, which moves a cold start before the
attainment does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scaler.policy.api import LoadTotals, Observation
from scaler.policy.keep_warm import IdleGaps
from scaler.policy.slo_load import (
    LOOKBACK_S,
    Capacity,
    LoadHistory,
    Sizing,
    learn_capacity,
    with_interval,
)

__all__ = ["MeasuredAttainment", "SloState"]


@dataclass(frozen=True, slots=True)
class MeasuredAttainment:
    """First tokens within the objective and first tokens counted, per decision
    interval ``(end_s, within, counted)``, over the last :data:`LOOKBACK_S` seconds."""

    intervals: tuple[tuple[float, float, float], ...] = ()

    def add(self, end_s: float, within: float, counted: float) -> MeasuredAttainment:
        kept = tuple(i for i in self.intervals if i[0] > end_s - LOOKBACK_S)
        if counted <= 0:
            return self if kept == self.intervals else MeasuredAttainment(kept)
        return MeasuredAttainment((*kept, (end_s, max(0.0, min(within, counted)), counted)))

    @property
    def counted(self) -> float:
        return sum(i[2] for i in self.intervals)

    @property
    def share(self) -> float | None:
        """The share within the objective (None: nothing measured in the window)."""
        counted = self.counted
        return sum(i[1] for i in self.intervals) / counted if counted > 0 else None


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
    measured: MeasuredAttainment = field(default_factory=MeasuredAttainment)

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
        measured = self.measured.add(
            now,
            totals.ttft_within_slo - before.ttft_within_slo,
            totals.ttft_counted - before.ttft_counted,
        )
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
            measured=measured,
            totals=totals,
            at_s=now,
            ready=observation.ready_replicas,
        )
