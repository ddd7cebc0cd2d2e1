"""One target's reconciler: its state, its lock, its decisions and its write bookkeeping.

The controller keeps one :class:`Reconciler` per opted-in target and only
says when to reconcile (ticks, activations, rechecks, pokes); everything a
target carries from one decision to the next lives here, with one owner:
the policy state, the lock, the last decision and signal view, the placement
plan, and the :class:`~scaler.actuator.StatusRecord` (what the status
annotation holds, a status still to be written, the last change time, the
problem already reported). :meth:`Reconciler.reconcile` does one step:

1. reads the target's observation out of the signal hub (a signal is not
   fresh when any source behind it is stale);
2. counts ready and current replicas, with a spot companion the whole pair
   (:func:`~scaler.placement.placer.pair_counts`): the companion is looked
   up and the pair counted once per decision, and the plan reuses both;
3. calls the pure policy with its state and keeps the state it returns;
4. with a :class:`~scaler.placement.placer.Placer`, splits the decided
   replicas between on-demand and spot (every replica plans, so a follower
   that takes over knows what is covered);
5. publishes the decision's gauges and, on the leader only, plans the writes
   (:func:`~scaler.actuator.plan_writes`) and has the actuator carry them out
   under the target's lock, keeping the record the actuator hands back;
6. raises the ``InvalidRouting`` Warning once per set of annotations;
7. with the warm tier, publishes the model's view for it
   (:class:`~scaler.warm.views.ModelView`) and, at a tick, tends its replicas
   (below).

**Warm-tier intents** (leader only; a follower keeps nothing asleep in its
books, the replicas themselves are the truth a new leader reads back):

- at a tick, the tier starts the sleeps due, and when the decision wants
  more replicas than are awake another sleeping one is woken in the
  background (the policy counts sleeping replicas as ready);
- an activation wakes one sleeping replica; its answer waits at most
  :data:`ACTIVATE_WAIT_S` (short of the activator's 2 s timeout) and the
  wake goes on in the background, the activator learning its outcome from
  the next answer;
- a failed wake falls back to the path from zero: one more replica,
  cold-started beside the sleeping ones, within max-scale, decided here
  (``Activated``) and carried out under the lock like any other decision.

Main decisions:

- **A bad annotation leaves the Deployment alone**: no decision, and a plan
  with one ``InvalidAnnotation`` Warning Event per distinct set of
  annotations; no write touches its scale until the annotations change.
- **One decision at a time.** A tick skips a target whose lock is held (an
  activation is deciding or writing for it); an activation or recheck waits
  for the lock. The lock is taken without yielding right after a decision
  that needs writes, so no other decision slips in between.
- **A conflict means the Deployment changed since the decision**: decide
  again on the re-read state (at most :data:`MAX_REDECISIONS` times), never
  re-apply the old decision; only conflicts that outlast those decisions
  count as a failed write.
- **Failed writes back off, but not a wake from zero.** A target whose
  writes failed waits out its backoff before the next plan, except an
  ``Activated`` decision: a held request must not wait for a backoff that an
  unrelated failure started.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from scaler.actuator import Actuator, Decided, StatusRecord, WritePlan, plan_writes
from scaler.gpu_ledger import CostView
from scaler.kube.types import CompanionInfo, LeaderElector, TargetSnapshot
from scaler.metrics import Metrics
from scaler.placement.placer import Placer, pair_counts
from scaler.policy.api import Decision, Mode, Reason
from scaler.policy.decide import PolicyState
from scaler.policy.events import ADAPTER_LOAD_REFUSED, INVALID_ROUTING
from scaler.policy.fallback import FallbackState
from scaler.policy.placement_plan import PlacementPlan
from scaler.policy.protocol import Policy
from scaler.signals.hub import SignalHub, SignalView
from scaler.targets.book import TargetBook, TargetConfig
from scaler.targets.state import TargetState
from scaler.warm.tier import WarmTier
from scaler.warm.views import ModelBoard, ModelView

__all__ = ["ACTIVATE_WAIT_S", "MAX_REDECISIONS", "Outcome", "Reconciler", "Shared", "Trigger"]

log = logging.getLogger(__name__)

# After a conflict, how many times one decision is made again on the re-read
# Deployment before waiting for the next tick.
MAX_REDECISIONS = 2

# How long an activation's answer waits for a wake from sleep: long enough for a
# plain level-1 wake, short of the activator's 2 s timeout.
ACTIVATE_WAIT_S = 1.5


class Trigger(enum.Enum):
    """Why a target is reconciled now."""

    TICK = "tick"  # skips a target whose lock is held
    ACTIVATION = "activation"  # an activator asks to wake it: the decision may wake from zero
    RECHECK = "recheck"  # a decision asked to be rechecked before the next tick


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one reconcile did: the last decision made (``None``: none, the
    annotations are invalid or the target is unknown), and whether it ran at
    all (``skipped``: a tick found the target busy).

    At a tick the writes (and the ``InvalidRouting`` Event) go on in
    ``writing``, a task that ends with the outcome of the decisions made
    while writing (after a conflict), so that a tick decides for every target
    before any write holds it up and the targets' writes run side by side."""

    decision: Decision | None = None
    skipped: bool = False
    known: bool = True
    writing: asyncio.Task[Outcome] | None = None


