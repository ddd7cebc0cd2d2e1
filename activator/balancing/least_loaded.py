"""Pick a replica among the ready ones: plain functions over load trackers.

Least-in-flight is the policy (docs/architecture.md). With two or more candidates it is
done as *power of two choices*: sample two distinct replicas at random and
take the less loaded. That keeps the pick O(1) with many replicas, breaks ties
at random (so a quiet model's sequential requests do not all land on the
first replica), and avoids the herd effect of every activator piling onto the
single least-loaded replica it saw last. When both sampled replicas are at
their ``container-concurrency`` limit a linear scan finds the least loaded
one that still has room, so a free slot is never left unused.

``limit`` is the per-replica in-flight bound this activator may use (0: no
bound); the caller passes its share of ``container-concurrency``.

The functions take the random source as an argument: tests pass a seeded
``random.Random`` and check exact picks with no network.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, TypeVar

__all__ = ["Loaded", "least_in_flight", "pick", "power_of_two_choices"]


class Loaded(Protocol):
    @property
    def in_flight(self) -> int: ...


T = TypeVar("T", bound=Loaded)


def least_in_flight(trackers: Sequence[T], limit: int) -> T | None:
    """The least loaded replica with room (first wins a tie), or None."""
    best: T | None = None
    for t in trackers:
        if (limit <= 0 or t.in_flight < limit) and (best is None or t.in_flight < best.in_flight):
            best = t
    return best


def power_of_two_choices(trackers: Sequence[T], limit: int, rng: random.Random) -> T | None:
    """Two random distinct candidates, the less loaded wins; scan if both are full."""
    n = len(trackers)
    i = rng.randrange(n)
    j = rng.randrange(n - 1)
    if j >= i:
        j += 1
    a, b = trackers[i], trackers[j]
    chosen = b if b.in_flight < a.in_flight else a
    if limit <= 0 or chosen.in_flight < limit:
        return chosen
    return least_in_flight(trackers, limit)


def pick(trackers: Sequence[T], limit: int, rng: random.Random) -> T | None:
    """The policy: one candidate is checked directly, more go to power of two choices."""
    if not trackers:
        return None
    if len(trackers) == 1:
        only = trackers[0]
        return only if limit <= 0 or only.in_flight < limit else None
    return power_of_two_choices(trackers, limit, rng)
