"""The cheapest mix of replicas across shapes that meets a model's demand (pure).

Each shape is sized alone first (:mod:`scaler.policy.shapes.decide`): its
**need** is how many of its replicas alone would meet the demand and the
objective, by the policy's own sizing at that shape's learned capacity.
A replica of a shape therefore covers ``1 / need`` of the demand, and a mix
``{shape: n}`` meets it when ``sum(n / need) >= 1``. :func:`choose_mix`
picks the cheapest such mix at the shapes' prices per replica-hour:

1. **Offers**: the shapes with a need, each within its cap (a shape whose
   pods stayed Pending is capped at the replicas it has:
   :mod:`scaler.policy.shapes.availability`). When the caps leave no
   cover, the shapes are offered uncapped: nothing else could serve, and
   asking keeps the model's place in line.
2. **Candidates**: each shape alone at its need; each pair, one shape's
   replicas topped up by the fewest of another's that complete the cover
   (a third shape rarely pays: its replicas would replace part of one
   replica of the others); and the shapes in order of cost per cover, each
   up to its cap, until covered (the cover when caps bind).
3. **Long prompts**: a request whose prompt a shape cannot prefill within
   the objective is a loss on that shape (its ``hopeless`` share). A mix
   whose fastest shape loses more than ``allowance`` beyond what the
   fastest offered shape loses gets replicas of the cheapest shape that
   serves them: as many as those prompts' share of the work on it (their
   requests' share, weighted by ``long_weight``, their size against the
   mean), and at least one. The activator sends them there.
4. **Bounds**: at most ``max_total`` replicas in all (the model's
   ``max-scale``); at least ``min_total`` (its ``min-scale``), the cheapest
   replicas added.
5. **Steadiness**: a mix that uses shapes other than those running now
   must save at least ``switch_saving`` (:data:`SWITCH_SAVING`, a quarter)
   of the cost of the best mix of the running shapes. Moving a model
   between shapes costs cold starts of both; a saving of a few percent, or
   a need that wobbles by a replica, does not pay for them.

Scale-in falls out of the cost: when the demand drops, the cheapest cover
of the smaller need drops the most expensive capacity per unit first.

Main decision, the unit of demand is the shapes' own sizing, not a ratio
of spec sheets: a shape's need counts what its replicas measured (its
prefill rate, its step costs, its batch), the prompts it cannot serve, and
the queueing of that many replicas, so one shape alone is exactly what
Tidal would run on it, and the mix is never dearer than the best of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

__all__ = ["SWITCH_SAVING", "Mix", "MixGoal", "Offer", "choose_mix", "cost_per_hour", "mix_of"]

#: The least saving, against the best mix of the shapes running, that moves a
#: model to other shapes: a move costs a cold start of both, and a need that
#: wobbles by a replica would otherwise move it back and forth.
SWITCH_SAVING = 0.25


@dataclass(frozen=True, slots=True)
class Offer:
    """One shape as the mix sees it.

    ``need``: its replicas alone that meet the demand (0: none needed);
    ``price``: dollars per replica-hour; ``hopeless``: the share of requests
    whose prefill alone misses the objective on it; ``most``: the replicas it
    can have now (``None``: no cap; a shape whose pods stayed Pending is capped
    at those it has, :mod:`scaler.policy.shapes.availability`).
    """

    name: str
    need: int
    price: float
    hopeless: float = 0.0
    most: int | None = None

    def allows(self, count: int) -> bool:
        return self.most is None or count <= self.most


@dataclass(frozen=True, slots=True)
class MixGoal:
    """The mix's bounds and rules (see the module docstring)."""

    max_total: int
    min_total: int = 0
    allowance: float = 1.0  # share of requests a mix may leave to no shape that serves them
    long_weight: float = 1.0  # long prompts' work per request against the mean
    switch_saving: float = SWITCH_SAVING  # the least saving that moves a model to other shapes
    # Why no move is made now, whatever it would save (empty: moves are allowed).
    held: str = ""


@dataclass(frozen=True, slots=True)
class Mix:
    """Replicas per shape (shapes at 0 left out), their cost, and why."""

    replicas: Mapping[str, int]
    cost_per_h: float
    why: str

    def __post_init__(self) -> None:
        kept = {name: n for name, n in self.replicas.items() if n > 0}
        object.__setattr__(self, "replicas", MappingProxyType(kept))

    @property
    def total(self) -> int:
        return sum(self.replicas.values())

    @property
    def described(self) -> str:
        """The replicas per shape and their cost, without the why."""
        parts = [f"{n} x {name}" for name, n in sorted(self.replicas.items())]
        return f"{' + '.join(parts) or 'none'} at ${self.cost_per_h:.2f}/h"


def cost_per_hour(replicas: Mapping[str, int], prices: Mapping[str, float]) -> float:
    """Dollars per hour of ``replicas`` at ``prices`` (a shape without a price costs 0)."""
    return sum(n * prices.get(name, 0.0) for name, n in replicas.items())


