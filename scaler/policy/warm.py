"""The warm tier: which replicas sleep, which one wakes, what makes room (pure).

A model opted in with ``autoscaling.tidal.dev/sleep-after`` climbs down a
ladder as it stays idle, every rung counted from the same idle start (the
policy state's ``idle_since_s``, the clock the grace period already uses):

    serving --(idle >= sleep-after)--> sleeping --(idle >= grace period)--> zero

A sleeping replica (vLLM's sleep mode) keeps its pod, process and GPU slice
but gives back its GPU memory; waking it takes about a second instead of a
cold start. Any request restarts the idle clock, and one arriving while the
model sleeps wakes a replica.

What this module decides, each a pure function of what it is given:

- :func:`sleep_due`: is the idle stretch long enough to sleep, and when to
  look again;
- :func:`replicas_to_sleep`: the awake replicas to put to sleep now, never
  one with requests running or waiting;
- :func:`choose_wake`: which sleeping replica to wake (level 1 first: its
  weights are in host RAM, so it wakes fastest);
- :func:`make_room`: on a GPU shared by several models, which idle awake
  models to put to sleep first so that a waking one fits, least recently
  used first; or that it cannot fit (then the caller falls back to the path
  from zero);
- :class:`MemoryBook`: each model's awake GPU memory, learned from DCGM's
  framebuffer-used samples rather than configured.

Main decision: "least recently used" is the end of a model's last busy
stretch, i.e. its idle start; a model that is busy now is never evicted, so
the choice can never cut a running request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from scaler.policy.api import ScalingConfig

__all__ = [
    "MemoryBook",
    "Replica",
    "Resident",
    "RoomPlan",
    "Rung",
    "choose_wake",
    "make_room",
    "replicas_to_sleep",
    "rung",
    "sleep_due",
]


class Rung(StrEnum):
    """Where a model stands on the ladder."""

    SERVING = "serving"  # at least one replica awake
    SLEEPING = "sleeping"  # replicas exist, all asleep
    ZERO = "zero"  # no replicas


@dataclass(frozen=True, slots=True)
class Replica:
    """One pod of a model as the scaler sees it."""

    pod: str
    sleeping: bool = False
    level: int = 0  # the sleep level while sleeping
    busy: bool = False  # requests running or waiting on it (scrape or activator)
    ready: bool = True


def sleep_due(
    config: ScalingConfig, idle_since_s: float | None, now: float
) -> tuple[bool, float | None]:
    """(sleep now?, seconds until it will be due) for a model idle since ``idle_since_s``.

    Off (``sleep-after`` unset) or busy (``idle_since_s`` None): never due, no recheck.
    """
    after = config.sleep_after_s
    if after is None or idle_since_s is None:
        return False, None
    idle_for = now - idle_since_s
    if idle_for >= after:
        return True, None
    return False, after - idle_for


def replicas_to_sleep(
    config: ScalingConfig, replicas: Sequence[Replica], idle_since_s: float | None, now: float
) -> tuple[str, ...]:
    """The pods to put to sleep now: awake, ready and not busy, once sleep is due."""
    due, _ = sleep_due(config, idle_since_s, now)
    if not due:
        return ()
    return tuple(r.pod for r in replicas if r.ready and not r.sleeping and not r.busy)


def rung(replicas: Sequence[Replica]) -> Rung:
    if not replicas:
        return Rung.ZERO
    if any(not r.sleeping for r in replicas):
        return Rung.SERVING
    return Rung.SLEEPING


def choose_wake(replicas: Sequence[Replica]) -> Replica | None:
    """The sleeping replica to wake: level 1 before level 2, then by name."""
    asleep = [r for r in replicas if r.sleeping and r.ready]
    if not asleep:
        return None
    return min(asleep, key=lambda r: (r.level != 1, r.pod))


@dataclass(frozen=True, slots=True)
class Resident:
    """A pod on one physical GPU, with what it holds there now."""

    target: str  # the model (namespace/name of its Deployment)
    pod: str
    awake: bool
    busy: bool
    used_mib: int
    # End of the model's last busy stretch (its idle start); None: busy now.
    idle_since_s: float | None


@dataclass(frozen=True, slots=True)
class RoomPlan:
    """``sleep``: pods to put to sleep first, in order; ``fits``: then the wake fits."""

    sleep: tuple[str, ...]
    fits: bool
    free_mib: int


def make_room(
    *, budget_mib: int, residents: Iterable[Resident], waking_pod: str, need_mib: int
) -> RoomPlan:
    """Put the least recently used idle models to sleep until ``need_mib`` is free.

    ``need_mib`` is what the wake adds on top of what ``waking_pod`` holds
    asleep. Busy models, and models that are not awake, are never chosen.
    When even sleeping every idle one leaves too little, nothing is slept and
    ``fits`` is False: the caller takes the path from zero instead of
    emptying a GPU for a wake that still fails.
    """
    if need_mib < 0 or budget_mib < 0:
        raise ValueError(f"need_mib and budget_mib must be >= 0; got {need_mib}, {budget_mib}")
    everyone = list(residents)
    others = [r for r in everyone if r.pod != waking_pod]
    used = sum(r.used_mib for r in everyone)  # the waking pod's residue counts too
    free = budget_mib - used
    if free >= need_mib:
        return RoomPlan(sleep=(), fits=True, free_mib=free)
    candidates = sorted(
        (r for r in others if r.awake and not r.busy and r.idle_since_s is not None),
        key=lambda r: (r.idle_since_s, r.pod),
    )
    chosen: list[str] = []
    for r in candidates:
        chosen.append(r.pod)
        free += r.used_mib  # an upper bound: a sleeping pod keeps a small residue
        if free >= need_mib:
            return RoomPlan(sleep=tuple(chosen), fits=True, free_mib=free)
    return RoomPlan(sleep=(), fits=False, free_mib=budget_mib - used)


@dataclass(slots=True)
class MemoryBook:
    """Each model's GPU memory awake and asleep, learned from framebuffer-used samples.

    vLLM takes its memory up front (weights plus a KV cache sized by
    ``--gpu-memory-utilization``), so an awake replica's footprint is steady;
    the book keeps the largest awake sample and the smallest asleep one per
    model. Unknown until a sample arrives.
    """

    awake: dict[str, int] = field(default_factory=dict)
    asleep: dict[str, int] = field(default_factory=dict)

    def observe(self, target: str, *, mib: float, sleeping: bool) -> None:
        if mib < 0:
            raise ValueError(f"framebuffer used must be >= 0 MiB; got {mib!r}")
        value = round(mib)
        if sleeping:
            self.asleep[target] = min(self.asleep.get(target, value), value)
        else:
            self.awake[target] = max(self.awake.get(target, 0), value)

    def wake_need_mib(self, target: str) -> int | None:
        """MiB a wake of this model adds on its GPU; None while unknown."""
        awake = self.awake.get(target)
        if awake is None:
            return None
        return max(0, awake - self.asleep.get(target, 0))
