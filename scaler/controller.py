"""The control loop: when each target is reconciled; nothing else.

A target is reconciled at every tick (default 2 s, from an injectable
:class:`~scaler.ticking.Ticker`), at once on an activation, at the
``recheck_after_s`` a decision asked for when that comes before the next
tick, and for every target when this replica wins the Lease or a node gets
an interruption notice (the service pokes the ticker:
:meth:`~scaler.ticking.IntervalTicker.poke`). The controller keeps the
targets in step with the opted-in Deployments
(:class:`~scaler.targets.book.TargetBook`), one
:class:`~scaler.targets.reconciler.Reconciler` each, and schedules: what a
target decides, its lock and the order of its steps are its reconciler's;
its writes and their bookkeeping (the status record, the backoff) are the
fenced :class:`~scaler.actuator.Actuator`'s, leader only; its warm-tier
intents are the reconciler's too (sleeps due, wakes, the
fallback to a cold start) against the shared :class:`~scaler.warm.tier.WarmTier`,
which reads the models' views and holds nothing of the controller. Beside the
reconciles it removes orphaned spot and shape companions and has the warm tier learn
GPU memory footprints; GPU-seconds and cost are the GPU ledger's
(:mod:`scaler.gpu_ledger`), which runs on its own schedule, and which the
live view reads.

Every replica decides, so a follower that takes over has warm windows and a
policy state that has long left its settling time; a follower keeps its copy of
the status annotation in step with what the leader wrote, so on taking over
it rewrites nothing that did not change. This module never asks whether
this replica leads: the actuator and the warm tier, which make the writes
and the replica calls, check the Lease where they fence them.

Main decisions:

- **No data is not zero load.** Until the Deployment list has synced, nothing
  is decided. When the API server is unreachable the last known Deployments
  and pods are kept; writes fail and back off (the actuator). Nothing in
  this module turns a missing answer into a zero.
- **Decide for all, then write side by side**: a tick decides for every
  target at its ``now`` before any write can hold it up; the targets' writes
  then run side by side (a target whose policy refuses its inputs, or whose
  writes fail, is logged without holding back the others).
- **A routing problem is reported, not acted on** (the reconciler raises one
  ``InvalidRouting`` Warning per set of annotations; the activator routes with
  defaults).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from groundwork.background_tasks import BackgroundTasks
from groundwork.rules.stats_report import ShapeRoute
from scaler.actuator import Actuator
from scaler.gpu_ledger import GpuLedger
from scaler.kube.types import PoolInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.placement.placer import Placer
from scaler.placement.shaper import Shaper
from scaler.policy.api import Decision
from scaler.policy.events import MOVED
from scaler.policy.protocol import Policy
from scaler.signals.hub import SignalHub
from scaler.targets.awake_labels import AwakeLabels
from scaler.targets.book import TargetBook, TargetConfig
from scaler.targets.deciding import Decider
from scaler.targets.pool_notices import PoolNotices
from scaler.targets.publishing import Publisher
from scaler.targets.reconciler import Outcome, Reconciler, Shared, Trigger
from scaler.targets.state import TargetState
from scaler.ticking import CallLater, RecheckTimers, Ticker
from scaler.warm.bill import TierSleepers
from scaler.warm.tier import WarmTier
from scaler.warm.views import ModelBoard

__all__ = ["Controller", "ControllerSettings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    # The tick interval: a recheck due before the next tick gets a decision of its own.
    tick_interval_s: float = 2.0


class Controller:
    """Decides for every opted-in Deployment; acts when leader."""

    def __init__(
        self,
        *,
        targets: TargetBook,
        signals: SignalHub,
        actuator: Actuator,
        policy: Policy,
        metrics: Metrics,
        clock: Callable[[], float],
        settings: ControllerSettings | None = None,
        call_later: CallLater | None = None,
        placer: Placer | None = None,
        wall_clock: Callable[[], float] = time.time,
        warm: WarmTier | None = None,
        board: ModelBoard | None = None,
        ledger: GpuLedger | None = None,
        shaper: Shaper | None = None,
    ) -> None:
        if warm is not None and board is None:
            raise ValueError("the warm tier reads the models' views: pass its ModelBoard too")
        self._book = targets
        self._publisher = Publisher(metrics, board)
        self._shared = Shared(
            book=targets,
            decider=Decider(
                signals=signals,
                policy=policy,
                placer=placer,
                wall_clock=wall_clock,
                shaper=shaper,
                sleepers=(
                    TierSleepers(warm.pool, ledger.sleeper_share)
                    if warm is not None and ledger is not None
                    else None
                ),
            ),
            actuator=actuator,
            publisher=self._publisher,
            clock=clock,
            warm=warm,
            wall_clock=wall_clock,
        )
        self._placer = placer  # removes orphan companions
        self._shaper = shaper  # and orphan shape companions
        self._actuator = actuator

        async def note(pool: PoolInfo, reason: str, message: str) -> bool:
            return await actuator.note(pool, reason=reason, message=message, warning=True)

        self._pool_notices = PoolNotices(note)
        self._awake = AwakeLabels(actuator)
        self._metrics = metrics
        self._clock = clock
        self._settings = settings or ControllerSettings()
        self._ledger = ledger  # the cost in the live view
        self._targets: dict[str, Reconciler] = {}
        self._last_tick: float | None = None
        # Extra decisions (rechecks) run only while run() is active.
        # Decisions outside the tick (rechecks), as tasks that exist only while the
        # loop runs: a controller stepped tick by tick in a test leaves none behind.
        self._side = BackgroundTasks(running=False)
        self._rechecks = RecheckTimers(self._recheck_due, call_later)
        self.ticks = 0
        self.rechecks_run = 0

    @property
    def warm(self) -> WarmTier | None:
        """The warm tier, when sleeping replicas are enabled."""
        return self._shared.warm

    # -- targets ------------------------------------------------------------

    def _sync(self, now: float) -> Mapping[str, TargetConfig]:
        """The one place the target book is brought up to date: one reconciler per
        target, in step with its config."""
        entries = self._book.entries()
        for key in [key for key in self._targets if key not in entries]:
            self._targets.pop(key).wakes.cancel()
            self._publisher.forget(key)
            self._actuator.forget(key)
        for key, entry in entries.items():
            reconciler = self._targets.get(key)
            if reconciler is None:
                self._targets[key] = Reconciler(entry, self._shared, now)
            else:
                reconciler.sync(entry)
        return entries

    async def _reconcile(self, reconciler: Reconciler, now: float, trigger: Trigger) -> Outcome:
        """One reconcile, with its recheck scheduled."""
        outcome = await reconciler.reconcile(now, trigger)
        if outcome.decision is not None:
            self._schedule_recheck(reconciler.key, outcome.decision, now)
        return outcome

    # -- entry points -----------------------------------------------------------

    async def tick(self, now: float) -> None:
        """Reconcile every target at ``now``; writes when leader."""
        self.ticks += 1
        started = self._clock()
        if not self._book.synced:
            return
        snapshots = self._book.snapshots()
        self._last_tick = now
        entries = self._sync(now)
        orphans = []
        if self._placer is not None:
            # Companions of Deployments no longer opted in go, beside the decisions;
            # their owners are unpinned (by the leader: the actuator fences it).
            orphans = [self._actuator.remove_orphan(o) for o in self._placer.orphans(snapshots)]
        if self._shaper is not None:
            orphans += [
                self._actuator.remove_orphan(c, shape=True) for c in self._shaper.orphans(snapshots)
            ]
        # Every target is decided at ``now`` before any write holds the tick up;
        # the writes run side by side.
        writing: list[tuple[Reconciler, asyncio.Task[Outcome]]] = []
        for reconciler in list(self._targets.values()):
            try:
                outcome = await self._reconcile(reconciler, now, Trigger.TICK)
            except ValueError:
                log.exception("%s: the policy refused to decide", reconciler.key)
                continue
            if outcome.writing is not None:
                writing.append((reconciler, outcome.writing))
        results, _, _ = await asyncio.gather(
            asyncio.gather(*(w for _, w in writing), return_exceptions=True),
            asyncio.gather(*orphans),
            # What is wrong with an InferencePool, said on the pool (leader only).
            self._pool_notices.tend(self._book.pools(), entries, snapshots),
        )
        for (reconciler, _), result in zip(writing, results, strict=True):
            if isinstance(result, BaseException):
                log.error("%s: writes failed", reconciler.key, exc_info=result)
            elif result.decision is not None:  # decided again after a conflict
                self._schedule_recheck(reconciler.key, result.decision, now)
        warm = self._shared.warm
        if warm is not None:
            warm.learn(now)  # the models' GPU memory footprints (leader only)
            warm.keep_room(now)  # room for a sleeping model to wake on each GPU
            await self._move_sleepers(warm, now, snapshots)
            await self._label_awake(None)
        self._metrics.tick_duration.observe(max(0.0, self._clock() - started))

    async def activate(self, key: str, *, now: float | None = None) -> bool:
        """An activator asks to wake ``key``: decide for it now. False if the target is unknown.

        With the warm tier, a target whose replicas all sleep gets one woken
        first (the leader does it; the answer goes back once it is awake)."""
        known = await self.decide_now(key, now=now, activation=True)
        reconciler = self._targets.get(key)
        if known and reconciler is not None:
            await reconciler.wakes.for_activation()
            await self._label_awake([key])
        return known

    async def _move_sleepers(
        self, warm: WarmTier, now: float, snapshots: Mapping[str, TargetSnapshot]
    ) -> None:
        """Empty a GPU of sleepers alone: each sleeper's pod template prefers a node whose
        GPU serves (a rollout moves it there; scaler.warm.moves). The tier plans only
        while it leads, and the actuator writes only then."""
        if warm.moves is None:
            return
        for move in warm.moves.plan(now, snapshots):
            snap = snapshots.get(move.target)
            if snap is None or not await self._actuator.moves.prefer_node(
                snap.deployment, move.node
            ):
                continue
            why = (
                f"{move.pod} moves to node {move.node}: its GPU holds only sleepers, and "
                f"{move.device} there serves"
            )
            log.info("%s: %s", move.target, why)
            await self._actuator.note(snap.deployment, reason=MOVED, message=why)

    async def _label_awake(self, keys: list[str] | None) -> None:
        """Behind an InferencePool, the awake label of ``keys``' pods (every target's when
        None) as the warm tier's books say (leader only: the actuator fences it)."""
        warm = self._shared.warm
        if warm is not None:
            entries, snapshots = self._book.entries(), self._book.snapshots()
            await self._awake.sync(entries, snapshots, warm.pool.entries.keys(), keys=keys)

    def not_woken(self, key: str) -> str | None:
        """Why an activation will not wake ``key``: its annotations are invalid (the
        problem names each key, value and what is allowed); None when it would."""
        if not self._book.synced:
            return None
        entry = self._book.entries().get(key)
        return entry.problem if entry is not None else None

    async def decide_now(
        self, key: str, *, now: float | None = None, activation: bool = False
    ) -> bool:
        """Reconcile ``key`` outside the tick (activation, recheck); writes when
        leader. False if the target is unknown."""
        at = self._clock() if now is None else now
        if not self._book.synced or key not in self._book.snapshots():
            return False
        self._sync(at)
        trigger = Trigger.ACTIVATION if activation else Trigger.RECHECK
        outcome = await self._reconcile(self._targets[key], at, trigger)
        return outcome.known

    async def run(self, ticker: Ticker) -> None:
        """Tick until cancelled (rechecks run only meanwhile)."""
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
            await asyncio.gather(*(r.stop() for r in self._targets.values()))

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
        self._side.spawn(self._recheck(key), name=name, failure=failure)

    async def _recheck(self, key: str) -> bool:
        self.rechecks_run += 1
        return await self.decide_now(key)

    # -- live view ----------------------------------------------------------------

    def shape_routes(self) -> dict[str, dict[str, ShapeRoute]]:
        """Per model with GPU shapes, each endpoint's shape, weight and reach: the
        activators' word (:mod:`scaler.policy.shapes.routes`), from the last decisions."""
        out = {}
        for key, reconciler in sorted(self._targets.items()):
            if reconciler.shaped is not None:
                out[key] = reconciler.shaped.routes()
        return out

    def devices(self) -> dict[str, object] | None:
        """The GPU devices held and what they do (the ledger's; None without one)."""
        return self._ledger.devices().as_json() if self._ledger is not None else None

    def target_states(self) -> list[TargetState]:
        """Every target's last decision and signals, sorted by key."""
        snapshots = self._book.snapshots()
        ledger = self._ledger
        return [
            reconciler.picture(snapshots.get(key), ledger.cost(key) if ledger else None)
            for key, reconciler in sorted(self._targets.items())
        ]
