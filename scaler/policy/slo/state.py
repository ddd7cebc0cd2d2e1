"""What SLO-first scaling remembers of one target between decisions.

Its own module, apart from :mod:`scaler.policy.slo.decide`, because the policy's
state (:class:`~scaler.policy.decide.PolicyState`) carries it, and the SLO
decision builds on :mod:`scaler.policy.decide`: kept here, the state depends
on neither decision and the two modules do not import each other.

It also keeps the attainment *measured* (:class:`MeasuredAttainment`): the
servers' first tokens within the objective over the last ten minutes
(:data:`MEASURED_WINDOW_S`), shown beside the goal in ``/v1/targets`` and
``tidal status``, and compared with what the replay predicted for the
replicas that served them (:meth:`SloState.corrected`): where the servers
measure clearly less while the model says the goal is met, the model is
wrong about them and the work it sizes for is raised (``headroom``). Sizing
itself acts on the load, which moves a cold start before the attainment
does: the measurement corrects the model, it does not replace it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from scaler.policy.api import LoadTotals, Observation
from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.slo.load import (
    Capacity,
    LoadHistory,
    learn_capacity,
    with_interval,
)
from scaler.policy.slo.phases import PhaseFit, learn_phases
from scaler.policy.slo.sizing import Sizing

# Closing the loop: the measured attainment over the last few cold starts
# (_RECENT_COLD_STARTS, at least _MIN_RECENT_S: time for replicas asked for to
# arrive and show), once it counts _MIN_COUNTED first tokens, under what the
# replay of the same window at the replicas there predicts, by more than
# chance, _MIN_SHORT_REQUESTS requests and _SLACK_SHORT of them, while that
# prediction meets what is attainable (the goal less the share no replica can
# serve in time, within _SLACK) and the goal is within reach, raises the
# headroom by _RAISE, at most once per such window and up to _MAX_HEADROOM.
# Misses the replay predicts too (a burst larger than the replicas there) say
# nothing against the model, nor do misses while the last ten minutes meet the
# goal. At or above the goal, the headroom fades back
# toward 1 over _FADE_S.
_RECENT_COLD_STARTS = 3.0
_MIN_RECENT_S = 120.0
_MIN_COUNTED = 50.0
_SLACK = 0.005
_SLACK_SHORT = 0.01
_MIN_SHORT_REQUESTS = 5.0
_RAISE = 1.2
_MAX_HEADROOM = 3.0
_FADE_S = 600.0
# The prefill rate sizing uses is at most this many times the fastest prefill a
# request has shown (see SloState.prefill_per_s).
_FASTEST_AT_MOST = 1.25
#: The attainment measured is reported over this window (ten minutes).
MEASURED_WINDOW_S = 600.0

__all__ = ["MEASURED_WINDOW_S", "MeasuredAttainment", "SloState", "recent_window_s"]


def _short(measured: float, predicted: float, counted: float) -> bool:
    """The servers measured clearly fewer first tokens in time than predicted: by
    more than chance (three binomial deviations), more than _MIN_SHORT_REQUESTS
    requests and more than _SLACK of them (a burst's few surprises are noise)."""
    missed = (predicted - measured) * counted
    q = min(max(1.0 - predicted, 1.0 / counted), 1.0)
    noise = 3.0 * math.sqrt(counted * q * (1.0 - q))
    return missed > max(_MIN_SHORT_REQUESTS, _SLACK_SHORT * counted, noise)


def recent_window_s(cold_start_s: float) -> float:
    """The window the headroom loop compares measured and predicted attainment over."""
    return max(_MIN_RECENT_S, _RECENT_COLD_STARTS * cold_start_s)


@dataclass(frozen=True, slots=True)
class MeasuredAttainment:
    """First tokens within the objective and first tokens counted, per decision
    interval ``(end_s, within, counted)``, over the last :data:`MEASURED_WINDOW_S` seconds."""

    intervals: tuple[tuple[float, float, float], ...] = ()

    def add(self, end_s: float, within: float, counted: float) -> MeasuredAttainment:
        kept = tuple(i for i in self.intervals if i[0] > end_s - MEASURED_WINDOW_S)
        if counted <= 0:
            return self if kept == self.intervals else MeasuredAttainment(kept)
        return MeasuredAttainment((*kept, (end_s, max(0.0, min(within, counted)), counted)))

    @property
    def counted(self) -> float:
        return sum(i[2] for i in self.intervals)

    def since(self, start_s: float) -> tuple[float, float]:
        """First tokens within the objective and counted, in intervals ending after
        ``start_s``."""
        within = counted = 0.0
        for end_s, w, c in reversed(self.intervals):
            if end_s <= start_s:
                break
            within += w
            counted += c
        return within, counted

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
    fit: PhaseFit = field(default_factory=PhaseFit)  # prefill and decode, learned
    headroom: float = 1.0  # work multiplier the measured attainment asked for
    raised_at_s: float | None = None  # when the headroom was last raised
    ready_since_s: float | None = None  # since when the ready count has not changed

    @property
    def prefill_per_s(self) -> float:
        """The prefill rate sizing uses: the step model's once it is trusted (no lower
        than the saturated rate), else the prompt-only capacity (its prior, the
        fastest prefill seen, saturation)."""
        fitted = self.fit.prefill_tokens_per_s
        if not self.fit.trusted or fitted is None:
            rate = self.capacity.tokens_per_s
        elif self.capacity.trusted:
            # A replica prefills at least what it was seen to prefill saturated: the
            # fit reads low where "busy" intervals hold idle gaps (bursty traffic).
            rate = max(fitted, self.capacity.tokens_per_s)
        else:
            rate = fitted
        # Not much more than one request was seen to prefill: a long prompt alone
        # on a replica shows nearly all it does, and counters that land a prompt's
        # tokens in the interval of its first token read lumpy, some intervals far
        # too fast. (Not a floor: a prefix cache makes a request look faster than
        # any replica prefills.)
        fastest = self.fastest_prefill_per_s
        return rate if fastest <= 0 else min(rate, _FASTEST_AT_MOST * fastest)

    @property
    def fastest_prefill_per_s(self) -> float:
        """The fastest prefill a request has shown (0: none yet)."""
        return 0.0 if self.totals is None else self.totals.best_prefill_tokens_per_s

    def corrected(
        self,
        sizing: Sizing,
        *,
        goal: float,
        now: float,
        interval_s: float,
        cold_start_s: float,
    ) -> SloState:
        """The headroom after comparing the measured attainment with what ``sizing``
        promised (see the constants above), ``interval_s`` after the last decision."""
        recent_s = recent_window_s(cold_start_s)
        within, counted = self.measured.since(now - recent_s)
        if counted < _MIN_COUNTED:
            return self
        measured = within / counted
        predicted = sizing.predicted
        # The model says the goal (or all that is attainable) is met at the
        # replicas there, and the servers measure less: the model is wrong.
        # Where the goal is out of reach the count is the one of least expected
        # cost, and misses behind prompts no replica can serve in time are the
        # tail's, not the model's: nothing to correct.
        attainable = goal - sizing.hopeless_share - _SLACK
        says_met = sizing.reachable and predicted is not None and predicted >= attainable
        # And the goal itself is missed over the whole measured window: a model
        # that meets it over ten minutes is not wrong because a burst surprised it.
        long_share = self.measured.share
        says_met = says_met and long_share is not None and long_share < attainable
        # The replay predicts at the replicas ready now: only a window they
        # served throughout is theirs to answer for.
        steady = self.ready_since_s is not None and now - self.ready_since_s >= recent_s
        waited = steady and (self.raised_at_s is None or now - self.raised_at_s >= recent_s)
        if says_met and predicted is not None and waited and _short(measured, predicted, counted):
            return replace(
                self, headroom=min(_MAX_HEADROOM, self.headroom * _RAISE), raised_at_s=now
            )
        if measured >= goal and self.headroom > 1.0:
            fade = math.exp(-max(0.0, interval_s) / _FADE_S)
            return replace(self, headroom=1.0 + (self.headroom - 1.0) * fade)
        return self

    @classmethod
    def start(cls, now: float) -> SloState:
        return cls(gaps=IdleGaps(started_s=now))

    def learn(self, observation: Observation, *, busy: bool, now: float) -> SloState:
        """Step 1: the history, the capacity and the idle gaps, with this observation."""
        gaps = self.gaps.observe(busy=busy, now=now)
        ready_since = self.ready_since_s
        if ready_since is None or observation.ready_replicas != self.ready:
            ready_since = now
        totals = observation.load
        if totals is None:
            return replace(
                self,
                gaps=gaps,
                at_s=now,
                ready=observation.ready_replicas,
                ready_since_s=ready_since,
            )
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
        fit = learn_phases(
            self.fit,
            self.totals,
            totals,
            interval_s=now - start,
            ready_before=self.ready,
            ready=observation.ready_replicas,
            prefill_per_s=capacity.tokens_per_s,
        )
        return replace(
            self,
            gaps=gaps,
            history=history,
            capacity=capacity,
            fit=fit,
            measured=measured,
            totals=totals,
            at_s=now,
            ready=observation.ready_replicas,
            ready_since_s=ready_since,
        )
