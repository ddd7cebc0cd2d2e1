"""One target's reconciler: the order of a model's steps, its state and its lock.

The controller keeps one :class:`Reconciler` per opted-in target and only
says when to reconcile (ticks, activations, rechecks, pokes). What a target
carries from one decision to the next lives here: the policy state, the
lock, the last decision, signal view and placement plan, the spot cover
the last plan left. :meth:`Reconciler.reconcile` takes these steps:

1. **observe**: the target's signals out of the hub;
2. **decide**: count the replicas, call the pure policy, split between
   on-demand and spot (:class:`~scaler.targets.deciding.Decider`; every
   replica decides, so a follower that takes over knows what is covered);
3. **publish**: the decision's gauges and, for a model in the warm tier,
   its view for the tier (:class:`~scaler.targets.publishing.Publisher`);
4. **plan**: the writes the decision needs, from the target's status record
   (:meth:`~scaler.actuator.Actuator.plan`, which plans nothing on a
   follower or while the target backs off);
5. **act**: the actuator carries the plan out under the target's lock;
6. **report**: the Warnings that leave scaling on (``InvalidRouting``),
   once per set of annotations;
7. **tend** (at a tick): the warm tier's intents
   (:class:`~scaler.targets.waking.Wakes`: the sleeps due, another replica
   woken when the decision wants more awake).

Leadership is not checked here: the actuator plans and writes only on the
leader, and the warm tier calls replicas only on the leader.

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
- **Failed writes back off, but not a wake from zero** (the actuator's
  plan): a held request must not wait for a backoff that an unrelated
  failure started.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from scaler.actuator import Actuator, Decided, WritePlan
from scaler.gpu_ledger import CostView
from scaler.kube.types import TargetSnapshot
from scaler.policy.api import Decision
from scaler.policy.decide import PolicyState
from scaler.policy.events import ADAPTER_LOAD_REFUSED, INVALID_ROUTING, UNKNOWN_ANNOTATION
from scaler.policy.placement.fallback import FallbackState
from scaler.policy.placement.plan import PlacementPlan
from scaler.signals.hub import SignalView
from scaler.targets.book import TargetBook, TargetConfig
from scaler.targets.deciding import Decider, decided
from scaler.targets.publishing import Publisher
from scaler.targets.state import TargetState
from scaler.targets.waking import Wakes
from scaler.warm.tier import WarmTier

__all__ = ["MAX_REDECISIONS", "Outcome", "Reconciler", "Shared", "Trigger"]

# After a conflict, how many times one decision is made again on the re-read
# Deployment before waiting for the next tick.
MAX_REDECISIONS = 2


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
    """What every target's reconciler uses, owned by the controller."""

    book: TargetBook
    decider: Decider
    actuator: Actuator
    publisher: Publisher
    clock: Callable[[], float]
    warm: WarmTier | None = None  # when sleeping replicas are enabled


@dataclass(slots=True)
class _Step:
    """One decision and what it saw, kept to plan it and to decide again after a conflict."""

    snap: TargetSnapshot
    entry: TargetConfig
    now: float
    activation: bool
    decided: Decided


