"""Which shapes can be bought now: a shape whose pods stay Pending is capped for a while (pure).

A replica of a shape is Pending when no node has its resource free: every
H100 taken, no ``3g.40gb`` slice left on the partitioned nodes. As for spot
(:mod:`scaler.policy.placement.availability`), a replica Pending for
``pending-timeout`` since it was created counts as not coming. Here the
**shape** is then capped at the replicas it does have (Ready, or starting
within the timeout; zero when all are stuck): the mix
(:mod:`scaler.policy.shapes.mix`) offers no more of it, its Deployment
shrinks to the cap (the ReplicaSet removes unscheduled pods first) and the
next cheapest shape covers the rest, in the same decision.

The cap is lifted after a backoff, twice the pending timeout, doubling
with each time in a row the shape was capped (at most :data:`MAX_OUT_S`):
the cluster may have freed its GPUs meanwhile, and asking again is the only
way to know. Asked again, the mix moves back to it (the covering shape's
Ready replicas stay until the new ones are Ready:
:mod:`scaler.policy.shapes.handover`); Pending again, it is capped for
longer. More Ready replicas than its last cap, with none stuck, end the
streak: the shape has come back.

Main decision: the clock is the wall clock (epoch seconds), as the pods'
``creationTimestamp`` is: ``pending-timeout`` is measured from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from scaler.policy.placement.availability import PodFacts, Unavailable, unavailable_reason

__all__ = ["MAX_OUT_S", "Outage", "ShapeAvailability", "Turn", "observe_shapes"]

#: The longest a shape stays capped before it is asked for again (seconds).
MAX_OUT_S = 3600.0


@dataclass(frozen=True, slots=True)
class Outage:
    """A shape capped at ``most`` replicas until ``until``; ``strikes``: times in a row;
    ``why`` for Events and the status. Kept after ``until`` until the shape comes back."""

    until: float
    most: int
    strikes: int
    why: str


@dataclass(frozen=True, slots=True)
class Turn:
    """A shape capped (``out``) or back serving, for an Event."""

    shape: str
    out: bool
    why: str


@dataclass(frozen=True, slots=True)
class ShapeAvailability:
    """Each shape's last outage (see :class:`Outage`)."""

    outages: Mapping[str, Outage] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outages", MappingProxyType(dict(self.outages)))

    def caps(self, now: float) -> dict[str, int]:
        """The shapes capped at ``now`` and their caps (shapes not named: no cap)."""
        return {name: o.most for name, o in self.outages.items() if now < o.until}

    def unfit(
        self, shape: str, why: str, *, now: float, pending_timeout_s: float
    ) -> tuple[ShapeAvailability, Turn | None]:
        """``shape`` capped at zero because its replicas miss the objective far more than
        the model's sizing expects (:func:`~scaler.policy.shapes.correction.unfit`), with
        the same backoff as a shape whose pods stay Pending; no change while it is capped."""
        last = self.outages.get(shape)
        if last is not None and now < last.until:
            return self, None
        strikes = 1 if last is None else last.strikes + 1
        wait_s = _backoff_s(pending_timeout_s, strikes)
        why = f"{why}; not asked for again for {_fmt_s(wait_s)}"
        outage = Outage(until=now + wait_s, most=0, strikes=strikes, why=why)
        return ShapeAvailability({**self.outages, shape: outage}), Turn(shape, out=True, why=why)


def _backoff_s(pending_timeout_s: float, strikes: int) -> float:
    """How long a shape stays capped: twice the timeout, doubling per strike."""
    return float(min(MAX_OUT_S, 2 * pending_timeout_s * 2.0 ** (strikes - 1)))


def _fmt_s(seconds: float) -> str:
    return f"{seconds / 60:g}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g}s"


def _stuck(facts: Sequence[PodFacts], now: float, timeout_s: float) -> int:
    return sum(
        1
        for p in facts
        if unavailable_reason(p, now=now, pending_timeout_s=timeout_s)
        is Unavailable.PENDING_TIMEOUT
    )


def observe_shapes(
    state: ShapeAvailability,
    pods: Mapping[str, Sequence[PodFacts]],
    *,
    now: float,
    pending_timeout_s: float,
) -> tuple[ShapeAvailability, tuple[Turn, ...]]:
    """The availability after seeing each shape's pods at ``now`` (see the module
    docstring), and the shapes capped or back."""
    if pending_timeout_s <= 0:
        raise ValueError(f"pending_timeout_s must be above 0 seconds, got {pending_timeout_s}")
    outages = dict(state.outages)
    turns: list[Turn] = []
    for name, facts in pods.items():
        live = [p for p in facts if not p.terminating]
        stuck = _stuck(live, now, pending_timeout_s)
        ready = sum(1 for p in live if p.ready)
        last = outages.get(name)
        if last is not None and now < last.until:
            continue  # capped: its Deployment is being brought down to the cap
        if not stuck:
            if last is not None and ready > last.most:
                del outages[name]
                turns.append(Turn(name, out=False, why=f"{ready} ready"))
            continue
        strikes = 1 if last is None else last.strikes + 1
        wait_s = _backoff_s(pending_timeout_s, strikes)
        most = len(live) - stuck
        replicas = "replica" if stuck == 1 else "replicas"
        why = (
            f"{stuck} {replicas} Pending past the pending-timeout ({_fmt_s(pending_timeout_s)}):"
            f" no more of its resource is free; at most {most} until asked again in"
            f" {_fmt_s(wait_s)}"
        )
        outages[name] = Outage(until=now + wait_s, most=most, strikes=strikes, why=why)
        turns.append(Turn(name, out=True, why=why))
    return ShapeAvailability(outages), tuple(turns)
