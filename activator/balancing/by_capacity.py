"""Balancing across GPU shapes: by each replica's capacity, a long prompt where it fits in time.

A model on several GPU shapes (docs/shapes.md) has replicas that are not
alike: a whole H100 takes more in flight than a ``1g.10gb`` slice, and a
prompt a slice would take seconds to prefill is one an H100 serves within
the objective. The scaler says, per shape, how much one replica takes
(``weight``: its learned prefill or decode rate, whichever binds) and the
longest prompt it serves in time (``reach``: what it prefills within the
objective, and short of its ``--max-model-len``; None: any). :func:`pick`:

1. **Fits first**: the candidates are the replicas whose reach covers the
   prompt. When none does, those of the longest reach: a prompt no shape
   serves in time goes to the fastest there is, never to a slower one.
2. **By capacity**: among the candidates, power of two choices on
   ``in_flight / weight`` (what the replica carries, against what it
   takes), so a replica with three times the capacity holds about three
   times the requests; an idle replica is picked before a busy one,
   however small, so a new shape's replica is measured even at low load;
   the per-replica ``limit`` (``container-concurrency``, this activator's
   share) still bounds each, and when both sampled are full a scan finds
   the least loaded with room.

With one shape (all weights equal, no reach) this is least in flight by
power of two choices, as :mod:`~activator.balancing.least_loaded` picks.

Pure, with the random source passed in, so the simulator runs it on its
replicas and tests check exact picks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

__all__ = ["Shaped", "fitting", "pick"]


class Shaped(Protocol):
    @property
    def in_flight(self) -> int: ...


T = TypeVar("T", bound=Shaped)


def _load(replica: Shaped, weight: float) -> float:
    return replica.in_flight / weight if weight > 0 else float("inf")


def fitting(
    replicas: Sequence[T], reach: Callable[[T], float | None], prompt_tokens: int
) -> list[T]:
    """The replicas that serve the prompt in time, else those of the longest reach."""
    reaches = [reach(r) for r in replicas]
    fits = [
        r for r, got in zip(replicas, reaches, strict=True) if got is None or got >= prompt_tokens
    ]
    if fits:
        return fits
    longest = max(got for got in reaches if got is not None)
    return [r for r, got in zip(replicas, reaches, strict=True) if got == longest]


def pick(
    replicas: Sequence[T],
    *,
    weight: Callable[[T], float],
    reach: Callable[[T], float | None],
    prompt_tokens: int,
    limit: int,
    rng: random.Random,
) -> T | None:
    """The replica for a prompt of ``prompt_tokens`` (see the module docstring); None
    when every candidate is at ``limit`` (0: no limit)."""
    if not replicas:
        return None
    candidates = fitting(replicas, reach, prompt_tokens)

    def room(r: T) -> bool:
        return limit <= 0 or r.in_flight < limit

    if len(candidates) > 1:
        i = rng.randrange(len(candidates))
        j = rng.randrange(len(candidates) - 1)
        j += j >= i
        a, b = candidates[i], candidates[j]
        chosen = b if _load(b, weight(b)) < _load(a, weight(a)) else a
        if room(chosen):
            return chosen
    elif room(candidates[0]):
        return candidates[0]
    open_ = [r for r in candidates if room(r)]
    return min(open_, key=lambda r: _load(r, weight(r)), default=None)
