"""Moving a model between shapes with no gap: the old replicas stay until the new are Ready (pure).

When the mix (:mod:`scaler.policy.shapes.mix`) moves replicas from one shape
to another (slices are cheaper for the load now; a shape was capped), the
new replicas take a cold start to serve. Scaling the old shape down at once
would leave the model short for that long, so :func:`hand_over` keeps Ready
replicas of the shrinking shapes, the cheapest cover first, until the
replicas the mix keeps or adds that are Ready cover what the model served
before (or all the mix asks for, when that is less). Once the new replicas
are Ready it keeps nothing more, and the old ones go.

The cover of a replica of shape ``s`` is ``1 / need[s]`` (its shape's
need: the replicas of it alone that meet the demand), so a mix of shapes
is compared with another in one unit. A shape with no need (the model is
going to zero) covers nothing and is never kept.

Main decision, stateless: what to keep is read from the Ready counts of
each decision, as spot's cover reads Ready spot replicas
(:mod:`scaler.policy.placement.fallback`), so a replica that never becomes
Ready (its shape capped, then dropped from the mix) is not waited for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["cover", "hand_over"]


def cover(counts: Mapping[str, int], needs: Mapping[str, int]) -> float:
    """The share of the demand ``counts`` replicas meet (shapes without a need: none)."""
    return sum(n / needs[name] for name, n in counts.items() if needs.get(name, 0) > 0)


def hand_over(
    target: Mapping[str, int],
    *,
    current: Mapping[str, int],
    ready: Mapping[str, int],
    needs: Mapping[str, int],
    prices: Mapping[str, float],
) -> dict[str, int]:
    """The replicas each shape's Deployment asks for: ``target`` (the mix), plus the
    Ready replicas of shrinking shapes that still cover for the new (module docstring).
    ``current``: what each Deployment asks for now; ``ready``: its Ready replicas."""
    asks = {name: n for name, n in target.items() if n > 0}
    serving = {name: min(ready.get(name, 0), n) for name, n in asks.items()}
    goal = min(cover(asks, needs), cover(ready, needs))
    missing = goal - cover(serving, needs)
    shrinking = [
        name
        for name, n in current.items()
        if needs.get(name, 0) > 0 and min(n, ready.get(name, 0)) > target.get(name, 0)
    ]
    # Keep the cheapest cover first: price per replica times the replicas needed.
    for name in sorted(shrinking, key=lambda s: (prices.get(s, 0.0) * needs[s], s)):
        if missing <= 1e-9:
            break
        spare = min(current[name], ready.get(name, 0)) - target.get(name, 0)
        keep = min(spare, math.ceil(missing * needs[name] - 1e-9))
        asks[name] = asks.get(name, 0) + keep
        missing -= keep / needs[name]
    return asks
