"""Stay warm or go to zero, on expected cost: pure, time passed in.

The rule: keep the last replica while

    P(a request within the next cold start | idle so far) x misses per cold start
        >= 1 - attainment

and let it go otherwise. In cost terms: staying warm for one more cold start
``C`` costs ``C`` GPU-seconds; going to zero risks, with that probability, a
cold start whose waiting requests all miss the objective (``C`` is longer
than any objective worth scaling to zero for). A miss is priced at the GPU
time of ``1 / (1 - attainment)`` cold starts, ``C / (1 - A)`` GPU-seconds:
the attainment goal says one request in ``1 / (1 - A)`` may miss, and a
cold start's GPU time is what a model spends to keep one from missing. With
``A`` = 99 %, a model stays warm while it expects at least one miss in a
hundred cold starts' worth of time, so a model invoked less than about once
in ``100 x C`` (under an hour per hour at ``C`` = 60 s) goes to zero as soon as
it is idle, and busier ones stay warm.

Why not a percentile of idle times (the rule ``adaptive`` grace used): a
keep-alive at a high percentile of a model's idle times is longest for the
*rarest* models, where a warm minute is least likely to be used. Under
Poisson traffic the chance of a request in the next minute does not depend
on how long the model has been idle; the expected-cost rule keeps the busy
models warm and lets the rare ones go at once, and for bursty traffic, whose
chance does fall with idle time, it lets go once the idle time is past what
the history says a gap lasts.

The probability comes from the model's own idle gaps (the last
:data:`KEPT_GAPS`): of the gaps that lasted longer than the current idle
time, the share that ended within the next cold start. One pseudo-gap adds
a prior: a request within ``C`` with probability ``C / (C + max(t,
mean gap))``, the hazard of a process whose remaining wait grows with the
wait so far, so a model seen once an hour ago, or idle far longer than any
gap it has shown, tends to zero rather than to warm. Misses per cold start
are one plus the requests the model's recent rate brings within ``C``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["KEPT_GAPS", "IdleGaps", "WarmOdds", "warm_odds"]

#: Idle gaps remembered per model: about a day of a model used once every
#: few minutes, a few minutes of a busy one.
KEPT_GAPS = 256


@dataclass(frozen=True, slots=True)
class IdleGaps:
    """A model's completed idle gaps (oldest first) and the current one."""

    started_s: float
    gaps: tuple[float, ...] = ()
    idle_since_s: float | None = None

    def observe(self, *, busy: bool, now: float) -> IdleGaps:
        if busy:
            if self.idle_since_s is None:
                return self
            gap = now - self.idle_since_s
            gaps = (*self.gaps, gap)[-KEPT_GAPS:] if gap > 0 else self.gaps
            return IdleGaps(self.started_s, gaps, None)
        if self.idle_since_s is None:
            return IdleGaps(self.started_s, self.gaps, now)
        return self

    def idle_for_s(self, now: float) -> float:
        return 0.0 if self.idle_since_s is None else max(0.0, now - self.idle_since_s)

    def p_request_within(self, horizon_s: float, now: float) -> float:
        """P(the current idle gap ends within ``horizon_s``), see the module docstring."""
        t = self.idle_for_s(now)
        longer = [g for g in self.gaps if g > t]
        ended = sum(1 for g in longer if g <= t + horizon_s)
        mean_gap = max(0.0, now - self.started_s) / (len(self.gaps) + 1)
        scale = max(t, mean_gap)
        prior = 1.0 if horizon_s + scale <= 0 else horizon_s / (horizon_s + scale)
        return (ended + prior) / (len(longer) + 1)


@dataclass(frozen=True, slots=True)
class WarmOdds:
    keep: bool
    p_request: float
    misses_per_cold_start: float
    allowed: float  # 1 - attainment

    @property
    def why(self) -> str:
        relation = ">=" if self.keep else "<"
        return (
            f"P(request within a cold start) {100 * self.p_request:.1f} % x "
            f"{self.misses_per_cold_start:.1f} misses {relation} {100 * self.allowed:.2g} % allowed"
        )


def warm_odds(
    gaps: IdleGaps,
    *,
    cold_start_s: float,
    request_rate: float,
    attainment: float,
    now: float,
) -> WarmOdds:
    """Whether the expected-cost rule keeps the last replica warm at ``now``."""
    p = gaps.p_request_within(cold_start_s, now)
    misses = 1.0 + max(0.0, request_rate) * cold_start_s
    allowed = 1.0 - attainment
    keep = math.isfinite(p) and p * misses >= allowed
    return WarmOdds(keep, p, misses, allowed)
