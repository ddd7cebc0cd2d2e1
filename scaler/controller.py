"""The control loop: when each target is decided, one decision at a time, and acting on it.

A decision for a target is made at every tick (default 2 s, from an
injectable :class:`~scaler.ticking.Ticker`), at once on an activation, at the
``recheck_after_s`` a decision asked for when that comes before the next
tick, and for every target when this replica wins the Lease
(:meth:`Controller.poke`). Each time the controller syncs the targets and
their configs (:class:`~scaler.targets.TargetBook`), has the
:class:`~scaler.deciding.Decider` decide from the signal hub's observation
and plan the writes, and, only when this replica holds the Lease, has the
:class:`~scaler.actuator.Actuator` carry the plan out (every write is there,
fenced by the Lease before each one). Beside the decisions it removes
orphaned spot companions and drives the warm tier (:mod:`scaler.warm_loop`);
GPU-seconds and cost are the GPU ledger's (:mod:`scaler.gpu_ledger`), which
runs on its own schedule, and which the live view reads.

Every replica decides, so a follower that takes over has warm windows and a
policy state that has long left its warm-up; a follower keeps its copy of
the status annotation in step with what the leader wrote, so on taking over
it rewrites nothing that did not change.

Main decisions:

- **A routing problem is reported, not acted on**: bad ``routing.tidal.dev/*``
  annotations raise one ``InvalidRouting`` Warning per set of annotations,
  and the target is scaled as usual (the activator routes with defaults).
- **No data is not zero load.** Until the Deployment list has synced, nothing
  is decided. When the API server is unreachable the last known Deployments
  and pods are kept; writes fail and back off (the actuator). Nothing in
  this module turns a missing answer into a zero.
- **One decision at a time per target.** An activation and a tick can race;
  a per-target lock is taken (without yielding) right after a decision that
  needs writes and held until they are done, and a tick skips a target whose
  writes are still in flight.
- **A conflict means the Deployment changed since the decision**: decide
  again on the re-read state (at most :data:`MAX_REDECISIONS` times), never
  re-apply the old decision; only conflicts that outlast those decisions
  count as a failed write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

from scaler.actuator import Actuator, WritePlan
from scaler.deciding import Decider
from scaler.gpu_ledger import GpuLedger
from scaler.kube.types import LeaderElector, TargetSnapshot
from scaler.metrics import Metrics
from scaler.placing import Placer
from scaler.policy.api import Decision
from scaler.policy.events import INVALID_ROUTING
from scaler.policy.protocol import Policy
from scaler.signals.hub import SignalHub
from scaler.target_state import TargetLoop, TargetState, sync_loops
from scaler.targets import TargetBook, TargetConfig
from scaler.ticking import CallLater, RecheckTimers, SideTasks, Ticker
from scaler.warm import WarmTier
from scaler.warm_loop import WarmLoop

__all__ = ["Controller", "ControllerSettings"]

log = logging.getLogger(__name__)

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
        warm: Callable[[WarmLoop], WarmTier] | None = None,
        ledger: GpuLedger | None = None,
    ) -> None:
        self._book = targets
        self._decider = Decider(
            signals=signals,
            policy=policy,
            actuator=actuator,
            leader=leader,
            metrics=metrics,
            placer=placer,
            wall_clock=wall_clock,
        )
        self._placer = placer  # forgets targets, removes orphans
        self._actuator = actuator
        self._policy = policy
        self._leader = leader
        self._metrics = metrics
        self._clock = clock
        self._settings = settings or ControllerSettings()
        self._ledger = ledger  # the cost in the live view
        self._loops: dict[str, TargetLoop] = {}
        self._last_tick: float | None = None
        # Extra decisions (rechecks, pokes) run only while run() is active.
        self._side = SideTasks()
        self._rechecks = RecheckTimers(self._recheck_due, call_later)
        self.ticks = 0
        self.rechecks_run = 0
        # The warm tier (sleeping replicas), driven from this loop.
        self._warm = (
            WarmLoop(
                book=targets,
                loops=self._loops,
                leader=leader,
                metrics=metrics,
                actuator=actuator,
                add_replica=self._add_replica,
                tier=warm,
            )
            if warm is not None
            else None
        )

    @property
    def warm(self) -> WarmTier | None:
        """The warm tier, when sleeping replicas are enabled."""
        return self._warm.tier if self._warm is not None else None

    # -- targets ------------------------------------------------------------

    def _sync(self, now: float) -> Mapping[str, TargetConfig]:
        entries = self._book.sync()
        initial = partial(self._policy.initial_state, now)
        leading = self._leader.is_leader
        for key in sync_loops(self._loops, entries, leading=leading, initial_state=initial):
            self._metrics.forget_target(key)
            self._actuator.forget(key)
            if self._placer is not None:
                self._placer.forget(key)
        return entries

    # -- deciding -------------------------------------------------------------

    def _decide(self, loop: TargetLoop, step: _Step, snap: TargetSnapshot) -> WritePlan | None:
        """Decide for ``loop`` on ``snap``; the writes the decision needs (leader only)."""
        entry, now = step.entry, step.now
        decision = self._decider.decide(loop, entry, snap, now, activation=step.activation)
        if decision is not None:
            self._schedule_recheck(loop.key, decision, now)
        return self._decider.plan(loop, entry, snap, decision, now)

    def _start(
        self, loop: TargetLoop, snap: TargetSnapshot, entry: TargetConfig, now: float
    ) -> tuple[_Step, WritePlan | None]:
        """Decide for one target, consuming a pending activation; the writes it needs."""
        step = _Step(snap, entry, now, loop.activation_pending)
        loop.activation_pending = False
        return step, self._decide(loop, step, snap)

    async def _act(self, loop: TargetLoop, step: _Step, plan: WritePlan) -> None:
        """Carry out ``plan``; the target's lock is held by the caller.

        On a conflict the Deployment changed since the decision: decide again on
        what the API server has now (re-checking the Lease in the plan), a
        bounded number of times, rather than re-apply the old decision.
        """
        snap = step.snap
        for attempt in range(MAX_REDECISIONS + 1):
            outcome = await self._actuator.carry_out(plan, now=step.now)
            loop.status = outcome.status
            loop.intended = outcome.intended
            loop.last_change_wall = outcome.last_change_wall
            loop.problem_reported = loop.problem_reported or outcome.problem_reported
            if outcome.fresh is None:
                return
            if attempt == MAX_REDECISIONS:
                assert outcome.conflict is not None  # a fresh read follows only a conflict
                await self._actuator.conflicted(snap.deployment, outcome.conflict, step.now)
                return
            fresh = outcome.fresh
            d = replace(
                snap.deployment,
                spec_replicas=fresh.replicas,
                resource_version=fresh.resource_version,
            )
            snap = replace(snap, deployment=d)
            next_plan = self._decide(loop, step, snap)
            if next_plan is None:
                return
            plan = next_plan

    async def _locked_act(self, loop: TargetLoop, step: _Step, plan: WritePlan) -> None:
        try:
            await self._act(loop, step, plan)
        finally:
            loop.lock.release()

    async def _add_replica(self, key: str, decision: Decision) -> None:
        """Carry out a decision made outside the policy (the warm tier's path from zero)."""
        loop, entry, snap = (
            self._loops.get(key),
            self._book.get(key),
            self._book.snapshots().get(key),
        )
        if loop is None or entry is None or snap is None:
            return
        async with loop.lock:
            now = self._clock()
            plan = self._decider.plan(loop, entry, snap, decision, now)
            if plan is not None:
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
        self._last_tick = now
        entries = self._sync(now)
        if self._placer is not None and self._leader.is_leader:
            # Companions of Deployments no longer opted in go; their owners are unpinned.
            for orphan in self._placer.orphans(snapshots):
                await self._actuator.remove_orphan(orphan)
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
            routing = entries[key].routing_problem
            if routing is not None and not loop.routing_reported and self._leader.is_leader:
                loop.routing_reported = True  # once per set of annotations, even if lost
                writes.append(self._report_routing(snapshots[key], routing))
            if self._warm is not None:
                self._warm.tick(key, entries[key], snapshots[key], now)
        if self._warm is not None:
            self._warm.learn(now)
        if writes:
            await asyncio.gather(*writes)
        self._metrics.tick_duration.observe(max(0.0, self._clock() - started))

    async def _report_routing(self, snap: TargetSnapshot, problem: str) -> None:
        message = f"the activator routes with the defaults of these annotations: {problem}"
        await self._actuator.note(
            snap.deployment, reason=INVALID_ROUTING, message=message, warning=True
        )

    async def activate(self, key: str, *, now: float | None = None) -> bool:
        """An activator asks to wake ``key``: decide for it now. False if the target is unknown.

        With the warm tier, a target whose replicas all sleep gets one woken
        first (the leader does it; the answer goes back once it is awake)."""
        known = await self.decide_now(key, now=now, activation=True)
        if known and self._warm is not None:
            await self._warm.activated(key)
        return known

    def not_woken(self, key: str) -> str | None:
        """Why an activation will not wake ``key``: its annotations are invalid (the
        problem names each key, value and what is allowed); None when it would."""
        if not self._book.synced:
            return None
        entry = self._book.sync().get(key)
        return entry.problem if entry is not None else None

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
            if self._warm is not None:
                await self._warm.stop()

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
        ledger = self._ledger
        return [
            loop.snapshot(
                snapshots.get(key),
                self._book.get(key),
                ledger.cost(key) if ledger is not None else None,
            )
            for key, loop in sorted(self._loops.items())
        ]
