"""Keep a model up or let it go to zero, on expected cost: pure, time passed in.

The prices: staying up costs one GPU-second a second. Going to zero costs
nothing until the next request, which then finds no replica and waits a
cold start ``C``: it and the requests that arrive during the cold start
miss the objective (``C`` is longer than any objective worth scaling to zero
for). A miss is priced at the GPU time of ``1 / (1 - A)`` cold starts,
``C / (1 - A)`` GPU-seconds, for an attainment goal ``A``: the goal lets one
request in ``1 / (1 - A)`` miss, and a cold start's GPU time is what a model
pays to keep one from missing. With ``A`` = 99 % and ``C`` = 60 s a miss is
worth 6,000 GPU-seconds.

Two forms of the rule, one price:

- :func:`keep_alive_odds`, what SLO-first scaling asks at every decision, looks
  one cold start ahead: staying up for the next ``C`` seconds costs ``C``
  GPU-seconds and avoids, with probability ``P(a request within the next
  cold start | idle so far)``, ``misses`` misses, so stay up while
  ``P x misses >= 1 - A``. For memoryless (Poisson) traffic of rate ``r``:
  ``r x C x misses >= 1 - A``, so a model invoked less than about once in
  ``100 x C`` goes to zero as soon as it is idle and busier ones stay up;
  for bursty traffic, whose chance of a request falls with idle time, it
  lets go once the idle time is past what the history says a gap lasts.
  ``P`` comes from the model's own idle gaps (the last :data:`KEPT_GAPS`):
  of the gaps longer than the idle time so far, the share that ended within
  the next ``C``, with one pseudo-gap as a prior (a request within ``C``
  with probability ``C / (C + max(t, mean gap))``, the hazard of a wait
  that grows with the wait so far, so a model seen once an hour ago, or idle
  far longer than any gap it has shown, tends to zero rather than to warm).
  Misses are one plus the requests the model's recent rate brings within ``C``.
- :func:`best_keep_alive`, what ``adaptive`` grace computes once per idle
  stretch from its histogram, looks over the whole gap: the keep-alive ``T``
  of least expected cost (warm until the request or ``T``, plus the misses
  of the gaps longer than ``T``). It agrees with the first form on Poisson
  traffic and also covers a periodic gap longer than ``C`` whose miss costs
  more than the wait (the first form, looking one cold start ahead, would
  let it go; ``adaptive`` pre-warms such patterns anyway).

Why not a percentile of idle times (the rule ``adaptive`` grace used): a
keep-alive at a high percentile of a model's idle times is longest for the
*rarest* models, where a warm minute is least likely to be used.

On the 40-model synthetic pool (6 h, 60 s cold starts) the first form
reached 99.0 % with 91 GPU-hours; scoring each decision with the second
form and the same prior kept more models warm, 99.5 % with 140.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "KEPT_GAPS",
    "IdleGaps",
    "KeepAliveOdds",
    "best_keep_alive",
    "keep_alive_odds",
    "miss_price_s",
]

#: Idle gaps remembered per model: about a day of a model used once every
#: few minutes, a few minutes of a busy one.
KEPT_GAPS = 256


def miss_price_s(*, cold_start_s: float, attainment: float) -> float:
    """GPU-seconds one missed request is worth (see the module docstring)."""
    return cold_start_s / max(1e-6, 1.0 - attainment)


def best_keep_alive(
    gaps: Iterable[tuple[float, float]], *, since_s: float, miss_cost_s: float
) -> tuple[float, float]:
    """The keep-alive ``T >= since_s`` of least expected cost, and that cost per idle
    stretch, over ``gaps`` (``(length_s, weight)``; those not longer than
    ``since_s`` are ignored). ``T == since_s`` means: go to zero now."""
    longer = sorted((g, w) for g, w in gaps if g > since_s and w > 0)
    total = sum(w for _, w in longer)
    if total <= 0:
        return since_s, 0.0
    best_t, best_cost = since_s, miss_cost_s  # go now: every remaining gap ends in a miss
    covered_time = covered_weight = 0.0
    for g, w in longer:
        # Keep alive until g: gaps up to g are covered (warm for their length),
        # longer ones cost g - since_s warm and then a miss.
        covered_time += w * (g - since_s)
        covered_weight += w
        rest = total - covered_weight
        cost = (covered_time + rest * (g - since_s + miss_cost_s)) / total
        if cost < best_cost:
            best_t, best_cost = g, cost
    return best_t, best_cost


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
        """P(the current idle gap ends within ``horizon_s``): of the gaps longer than
        the idle time so far, the share that ended within the horizon, with the prior
        as one more gap (module docstring)."""
        t = self.idle_for_s(now)
        longer = [g for g in self.gaps if g > t]
        ended = sum(1 for g in longer if g <= t + horizon_s)
        mean_gap = max(0.0, now - self.started_s) / (len(self.gaps) + 1)
        scale = max(t, mean_gap)
        prior = 1.0 if horizon_s + scale <= 0 else horizon_s / (horizon_s + scale)
        return (ended + prior) / (len(longer) + 1)


@dataclass(frozen=True, slots=True)
class KeepAliveOdds:
    keep: bool
    p_request: float  # P(a request within the next cold start | idle so far)
    misses_per_cold_start: float
    allowed: float  # 1 - attainment

    @property
    def why(self) -> str:
        relation = ">=" if self.keep else "<"
        return (
            f"P(request within a cold start) {100 * self.p_request:.1f} % x "
            f"{self.misses_per_cold_start:.1f} misses {relation} {100 * self.allowed:.2g} % allowed"
        )


def keep_alive_odds(
    gaps: IdleGaps,
    *,
    cold_start_s: float,
    request_rate: float,
    attainment: float,
    now: float,
) -> KeepAliveOdds:
    """Whether the one-cold-start-ahead rule keeps the last replica warm at ``now``."""
    p = gaps.p_request_within(cold_start_s, now)
    misses = 1.0 + max(0.0, request_rate) * cold_start_s
    allowed = 1.0 - attainment
    keep = math.isfinite(p) and p * misses >= allowed
    return KeepAliveOdds(keep, p, misses, allowed)