class Reconciler:
    """One target's state across decisions (see the module docstring)."""

    def __init__(self, entry: TargetConfig, shared: Shared, now: float) -> None:
        """A new target's reconciler, from the policy's initial state and the status
        annotation as the Deployment carries it."""
        self.key = entry.key
        self.shared = shared
        self.state: PolicyState = shared.decider.initial_state(now)
        self.revision = entry.revision  # the TargetConfig revision last seen
        self.lock = asyncio.Lock()
        self.activation_pending = False
        self.decision: Decision | None = None
        self.view: SignalView | None = None
        self.decided_at: float | None = None
        self.last_busy_s: float | None = None  # the last decision that saw work (warm tier's LRU)
        self.placement: PlacementPlan | None = None  # this decision's, when a placer is set
        # The spot cover the last plan left; kept through decisions that plan nothing
        # (invalid annotations), as the cover itself is still there.
        self.fallback: FallbackState | None = None
        self.wakes = Wakes(
            self.key,
            warm=shared.warm,
            book=shared.book,
            metrics=shared.publisher.metrics,
            add_replica=self._add_replica,
            clock=shared.clock,
        )
        shared.actuator.records.start(self.key, entry.seen_status)

    def sync(self, entry: TargetConfig) -> None:
        """Keep in step with the target's config and the status annotation it carries."""
        changed = self.revision != entry.revision
        self.revision = entry.revision
        self.shared.actuator.records.seen(self.key, entry.seen_status, changed=changed)

    async def stop(self) -> None:
        """Cancel the background wakes still running and wait for them to end."""
        await asyncio.gather(*self.wakes.cancel(), return_exceptions=True)

    # -- the steps ----------------------------------------------------------------

    async def reconcile(self, now: float, trigger: Trigger) -> Outcome:
        """Decide for this target at ``now`` and, when leader, carry out the writes.

        Raises ``ValueError`` when the policy refuses the inputs."""
        if trigger is Trigger.TICK:
            if self.lock.locked():
                return Outcome(skipped=True)  # an activation is deciding or writing for it
            return await self._tick(now)
        if trigger is Trigger.ACTIVATION:
            self.activation_pending = True
        async with self.lock:
            current = self._current()
            if current is None:
                return Outcome(known=False)
            step, plan = self._step(*current, now)  # 1-4
            if plan is not None:
                await self._act(step, plan)  # 5
        return Outcome(decision=self.decision)

    async def _tick(self, now: float) -> Outcome:
        current = self._current()
        if current is None:
            return Outcome(known=False)
        snap, entry = current
        step, plan = self._step(snap, entry, now)  # 1-4
        if entry.config is not None:  # 7
            idle = self.state.idle_since_s is not None
            self.wakes.tend(snap, entry.config, self.decision, idle=idle, now=now)
        report = self._warnings_due(entry) + self._refusals_due()  # 6
        if plan is None and not report:
            return Outcome(decision=self.decision)
        if plan is not None:
            await self.lock.acquire()  # free: returns without yielding
        writing = asyncio.ensure_future(self._write(step, plan, report))  # 5, 6
        writing.set_name(f"tidal-scaler-write:{self.key}")
        return Outcome(decision=self.decision, writing=writing)

    def _current(self) -> tuple[TargetSnapshot, TargetConfig] | None:
        book = self.shared.book
        snap, entry = book.snapshots().get(self.key), book.get(self.key)
        return None if snap is None or entry is None else (snap, entry)

    def _step(
        self, snap: TargetSnapshot, entry: TargetConfig, now: float
    ) -> tuple[_Step, WritePlan | None]:
        """Decide, consuming a pending activation; the writes the decision needs."""
        activation, self.activation_pending = self.activation_pending, False
        return self._decide(snap, entry, now, activation)

    def _decide(
        self, snap: TargetSnapshot, entry: TargetConfig, now: float, activation: bool
    ) -> tuple[_Step, WritePlan | None]:
        """Steps 1 to 4."""
        shared, config = self.shared, entry.config
        self.view = view = shared.decider.signals.observe(self.key, config, now=now)
        self.decided_at = now
        if config is None:
            # Nothing is decided while the annotations are invalid: an earlier
            # decision must not show as the current one (GET /v1/targets).
            self.decision = None
            self.placement = None
            step = _Step(
                snap, entry, now, activation, decided(None, problem=entry.problem, view=view)
            )
            return step, shared.actuator.plan(snap, step.decided, now=now)
        made = shared.decider.decide(
            snap,
            config,
            view,
            state=self.state,
            fallback=self.fallback,
            last_desired=shared.actuator.records.get(self.key).last_desired,
            activation=activation,
            now=now,
        )
        self.state, self.decision = made.state, made.decision
        if view.combined.demand.busy or activation:
            self.last_busy_s = now
        if made.placement is not None:
            self.placement, self.fallback = made.placement, made.placement.state
        shared.publisher.decision(self.key, snap, made)
        shared.publisher.model(self.key, snap, config, made, self.last_busy_s)
        step = _Step(
            snap,
            entry,
            now,
            activation,
            decided(
                made.decision,
                problem=entry.problem,
                view=view,
                placement=made.placement,
                companion=made.companion,
                current=made.current,
            ),
        )
        return step, shared.actuator.plan(snap, step.decided, now=now)

    async def _act(self, step: _Step, plan: WritePlan) -> None:
        """Carry out ``plan``; the lock is held by the caller.

        On a conflict the Deployment changed since the decision: decide again on
        what the API server has now (the actuator re-checks the Lease in the
        plan), a bounded number of times, rather than re-apply the old decision.
        """
        actuator = self.shared.actuator
        snap = step.snap
        for attempt in range(MAX_REDECISIONS + 1):
            outcome = await actuator.carry_out(plan, now=step.now)
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

    async def _add_replica(self, decision: Decision, now: float) -> None:
        """Carry out a decision made outside the policy (the warm tier's path from
        zero when a wake failed), under the lock like every other."""
        shared = self.shared
        async with self.lock:
            current = self._current()
            if current is None:
                return
            snap, entry = current
            placement = self.placement
            companion, pair = None, None
            if placement is not None:
                last = shared.actuator.records.get(self.key).last_desired
                companion, pair = shared.decider.pair(snap, last)
            made = decided(
                decision,
                problem=entry.problem,
                view=self.view,
                placement=placement,
                companion=companion,
                current=pair,
            )
            step = _Step(snap, entry, now, True, made)
            plan = shared.actuator.plan(snap, made, now=now)
            if plan is not None:
                await self._act(step, plan)

    async def _write(
        self, step: _Step, plan: WritePlan | None, report: tuple[tuple[str, str], ...]
    ) -> Outcome:
        """A tick's writes, under the lock the tick took for them, and its Events."""
        writes: list[Awaitable[object]] = []
        if plan is not None:
            writes.append(self._locked_act(step, plan))
        for reason, message in report:
            writes.append(
                self.shared.actuator.note(
                    step.snap.deployment, reason=reason, message=message, warning=True
                )
            )
        await asyncio.gather(*writes)
        return Outcome(decision=self.decision)

    async def _locked_act(self, step: _Step, plan: WritePlan) -> None:
        try:
            await self._act(step, plan)
        finally:
            self.lock.release()

    def _refusals_due(self) -> tuple[tuple[str, str], ...]:
        """An AdapterLoadRefused Warning for the LoRA adapter loads the activators
        reported refused since the last tick (the actuator raises it on the leader only;
        they are taken either way)."""
        refusals = self.shared.decider.signals.take_adapter_refusals(self.key)
        return ((ADAPTER_LOAD_REFUSED, "; ".join(refusals)),) if refusals else ()

    def _warnings_due(self, entry: TargetConfig) -> tuple[tuple[str, str], ...]:
        """The Warning Events (reason, message) to raise now, once per set of
        annotations: routing annotations the activator cannot use, and unknown
        keys of ours."""
        notes = []
        if entry.routing_problem is not None:
            message = "the activator routes with the defaults of these annotations: "
            notes.append((INVALID_ROUTING, message + entry.routing_problem))
        if entry.unknown_keys is not None:
            notes.append((UNKNOWN_ANNOTATION, entry.unknown_keys))
        if not notes or not self.shared.actuator.records.warnings_due(self.key):
            return ()
        return tuple(notes)

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
            pool=entry.pool.key if entry is not None and entry.pool is not None else None,
        )
