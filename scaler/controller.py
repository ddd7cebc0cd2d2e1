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
   :class:`~scaler.actuator.Actuator` carries out (every write is there).

Samples go into the hub as they arrive, not here. Every replica does 1-3, so
a follower that takes over has warm windows and a policy state that has long
left its warm-up; :meth:`Controller.poke` (called when this replica wins the
Lease) decides for every target at once instead of waiting for the next tick.
A follower keeps its copy of the status annotation in step with what the
leader wrote, so on taking over it rewrites nothing that did not change.

Main decisions:

- **No data is not zero load.** Until the Deployment list has synced, nothing
  is decided. When the API server is unreachable the last known Deployments
  and pods are kept; writes fail and are retried at the next tick. Nothing in
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
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaler.actuator import Actuator, WritePlan, plan_writes
from scaler.gpu_seconds import GpuSeconds
from scaler.kube.types import LeaderElector, PodInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.api import Decision, Mode, Observation, Reason, SignalKind, SignalReading
from scaler.policy.decide import PolicyState
from scaler.policy.protocol import Policy
from scaler.policy.status_doc import StatusDocument
from scaler.signals.combine import CombinedSignals
from scaler.signals.hub import SignalHub, SignalView
from scaler.targets import TargetBook, TargetConfig
from scaler.ticking import CallLater, RecheckTimers, Ticker
from scaler.warm import WarmTier

