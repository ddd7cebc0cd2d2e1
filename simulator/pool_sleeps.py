"""Sleep in ``tidal simulate``'s shared pool: when a pod sleeps, how deep, and what stays asleep.

Every sleep is the scaler's: announced for the handoff (a request meanwhile
cancels it, and the pod serves at once), then the sleep call, after which
its memory is down to the residue. :class:`PoolSleeps` asks the product's
pure rules (:mod:`scaler.policy.warm_tier`) at each turn:

- *a sleep due*: an idle pod sleeps once ``sleep-after`` has passed
  (:func:`~scaler.policy.warm_tier.replicas_to_sleep`), at level 1 where its
  node's host memory holds the weights, else level 2;
- *room to wake*: an idle pod beside sleepers may be slept early so that
  they keep room to wake (:func:`~scaler.policy.warm_tier.keep_room_to_wake`);
  where no such room can be kept, the sleepers are moved
  (:meth:`~simulator.pool_moves.PoolMoves.rehome`);
- *the grace period's end*: an awake pod goes to zero; a sleeper stays
  asleep while that is cheaper than zero
  (:func:`~scaler.policy.warm_tier.choose_depth`), its device's cost shared
  by the pods on it unless an awake model keeps it paid.

Main decision: **a sleep is timed as it would be on the cluster**: a pod
put to sleep frees its memory only after the handoff and the sleep call,
so a wake or a new pod that needs that room waits for both.
"""

from __future__ import annotations

import math
from typing import Protocol

from scaler.policy import ScalingConfig
from scaler.policy.warm_tier import (
    ZERO,
    GpuUse,
    Replica,
    Rungs,
    choose_depth,
    holeless,
    keep_room_to_wake,
    replicas_to_sleep,
)
from simulator.engine.sleep_timing import host_memory_mib, sleep_seconds
from simulator.pool_books import PoolBooks, PoolConfig, PoolPod
from simulator.pool_moves import PoolMoves
from simulator.pool_traffic import PoolTraffic

__all__ = ["PoolSleeps", "SleepSide"]


class SleepSide(Protocol):
    """What the sleeps need from the pool's event loop."""

    books: PoolBooks
    pods: dict[str, PoolPod]
    rungs: Rungs
    config: ScalingConfig
    busy_gap_s: float
    grace_s: float
    warm: bool
    traffic: PoolTraffic
    moves: PoolMoves

    def push(self, at: float, what: str, key: str, version: int) -> None: ...
    def remove(self, pod: PoolPod, at: float) -> None: ...


class PoolSleeps:
    """The pool's sleeps, and how many were evictions or at level 2."""

    def __init__(self, side: SleepSide, pool: PoolConfig) -> None:
        self._side = side
        self._pool = pool
        self.evictions = 0
        self.level2_sleeps = 0

    def sleep_if_due(self, pod: PoolPod, at: float) -> None:
        """Put ``pod`` to sleep if its sleep-after has passed, and keep its device's hole."""
        side = self._side
        replica = Replica(
            pod=pod.model,
            sleeping=not pod.awake,
            busy=pod.busy_until > at,
            ready=pod.ready_at <= at,
        )
        # A microsecond's slack: idle start + sleep-after - idle start can round
        # to just under sleep-after, and there is no later look.
        if pod.model in replicas_to_sleep(side.config, [replica], pod.busy_until, at + 1e-6):
            self._put_to_sleep(pod)
            self.keep_hole(pod.device)

    def _put_to_sleep(self, pod: PoolPod, *, at: float | None = None) -> float:
        """Put an idle awake pod to sleep at the level its node has room for, as the
        scaler does (announced for the handoff, then the sleep call), from ``at``
        (now); the seconds from then before its memory is free."""
        side = self._side
        now = side.books.now if at is None else at
        level = self._level_for(pod)
        pod.awake, pod.level = False, level
        pod.call_at = now + self._pool.handoff_s
        pod.freed_at = pod.call_at + sleep_seconds(self._pool.weights_mib, level)
        pod.version += 1
        if level == 2:
            self.level2_sleeps += 1
        side.moves.touched(pod.device)
        if math.isfinite(side.grace_s):
            idle_since = max(pod.busy_until, pod.ready_at)
            side.push(max(now, idle_since + side.grace_s), "zero", pod.model, pod.version)
        return pod.freed_at - now

    def _level_for(self, pod: PoolPod) -> int:
        """The configured level, or level 2 where the node's host memory cannot hold the weights."""
        side = self._side
        fits = side.books.host_free_mib(pod.device) >= host_memory_mib(self._pool.weights_mib, 1)
        if side.config.sleep_level == 2 or not fits:
            return 2
        return 1

    def grace_over(self, pod: PoolPod, at: float) -> None:
        """The grace period is over: an awake pod goes to zero; a sleeping one stays
        asleep while that is cheaper than zero (looking again one cold start later),
        its device's cost shared by the pods on it unless an awake model keeps it paid."""
        side = self._side
        if pod.model in side.moves.moving:  # the move settles it first
            side.push(at + side.rungs.cold_start_s, "zero", pod.model, pod.version)
            return
        if not side.warm or pod.awake:
            side.remove(pod, at)
            return
        device = side.books.devices[pod.device]
        share = 0.0 if device.use(at) is GpuUse.SERVING else 1.0 / len(device.pods)
        depth = choose_depth(
            side.traffic.gaps_at(pod.model, at),
            rungs=side.rungs,
            now=at,
            device_share=share,
            allowed=(pod.level, ZERO),
        )
        if depth.rung == ZERO:
            side.remove(pod, at)
        else:
            side.push(at + side.rungs.cold_start_s, "zero", pod.model, pod.version)

    def keep_hole(self, index: int) -> None:
        """Keep room to wake on device ``index``; where none can be kept, move its
        sleepers to devices that have it."""
        side, p = self._side, self._pool
        residents = side.books.residents(index, side.traffic)
        need = p.awake_mib - p.asleep_mib
        victims = keep_room_to_wake(
            budget_mib=p.gpu_memory_mib,
            residents=residents,
            wake_need_mib=need,
            busy_gap_s=side.busy_gap_s,
        )
        if victims:
            self.evict(victims)
        elif holeless(
            budget_mib=p.gpu_memory_mib,
            residents=residents,
            wake_need_mib=need,
            busy_gap_s=side.busy_gap_s,
        ):
            side.moves.rehome(index)

    def evict(self, victims: tuple[str, ...], *, at: float | None = None) -> float:
        """Put ``victims`` to sleep (side by side, as the scaler does) from ``at`` (now);
        the seconds from then before their memory is free."""
        seconds = 0.0
        for v in victims:
            seconds = max(seconds, self._put_to_sleep(self._side.pods[v], at=at))
            self.evictions += 1
        return seconds
