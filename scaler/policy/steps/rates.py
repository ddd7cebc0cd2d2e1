"""Step 2 of the decision: Knative's rate limits, on ``max(ready, 1)``.

At most ``ceil(up_rate x max(ready, 1))`` (the ceiling guarantees a step of
at least one replica when the rate is close to 1), but never forcing a
decrease below the current scale while pods are still starting; at least
``ceil(max(ready, 1) / down_rate)`` (Knative rounds this one down), capped
at ``ready - 1`` so that a rate close to 1 still lets the scale step down,
and at the current scale so that pods still terminating (counted ready)
never push it back up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaler.policy.api import ScalingConfig
from scaler.policy.steps.rounding import EPSILON, ceil_replicas

__all__ = ["Rates", "limit", "rate_limits"]


@dataclass(frozen=True, slots=True)
class Rates:
    max_up: int  # the most replicas this decision may ask for
    min_down: int  # the fewest (above zero) it may ask for


def rate_limits(config: ScalingConfig, current: int, ready: int) -> Rates:
    """Knative's rate limits on ``max(ready, 1)``; a rate never forces a step the other
    way (ready can still count pods a scale-down is removing, so the floor is capped at
    the current scale)."""
    base = max(ready, 1)
    max_up = max(current, math.ceil(config.max_scale_up_rate * base - EPSILON))
    min_down = min(ceil_replicas(base / config.max_scale_down_rate), base - 1, current)
    return Rates(max_up=max_up, min_down=min_down)


def limit(want: int, rates: Rates) -> int:
    """``want`` within the rates."""
    return min(max(want, rates.min_down), rates.max_up)
