"""How deep an idle model sleeps: level 1, level 2 or zero, on expected cost (pure).

Three rungs below awake, each cheaper to hold and slower to come back from:

    rung      holds                                    comes back in (Llama-3.1-8B)
    level 1   a device slice, its residue, the         a wake: 0.9 s (host-to-device copy)
              weights in the node's host memory
    level 2   a device slice and its residue           a wake: 2.2 s (reload from page cache)
    zero      nothing                                  a cold start: tens of seconds

The rule is the keep-alive rule of :mod:`scaler.policy.idle.keep_alive`,
one cold start ``C`` ahead, with each rung's way back in place of the cold
start. Over the next ``C``:

- holding a rung costs the share of a device the pod keeps paid
  (``device_share``, seconds of a whole device per second: nothing beside
  an awake model, whose device is paid for anyway; all of it for a pod alone
  on a device; see :mod:`scaler.policy.warm_tier.gpu_use`);
- a request that comes finds the model at that rung. If the way back fits
  within the objective (``wake_budget_s``: what a wake may take and the
  request still meet it), nothing misses; otherwise it and the requests the
  model's rate brings while it comes back miss, each at the keep-alive
  rule's price of a miss (``C / (1 - A)`` device-seconds).

So ``cost(rung) = hold(rung) x C + P(request within C) x misses(rung) x price``,
and the cheapest rung wins; a tie goes to the shallower one (a wake is never
worse for the user). Level 1 is a choice only where the node's host memory
holds the weights (``host_memory_free``): its price there is the room it
takes from the models that would otherwise sleep at level 1 on that node,
which the caller settles by offering level 1 to the models most likely to
be asked for first (:func:`rank_for_host_memory`).

Main decision: level 2 is not "level 1, slower". With the objective's
default 2 s, a level-2 wake of an 8B model misses it, so level 2 is worth its
slice only for a model whose return costs more at zero (its cold start's
misses) than the slice does; with a looser objective it is as good as level 1
for the user and frees the host memory, so it is chosen whenever host memory
is short.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaler.policy.idle.keep_alive import IdleGaps, miss_price_s

__all__ = ["ZERO", "Depth", "Rungs", "choose_depth", "miss_cost", "rank_for_host_memory"]

#: The rung "no replica".
ZERO = 0


@dataclass(frozen=True, slots=True)
class Rungs:
    """What each rung takes to come back from, and the objective it is judged by.

    ``wake_s``: level -> seconds from a held request to a replica ready for it
    (the wake and its one-token warm-up); ``cold_start_s``: the same from zero;
    ``wake_budget_s``: the longest a wake may take and its request still meet
    the objective (the TTFT objective less the request's own prefill).
    """

    wake_s: Mapping[int, float]
    cold_start_s: float
    wake_budget_s: float
    attainment: float = 0.99

    def __post_init__(self) -> None:
        for level, seconds in self.wake_s.items():
            if level not in (1, 2) or not seconds >= 0:
                raise ValueError(
                    f"wake times are for levels 1 and 2, >= 0 s; got {level}: {seconds}"
                )
        if not self.cold_start_s > 0:
            raise ValueError(f"cold start must be > 0 s; got {self.cold_start_s}")
        if not self.wake_budget_s >= 0:
            raise ValueError(f"wake budget must be >= 0 s; got {self.wake_budget_s}")
        if not 0 < self.attainment < 1:
            raise ValueError(f"attainment must be within (0, 1); got {self.attainment}")

    def back_s(self, rung: int) -> float:
        return self.cold_start_s if rung == ZERO else self.wake_s[rung]


@dataclass(frozen=True, slots=True)
class Depth:
    """The rung chosen (1, 2, or :data:`ZERO`) and each rung's expected cost (device-seconds)."""

    rung: int
    costs: Mapping[int, float]
    p_request: float

    @property
    def why(self) -> str:
        parts = ", ".join(
            f"{'zero' if r == ZERO else f'level {r}'} {c:.0f}"
            for r, c in sorted(self.costs.items())
        )
        return f"P(request within a cold start) {100 * self.p_request:.1f} %; expected cost {parts}"


def _rate(gaps: IdleGaps, now: float) -> float:
    """Requests per second, from the gaps seen over the model's history."""
    span = max(1e-9, now - gaps.started_s)
    return (len(gaps.gaps) + 1) / span


def choose_depth(
    gaps: IdleGaps,
    *,
    rungs: Rungs,
    now: float,
    device_share: float,
    host_memory_free: bool = True,
    allowed: Sequence[int] = (1, 2, ZERO),
) -> Depth:
    """The cheapest rung among ``allowed`` for an idle model (module docstring).

    ``device_share``: the share of a device the pod keeps paid while it sleeps
    (0..1). Level 1 is left out when ``host_memory_free`` is False or its wake
    time is unknown, level 2 when its wake time is unknown.
    """
    if not 0.0 <= device_share <= 1.0:
        raise ValueError(f"device share must be within 0..1; got {device_share!r}")
    horizon = rungs.cold_start_s
    costs: dict[int, float] = {}
    for rung in allowed:
        if rung == 1 and not host_memory_free:
            continue
        if rung != ZERO and rung not in rungs.wake_s:
            continue
        hold = 0.0 if rung == ZERO else device_share * horizon
        costs[rung] = hold + miss_cost(gaps, rungs=rungs, now=now, back_s=rungs.back_s(rung))
    if not costs:
        raise ValueError(
            f"no rung to choose from: allowed {list(allowed)}, wake times {dict(rungs.wake_s)}"
        )
    # Shallowest first among equals: zero sorts last.
    order = sorted(costs, key=lambda r: (costs[r], r == ZERO, r))
    return Depth(order[0], costs, gaps.p_request_within(horizon, now))


def miss_cost(gaps: IdleGaps, *, rungs: Rungs, now: float, back_s: float) -> float:
    """Device-seconds the misses are worth when the model's next request, within a
    cold start, finds it ``back_s`` from ready: none when that fits the objective's
    wake budget, else that request and those its rate brings meanwhile, each at
    the keep-alive rule's price."""
    if back_s <= rungs.wake_budget_s:
        return 0.0
    horizon = rungs.cold_start_s
    misses = 1.0 + _rate(gaps, now) * back_s
    price = miss_price_s(cold_start_s=horizon, attainment=rungs.attainment)
    return gaps.p_request_within(horizon, now) * misses * price


def rank_for_host_memory(
    candidates: Sequence[tuple[str, IdleGaps]], *, horizon_s: float, now: float
) -> list[str]:
    """Models in the order they deserve a node's host memory for a level-1 sleep: the
    one most likely to be asked for within ``horizon_s`` first (its wake would miss
    the objective at level 2), ties by name."""
    ranked = sorted(candidates, key=lambda c: (-c[1].p_request_within(horizon_s, now), c[0]))
    return [name for name, _ in ranked]
