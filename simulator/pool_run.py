"""The shared pool's event loop: requests, cold starts, wakes, deadlines (``tidal simulate``).

:class:`PoolSim` serves a trace of many models on the devices of
:class:`~simulator.pool_books.PoolBooks`, asking the product's pure rules
(:mod:`scaler.policy.warm_tier`) at each turn: where a new pod goes, and how
a sleeping pod wakes. Its parts each own one job: each model's traffic as
the scaler sees it (:mod:`simulator.pool_traffic`), when and how deep pods
sleep (:mod:`simulator.pool_sleeps`), and moving pods between devices
(:mod:`simulator.pool_moves`); :mod:`simulator.warm_tier` describes the two
policies it runs and scores them. Deadlines (a sleep due, a grace period's
end, a replacement ready, a device to look at again) wait in one heap, each
stamped with the version of what it concerns, so a request that restarts a
pod's idle clock makes its old deadlines stale instead of removing them.

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
from scaler.policy.warm_tier import (
    BUSY_WAIT_S,
    Rungs,
    choose_site,
    plan_wake,
    settled,
    sleep_due,
)
from simulator.engine.sleep_timing import sleep_seconds, wake_seconds
from simulator.pool_books import PoolBooks, PoolConfig, PoolPod, WarmCounts
from simulator.pool_moves import PoolMoves
from simulator.pool_sleeps import PoolSleeps
from simulator.pool_traffic import PoolTraffic
from simulator.traces import TraceRequest
from simulator.world import WorldConfig

__all__ = ["PoolSim"]

_WAKE_TAGS = ("weights", "kv_cache")
#: What a wake may take of the objective: the rest is left for the request's own prefill.
_WAKE_SHARE_OF_OBJECTIVE = 0.9


@dataclass(slots=True)
class _Tally:
    wakes: int = 0
    fallbacks: int = 0
    waited: int = 0


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
        self.traffic = PoolTraffic(self.books, horizon_s=self.rungs.cold_start_s)
        self.moves = PoolMoves(self, pool)
        self.sleeps = PoolSleeps(self, pool)
        self.tally = _Tally()
        self.cold_starts = 0
        if self.warm:
            self.push(self.rungs.cold_start_s, "compact", "", 0)

    @property
    def counts(self) -> WarmCounts:
        t, s, m = self.tally, self.sleeps, self.moves
        return WarmCounts(
            t.wakes, s.evictions, t.fallbacks, self.books.peak, t.waited,
            s.level2_sleeps, m.moves, m.emptied,
        )  # fmt: skip

    # --- what the moves and the sleeps use ------------------------------------------------

    def push(self, at: float, what: str, key: str, version: int) -> None:
        self.order += 1
        heapq.heappush(self.deadlines, (at, self.order, what, key, version))

    def remove(self, pod: PoolPod, at: float) -> None:
        del self.pods[pod.model]
        index = pod.device
        self.books.remove(pod, at)
        if index in self.books.devices and self.warm:
            self.moves.touched(index)

    def took_over(self, pod: PoolPod, at: float) -> None:
        """A move's replacement took over: it is the model's pod now; its deadlines, and
        its sleep if the model is idle."""
        self.pods[pod.model] = pod
        pod.busy_until = max(pod.busy_until, self.traffic.last_end(pod.model))
        self._schedule(pod)
        self.sleeps.sleep_if_due(pod, at)

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
            self.sleeps.sleep_if_due(pod, at)
        elif what == "hole":
            if pod.awake and not pod.busy(at):
                self.sleeps.keep_hole(pod.device)
                if (self.traffic.mean_gap(pod.model) or math.inf) <= self.busy_gap_s:
                    self.moves.pair(pod)
        else:
            self.sleeps.grace_over(pod, at)

    def _schedule(self, pod: PoolPod) -> None:
        idle_since = max(pod.busy_until, pod.ready_at)
        if self.warm:
            self.push(idle_since, "hole", pod.model, pod.version)
            _, wait = sleep_due(self.config, idle_since, idle_since)
            self.push(idle_since + (wait or 0.0), "sleep", pod.model, pod.version)
        if math.isfinite(self.grace_s):
            self.push(idle_since + self.grace_s, "zero", pod.model, pod.version)

    # --- room -----------------------------------------------------------------------------

    def _place(self) -> tuple[int, float]:
        """A device for a new pod and the wait for making room there."""
        p = self.pool
        if self.warm:
            spot = choose_site(
                self.books.sites(self.traffic),
                new_mib=p.awake_mib,
                wake_need_mib=p.awake_mib - p.asleep_mib,
                busy_gap_s=self.busy_gap_s,
                max_blocked=self.max_blocked(),
            )
            if spot is not None:
                return int(spot.device), self.sleeps.evict(spot.sleep)
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
        self.traffic.arrived(r.model, at)
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
        self.traffic.busy_until(pod.model, pod.busy_until)
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
            for r in self.books.residents(pod.device, self.traffic)
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
        made = self.sleeps.evict(plan.sleep, at=plan.at_s)
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
