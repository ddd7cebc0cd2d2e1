"""Moves in ``tidal simulate``'s shared pool: giving devices back, rehoming sleepers.

A pod cannot move in Kubernetes; a move is what a cluster does (see
:mod:`scaler.policy.warm_tier.emptying`): a replacement pod starts on the
target device (a cold start there, awake-sized and busy), and once it is
ready the old pod is removed (after its requests, as a terminating pod
drains). A request meanwhile is served by the old pod where it is. The
replacement then sleeps like any idle pod.

:class:`PoolMoves` looks at three things, each with a pure rule:

- a device that has held only sleepers for a while: emptied when its
  sleepers' moves (or zero) cost less than keeping it
  (:func:`~scaler.policy.warm_tier.plan_emptying`), looked at one cold start
  after it began to hold only sleepers and every cold start after;
- a device whose busy models leave its sleepers no room to wake
  (:func:`~scaler.policy.warm_tier.holeless`): its sleepers rehomed
  (:func:`~scaler.policy.warm_tier.plan_rehoming`);
- every cold start, the device with the fewest pods, when all of them fit
  elsewhere and their moves cost less than keeping it for as long as the pool
  has gone without opening a device (compaction: the pool grew during its
  first minutes, when every model started at once, and shrinks back here).

Main decision: one device at a time. A compaction waits for the pool to go
a cold start without opening a device, and each device's plan is all or
nothing, so moves never chase each other.
"""

from __future__ import annotations

import math
from typing import Protocol

from scaler.policy import ScalingConfig
from scaler.policy.warm_tier import (
    GpuUse,
    Leaver,
    MoveCosts,
    Rungs,
    pair_site,
    plan_emptying,
    plan_rehoming,
)
from simulator.engine.sleep_timing import host_memory_mib, sleep_seconds
from simulator.pool_books import PoolBooks, PoolConfig, PoolPod
from simulator.pool_traffic import PoolTraffic

__all__ = ["PoolMoves", "PoolSide"]


class PoolSide(Protocol):
    """What the moves need from the pool's event loop."""

    books: PoolBooks
    pods: dict[str, PoolPod]
    rungs: Rungs
    config: ScalingConfig
    busy_gap_s: float
    traffic: PoolTraffic

    def push(self, at: float, what: str, key: str, version: int) -> None: ...
    def remove(self, pod: PoolPod, at: float) -> None: ...
    def took_over(self, pod: PoolPod, at: float) -> None: ...
    def cold_start_s(self) -> float: ...
    def max_blocked(self) -> float: ...


