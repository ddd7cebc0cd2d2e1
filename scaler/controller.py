"""The control loop: per target, read the signals, decide, act.

At every tick (default 2 s, from an injectable :class:`~scaler.ticking.Ticker`),
at once on an activation, and at the ``recheck_after_s`` a decision asked for
when that comes before the next tick, for each opted-in Deployment the
controller

1. syncs the targets and their configs (:class:`~scaler.targets.TargetBook`);
2. reads the target's observation out of the signal hub
   (:class:`~scaler.signals.hub.SignalHub`: combined sources, and the windows
   read into signals, a signal not fresh when any source behind it is stale);
3. calls the pure policy with the target's state and keeps the state it
   returns;
4. acts, only when this replica holds the Lease: the decision becomes a
   :class:`~scaler.actuator.WritePlan` that the
   :class:`~scaler.actuator.Actuator` carries out (every write is there,
   fenced by the Lease before each one). When a write meets a conflict the
   Deployment changed since the decision: the controller decides again on
   the re-read state (a bounded number of times), never re-applying the old
   decision.

Samples go into the hub as they arrive, not here. Every replica does 1-3, so
a follower that takes over has warm windows and a policy state that has long
left its warm-up; :meth:`Controller.poke` (called when this replica wins the
Lease) decides for every target at once instead of waiting for the next tick.
A follower keeps its copy of the status annotation in step with what the
leader wrote, so on taking over it rewrites nothing that did not change.

Main decisions:

- **No data is not zero load.** Until the Deployment list has synced, nothing
  is decided. When the API server is unreachable the last known Deployments
  and pods are kept; writes fail and back off (the actuator). Nothing in
  this module turns a missing answer into a zero.
- **A bad annotation leaves the Deployment alone**: one ``InvalidAnnotation``
  Warning Event per distinct set of annotations, and no write touches its
  scale until the annotations change.
- **One decision at a time per target.** An activation and a tick can race;
  a per-target lock is taken (without yielding) right after a decision that
  needs writes and held until they are done, and a tick skips a target whose
  writes are still in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any

from scaler.actuator import Actuator, WritePlan, plan_writes
from scaler.gpu_seconds import GpuSeconds, asleep_gpu_seconds
from scaler.kube.types import CompanionInfo, LeaderElector, PodInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.placing import Placer
from scaler.policy.api import Decision, Mode, Observation, Reason
from scaler.policy.protocol import Policy
from scaler.signals.hub import SignalHub
from scaler.target_state import TargetLoop, TargetState
from scaler.targets import TargetBook, TargetConfig
from scaler.ticking import CallLater, RecheckTimers, SideTasks, Ticker
from scaler.warm import WarmTier

__all__ = ["Controller", "ControllerSettings"]

log = logging.getLogger(__name__)

# How long an activation's answer waits for a wake from sleep: long enough for a
# plain level-1 wake, short of the activator's 2 s timeout.
ACTIVATE_WAIT_S = 1.5

# After a conflict, how many times one decision is made again on the re-read
# Deployment before waiting for the next tick.
MAX_REDECISIONS = 2


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    # The tick interval: a recheck due before the next tick gets a decision of its own.
    tick_interval_s: float = 2.0


@dataclass(frozen=True, slots=True)
class _Step:
    """What one decision was based on, kept to decide again after a conflict."""

    snap: TargetSnapshot
    entry: TargetConfig
    now: float
    activation: bool


class Controller:
    """Decides for every opted-in Deployment; acts when leader."""

    def __init__(
        self,
        *,
        targets: TargetBook,
        signals: SignalHub,
        actuator: Actuator,
        policy: Policy,
        leader: LeaderElector,
        metrics: Metrics,
        clock: Callable[[], float],
        settings: ControllerSettings | None = None,
        call_later: CallLater | None = None,
        placer: Placer | None = None,
        wall_clock: Callable[[], float] = time.time,
        warm: Callable[[Controller], WarmTier] | None = None,
    ) -> None:
        self._book = targets
        # Spot/on-demand placement (scaler.placing): planned on every replica so a
        # follower that takes over knows what is covered; written by the leader.
        # The wall clock measures pending-timeout against creationTimestamp.
        self._placer = placer
        self._wall_clock = wall_clock
        self._signals = signals
        self._actuator = actuator
        self._policy = policy
        self._leader = leader
        self._metrics = metrics
        self._clock = clock
        self._settings = settings or ControllerSettings()
        self._gpu_seconds = GpuSeconds(metrics)
        self._loops: dict[str, TargetLoop] = {}
        self._last_tick: float | None = None
        # Extra decisions (rechecks, pokes) run only while run() is active.
        self._side = SideTasks()
        self._rechecks = RecheckTimers(self._recheck_due, call_later)
        self.ticks = 0
        self.rechecks_run = 0
        # The warm tier (sleeping replicas), built over this controller's views.
        self.warm: WarmTier | None = warm(self) if warm is not None else None
        self._waking: set[str] = set()  # targets with a background wake under way
        # The warm tier's background work (wakes, Events): unlike rechecks it runs
        # in a controller driven tick by tick too; run() cancels what is left.
        self._warm_tasks: set[asyncio.Task[None]] = set()

    # -- views for the warm tier ----------------------------------------------------

    def idle_since(self, key: str) -> float | None:
        """Start of the target's current idle stretch (None: busy, or unknown)."""
        loop = self._loops.get(key)
        return loop.state.idle_since_s if loop is not None else None

    def last_used(self, key: str) -> float | None:
        """When the target last had work (None: not since this replica started)."""
        loop = self._loops.get(key)
        return loop.last_busy_s if loop is not None else None

    def pod_load(self, key: str, pod: str) -> float:
        """Requests running or waiting on one pod, as the last decision saw them."""
        loop = self._loops.get(key)
        if loop is None or loop.view is None:
            return 0.0
        return loop.view.combined.pod_load.get(pod, 0.0)

    # -- targets ------------------------------------------------------------

    def _sync(self, now: float) -> Mapping[str, TargetConfig]:
        entries = self._book.sync()
        for key in [k for k in self._loops if k not in entries]:
            del self._loops[key]
            self._metrics.forget_target(key)
            self._actuator.forget(key)
            if self._placer is not None:
                self._placer.forget(key)
        leading = self._leader.is_leader
        for key, entry in entries.items():
            loop = self._loops.get(key)
            if loop is None:
                self._loops[key] = TargetLoop(
                    key=key,
                    state=self._policy.initial_state(now),
                    revision=entry.revision,
                    status=entry.seen_status,
                )
                continue
            if loop.revision != entry.revision:
                loop.revision = entry.revision
                loop.problem_reported = False
            if not leading:
                # The leader writes the status; keep our copy in step so that, on
                # taking over, we rewrite it only if our decision differs.
                loop.status = entry.seen_status
        return entries

    # -- deciding -------------------------------------------------------------

    def _decide(
        self,
        loop: TargetLoop,
        entry: TargetConfig,
        snap: TargetSnapshot,
        now: float,
        *,
        activation: bool = False,
    ) -> Decision | None:
        view = self._signals.observe(loop.key, entry.config, now=now)
        loop.view = view
        config = entry.config
        if config is None:
            return None
        d = snap.deployment
        ready, current = self._pair_counts(loop, snap)
        observation = Observation(
            ready_replicas=ready,
            spec_replicas=current,
            signals=view.readings,
            demand=view.combined.demand,
            activation_requested=activation,
            demand_seen_at_s=view.demand_seen_at_s,
        )
        decision, loop.state = self._policy.decide(
            config=config, observation=observation, state=loop.state, now=now
        )
        if view.combined.demand.busy or activation:
            loop.last_busy_s = now
        if self._placer is not None:
            loop.placement = self._placer.plan(
                deployment=d,
                pods=snap.pods,
                placement=config.placement,
                target=decision.desired,
                now_wall=self._wall_clock(),
            )
        loop.decision = decision
        loop.decided_at = now
        self._schedule_recheck(loop.key, decision, now)
        self._metrics.observe_decision(
            loop.key,
            desired=decision.desired,
            ready=ready,
            panic=decision.mode is Mode.PANIC,
            readings=view.readings,
            observed=view.combined.observed,
            spot_fallback=loop.placement.split.covering if loop.placement is not None else 0,
        )
        if loop.placement is not None:
            companion = self._companion(snap)
            split = loop.placement.split
            self._metrics.observe_split(
                loop.key,
                desired={"on-demand": split.on_demand, "spot": split.spot},
                ready={
                    "on-demand": d.ready_replicas,
                    "spot": companion.ready_replicas if companion is not None else 0,
                },
            )
        return decision

    def _companion(self, snap: TargetSnapshot) -> CompanionInfo | None:
        if self._placer is None:
            return None
        return self._placer.view.companions().get(snap.deployment.key)

    def _pair_counts(self, loop: TargetLoop, snap: TargetSnapshot) -> tuple[int, int]:
        """Ready and current replicas of the whole model: with a spot companion, both halves.

        The current scale of a pair is the last target decided (the status
        annotation's ``desired``), not the sum of the two Deployments, which
        includes on-demand cover and spot over-provisioning.
        """
        d = snap.deployment
        companion = self._companion(snap)
        if companion is None:
            return d.ready_replicas, d.spec_replicas
        ready = d.ready_replicas + companion.ready_replicas
        last = (loop.status or {}).get("desired")
        if isinstance(last, int) and last >= 0:
            return ready, last
        return ready, d.spec_replicas + companion.spec_replicas

    def _account(self, now: float, snapshots: Mapping[str, TargetSnapshot]) -> None:
        """GPU-seconds by capacity type (each pod's node, with a placer) and cost."""
        asleep = self.warm.asleep_count if self.warm is not None else None
        if self._placer is None:
            self._gpu_seconds.tick(now, snapshots, asleep)
            return
        if self._last_tick is not None and now > self._last_tick:
            seconds = now - self._last_tick
            added = 0.0
            for snap in snapshots.values():
                for facts in self._placer.facts(snap.ready_pods):
                    gpus = facts.gpus or snap.deployment.gpus_per_replica
                    self._metrics.add_gpu_seconds(facts.capacity_type.value, gpus * seconds)
                    added += gpus * seconds
            sleeping = min(added, asleep_gpu_seconds(snapshots, asleep, seconds))
            self._metrics.add_gpu_seconds_by_state(awake=added - sleeping, asleep=sleeping)
        self._placer.account(
            {key: snap.pods for key, snap in snapshots.items()}, now_wall=self._wall_clock()
        )

    async def _remove_orphans(self, snapshots: Mapping[str, TargetSnapshot]) -> None:
        """Companions of Deployments no longer opted in go, and their owners are unpinned."""
        if self._placer is None or not self._leader.is_leader:
            return
        for orphan in self._placer.orphans(snapshots):
            await self._actuator.remove_orphan(orphan)

    def _plan(
        self,
        loop: TargetLoop,
        entry: TargetConfig,
        snap: TargetSnapshot,
        decision: Decision | None,
        now: float,
    ) -> WritePlan | None:
        if not self._leader.is_leader:
            return None
        waking = decision is not None and decision.reason is Reason.ACTIVATED
        if self._actuator.backing_off(loop.key, now) and not waking:
            return None  # failed writes: wait out the backoff (waking from zero never waits)
        view = loop.view
        companion = self._companion(snap)
        placement = loop.placement if decision is not None else None
        return plan_writes(
            placement=placement,
            companion_replicas=companion.spec_replicas if companion is not None else None,
            total_before=self._pair_counts(loop, snap)[1] if placement is not None else None,
            deployment=snap.deployment,
            pods=snap.pods,
            decision=decision,
            problem=entry.problem,
            problem_reported=loop.problem_reported,
            status=loop.status,
            intended=loop.intended,
            last_change_wall=loop.last_change_wall,
            pod_load=view.combined.pod_load if view is not None else None,
            readings=view.readings if view is not None else None,
        )

    def _start(
        self, loop: TargetLoop, snap: TargetSnapshot, entry: TargetConfig, now: float
    ) -> tuple[_Step, WritePlan | None]:
        """Decide for one target, consuming a pending activation; the writes it needs."""
        step = _Step(snap, entry, now, loop.activation_pending)
        loop.activation_pending = False
        decision = self._decide(loop, entry, snap, now, activation=step.activation)
        return step, self._plan(loop, entry, snap, decision, now)

    async def _act(self, loop: TargetLoop, step: _Step, plan: WritePlan) -> None:
        """Carry out ``plan``; the target's lock is held by the caller.

        On a conflict the Deployment changed since the decision: decide again on
        what the API server has now (re-checking the Lease in :meth:`_plan`), a
        bounded number of times, rather than re-apply the old decision.
        """
        snap = step.snap
        for attempt in range(MAX_REDECISIONS + 1):
            outcome = await self._actuator.carry_out(plan, now=step.now)
            loop.status = outcome.status
            loop.intended = outcome.intended
            loop.last_change_wall = outcome.last_change_wall
            loop.problem_reported = loop.problem_reported or outcome.problem_reported
            if outcome.fresh is None or attempt == MAX_REDECISIONS:
                return
            fresh = outcome.fresh
            d = replace(
                snap.deployment,
                spec_replicas=fresh.replicas,
                resource_version=fresh.resource_version,
            )
            snap = replace(snap, deployment=d)
            decision = self._decide(loop, step.entry, snap, step.now, activation=step.activation)
            next_plan = self._plan(loop, step.entry, snap, decision, step.now)
            if next_plan is None:
                return
            plan = next_plan

    async def _locked_act(self, loop: TargetLoop, step: _Step, plan: WritePlan) -> None:
        try:
            await self._act(loop, step, plan)
        finally:
            loop.lock.release()

    # -- the warm tier ------------------------------------------------------------

    def _spawn_warm(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._warm_tasks.add(task)
        task.add_done_callback(self._warm_tasks.discard)

    def _warm_tick(self, key: str, entry: TargetConfig, snap: TargetSnapshot, now: float) -> None:
        """Leader only: keep the warm tier's view of the pods, start due sleeps."""
        warm, config = self.warm, entry.config
        if warm is None or config is None or config.sleep_after_s is None:
            return
        if not self._leader.is_leader:
            warm.step_down()
            return
        warm.remember_addresses(key, config, snap.pods)
        warm.forget_missing(key, snap.pods)
        warm.reconcile(key, config, snap.pods)
        warm.consider_sleep(key, config, snap.pods, now)
        self._metrics.set_sleeping(key, warm.asleep_count(key))
        # Demand for more replicas than are awake (an activation wakes only one):
        # wake the next sleeping one rather than let the policy count it as ready.
        loop = self._loops.get(key)
        decision = loop.decision if loop is not None else None
        if decision is None or self.idle_since(key) is not None or warm.asleep_count(key) == 0:
            return
        awake = sum(
            1
            for p in snap.pods
            if p.ready and not p.terminating and warm.phase_of(f"{p.namespace}/{p.name}") is None
        )
        if decision.desired > awake and key not in self._waking:
            self._waking.add(key)
            self._spawn_warm(self._wake_more(key), f"tidal-scaler-wake:{key}")

    async def _wake_more(self, key: str) -> None:
        try:
            if self.warm is not None:
                await self.warm.wake(key, lru=self._lru_on)
        except Exception:
            log.exception("%s: waking another replica failed", key)
        finally:
            self._waking.discard(key)

    def note(self, key: str, reason: str, message: str, warning: bool) -> None:
        """An Event about ``key`` from the warm tier (best effort, in the background)."""
        snap = self._book.snapshots().get(key)
        if snap is None:
            return
        if reason == "Slept":
            self._metrics.slept(key)
        self._spawn_warm(
            self._actuator.note(snap.deployment, reason=reason, message=message, warning=warning),
            f"tidal-scaler-event:{key}",
        )

    def _lru_on(self, node: str | None, target: str) -> list[tuple[str, str, int]]:
        """Idle awake pods of other warm-tier models on ``node``, least recently used first."""
        warm = self.warm
        if warm is None:
            return []
        snapshots = self._book.snapshots()
        pods: dict[str, tuple[PodInfo, ...]] = {}
        levels: dict[str, int] = {}
        for key, snap in snapshots.items():
            entry = self._book.get(key)
            config = entry.config if entry is not None else None
            if config is None or config.sleep_after_s is None:
                continue  # only models opted in to the warm tier are put to sleep
            pods[key] = snap.pods
            levels[key] = config.sleep_level
        ranked = warm.idle_awake_on(node, exclude_target=target, pods=pods)
        return [(t, pod, levels[t]) for _, t, pod in ranked]

    async def _wake(self, key: str) -> None:
        """An activation for a target whose replicas sleep: wake one, or add one from zero."""
        warm = self.warm
        entry = self._book.get(key)
        snap = self._book.snapshots().get(key)
        if warm is None or entry is None or snap is None or entry.config is None:
            return
        if not self._leader.is_leader or warm.asleep_count(key) == 0:
            return
        awake_ready = [
            p
            for p in snap.pods
            if p.ready and not p.terminating and warm.phase_of(f"{p.namespace}/{p.name}") is None
        ]
        if awake_ready:
            return
        outcome = await warm.wake(key, lru=self._lru_on)
        if outcome.woke is not None or outcome.reason in ("waking already", "nothing sleeps"):
            return
        # The path from zero: one more replica, cold-started, beside the sleeping
        # ones, within max-scale (at max-scale the activator's retry tries again).
        loop = self._loops.get(key)
        d = snap.deployment
        if loop is None or d.spec_replicas >= entry.config.max_scale:
            return
        fallback = Decision(
            desired=d.spec_replicas + 1,
            reason=Reason.ACTIVATED,
            mode=Mode.STABLE,
            message=f"waking from sleep failed ({outcome.reason}); adding a replica from zero",
        )
        now = self._clock()
        plan = self._plan(loop, entry, snap, fallback, now)
        if plan is not None:
            async with loop.lock:
                await self._act(loop, _Step(snap, entry, now, True), plan)

    # -- entry points -----------------------------------------------------------

    async def tick(self, now: float) -> None:
        """One decision for every target at ``now``; writes when leader."""
        self.ticks += 1
        started = self._clock()
        self._metrics.set_leader(self._leader.is_leader)
        if not self._book.synced:
            return
        snapshots = self._book.snapshots()
        self._account(now, snapshots)
        self._last_tick = now
        entries = self._sync(now)
        await self._remove_orphans(snapshots)
        writes = []
        for key, loop in self._loops.items():
            if loop.lock.locked():
                continue  # an activation is deciding or writing for it right now
            try:
                step, plan = self._start(loop, snapshots[key], entries[key], now)
            except ValueError:
                log.exception("%s: the policy refused to decide", key)
                continue
            if plan is not None:
                await loop.lock.acquire()  # free: returns without yielding
                writes.append(self._locked_act(loop, step, plan))
            self._warm_tick(key, entries[key], snapshots[key], now)
        if self.warm is not None and self._leader.is_leader:
            self.warm.learn(now)
        if writes:
            await asyncio.gather(*writes)
        self._metrics.tick_duration.observe(max(0.0, self._clock() - started))

    async def activate(self, key: str, *, now: float | None = None) -> bool:
        """An activator asks to wake ``key``: decide for it now. False if the target is unknown.

        With the warm tier, a target whose replicas all sleep gets one woken
        first (the leader does it; the answer goes back once it is awake)."""
        known = await self.decide_now(key, now=now, activation=True)
        if known and self.warm is not None:
            # The wake runs on its own: an activator that stops waiting for this
            # answer (its timeout is shorter than a wake that first makes room)
            # cannot cancel it; it learns the outcome from the next answer.
            task = asyncio.ensure_future(self._wake(key))
            task.set_name(f"tidal-scaler-wake:{key}")
            self._warm_tasks.add(task)
            task.add_done_callback(self._warm_tasks.discard)
            await asyncio.wait({task}, timeout=ACTIVATE_WAIT_S)
        return known

    async def decide_now(
        self, key: str, *, now: float | None = None, activation: bool = False
    ) -> bool:
        """One decision for ``key`` outside the tick (activation, recheck); writes when
        leader. False if the target is unknown."""
        at = self._clock() if now is None else now
        if not self._book.synced or key not in self._book.snapshots():
            return False
        self._sync(at)
        loop = self._loops[key]
        if activation:
            loop.activation_pending = True
        await loop.lock.acquire()
        try:
            snap = self._book.snapshots().get(key)
            entry = self._book.get(key)
            if snap is None or entry is None:
                return False
            step, plan = self._start(loop, snap, entry, at)
            if plan is not None:
                await self._act(loop, step, plan)
        finally:
            loop.lock.release()
        return True

    async def run(self, ticker: Ticker) -> None:
        """Tick until cancelled (rechecks and pokes run only meanwhile)."""
        self._side.running = True
        try:
            async for now in ticker:
                try:
                    await self.tick(now)
                except Exception:  # one bad tick must not stop the controller
                    log.exception("tick failed")
        finally:
            self._rechecks.cancel_all()
            await self._side.stop()
            tasks = list(self._warm_tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- extra decisions --------------------------------------------------------------

    def _schedule_recheck(self, key: str, decision: Decision, now: float) -> None:
        """Act on ``recheck_after_s``: decide again then if that is before the next tick."""
        after = decision.recheck_after_s
        if not self._side.running or after is None or after <= 0:
            return
        last = self._last_tick if self._last_tick is not None else now
        due = now + after
        if due < last + self._settings.tick_interval_s:  # else the tick decides in time
            self._rechecks.at(key, due, now=now)

    def _recheck_due(self, key: str) -> None:
        name, failure = f"tidal-scaler-recheck:{key}", f"{key}: recheck failed"
        self._side.spawn(lambda: self._recheck(key), name, failure=failure)

    async def _recheck(self, key: str) -> bool:
        self.rechecks_run += 1
        return await self.decide_now(key)

    def poke(self) -> None:
        """Decide for every target now, not at the next tick (this replica just became
        leader: its windows are warm, so it acts on them at once)."""
        failure = "decision after becoming leader failed"
        self._side.spawn(lambda: self.tick(self._clock()), "tidal-scaler-poke", failure=failure)

    # -- live view ----------------------------------------------------------------

    def target_states(self) -> list[TargetState]:
        """Every target's last decision and signals, sorted by key."""
        snapshots = self._book.snapshots()
        placer = self._placer
        return [
            loop.snapshot(
                snapshots.get(key),
                self._book.get(key),
                placer.cost(key) if placer is not None else None,
            )
            for key, loop in sorted(self._loops.items())
        ]
