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
    "HANDOFF_S",
    "MemoryBook",
    "Resident",
    "RoomPlan",
    "WakePlan",
    "busy_model",
    "holeless",
    "keep_room_to_wake",
    "make_room",
    "place_pod",
    "plan_wake",
    "settled",
]


#: The longest a wake waits for busy models beside it to finish their requests
#: before it falls back to a cold start: a request about to finish, not a
#: cold start's worth of serving (the scaler cannot see when one will end).
BUSY_WAIT_S = 10.0

#: How long a replica is announced as not routable before it is put to sleep:
#: two of the activators' one-second report periods, so that every activator
#: has stopped sending to it. Every sleep pays it, a sleep to make room for a
#: wake included, which is why a wake that finds no room waits some 3 s more.
HANDOFF_S = 2.0


def settled(residents: Iterable[Resident]) -> list[Resident]:
    """``residents`` as they will be once the sleeps under way are done."""
    return [
        r
        if r.draining_to_mib is None
        else replace(r, used_mib=r.draining_to_mib, draining_to_mib=None, free_at_s=None)
        for r in residents
    ]


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
    # A busy pod: when its work is expected to end (None: unknown); a pod whose
    # sleep is under way: when its memory is given back.
    free_at_s: float | None = None
    # P(the model is asked for within the next cold start), from its gaps: what
    # a sleeper here risks when a new pod's cold start takes its room to wake.
    p_soon: float = 0.0
    # A sleep under way (announced, or its call running): what the pod holds
    # once it is done; None: no sleep under way. Its memory until then is
    # ``used_mib``, and it is never chosen to make room (it is already going).
    draining_to_mib: int | None = None

    def next_request_s(self) -> float:
        """When the model's next request is expected; +inf without a history."""
        if self.mean_gap_s is None or self.idle_since_s is None:
            return math.inf
        return self.idle_since_s + self.mean_gap_s


@dataclass(frozen=True, slots=True)
class RoomPlan:
    """``sleep``: pods to put to sleep first, in order; ``fits``: then the wake fits;
    ``blocked``: for a new pod, the wakes its cold start is expected to leave without
    room (the sleepers' chances of a request meanwhile, summed)."""

    sleep: tuple[str, ...]
    fits: bool
    free_mib: int
    blocked: float = 0.0


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
    *,
    budget_mib: int,
    residents: Iterable[Resident],
    new_mib: int,
    wake_need_mib: int,
    busy_gap_s: float = 0.0,
    max_blocked: float = 0.0,
) -> RoomPlan:
    """May a new pod of ``new_mib`` awake go on this GPU, and what sleeps first.

    Not when, with it there, a sleeping pod could no longer wake without
    evicting a busy one: a new pod is busy through its whole cold start, and
    a wake that finds only busy pods beside it falls back to a cold start.
    So the memory pinned by busy pods, sleeping residues and the new pod
    must leave ``wake_need_mib`` free on a GPU that holds sleeping pods.
    A model asked for more often than every ``busy_gap_s`` counts as busy: it
    is never slept for room (:func:`keep_room_to_wake`). Where the new pod would leave
    no room to wake for its cold start, it may still go when the sleepers there
    are unlikely to be asked for meanwhile: their chances summed (``blocked``)
    under ``max_blocked``.
    """
    everyone = settled(residents)  # a sleep under way is done long before a cold start
    # A model too busy to sleep is not put to sleep to make the room either.
    everyone = [replace(r, busy=True) if busy_model(r, busy_gap_s) else r for r in everyone]

    def pinning(r: Resident) -> bool:
        return r.busy or not r.awake

    blocked = 0.0
    if any(not r.awake for r in everyone):
        pinned = new_mib + sum(r.used_mib for r in everyone if pinning(r))
        if pinned + wake_need_mib > budget_mib:
            blocked = sum(r.p_soon for r in everyone if not r.awake)
            if blocked >= max_blocked:
                return RoomPlan(sleep=(), fits=False, free_mib=budget_mib - pinned, blocked=blocked)
    plan = make_room(budget_mib=budget_mib, residents=everyone, waking_pod="", need_mib=new_mib)
    return replace(plan, blocked=blocked)