@dataclass(frozen=True, slots=True)
class Shared:
    """What every target's reconciler uses, owned by the service."""

    book: TargetBook
    signals: SignalHub
    policy: Policy
    actuator: Actuator
    leader: LeaderElector
    metrics: Metrics
    placer: Placer | None
    clock: Callable[[], float]
    # The wall clock measures placement's pending-timeout against the pods'
    # creationTimestamp, which the API server writes in wall time.
    wall_clock: Callable[[], float]
    # The warm tier and the board of model views it reads, when sleeping is enabled.
    warm: WarmTier | None = None
    board: ModelBoard | None = None


@dataclass(slots=True)
class _Step:
    """One decision and what it saw, kept to plan it and to decide again after a conflict."""

    snap: TargetSnapshot
    entry: TargetConfig
    now: float
    activation: bool
    decided: Decided


@dataclass(slots=True)
class Reconciler:
    """One target's state across decisions (see the module docstring)."""

    key: str
    shared: Shared
    state: PolicyState
    revision: int  # the TargetConfig revision last seen
    record: StatusRecord = field(default_factory=StatusRecord)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    routing_reported: bool = False  # the InvalidRouting Event of this revision was raised
    activation_pending: bool = False
    decision: Decision | None = None
    view: SignalView | None = None
    decided_at: float | None = None
    last_busy_s: float | None = None  # the last decision that saw work (warm tier's LRU)
    placement: PlacementPlan | None = None  # this decision's, when a placer is set
    # The spot cover the last plan left; kept through decisions that plan nothing
    # (invalid annotations), as the cover itself is still there.
    fallback: FallbackState | None = None
    waking: bool = False  # a background wake for more replicas is under way
    # Background wakes (and their fallback): stop() cancels what is left.
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @classmethod
    def start(cls, entry: TargetConfig, shared: Shared, now: float) -> Reconciler:
        """A new target's reconciler, from the policy's initial state and the status
        annotation as the Deployment carries it."""
        return cls(
            key=entry.key,
            shared=shared,
            state=shared.policy.initial_state(now),
            revision=entry.revision,
            record=StatusRecord(status=entry.seen_status),
        )

    def sync(self, entry: TargetConfig, *, leading: bool) -> None:
        """Keep in step with the target's config: a changed config may report its
        problem again; a follower copies the status annotation the leader wrote, so
        that on taking over it rewrites it only if its decision differs."""
        if self.revision != entry.revision:
            self.revision = entry.revision
            self.record = replace(self.record, problem_reported=False)
            self.routing_reported = False
        if not leading:
            self.record = replace(self.record, status=entry.seen_status)

    # -- reconciling ------------------------------------------------------------------

    async def reconcile(self, now: float, trigger: Trigger) -> Outcome:
        """Decide for this target at ``now`` and, when leader, carry out the writes.

        Raises ``ValueError`` when the policy refuses the inputs."""
        book = self.shared.book
        if trigger is Trigger.TICK:
            if self.lock.locked():
                return Outcome(skipped=True)  # an activation is deciding or writing for it
            snap, entry = book.snapshots().get(self.key), book.get(self.key)
            if snap is None or entry is None:
                return Outcome(known=False)
            step, plan = self._start(snap, entry, now)
            self._tend_warm(snap, entry, now)
            report = self._routing_due(entry)
            refused = self._refusals_due()
            if plan is None and report is None and refused is None:
                return Outcome(decision=self.decision)
            if plan is not None:
                await self.lock.acquire()  # free: returns without yielding
            writing = asyncio.ensure_future(self._write(step, plan, report, refused))
            writing.set_name(f"tidal-scaler-write:{self.key}")
            return Outcome(decision=self.decision, writing=writing)
        if trigger is Trigger.ACTIVATION:
            self.activation_pending = True
        async with self.lock:
            snap, entry = book.snapshots().get(self.key), book.get(self.key)
            if snap is None or entry is None:
                return Outcome(known=False)
            step, plan = self._start(snap, entry, now)
            if plan is not None:
                await self._act(step, plan)
        return Outcome(decision=self.decision)

    async def _add_replica(self, decision: Decision, now: float) -> None:
        """Carry out a decision made outside the policy (the warm tier's path from
        zero when a wake failed), under the lock like every other."""
        book = self.shared.book
        async with self.lock:
            snap, entry = book.snapshots().get(self.key), book.get(self.key)
            if snap is None or entry is None:
                return
            step = _Step(snap, entry, now, True, self._decided(snap, entry, decision))
            plan = self._plan(step)
            if plan is not None:
                await self._act(step, plan)

    def _start(
        self, snap: TargetSnapshot, entry: TargetConfig, now: float
    ) -> tuple[_Step, WritePlan | None]:
        """Decide, consuming a pending activation; the writes the decision needs."""
        activation, self.activation_pending = self.activation_pending, False
        return self._decide(snap, entry, now, activation)

    def _decide(
        self, snap: TargetSnapshot, entry: TargetConfig, now: float, activation: bool
    ) -> tuple[_Step, WritePlan | None]:
        shared = self.shared
        view = shared.signals.observe(self.key, entry.config, now=now)
        self.view = view
        config = entry.config
        self.decided_at = now
        if config is None:
            # Nothing is decided while the annotations are invalid: an earlier
            # decision must not show as the current one (GET /v1/targets).
            self.decision = None
            self.placement = None
            step = _Step(snap, entry, now, activation, self._decided(snap, entry, None))
            return step, self._plan(step)
        companion = self._companion(snap)
        ready, current = self._pair_counts(snap, companion)
        observation = view.observation(ready=ready, spec=current, activation=activation)
        decision, self.state = shared.policy.decide(
            config=config, observation=observation, state=self.state, now=now
        )
        if view.combined.demand.busy or activation:
            self.last_busy_s = now
        if shared.placer is not None:
            self.placement = shared.placer.plan(
                snap,
                companion=companion,
                placement=config.placement,
                target=decision.desired,
                state=self.fallback,
                now_wall=shared.wall_clock(),
            )
            self.fallback = self.placement.state
        self.decision = decision
        self._publish(snap, companion, decision, ready)
        self._publish_view(snap, entry)
        decided = self._decided(snap, entry, decision, (companion, current))
        step = _Step(snap, entry, now, activation, decided)
        return step, self._plan(step)

    def _decided(
        self,
        snap: TargetSnapshot,
        entry: TargetConfig,
        decision: Decision | None,
        pair: tuple[CompanionInfo | None, int] | None = None,
    ) -> Decided:
        """``decision`` with what it saw, for the plan; ``pair``: the companion and the
        pair's current scale as the decision counted them (looked up here only for a
        decision made outside the policy)."""
        view = self.view
        placement = self.placement if decision is not None else None
        companion, current = pair if pair is not None else (None, None)
        if placement is not None and pair is None:
            companion = self._companion(snap)
            current = self._pair_counts(snap, companion)[1]
        return Decided(
            decision=decision,
            problem=entry.problem,
            readings=view.readings if view is not None else {},
            pod_load=view.combined.pod_load if view is not None else {},
            placement=placement,
            companion_replicas=companion.spec_replicas if companion is not None else None,
            total_before=current if placement is not None else None,
        )

    def _plan(self, step: _Step) -> WritePlan | None:
        """The writes the step's decision needs, or None: not the leader, or backing off."""
        shared = self.shared
        if not shared.leader.is_leader:
            return None
        decision = step.decided.decision
        waking = decision is not None and decision.reason is Reason.ACTIVATED
        if shared.actuator.backing_off(self.key, step.now) and not waking:
            return None
        return plan_writes(step.snap.deployment, step.snap.pods, step.decided, self.record)

    async def _act(self, step: _Step, plan: WritePlan) -> None:
        """Carry out ``plan``; the lock is held by the caller.

        On a conflict the Deployment changed since the decision: decide again on
        what the API server has now (re-checking the Lease in the plan), a
        bounded number of times, rather than re-apply the old decision.
        """
        actuator = self.shared.actuator
        snap = step.snap
        for attempt in range(MAX_REDECISIONS + 1):
            outcome = await actuator.carry_out(plan, now=step.now)
            # The record as the actuator left it; a config change meanwhile may have
            # cleared the problem already reported, and that clearing stands.
            reported_now = outcome.record.problem_reported and not plan.record.problem_reported
            self.record = replace(
                outcome.record, problem_reported=self.record.problem_reported or reported_now
            )
            if outcome.fresh is None:
                return
            if attempt == MAX_REDECISIONS:
                assert outcome.conflict is not None  # a fresh read follows only a conflict
                await actuator.conflicted(snap.deployment, outcome.conflict, step.now)
                return
            fresh = outcome.fresh
            d = replace(
                snap.deployment,
                spec_replicas=fresh.replicas,
                resource_version=fresh.resource_version,
            )
            snap = replace(snap, deployment=d)
            step, next_plan = self._decide(snap, step.entry, step.now, step.activation)
            if next_plan is None:
                return
            plan = next_plan

    async def _write(
        self, step: _Step, plan: WritePlan | None, report: str | None, refused: str | None = None
    ) -> Outcome:
        """A tick's writes, under the lock the tick took for them, and its Events."""
        writes = []
        if plan is not None:
            writes.append(self._locked_act(step, plan))
        deployment, note = step.snap.deployment, self.shared.actuator.note
        if report is not None:
            writes.append(note(deployment, reason=INVALID_ROUTING, message=report, warning=True))
        if refused is not None:
            writes.append(
                note(deployment, reason=ADAPTER_LOAD_REFUSED, message=refused, warning=True)
            )
        await asyncio.gather(*writes)
        return Outcome(decision=self.decision)

    async def _locked_act(self, step: _Step, plan: WritePlan) -> None:
        try:
            await self._act(step, plan)
        finally:
            self.lock.release()

    def _refusals_due(self) -> str | None:
        """The AdapterLoadRefused message for the refusals the activators reported."""
        refusals = self.shared.signals.take_adapter_refusals(self.key)
        if not refusals or not self.shared.leader.is_leader:
            return None
        return "; ".join(refusals)

    def _routing_due(self, entry: TargetConfig) -> str | None:
        """The InvalidRouting message to raise now, once per set of annotations."""
        problem = entry.routing_problem
        if problem is None or self.routing_reported or not self.shared.leader.is_leader:
            return None
        self.routing_reported = True  # once per set of annotations, even if lost
        return f"the activator routes with the defaults of these annotations: {problem}"

    # -- the warm tier ----------------------------------------------------------------

    def _publish_view(self, snap: TargetSnapshot, entry: TargetConfig) -> None:
        board, config, view = self.shared.board, entry.config, self.view
        if board is None or config is None or view is None:
            return
        if config.sleep_after_s is None:
            # The tier reads only the models it may put to sleep (or wake).
            board.forget(self.key)
            return
        board.publish(
            self.key,
            ModelView(
                idle_since=self.state.idle_since_s,
                last_used=self.last_busy_s,
                pod_load=view.combined.pod_load,
                pods=snap.pods,
                sleep_level=config.sleep_level,
            ),
        )

    def _tend_warm(self, snap: TargetSnapshot, entry: TargetConfig, now: float) -> None:
        """After a tick's decision: keep the tier's view of the pods, start due sleeps,
        and wake another replica when the decision wants more awake (leader only)."""
        warm, config = self.shared.warm, entry.config
        if warm is None or config is None or config.sleep_after_s is None:
            return
        if not self.shared.leader.is_leader:
            warm.step_down()
            return
        key = self.key
        warm.remember_addresses(key, config, snap.pods)
        warm.forget_missing(key, snap.pods)
        warm.reconcile(key, config, snap.pods)
        warm.consider_sleep(key, config, snap.pods, now)
        self.shared.metrics.set_sleeping(key, warm.asleep_count(key))
        decision = self.decision
        if decision is None or self.state.idle_since_s is not None or warm.asleep_count(key) == 0:
            return
        if decision.desired > len(warm.awake_ready(snap.pods)) and not self.waking:
            self.waking = True
            self._spawn(self._wake_more(warm), f"tidal-scaler-wake:{key}")

    async def wake_for_activation(self) -> None:
        """An activation was decided: wake a sleeping replica, waiting at most
        :data:`ACTIVATE_WAIT_S` for it.

        The wake runs on its own: an activator that stops waiting for the answer
        (its timeout is shorter than a wake that first makes room) cannot cancel
        it; it learns the outcome from the next answer."""
        warm = self.shared.warm
        if warm is None:
            return
        task = self._spawn(self._wake(warm), f"tidal-scaler-wake:{self.key}")
        await asyncio.wait({task}, timeout=ACTIVATE_WAIT_S)

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel the background wakes still running (the target is gone); the tasks."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        return tasks

    async def stop(self) -> None:
        """Cancel the background wakes still running and wait for them to end."""
        await asyncio.gather(*self.cancel(), return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _wake_more(self, warm: WarmTier) -> None:
        try:
            await warm.wake(self.key)
        except Exception:
            log.exception("%s: waking another replica failed", self.key)
        finally:
            self.waking = False

    async def _wake(self, warm: WarmTier) -> None:
        """Wake one sleeping replica unless one is awake; else add one from zero."""
        key, book = self.key, self.shared.book
        entry, snap = book.get(key), book.snapshots().get(key)
        if entry is None or entry.config is None or snap is None:
            return
        if not self.shared.leader.is_leader or warm.asleep_count(key) == 0:
            return
        if warm.awake_ready(snap.pods):
            return
        outcome = await warm.wake(key)
        if outcome.woke is not None or outcome.reason in ("waking already", "nothing sleeps"):
            return
        # The path from zero: one more replica beside the sleeping ones, within
        # max-scale (at max-scale the activator's retry tries again).
        entry, snap = book.get(key), book.snapshots().get(key)
        if entry is None or entry.config is None or snap is None:
            return
        spec = snap.deployment.spec_replicas
        if spec >= entry.config.max_scale:
            return
        decision = Decision(
            desired=spec + 1,
            reason=Reason.ACTIVATED,
            mode=Mode.STABLE,
            message=f"waking from sleep failed ({outcome.reason}); adding a replica from zero",
        )
        await self._add_replica(decision, self.shared.clock())

    # -- counting ---------------------------------------------------------------------

    def _companion(self, snap: TargetSnapshot) -> CompanionInfo | None:
        placer = self.shared.placer
        return placer.companion(snap.deployment.key) if placer is not None else None

    def _pair_counts(
        self, snap: TargetSnapshot, companion: CompanionInfo | None
    ) -> tuple[int, int]:
        # A pair's current scale is the last target decided: the one a failed status
        # write still intends, if any, else the one the annotation holds. With the
        # annotation's, a change whose status write failed would be announced again.
        last = (self.record.intended or self.record.status or {}).get("desired")
        return pair_counts(snap.deployment, companion, last)

    def _publish(
        self,
        snap: TargetSnapshot,
        companion: CompanionInfo | None,
        decision: Decision,
        ready: int,
    ) -> None:
        """The decision's gauges: desired and ready replicas, by capacity type with a plan."""
        view, placement, metrics = self.view, self.placement, self.shared.metrics
        assert view is not None
        metrics.observe_decision(
            self.key,
            desired=decision.desired,
            ready=ready,
            panic=decision.mode is Mode.PANIC,
            readings=view.readings,
            observed=view.combined.observed,
            spot_fallback=placement.split.covering if placement is not None else 0,
        )
        if placement is None:
            return
        metrics.observe_split(
            self.key,
            desired={"on-demand": placement.split.on_demand, "spot": placement.split.spot},
            ready={
                "on-demand": snap.deployment.ready_replicas,
                "spot": companion.ready_replicas if companion is not None else 0,
            },
        )

    # -- the live view ----------------------------------------------------------------

    def picture(self, snap: TargetSnapshot | None, cost: CostView | None) -> TargetState:
        """The read-only picture of this target for ``GET /v1/targets``."""
        entry = self.shared.book.get(self.key)
        view = self.view
        return TargetState(
            key=self.key,
            problem=entry.problem if entry is not None else None,
            spec_replicas=snap.deployment.spec_replicas if snap else None,
            ready_replicas=snap.deployment.ready_replicas if snap else None,
            decision=self.decision,
            readings=view.readings if view is not None else {},
            combined=view.combined if view is not None else None,
            decided_at=self.decided_at,
            placement=self.placement,
            cost=cost,
        )