def _candidates(offers: Sequence[Offer]) -> list[dict[str, int]]:
    """Each shape alone, each pair (n of one, the fewest of the other completing), and
    the shapes filled in order of cost per cover up to their caps; within the caps."""
    out: list[dict[str, int]] = [{o.name: o.need} for o in offers if o.allows(o.need)]
    for a in offers:
        for b in offers:
            # Step through the shape of the smaller need (the larger replicas): few steps.
            if a.name == b.name or a.need > b.need:
                continue
            for n_a in range(1, a.need if a.most is None else min(a.need, a.most + 1)):
                n_b = math.ceil((a.need - n_a) * b.need / a.need)
                if b.allows(n_b):
                    out.append({a.name: n_a, b.name: n_b})
    filled: dict[str, int] = {}
    missing = 1.0  # the share of the demand not covered yet
    for o in sorted(offers, key=lambda o: o.price * o.need):
        n = min(math.ceil(missing * o.need - 1e-9), o.need if o.most is None else o.most)
        if n > 0:
            filled[o.name] = n
            missing -= n / o.need
        if missing <= 1e-9:
            out.append(filled)
            break
    return out


def _with_long(
    counts: dict[str, int], offers: Mapping[str, Offer], goal: MixGoal, floor: float
) -> dict[str, int]:
    """``counts`` with replicas for the prompts only faster shapes serve (step 3)."""
    lost = min(offers[name].hopeless for name in counts)
    if lost <= floor + goal.allowance:
        return counts
    best: dict[str, int] | None = None
    for t in offers.values():
        if t.hopeless > floor + goal.allowance:
            continue
        share = min(1.0, (lost - t.hopeless) * goal.long_weight)
        extra = max(1, math.ceil(t.need * share))
        fixed = {**counts, t.name: counts.get(t.name, 0) + extra}
        if not t.allows(fixed[t.name]):
            continue
        if best is None or _cost(fixed, offers) < _cost(best, offers):
            best = fixed
    return counts if best is None else best


def _cost(counts: Mapping[str, int], offers: Mapping[str, Offer]) -> float:
    return sum(n * offers[name].price for name, n in counts.items())


def mix_of(replicas: Mapping[str, int], prices: Mapping[str, float]) -> Mix:
    """``replicas`` as a :class:`Mix` at ``prices`` (what runs, described as a chosen
    mix is)."""
    offers = {name: Offer(name, 1, prices.get(name, 0.0)) for name in replicas}
    return Mix(replicas, _cost(replicas, offers), _describe(replicas, offers))


def _bounded(counts: dict[str, int], offers: Mapping[str, Offer], goal: MixGoal) -> dict[str, int]:
    """Raised to ``min_total`` with the cheapest of its shapes (step 4)."""
    short = goal.min_total - sum(counts.values())
    if short <= 0:
        return counts
    cheapest = min(counts, key=lambda name: offers[name].price)
    return {**counts, cheapest: counts[cheapest] + short}


def _describe(counts: Mapping[str, int], offers: Mapping[str, Offer]) -> str:
    parts = [f"{n} x {name}" for name, n in sorted(counts.items()) if n > 0]
    return f"{' + '.join(parts) or 'none'} at ${_cost(counts, offers):.2f}/h"


def _best(
    candidates: Sequence[dict[str, int]], offers: Mapping[str, Offer]
) -> dict[str, int] | None:
    order = {name: i for i, name in enumerate(offers)}
    return min(
        candidates,
        key=lambda c: (_cost(c, offers), sum(c.values()), sorted(order[n] for n in c)),
        default=None,
    )


def choose_mix(
    offers: Sequence[Offer], goal: MixGoal, current: Mapping[str, int] | None = None
) -> Mix:
    """The cheapest mix meeting the demand (see the module docstring). ``current``: the
    replicas each shape runs now (for steadiness)."""
    if goal.max_total < 1:
        raise ValueError(f"max_total must be at least 1 replica, got {goal.max_total}")
    wanted = [o for o in offers if o.need > 0]
    if not wanted:
        return Mix({}, 0.0, "no shape is needed")
    usable = [o for o in wanted if o.most != 0]
    found = _candidates(usable)
    if not found:
        # The caps leave no cover: ask for what is needed anyway, as if uncapped;
        # nothing else could serve, and asking keeps the model's place in line.
        usable = [replace(o, most=None) for o in wanted]
        found = _candidates(usable)
    by_name = {o.name: o for o in usable}
    floor = min(o.hopeless for o in usable)
    candidates = [_bounded(_with_long(c, by_name, goal, floor), by_name, goal) for c in found]
    within = [c for c in candidates if sum(c.values()) <= goal.max_total]
    if not within:
        # Nothing meets the demand within max-scale: the most capacity it allows, on
        # the shape whose replicas each cover the most (the smallest need).
        widest = min(usable, key=lambda o: (o.need, o.price))
        counts = {widest.name: goal.max_total}
        return Mix(counts, _cost(counts, by_name), f"{_describe(counts, by_name)}, at max-scale")
    best = _best(within, by_name)
    assert best is not None
    running = {name for name, n in (current or {}).items() if n > 0 and name in by_name}
    if running and not set(best) <= running:
        kept = _best([c for c in within if set(c) <= running], by_name)
        if kept is not None and (
            goal.held or _cost(best, by_name) >= (1 - goal.switch_saving) * _cost(kept, by_name)
        ):
            why = goal.held or (
                f"moving to {_describe(best, by_name)} would save"
                f" less than {goal.switch_saving:.0%}"
            )
            return Mix(kept, _cost(kept, by_name), f"{_describe(kept, by_name)} ({why})")
    return Mix(best, _cost(best, by_name), _describe(best, by_name))