def keep_room_to_wake(
    *,
    budget_mib: int,
    residents: Iterable[Resident],
    wake_need_mib: int,
    busy_gap_s: float = 0.0,
) -> tuple[str, ...]:
    """Idle awake pods to put to sleep now so that a sleeping pod on this GPU can
    wake without waiting for a sleep first (an awake-sized hole); () when the GPU
    holds no sleeping pod, the hole is there, or only busy pods fill it.

    A model whose requests come more often than every ``busy_gap_s`` (its mean
    gap) counts as busy here: slept for a hole, it would be woken again for
    most of its requests, each wake taking the very hole it made (and every
    sleep is announced for a handoff first, which its next request would
    cancel). Such a model keeps its slot, and a device where models like it
    leave no hole is one whose sleepers belong elsewhere (:func:`holeless`).
    """
    everyone = settled(residents)  # the hole a sleep under way makes counts
    if all(r.awake for r in everyone):
        return ()
    everyone = [replace(r, busy=True) if busy_model(r, busy_gap_s) else r for r in everyone]
    plan = make_room(
        budget_mib=budget_mib, residents=everyone, waking_pod="", need_mib=wake_need_mib
    )
    return plan.sleep if plan.fits else ()


def busy_model(r: Resident, busy_gap_s: float) -> bool:
    """An awake model asked for more often than every ``busy_gap_s`` on average:
    one that keeps its slot (:func:`keep_room_to_wake`)."""
    return r.awake and r.mean_gap_s is not None and r.mean_gap_s <= busy_gap_s


def holeless(
    *,
    budget_mib: int,
    residents: Iterable[Resident],
    wake_need_mib: int,
    busy_gap_s: float,
) -> bool:
    """A device holding sleepers where no room to wake can be kept for long: its
    awake models are too busy to be slept for a hole (:func:`keep_room_to_wake`)
    and fill the room a wake needs, whatever they are doing this moment. Its
    sleepers' wakes would each wait for a sleep beside them, and miss the
    objective."""
    everyone = settled(residents)
    if all(r.awake for r in everyone):
        return False
    everyone = [
        replace(r, busy=busy_model(r, busy_gap_s), idle_since_s=r.idle_since_s or 0.0)
        for r in everyone
    ]
    return not make_room(
        budget_mib=budget_mib, residents=everyone, waking_pod="", need_mib=wake_need_mib
    ).fits


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
    evict_s: float = 0.0,
    busy_gap_s: float = 0.0,
) -> WakePlan:
    """The soonest room for a wake: now, when a sleep under way beside it is done, or
    when busy pods whose work is expected to end (``free_at_s``) can be slept, within
    ``max_wait_s``.

    ``evict_s``: how long a sleep to make room takes before its memory is free
    (the handoff and the sleep call), so waiting for a sleep already under way
    beats starting another when it ends sooner. ``max_wait_s`` is what falling
    back costs (a cold start, less the wake): a wake blocked only by a request
    about to finish waits for it instead. A model asked for more often than
    every ``busy_gap_s`` is put to sleep for it only when nothing else makes
    room in time: its next request would cancel the sleep, or need a wake of
    its own.
    """
    spared = [
        replace(r, busy=True, free_at_s=None) if busy_model(r, busy_gap_s) and not r.busy else r
        for r in residents
    ]
    plan = _soonest_room(spared, budget_mib, waking_pod, need_mib, now, max_wait_s, evict_s)
    if plan.fits or busy_gap_s <= 0:
        return plan
    return _soonest_room(
        list(residents), budget_mib, waking_pod, need_mib, now, max_wait_s, evict_s
    )


def _soonest_room(
    residents: list[Resident],
    budget_mib: int,
    waking_pod: str,
    need_mib: int,
    now: float,
    max_wait_s: float,
    evict_s: float,
) -> WakePlan:
    ends = sorted(
        {
            r.free_at_s
            for r in residents
            if ((r.busy and r.awake) or r.draining_to_mib is not None)
            and r.pod != waking_pod
            and r.free_at_s is not None
            if now < r.free_at_s <= now + max_wait_s
        }
    )
    best: WakePlan | None = None
    best_ready = math.inf
    for t in (now, *ends):
        if t >= best_ready:
            break
        then = [_at(r, t) for r in residents]
        plan = make_room(
            budget_mib=budget_mib, residents=then, waking_pod=waking_pod, need_mib=need_mib
        )
        ready = t + (evict_s if plan.sleep else 0.0)
        if plan.fits and ready < best_ready:
            best, best_ready = WakePlan(plan.sleep, True, t), ready
    return best if best is not None else WakePlan((), False, now)


def _at(r: Resident, t: float) -> Resident:
    """``r`` at ``t``: a busy pod whose work ended by then is idle, a sleep done by then
    holds only what it keeps asleep."""
    if r.free_at_s is None or r.free_at_s > t:
        return r
    if r.draining_to_mib is not None:
        return replace(r, used_mib=r.draining_to_mib, draining_to_mib=None, free_at_s=None)
    if r.busy:
        return replace(r, busy=False, idle_since_s=r.free_at_s)
    return r


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