class PoolMoves:
    """The pool's moves, their replacements in flight, and what they did."""

    def __init__(self, side: PoolSide, pool: PoolConfig) -> None:
        self._side = side
        self._pool = pool
        self.moving: dict[str, PoolPod] = {}  # model -> its replacement, starting elsewhere
        self.moves = 0
        self.emptied = 0
        self.last_opened_s = 0.0

    @property
    def costs(self) -> MoveCosts:
        p, side = self._pool, self._side
        return MoveCosts(
            new_mib=p.awake_mib,
            wake_need_mib=p.awake_mib - p.asleep_mib,
            # A replacement's cold start, at its share of the new device.
            move_cost_s=side.rungs.cold_start_s * p.awake_mib / p.gpu_memory_mib,
            busy_gap_s=side.busy_gap_s,
            max_blocked=side.max_blocked(),
        )

    # --- devices of sleepers alone --------------------------------------------------------

    def touched(self, index: int) -> None:
        """A pod on device ``index`` changed: note when it began to hold only sleepers,
        and look at emptying it one cold start later."""
        side = self._side
        now = side.books.now
        device = side.books.devices[index]
        only_sleepers = device.use(now) is GpuUse.SLEEPING_ONLY
        if only_sleepers and device.sleeping_since is None:
            device.sleeping_since = now
            device.version += 1
            side.push(now + side.rungs.cold_start_s, "empty", str(index), device.version)
        elif not only_sleepers and device.sleeping_since is not None:
            device.sleeping_since = None
            device.version += 1

    def consider_emptying(self, index: int, at: float) -> None:
        side = self._side
        device = side.books.devices[index]
        if device.sleeping_since is None or device.use(at) is not GpuUse.SLEEPING_ONLY:
            return
        if not self._empty(index, at, keep_cost_s=at - device.sleeping_since):
            side.push(at + side.rungs.cold_start_s, "empty", str(index), device.version)

    def _empty(
        self, index: int, at: float, *, keep_cost_s: float, zero_allowed: bool = True
    ) -> bool:
        side = self._side
        leavers = self._leavers(index, at)
        if leavers is None:
            return False
        plan = plan_emptying(
            leavers,
            sites=side.books.sites(side.traffic, but=index),
            keep_cost_s=keep_cost_s,
            rungs=side.rungs,
            now=at,
            costs=self.costs,
            zero_allowed=zero_allowed,
        )
        if plan is None:
            return False
        self.emptied += 1
        for model in plan.zeros:
            side.remove(side.pods[model], at)
        for model, target in plan.moves:
            self.move(side.pods[model], int(target), at)
        return True

    def _leavers(self, index: int, at: float) -> list[Leaver] | None:
        """The pods of device ``index`` as leavers; None when one of them cannot leave
        now (starting, waking, busy, moving, or a replacement)."""
        side = self._side
        weights = self._pool.weights_mib
        out = []
        for pod in side.books.devices[index].pods:
            if pod.replaces or pod.model in self.moving or pod.busy(at):
                return None
            if not pod.awake and at < pod.freed_at:
                return None  # its sleep is under way
            level = pod.level if not pod.awake else 1
            out.append(
                Leaver(
                    pod=pod.model,
                    target=pod.model,
                    gaps=side.traffic.gaps_at(pod.model, at),
                    host_mib=host_memory_mib(weights, level),
                    asleep=not pod.awake,
                    busy=pod.awake
                    and (side.traffic.mean_gap(pod.model) or math.inf) <= side.busy_gap_s,
                )
            )
        return out

    # --- compaction and rehoming ----------------------------------------------------------

    def compact(self, at: float) -> None:
        """Give back the emptiest device whose pods all fit elsewhere (module docstring)."""
        side = self._side
        if not self._pool.compaction:
            return
        held_for = at - self.last_opened_s
        if held_for < side.rungs.cold_start_s or self.moving:
            return
        devices = side.books.devices
        for index in sorted(devices, key=lambda i: (len(devices[i].pods), i)):
            if self._empty(index, at, keep_cost_s=held_for, zero_allowed=False):
                return

    def rehome(self, index: int) -> None:
        """Move the sleepers of a device where they cannot wake in time."""
        side, p = self._side, self._pool
        now = side.books.now
        sleepers = [
            leaver
            for leaver in self._leavers_anyway(index, now)
            if leaver.asleep and leaver.pod not in self.moving
        ]
        if not sleepers:
            return
        moves = plan_rehoming(
            sleepers,
            sites=side.books.sites(side.traffic, but=index),
            rungs=side.rungs,
            now=now,
            costs=self.costs,
            stay_back_s=p.handoff_s + sleep_seconds(p.weights_mib, 1) + side.rungs.wake_s[1],
        )
        for model, target in moves:
            self.move(side.pods[model], int(target), now)

    def _leavers_anyway(self, index: int, at: float) -> list[Leaver]:
        side = self._side
        weights = self._pool.weights_mib
        return [
            Leaver(
                pod=pod.model,
                target=pod.model,
                gaps=side.traffic.gaps_at(pod.model, at),
                host_mib=host_memory_mib(weights, pod.level),
            )
            for pod in side.books.devices[index].pods
            if not pod.awake and not pod.replaces and at >= pod.freed_at
        ]

    def pair(self, pod: PoolPod) -> None:
        """Move a busy model off a device it shares with sleepers, to pair with another
        busy model on a device of its own, so its sleepers get both places to wake in."""
        side = self._side
        if pod.model in self.moving or not side.books.devices[pod.device].pods:
            return
        if not any(not q.awake for q in side.books.devices[pod.device].pods):
            return
        costs = self.costs
        target = pair_site(
            side.books.sites(side.traffic, but=pod.device),
            new_mib=costs.new_mib,
            wake_need_mib=costs.wake_need_mib,
            busy_gap_s=costs.busy_gap_s,
        )
        if target is not None:
            self.move(pod, int(target), side.books.now)

    # --- one move -------------------------------------------------------------------------

    def move(self, pod: PoolPod, target: int, at: float) -> None:
        """Start ``pod``'s replacement on device ``target`` (a cold start there)."""
        side = self._side
        ready_at = at + side.cold_start_s()
        new = PoolPod(pod.model, target, ready_at=ready_at, replaces=True)
        side.books.add(new)
        self.moving[pod.model] = new
        self.moves += 1
        side.push(ready_at, "ready", pod.model, new.version)
        self.touched(target)

    def take_over(self, new: PoolPod, at: float) -> None:
        """A replacement is ready: it takes over from the old pod, which is removed
        (once its requests are done, as a terminating pod drains)."""
        side = self._side
        old = side.pods.get(new.model)
        if old is not None and old.busy(at):
            side.push(max(old.busy_until, old.ready_at), "ready", new.model, new.version)
            return
        del self.moving[new.model]
        if old is not None:
            side.remove(old, at)
        new.replaces, new.cold = False, False
        self.touched(new.device)
        side.took_over(new, at)
