"""Where one more replica stops buying attainment worth its GPU-hours: pure.

Sizing finds the fewest replicas that meet the goal over the replayed
history (:mod:`scaler.policy.slo.sizing`). That count is not always worth
buying: where a tail of prompts no replica prefills in time keeps the goal
out of reach, every replica up to the ceiling still buys a little, and where
rare large bursts set it, a fleet a third larger barely helps the rest of
the time. :func:`recent_knee` stops earlier, where the next replica stops
paying for itself.

Main decision, the price of a replica is relative on both sides: the fleet
grows from ``n`` to ``m`` replicas while the requests it meets grow by at
least ``KNEE x (1 - goal) x (m - n) / n`` of those ``n`` meet. A replica that
adds a quarter to the bill must meet 2.5 % more requests at a 99 % goal,
25 % at a 90 % one (a goal that allows more misses buys fewer replicas for
them). Relative, because the battery judges a count against the fixed
fleets around it, and because the same rule must hold at 3 replicas and at
20: a fleet of 20 meets, per replica added, a twentieth of what a fleet of 3
does. Judged over the last few cold starts (``_KNEE_COLD_STARTS``): the
replay's reach is for the bursts it has seen, but a level that has just
risen must move the count within a few cold starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from scaler.policy.slo.fleet_replay import FleetReplay
from scaler.policy.slo.replay import Step

__all__ = ["KNEE", "KneeWindow", "knee", "knee_window", "recent_knee"]

#: See the module docstring: at a 99 % goal a replica that adds a quarter to the
#: bill must meet 2.5 % more requests.
KNEE = 10.0
# The knee judges the load of the last few cold starts, and at least this long.
_KNEE_COLD_STARTS = 5.0
_MIN_KNEE_WINDOW_S = 300.0
# How many replicas ahead knee looks for a step worth its cost (a burst that
# only a few more replicas serve at all).
_KNEE_LOOKAHEAD = 3


class KneeWindow(NamedTuple):
    """The stretch :func:`recent_knee` judges, in a series."""

    first: int  # its first interval
    servable: float  # its requests a fleet can serve in time
    load: float  # its work per second (replicas)


def knee_window(series: Sequence[Step], cold_start_s: float) -> KneeWindow:
    """The last ``_KNEE_COLD_STARTS`` cold starts of ``series`` (at least
    ``_MIN_KNEE_WINDOW_S``)."""
    window_s = max(_MIN_KNEE_WINDOW_S, _KNEE_COLD_STARTS * cold_start_s)
    first, spent = len(series), 0.0
    while first > 0 and spent < window_s:
        first -= 1
        spent += series[first].dt
    recent = series[first:]
    servable = sum(step.requests for step in recent)
    load = sum(step.prefill + step.decode * step.dt for step in recent) / max(1e-9, spent)
    return KneeWindow(first, servable, load)


def recent_knee(
    replay: FleetReplay,
    window: KneeWindow,
    *,
    attainment: float,
    cap: int,
) -> int:
    """:func:`knee` over the requests of ``window`` (:func:`knee_window`: the last few
    cold starts and the cold start ahead) in ``replay``'s series, up to ``cap``."""
    first, servable, load = window
    if servable <= 0:
        return 1
    known: dict[int, float] = {}

    def met(n: int) -> float:
        if n not in known:
            known[n] = servable - replay.late_between(n, first)
        return known[n]

    least = max(1, min(cap, math.ceil(load)))
    threshold = KNEE * (1.0 - attainment)

    def worth(n: int) -> bool:
        """The n-th replica meets enough more than n - 1 do (module docstring)."""
        below = met(n - 1)
        return below <= 0 or (met(n) - below) / below >= threshold / (n - 1)

    # Each replica buys less than the one before (the queue's convexity), so the
    # last one worth its cost is found by bisection, and knee then looks past it
    # for a cliff (a burst only a few more replicas serve at all).
    lo, hi = least, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if worth(mid):
            lo = mid
        else:
            hi = mid - 1
    return knee(met, lo, cap, threshold)


def knee(met: Callable[[int], float], start: int, cap: int, threshold: float) -> int:
    """Where one more replica stops buying attainment worth its GPU-hours.

    From ``start`` replicas the fleet grows to ``m`` (up to ``cap``, looking
    :data:`_KNEE_LOOKAHEAD` ahead) while the requests ``met(m)`` meets grow by at
    least ``threshold`` times as large a share as the fleet's GPU-hours do: a
    replica that adds a fifth to the bill must add ``threshold / 5`` to the
    requests met. Relative on both sides, so the rule is the same for a fleet of
    3 and one of 20."""
    n, met_n = start, met(start)
    while n < cap:
        grow_to = None
        for m in range(n + 1, min(cap, n + _KNEE_LOOKAHEAD) + 1):
            gain = math.inf if met_n <= 0 else (met(m) - met_n) / met_n
            if gain >= threshold * (m - n) / n:
                grow_to = m
        if grow_to is None:
            break
        n, met_n = grow_to, met(grow_to)
    return n
