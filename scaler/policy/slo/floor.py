"""The warm floor from recent peaks, fading: pure, time passed in.

A count the sizing wanted is not dropped the moment it stops wanting it. Each
replica it no longer wants is kept for a break-even time and the floor then
steps down one replica per break-even time, so a peak fades instead of being
cut at once when the replay's lookback forgets it.

Main decision, the break-even time (ski rental): letting a replica go saves
one GPU-second a second; wanting it back costs a cold start of GPU time
before it serves, and the requests that arrive meanwhile wait. Keeping it
idle until the idle time has cost as much as a cold start, ``C``, and then
letting go is within twice the cost of the clairvoyant choice whatever the
next request's time (the deterministic ski-rental bound); so each step of the
floor waits one cold start.
"""

from __future__ import annotations

import math

from scaler.policy.windows import MaxHold

__all__ = ["fading_floor", "floor_window_s"]


def floor_window_s(cold_start_s: float, peak: int) -> float:
    """How long a peak of ``peak`` replicas lifts the floor at all."""
    return max(1.0, cold_start_s) * (peak + 1)


def fading_floor(hold: MaxHold, now: float, *, cold_start_s: float) -> int | None:
    """The floor at ``now`` from the counts ``hold`` recorded (``None``: none): each
    recorded ``(t, n)`` holds ``n`` for a cold start after ``t``, then one fewer
    per further cold start."""
    step = max(1.0, cold_start_s)
    best: int | None = None
    for recorded_s, value in hold.entries:
        age = now - recorded_s
        if age < 0:
            continue
        lifted = value - max(0, math.floor(age / step))
        if lifted > 0 and (best is None or lifted > best):
            best = lifted
    return best
