"""The shared pool's event loop: requests, cold starts, sleeps, wakes (``tidal simulate``).

:class:`PoolSim` serves a trace of many models on the devices of
:class:`~simulator.pool_books.PoolBooks`, asking the product's pure rules
(:mod:`scaler.policy.warm_tier`) at each turn; :mod:`simulator.warm_tier`
describes the two policies it runs and scores them, and
:mod:`simulator.pool_moves` moves pods between devices. Deadlines (a sleep
due, a grace period's end, a replacement ready, a device to look at again)
wait in one heap, each stamped with the version of what it concerns, so a
request that restarts a pod's idle clock makes its old deadlines stale
instead of removing them.

Every sleep is the scaler's: announced for the handoff (a request meanwhile
cancels it, and the pod serves at once), then the sleep call, after which
its memory is down to the residue; a wake that needs room another pod must
make waits for all of that.

Main decision: every choice goes through the same pure function the
scaler calls, with what the simulator knows in place of what the scaler
observes; the simulator adds only time and bookkeeping.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

from scaler.policy import ScalingConfig
from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.warm_tier import (
    BUSY_WAIT_S,
    ZERO,
    GpuUse,
    Replica,
    Rungs,
    choose_depth,
    choose_site,
    holeless,
    keep_room_to_wake,
    mean_gap_s,
    plan_wake,
    replicas_to_sleep,
    settled,
    sleep_due,
)
from simulator.engine.sleep_timing import host_memory_mib, sleep_seconds, wake_seconds
from simulator.pool_books import PoolBooks, PoolConfig, PoolPod, WarmCounts
from simulator.pool_moves import PoolMoves
from simulator.traces import TraceRequest
from simulator.world import WorldConfig

__all__ = ["PoolSim"]

_WAKE_TAGS = ("weights", "kv_cache")
#: What a wake may take of the objective: the rest is left for the request's own prefill.
_WAKE_SHARE_OF_OBJECTIVE = 0.9


@dataclass(slots=True)
class _Tally:
    wakes: int = 0
    evictions: int = 0
    fallbacks: int = 0
    waited: int = 0
    level2_sleeps: int = 0


class PoolSim:
    """Many models on one pool of devices, under one model's annotations."""

    def __init__(
        self, config: ScalingConfig, pool: PoolConfig, world: WorldConfig, *, slo_ttft_s: float
    ) -> None:
        self.config = config
        self.pool = pool
        self.world = world
        self.engine = world.engine
        self.books = PoolBooks(pool)
        self.warm = config.sleep_after_s is not None
        # min-scale > 0 keeps the pod: it never reaches zero.
        self.grace_s = math.inf if config.min_scale > 0 else config.scale_to_zero_grace_s
        self.rng = random.Random(world.seed + 1)
        self.pods: dict[str, PoolPod] = {}
        self.deadlines: list[tuple[float, int, str, str, int]] = []
        self.order = 0
        self.gaps: dict[str, IdleGaps] = {}  # each model's, kept across its pods
        self.last_end: dict[str, float] = {}
        warm_up = self.engine.step_time_s(decoding=0, prefill_tokens=1)
        objective = config.slo_ttft_s if config.slo_ttft_s is not None else slo_ttft_s
        self.rungs = Rungs(
            wake_s={
                level: wake_seconds(pool.weights_mib, level, _WAKE_TAGS) + warm_up
                for level in (1, 2)
            },
            cold_start_s=world.cold_start.median_s,
            wake_budget_s=_WAKE_SHARE_OF_OBJECTIVE * objective,
            attainment=config.slo_attainment,
        )
        # A model asked for more often than its sleep-after (its mean gap) is
        # awake nearly all the time anyway: it keeps its place rather than being
        # slept for room to wake, and pairs with another like it.
        self.busy_gap_s = config.sleep_after_s or 0.0
        self.moves = PoolMoves(self, pool)
        self.tally = _Tally()
        self.cold_starts = 0
        if self.warm:
            self.push(self.rungs.cold_start_s, "compact", "", 0)

    @property
    def counts(self) -> WarmCounts:
        t, m = self.tally, self.moves
        return WarmCounts(
            t.wakes, t.evictions, t.fallbacks, self.books.peak, t.waited,
            t.level2_sleeps, m.moves, m.emptied,
        )  # fmt: skip

    # --- what the moves use ---------------------------------------------------------------

    def push(self, at: float, what: str, key: str, version: int) -> None:
        self.order += 1
        heapq.heappush(self.deadlines, (at, self.order, what, key, version))

    def gaps_at(self, model: str, now: float) -> IdleGaps:
        """The model's idle gaps as the scaler would see them at ``now``."""
        gaps = self.gaps.get(model) or IdleGaps(started_s=now)
        end = self.last_end.get(model)
        if end is not None and end <= now:
            gaps = gaps.observe(busy=False, now=end)
        return gaps

    def mean_gap(self, model: str) -> float | None:
        return mean_gap_s(self.gaps_at(model, self.books.now))

    def p_soon(self, model: str) -> float:
        now = self.books.now
        return self.gaps_at(model, now).p_request_within(self.rungs.cold_start_s, now)

    def remove(self, pod: PoolPod, at: float) -> None:
        del self.pods[pod.model]
        index = pod.device
        self.books.remove(pod, at)
        if index in self.books.devices and self.warm:
            self.moves.touched(index)

    def settle(self, pod: PoolPod, at: float) -> None:
        """A replacement took over: its deadlines, and its sleep if the model is idle."""
        pod.busy_until = max(pod.busy_until, self.last_end.get(pod.model, 0.0))
        self._schedule(pod)
        self._sleep_if_due(pod, at)

    def cold_start_s(self) -> float:
        return self.world.cold_start.draw(self.rng)

    # --- deadlines ------------------------------------------------------------------------

    def expire(self, until: float) -> None:
        while self.deadlines and self.deadlines[0][0] <= until:
            at, _, what, key, version = heapq.heappop(self.deadlines)
            self.books.advance(at)
            if what == "compact":
                self.moves.compact(at)
                self.push(at + self.rungs.cold_start_s, "compact", "", 0)
            elif what == "empty":
                device = self.books.devices.get(int(key))
                if device is not None and device.version == version:
                    self.moves.consider_emptying(int(key), at)
            else:
                self._pod_deadline(at, what, key, version)

    def _pod_deadline(self, at: float, what: str, key: str, version: int) -> None:
        pod = self.moves.moving.get(key) if what == "ready" else self.pods.get(key)
        if pod is None or pod.version != version:
            return
        if what == "ready":
            self.moves.take_over(pod, at)
        elif what == "sleep":
            self._sleep_if_due(pod, at)
        elif what == "hole":
            if pod.awake and not pod.busy(at):
                self._keep_hole(pod.device)
                if (self.mean_gap(pod.model) or math.inf) <= self.busy_gap_s:
                    self.moves.pair(pod)
        else:
            self._grace_over(pod, at)

    def _schedule(self, pod: PoolPod) -> None:
        idle_since = max(pod.busy_until, pod.ready_at)
        if self.warm:
            self.push(idle_since, "hole", pod.model, pod.version)
            _, wait = sleep_due(self.config, idle_since, idle_since)
            self.push(idle_since + (wait or 0.0), "sleep", pod.model, pod.version)
        if math.isfinite(self.grace_s):
            self.push(idle_since + self.grace_s, "zero", pod.model, pod.version)

    # --- the ladder -----------------------------------------------------------------------

    def _sleep_if_due(self, pod: PoolPod, at: float) -> None:
        replica = Replica(
            pod=pod.model,
            sleeping=not pod.awake,
            busy=pod.busy_until > at,
            ready=pod.ready_at <= at,
        )
        # A microsecond's slack: idle start + sleep-after - idle start can round
        # to just under sleep-after, and there is no later look.
        if pod.model in replicas_to_sleep(self.config, [replica], pod.busy_until, at + 1e-6):
            self._put_to_sleep(pod)
            self._keep_hole(pod.device)

    def _put_to_sleep(self, pod: PoolPod, *, at: float | None = None) -> float:
        """Put an idle awake pod to sleep at the level its node has room for, as the
        scaler does (announced for the handoff, then the sleep call), from ``at``
        (now); the seconds from then before its memory is free."""
        now = self.books.now if at is None else at
        level = self._level_for(pod)
        pod.awake, pod.level = False, level
        pod.call_at = now + self.pool.handoff_s
        pod.freed_at = pod.call_at + sleep_seconds(self.pool.weights_mib, level)
        pod.version += 1
        if level == 2:
            self.tally.level2_sleeps += 1
        self.moves.touched(pod.device)
        if math.isfinite(self.grace_s):
            idle_since = max(pod.busy_until, pod.ready_at)
            self.push(max(now, idle_since + self.grace_s), "zero", pod.model, pod.version)
        return pod.freed_at - now

    def _level_for(self, pod: PoolPod) -> int:
        """The configured level, or level 2 where the node's host memory cannot hold the weights."""
        fits = self.books.host_free_mib(pod.device) >= host_memory_mib(self.pool.weights_mib, 1)
        if self.config.sleep_level == 2 or not fits:
            return 2
        return 1

    def _grace_over(self, pod: PoolPod, at: float) -> None:
        """The grace period is over: an awake pod goes to zero; a sleeping one stays
        asleep while that is cheaper than zero (looking again one cold start later),
        its device's cost shared by the pods on it unless an awake model keeps it paid."""
        if pod.model in self.moves.moving:  # the move settles it first
            self.push(at + self.rungs.cold_start_s, "zero", pod.model, pod.version)
            return
        if not self.warm or pod.awake:
            self.remove(pod, at)
            return
        device = self.books.devices[pod.device]
        share = 0.0 if device.use(at) is GpuUse.SERVING else 1.0 / len(device.pods)
        depth = choose_depth(
            self.gaps_at(pod.model, at),
            rungs=self.rungs,
            now=at,
            device_share=share,
            allowed=(pod.level, ZERO),
        )
        if depth.rung == ZERO:
            self.remove(pod, at)
        else:
            self.push(at + self.rungs.cold_start_s, "zero", pod.model, pod.version)

    # --- room -----------------------------------------------------------------------------

    def _keep_hole(self, index: int) -> None:
        """Keep room to wake on device ``index``; where none can be kept, move its
        sleepers to devices that have it."""
        p = self.pool
        residents = self.books.residents(index, self)
        need = p.awake_mib - p.asleep_mib
        victims = keep_room_to_wake(
            budget_mib=p.gpu_memory_mib,
            residents=residents,
            wake_need_mib=need,
            busy_gap_s=self.busy_gap_s,
        )
        if victims:
            self._evict(victims)
        elif holeless(
            budget_mib=p.gpu_memory_mib,
            residents=residents,
            wake_need_mib=need,
            busy_gap_s=self.busy_gap_s,
        ):
            self.moves.rehome(index)

    def _evict(self, victims: tuple[str, ...], *, at: float | None = None) -> float:
        """Put ``victims`` to sleep (side by side, as the scaler does) from ``at`` (now);
        the seconds from then before their memory is free."""
        seconds = 0.0
        for v in victims:
            seconds = max(seconds, self._put_to_sleep(self.pods[v], at=at))
            self.tally.evictions += 1
        return seconds

    def _place(self) -> tuple[int, float]:
        """A device for a new pod and the wait for making room there."""
        p = self.pool
        if self.warm:
            spot = choose_site(
                self.books.sites(self),
                new_mib=p.awake_mib,
                wake_need_mib=p.awake_mib - p.asleep_mib,
                busy_gap_s=self.busy_gap_s,
                max_blocked=self.max_blocked(),
            )
            if spot is not None:
                return int(spot.device), self._evict(spot.sleep)
        else:
            for index in sorted(self.books.devices):
                device = self.books.devices[index]
                room = self.books.used_mib(index) + p.awake_mib <= p.gpu_memory_mib
                if len(device.pods) < p.slices and room:
                    return index, 0.0
        self.moves.last_opened_s = self.books.now
        return self.books.open_device(), 0.0

    def max_blocked(self) -> float:
        """The wakes a new pod's cold start may put at risk on a held device rather
        than open another: a miss is worth ``C / (1 - A)`` device-seconds, and a new
        device is expected to be held as long as the pool has gone without one
        (at least a cold start)."""
        held = max(self.rungs.cold_start_s, self.books.now - self.moves.last_opened_s)
        return (1.0 - self.rungs.attainment) * held / self.rungs.cold_start_s

    def _start_pod(self, model: str) -> PoolPod:
        index, extra = self._place()
        ready_at = self.books.now + extra + self.cold_start_s()
        pod = PoolPod(model, index, ready_at=ready_at)
        self.books.add(pod)
        self.pods[model] = pod
        self.cold_starts += 1
        if self.warm:
            self.moves.touched(index)
        return pod

    # --- requests -------------------------------------------------------------------------

    def request(self, r: TraceRequest) -> tuple[float | None, float | None, str | None, bool]:
        """Serve one request: (first token, finished, failure, held for a start or wake)."""
        at = r.offset_s
        self.expire(at)
        self.books.advance(at)
        gaps = self.gaps_at(r.model, at)
        self.gaps[r.model] = gaps.observe(busy=True, now=at)
        pod = self.pods.get(r.model)
        if pod is None:
            pod = self._start_pod(r.model)
        elif not pod.awake and at < pod.call_at:
            # Announced for a sleep, not asleep yet: the activation cancels it.
            pod.awake, pod.level, pod.call_at, pod.freed_at = True, 0, 0.0, 0.0
            self.moves.touched(pod.device)
        elif not pod.awake:
            pod = self._wake(pod, at)
        start = max(at, pod.ready_at)
        held = pod.ready_at > at
        pod.version += 1
        if start - at > self.world.cold_start_timeout_s:
            self._schedule(pod)
            return None, None, "cold-start-timeout", held
        e = self.engine
        first = start + e.step_time_s(decoding=0, prefill_tokens=r.prompt_tokens)
        finished = first + (r.output_tokens - 1) * e.step_time_s(decoding=1, prefill_tokens=0)
        self.books.devices[pod.device].intervals.append((start, finished))
        pod.busy_until = max(pod.busy_until, finished)
        self.last_end[pod.model] = pod.busy_until
        self._schedule(pod)
        return first, finished, None, held

    def _wake(self, pod: PoolPod, at: float) -> PoolPod:
        """Wake a sleeping pod for a request at ``at`` (once its own sleep is done):
        now, after requests about to finish beside it, or (no room within a cold
        start) a fresh pod."""
        p = self.pool
        wake_s = self.rungs.wake_s[pod.level]
        start = max(at, pod.freed_at)
        residents = [
            settled([r])[0] if r.pod == pod.model else r
            for r in self.books.residents(pod.device, self)
        ]
        plan = plan_wake(
            budget_mib=p.gpu_memory_mib,
            residents=residents,
            waking_pod=pod.model,
            need_mib=p.awake_mib - p.asleep_mib,
            now=start,
            max_wait_s=min(BUSY_WAIT_S, max(0.0, self.rungs.cold_start_s - wake_s)),
            evict_s=p.handoff_s + sleep_seconds(p.weights_mib, 1),
            busy_gap_s=self.busy_gap_s,
        )
        if not plan.fits:
            # Nothing there can make room in time: the path from zero, a fresh
            # pod where one fits, as the scaler falls back.
            self.tally.fallbacks += 1
            self.remove(pod, at)
            return self._start_pod(pod.model)
        made = self._evict(plan.sleep, at=plan.at_s)
        pod.awake, pod.cold, pod.level, pod.call_at, pod.freed_at = True, False, 0, 0.0, 0.0
        pod.ready_at = plan.at_s + made + wake_s
        self.tally.wakes += 1
        if plan.at_s > at:
            self.tally.waited += 1
        self.moves.touched(pod.device)
        return pod

    def finish(self, end_s: float) -> float:
        """Run the deadlines out to ``end_s`` and release every device then; the end time."""
        self.expire(end_s)
        self.books.advance(end_s)
        for pod in [*self.pods.values(), *self.moves.moving.values()]:
            self.books.remove(pod, end_s)
        self.pods.clear()
        self.moves.moving.clear()
        return end_s
