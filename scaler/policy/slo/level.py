"""The load's level and how well the history knows it: pure.

Sizing replays the history as the forecast of the load ahead
(:mod:`scaler.policy.slo.sizing`). Two questions about that history are
statistical, and answered here on its stretches of ``STRETCH_S`` seconds
(the work each brought, in replica-seconds):

- **is it settled?** (:func:`is_settled`): is the history long enough to know
  the load's mean within a quarter, twice in three? Until it is, a count may
  rise but not fall: a warm fleet taken over, or the first minutes of a
  model, say nothing yet of the bursts to come. Poisson traffic at a steady
  rate settles within a cold start; bursts a minute apart with quiet
  between (a coefficient of variation of 3) take the replay's whole reach;
- **has the load fallen?** (:func:`fallen_level`): is the last few cold
  starts' mean below the mean before by more than chance (two standard
  errors of so short a stretch, from the spread before it)? Then the replay
  is the history scaled to the level now (:func:`releveled`), its bursts
  keeping their shape, so that a day's decline lowers the count within a
  few cold starts instead of the replay's whole reach. A rise needs no such
  test: the replay's late requests show it at once.

Main decision, chance is judged on the history's own spread: bursts a minute
apart over quiet move a stretch's mean far more than a Poisson load's
decline does, so the same test lets a diurnal count follow its day and keeps
a bursty model's count through its quiet minutes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import itemgetter

from scaler.policy.slo.replay import Step

__all__ = ["STRETCH_S", "fallen_level", "is_settled", "releveled", "stretches"]

#: The stretches the history's statistics are taken over.
STRETCH_S = 10.0
# Settled: the stretches estimate their mean within this share (see is_settled).
_SETTLE_PRECISION = 0.25
# A level fallen: judged over the last five cold starts (a replica let go comes
# back a cold start late), and at most to this share.
_LEVEL_DOWN_COLD_STARTS = 5.0
_LEVEL_LEAST = 0.1

#: One interval as sizing builds it: ``(seconds, prefill work, decode work,
#: servable requests, arrivals)``.
Raw = tuple[float, float, float, float, float]


def stretches(raw: Sequence[Raw]) -> list[float]:
    """The work (replica-seconds) of each stretch of ``STRETCH_S``, oldest first."""
    out: list[float] = []
    work = spent = 0.0
    for dt, prefill, decode, _, _ in raw:
        work += prefill + decode
        spent += dt
        if spent >= STRETCH_S:
            out.append(work)
            work = spent = 0.0
    return out


def fallen_level(buckets: Sequence[float], cold_start_s: float) -> tuple[float, float]:
    """Whether the load has fallen to a new level by more than chance, and how far:
    ``(recent mean over the mean before, the recent stretch's seconds)``, or
    ``(1, 0)``. Over the last ``_LEVEL_DOWN_COLD_STARTS`` cold starts (a replica
    let go comes back a cold start late), against two standard errors of so short
    a stretch from the spread of the stretches before it: bursts a minute apart
    over quiet are noise that no such stretch clears, a day's decline is not. (A
    rise needs no such test: the replay's late requests show it at once.)"""
    k = max(3, math.ceil(_LEVEL_DOWN_COLD_STARTS * cold_start_s / STRETCH_S))
    before = buckets[:-k]
    if len(before) < 3:
        return 1.0, 0.0
    mean = sum(before) / len(before)
    if mean <= 0:
        return 1.0, 0.0
    sd = math.sqrt(sum((b - mean) ** 2 for b in before) / (len(before) - 1))
    recent = sum(buckets[-k:]) / k
    if recent >= mean - 2.0 * sd / math.sqrt(k):
        return 1.0, 0.0
    return max(_LEVEL_LEAST, recent / mean), k * STRETCH_S


def releveled(
    raw: Sequence[Raw],
    level: float,
    recent_s: float,
    hopeless: float,
) -> tuple[list[Raw], float, float]:
    """``raw`` with every interval before the last ``recent_s`` seconds scaled by
    ``level`` (work, requests, arrivals), and the requests and hopeless ones again."""
    out: list[Raw] = []
    elapsed = 0.0
    for dt, prefill, decode, servable, arrivals in reversed(raw):
        f = 1.0 if elapsed < recent_s else level
        elapsed += dt
        out.append((dt, prefill * f, decode * f, servable * f, arrivals * f))
    out.reverse()
    requests = sum(i[4] for i in out)
    servable = sum(i[3] for i in out)
    return out, requests, max(0.0, requests - servable) if hopeless > 0 else 0.0


def is_settled(series: Sequence[Step], cold_start_s: float, lookback_s: float) -> bool:
    """Whether the history knows the load: its span holds the ``(2 CV / 0.25)^2``
    stretches of ``STRETCH_S`` that estimate their mean work within a quarter
    (twice in three), at least a cold start and at most the replay's reach. Poisson
    traffic at a steady rate settles within a cold start; bursts a minute apart
    with quiet between (a coefficient of variation of 3) take the whole reach."""
    span: float = sum(map(itemgetter(0), series))  # each step's dt, oldest first
    if span >= lookback_s:
        return True
    if span < cold_start_s:
        return False
    buckets: list[float] = []
    work = spent = 0.0
    for step in series:
        work += step.prefill + step.decode * step.dt
        spent += step.dt
        if spent >= STRETCH_S:
            buckets.append(work)
            work = spent = 0.0
    if len(buckets) < 2:
        return False
    mean = sum(buckets) / len(buckets)
    if mean <= 0:
        return False
    variance = sum((b - mean) ** 2 for b in buckets) / (len(buckets) - 1)
    needed = (2.0 / _SETTLE_PRECISION) ** 2 * variance / mean**2
    return len(buckets) >= needed