__all__ = ["Controller", "ControllerSettings", "TargetState"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    # The tick interval: a recheck due before the next tick gets a decision of its own.
    tick_interval_s: float = 2.0


@dataclass(frozen=True, slots=True)
class TargetState:
    """One target as the controller last saw and decided it (for ``/v1/targets``)."""

    key: str
    problem: str | None
    spec_replicas: int | None
    ready_replicas: int | None
    decision: Decision | None
    readings: Mapping[SignalKind, SignalReading]
    combined: CombinedSignals | None
    decided_at: float | None


@dataclass(slots=True)
class _Loop:
    """One target's state across decisions."""

    key: str
    state: PolicyState
    revision: int
    status: StatusDocument | None  # discrete status last written or seen
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    problem_reported: bool = False
    activation_pending: bool = False
    decision: Decision | None = None
    view: SignalView | None = None
    last_change_wall: str | None = None
    decided_at: float | None = None
    last_busy_s: float | None = None  # the last decision that saw work (warm tier's LRU)


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
        warm: Callable[[Controller], WarmTier] | None = None,
    ) -> None:
        self._book = targets
        self._signals = signals
        self._actuator = actuator
        self._policy = policy
        self._leader = leader
        self._metrics = metrics
        self._clock = clock
        self._settings = settings or ControllerSettings()
        self._gpu_seconds = GpuSeconds(metrics)
        self._loops: dict[str, _Loop] = {}
        self._last_tick: float | None = None
        # Extra decisions (rechecks, pokes) run only while run() is active, so a
        # controller driven tick by tick in a test leaves nothing behind.
        self._running = False
        self._rechecks = RecheckTimers(self._recheck_due, call_later)
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.ticks = 0
        self.rechecks_run = 0
        # The warm tier (sleeping replicas), built over this controller's views.
        self.warm: WarmTier | None = warm(self) if warm is not None else None
        self._waking: set[str] = set()  # targets with a background wake under way

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
        leading = self._leader.is_leader
        for key, entry in entries.items():
            loop = self._loops.get(key)
            if loop is None:
                self._loops[key] = _Loop(
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
        self, loop: _Loop, entry: TargetConfig, snap: TargetSnapshot, now: float
    ) -> Decision | None:
        view = self._signals.observe(loop.key, entry.config, now=now)
        loop.view = view
        config = entry.config
        if config is None:
            return None
        d = snap.deployment
        observation = Observation(
            ready_replicas=d.ready_replicas,
            spec_replicas=d.spec_replicas,
            signals=view.readings,
            demand=view.combined.demand,
            activation_requested=loop.activation_pending,
        )
        decision, loop.state = self._policy.decide(
            config=config, observation=observation, state=loop.state, now=now
        )
        if view.combined.demand.busy or loop.activation_pending:
            loop.last_busy_s = now
        loop.activation_pending = False
        loop.decision = decision
        loop.decided_at = now
        self._schedule_recheck(loop.key, decision, now)
        self._metrics.observe_decision(
            loop.key,
            desired=decision.desired,
            ready=d.ready_replicas,
            panic=decision.mode is Mode.PANIC,
            readings=view.readings,
            observed=view.combined.observed,
        )
        return decision

    def _plan(
        self, loop: _Loop, entry: TargetConfig, snap: TargetSnapshot, decision: Decision | None
    ) -> WritePlan | None:
        if not self._leader.is_leader:
            return None
        view = loop.view
        return plan_writes(
            deployment=snap.deployment,
            pods=snap.pods,
            decision=decision,
            problem=entry.problem,
            problem_reported=loop.problem_reported,
            status=loop.status,
            last_change_wall=loop.last_change_wall,
            pod_load=view.combined.pod_load if view is not None else None,
            readings=view.readings if view is not None else None,
        )

    async def _act(self, loop: _Loop, plan: WritePlan) -> None:
        """Carry out ``plan``; the target's lock is held by the caller."""
        outcome = await self._actuator.carry_out(plan)
        loop.status = outcome.status
        loop.last_change_wall = outcome.last_change_wall
        loop.problem_reported = loop.problem_reported or outcome.problem_reported

    async def _locked_act(self, loop: _Loop, plan: WritePlan) -> None:
        try:
            await self._act(loop, plan)
        finally:
            loop.lock.release()

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
            self._spawn(self._wake_more(key), f"tidal-scaler-wake:{key}")

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
        self._spawn(
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
        plan = self._plan(loop, entry, snap, fallback)
        if plan is not None:
            async with loop.lock:
                await self._act(loop, plan)

    # -- entry points -----------------------------------------------------------

    async def tick(self, now: float) -> None:
        """One decision for every target at ``now``; writes when leader."""
        self.ticks += 1
        started = self._clock()
        self._metrics.set_leader(self._leader.is_leader)
        if not self._book.synced:
            return
        snapshots = self._book.snapshots()
        warm = self.warm
        self._gpu_seconds.tick(now, snapshots, warm.asleep_count if warm is not None else None)
        self._last_tick = now
        entries = self._sync(now)
        writes = []
        for key, loop in self._loops.items():
            if loop.lock.locked():
                continue  # an activation is deciding or writing for it right now
            snap, entry = snapshots[key], entries[key]
            try:
                decision = self._decide(loop, entry, snap, now)
            except ValueError:
                log.exception("%s: the policy refused to decide", key)
                continue
            plan = self._plan(loop, entry, snap, decision)
            if plan is not None:
                await loop.lock.acquire()  # free: returns without yielding
                writes.append(self._locked_act(loop, plan))
            self._warm_tick(key, entry, snap, now)
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
        if known:
            await self._wake(key)
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
            decision = self._decide(loop, entry, snap, at)
            plan = self._plan(loop, entry, snap, decision)
            if plan is not None:
                await self._act(loop, plan)
        finally:
            loop.lock.release()
        return True

    async def run(self, ticker: Ticker) -> None:
        """Tick until cancelled (rechecks and pokes run only meanwhile)."""
        self._running = True
        try:
            async for now in ticker:
                try:
                    await self.tick(now)
                except Exception:  # one bad tick must not stop the controller
                    log.exception("tick failed")
        finally:
            self._running = False
            self._rechecks.cancel_all()
            tasks = list(self._side_tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- extra decisions --------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    def _schedule_recheck(self, key: str, decision: Decision, now: float) -> None:
        """Act on ``recheck_after_s``: decide again then if that is before the next tick."""
        after = decision.recheck_after_s
        if not self._running or after is None or after <= 0:
            return
        last = self._last_tick if self._last_tick is not None else now
        due = now + after
        if due < last + self._settings.tick_interval_s:  # else the tick decides in time
            self._rechecks.at(key, due, now=now)

    def _recheck_due(self, key: str) -> None:
        if self._running:
            self._spawn(self._recheck(key), f"tidal-scaler-recheck:{key}")

    async def _recheck(self, key: str) -> None:
        try:
            self.rechecks_run += 1
            await self.decide_now(key)
        except Exception:
            log.exception("%s: recheck failed", key)

    def poke(self) -> None:
        """Decide for every target now, not at the next tick (this replica just became
        leader: its windows are warm, so it acts on them at once)."""
        if self._running:
            self._spawn(self._poked(), "tidal-scaler-poke")

    async def _poked(self) -> None:
        try:
            await self.tick(self._clock())
        except Exception:
            log.exception("decision after becoming leader failed")

    # -- live view ----------------------------------------------------------------

    def target_states(self) -> list[TargetState]:
        """Every target's last decision and signals, sorted by key."""
        snapshots = self._book.snapshots()
        out = []
        for key, loop in sorted(self._loops.items()):
            snap = snapshots.get(key)
            entry = self._book.get(key)
            view = loop.view
            out.append(
                TargetState(
                    key=key,
                    problem=entry.problem if entry is not None else None,
                    spec_replicas=snap.deployment.spec_replicas if snap else None,
                    ready_replicas=snap.deployment.ready_replicas if snap else None,
                    decision=loop.decision,
                    readings=view.readings if view is not None else {},
                    combined=view.combined if view is not None else None,
                    decided_at=loop.decided_at,
                )
            )
        return out
