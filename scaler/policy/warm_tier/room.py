"""The warm tier's room on a shared GPU: who sleeps so that a wake or a new pod fits (pure).

Several models' pods may share one physical GPU; an awake vLLM holds its
weights and KV cache there, a sleeping one only a small residue. What this
module decides, each a pure function of what it is given:

- :func:`make_room`: which idle awake models to put to sleep first so that a
  waking one fits; or that it cannot fit (then the caller falls back to the
  path from zero);
- :func:`place_pod`: whether a new pod may go on a GPU, and what to put to
  sleep there first: it must leave room for one sleeping pod to wake
  without evicting a busy one (a pod in its cold start is busy for a
  minute, so a wake beside two of them would otherwise fall back to a cold
  start of its own);
- :func:`keep_room_to_wake`: which idle awake pods to put to sleep as soon
  as they are idle, so that a GPU holding sleeping pods keeps an awake-sized
  hole and a wake there waits for no sleep;
- :func:`plan_wake`: :func:`make_room` now, or, when only requests about to
  finish are in the way, the moment their pods are idle and can be slept,
  within a bound (:data:`BUSY_WAIT_S`, and never longer than the cold start
  it avoids);
- :class:`MemoryBook`: each model's awake GPU memory, learned from DCGM's
  framebuffer-used samples rather than configured.

Main decision: the model put to sleep first is the one whose next request
is expected latest (its idle start plus its mean idle gap, from its own
history of requests); a model without a history counts as expected last,
and ties go to the least recently used. A model that is busy now is never
evicted, so the choice can never cut a running request.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

__all__ = [
    "BUSY_WAIT_S",
    "MemoryBook",
    "Resident",
    "RoomPlan",
    "WakePlan",
    "keep_room_to_wake",
    "make_room",
    "place_pod",
    "plan_wake",
]


#: The longest a wake waits for busy models beside it to finish their requests
#: before it falls back to a cold start: a request about to finish, not a
#: cold start's worth of serving (the scaler cannot see when one will end).
BUSY_WAIT_S = 10.0


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
    # The model's mean idle gap (None: no history yet): its next request is
    # expected at its idle start plus this.
    mean_gap_s: float | None = None
    # A busy pod: when its work is expected to end (None: unknown).
    free_at_s: float | None = None

    def next_request_s(self) -> float:
        """When the model's next request is expected; +inf without a history."""
        if self.mean_gap_s is None or self.idle_since_s is None:
            return math.inf
        return self.idle_since_s + self.mean_gap_s


@dataclass(frozen=True, slots=True)
class RoomPlan:
    """``sleep``: pods to put to sleep first, in order; ``fits``: then the wake fits."""

    sleep: tuple[str, ...]
    fits: bool
    free_mib: int


def make_room(
    *, budget_mib: int, residents: Iterable[Resident], waking_pod: str, need_mib: int
) -> RoomPlan:
    """Put idle models to sleep until ``need_mib`` is free: the one whose next
    request is expected latest first, then the least recently used.

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
        key=lambda r: (-r.next_request_s(), r.idle_since_s, r.pod),
    )
    chosen: list[str] = []
    for r in candidates:
        chosen.append(r.pod)
        free += r.used_mib  # an upper bound: a sleeping pod keeps a small residue
        if free >= need_mib:
            return RoomPlan(sleep=tuple(chosen), fits=True, free_mib=free)
    return RoomPlan(sleep=(), fits=False, free_mib=budget_mib - used)


def place_pod(
    *, budget_mib: int, residents: Iterable[Resident], new_mib: int, wake_need_mib: int
) -> RoomPlan:
    """May a new pod of ``new_mib`` awake go on this GPU, and what sleeps first.

    Not when, with it there, a sleeping pod could no longer wake without
    evicting a busy one: a new pod is busy through its whole cold start, and
    a wake that finds only busy pods beside it falls back to a cold start.
    So the memory pinned by busy pods, sleeping residues and the new pod
    must leave ``wake_need_mib`` free on a GPU that holds sleeping pods.
    """
    everyone = list(residents)
    if any(not r.awake for r in everyone):
        pinned = new_mib + sum(r.used_mib for r in everyone if r.busy or not r.awake)
        if pinned + wake_need_mib > budget_mib:
            return RoomPlan(sleep=(), fits=False, free_mib=budget_mib - pinned)
    return make_room(budget_mib=budget_mib, residents=everyone, waking_pod="", need_mib=new_mib)


def keep_room_to_wake(
    *, budget_mib: int, residents: Iterable[Resident], wake_need_mib: int
) -> tuple[str, ...]:
    """Idle awake pods to put to sleep now so that a sleeping pod on this GPU can
    wake without waiting for a sleep first (an awake-sized hole); () when the GPU
    holds no sleeping pod, the hole is there, or only busy pods fill it."""
    everyone = list(residents)
    if all(r.awake for r in everyone):
        return ()
    plan = make_room(
        budget_mib=budget_mib, residents=everyone, waking_pod="", need_mib=wake_need_mib
    )
    return plan.sleep if plan.fits else ()


@dataclass(frozen=True, slots=True)
class WakePlan:
    """``sleep`` first, then wake at ``at_s`` (now, or when busy pods finish); or no fit."""

    sleep: tuple[str, ...]
    fits: bool
    at_s: float


def plan_wake(
    *,
    budget_mib: int,
    residents: Sequence[Resident],
    waking_pod: str,
    need_mib: int,
    now: float,
    max_wait_s: float,
) -> WakePlan:
    """Room for a wake now, or at the first moment within ``max_wait_s`` when
    busy pods whose work is expected to end (``free_at_s``) can be slept.

    ``max_wait_s`` is what falling back costs (a cold start, less the wake):
    a wake blocked only by a request about to finish waits for it instead.
    """
    plan = make_room(
        budget_mib=budget_mib, residents=residents, waking_pod=waking_pod, need_mib=need_mib
    )
    if plan.fits:
        return WakePlan(plan.sleep, True, now)
    ends = sorted(
        {
            r.free_at_s
            for r in residents
            if r.busy and r.awake and r.pod != waking_pod and r.free_at_s is not None
            if now < r.free_at_s <= now + max_wait_s
        }
    )
    for t in ends:
        then = [
            replace(r, busy=False, idle_since_s=r.free_at_s)
            if r.busy and r.free_at_s is not None and r.free_at_s <= t
            else r
            for r in residents
        ]
        plan = make_room(
            budget_mib=budget_mib, residents=then, waking_pod=waking_pod, need_mib=need_mib
        )
        if plan.fits:
            return WakePlan(plan.sleep, True, t)
    return WakePlan((), False, now)


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
