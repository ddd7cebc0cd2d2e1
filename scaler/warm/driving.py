"""The warm tier inside the control loop: what to sleep at a tick, what to wake, and the fallback.

:class:`~scaler.warm.tier.WarmTier` makes the replicas' sleep and wake calls and
keeps which replicas sleep; this module connects it to the controller. The
controller calls :meth:`WarmLoop.tick` after each target's decision, and
:meth:`WarmLoop.activated` after deciding for an activation; the warm tier
reads the targets' idle stretches and per-pod load through the views here
(:meth:`WarmLoop.idle_since`, :meth:`WarmLoop.pod_load`,
:meth:`WarmLoop.last_used`) and reports Events through :meth:`WarmLoop.note`.

Main decisions:

- **Only the leader sleeps and wakes.** A follower keeps nothing asleep in its
  books (:meth:`~scaler.warm.tier.WarmTier.step_down`); the replicas themselves
  are the truth a new leader reads back.
- **An activation wakes one replica; demand wakes the rest.** The policy
  counts sleeping replicas as ready, so when a decision wants more replicas
  than are awake, the next sleeping one is woken in the background.
- **A failed wake falls back to the path from zero**: one more replica,
  cold-started beside the sleeping ones, within max-scale. It is a decision
  made here (``Activated``), carried out by the controller through the same
  plan and actuator as every other write.
- **The activation's answer does not wait for a long wake.** It waits at most
  :data:`ACTIVATE_WAIT_S` (short of the activator's 2 s timeout); the wake
  goes on in the background and the activator learns its outcome from the
  next answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from scaler.actuator import Actuator
from scaler.kube.types import LeaderElector, PodInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.api import Decision, Mode, Reason
from scaler.policy.events import SLEPT
from scaler.targets.book import TargetBook, TargetConfig
from scaler.targets.reconciler import Reconciler
from scaler.warm.tier import WarmTier

__all__ = ["ACTIVATE_WAIT_S", "WarmLoop"]

log = logging.getLogger(__name__)

# How long an activation's answer waits for a wake from sleep: long enough for a
# plain level-1 wake, short of the activator's 2 s timeout.
ACTIVATE_WAIT_S = 1.5


class WarmLoop:
    """Sleeps idle replicas and wakes them on demand, for the controller's targets.

    ``targets`` are the controller's reconcilers (read only here);
    ``add_replica(key, decision)`` carries out a decision for ``key`` under its
    lock, as the controller does its own; ``tier`` builds the
    :class:`~scaler.warm.tier.WarmTier` over this object's views.
    """

    def __init__(
        self,
        *,
        book: TargetBook,
        targets: Mapping[str, Reconciler],
        leader: LeaderElector,
        metrics: Metrics,
        actuator: Actuator,
        add_replica: Callable[[str, Decision], Awaitable[None]],
        tier: Callable[[WarmLoop], WarmTier],
    ) -> None:
        self._book = book
        self._targets = targets
        self._leader = leader
        self._metrics = metrics
        self._actuator = actuator
        self._add_replica = add_replica
        self._waking: set[str] = set()  # targets with a background wake under way
        # Background work (wakes, Events): it runs in a controller driven tick by
        # tick too; stop() cancels what is left.
        self._tasks: set[asyncio.Task[None]] = set()
        self.tier = tier(self)

    # -- views for the warm tier ----------------------------------------------------

    def idle_since(self, key: str) -> float | None:
        """Start of the target's current idle stretch (None: busy, or unknown)."""
        loop = self._targets.get(key)
        return loop.state.idle_since_s if loop is not None else None

    def last_used(self, key: str) -> float | None:
        """When the target last had work (None: not since this replica started)."""
        loop = self._targets.get(key)
        return loop.last_busy_s if loop is not None else None

    def pod_load(self, key: str, pod: str) -> float:
        """Requests running or waiting on one pod, as the last decision saw them."""
        loop = self._targets.get(key)
        if loop is None or loop.view is None:
            return 0.0
        return loop.view.combined.pod_load.get(pod, 0.0)

    def note(self, key: str, reason: str, message: str, warning: bool) -> None:
        """An Event about ``key`` from the warm tier (best effort, in the background)."""
        snap = self._book.snapshots().get(key)
        if snap is None:
            return
        if reason == SLEPT:
            self._metrics.slept(key)
        self._spawn(
            self._actuator.note(snap.deployment, reason=reason, message=message, warning=warning),
            f"tidal-scaler-event:{key}",
        )

    def asleep_count(self, key: str) -> int:
        return self.tier.asleep_count(key)

    # -- from the controller --------------------------------------------------------

    def tick(self, key: str, entry: TargetConfig, snap: TargetSnapshot, now: float) -> None:
        """After ``key``'s decision: keep the tier's view of its pods, start due sleeps
        (leader only), and wake another replica when the decision wants more awake."""
        warm, config = self.tier, entry.config
        if config is None or config.sleep_after_s is None:
            return
        if not self._leader.is_leader:
            warm.step_down()
            return
        warm.remember_addresses(key, config, snap.pods)
        warm.forget_missing(key, snap.pods)
        warm.reconcile(key, config, snap.pods)
        warm.consider_sleep(key, config, snap.pods, now)
        self._metrics.set_sleeping(key, warm.asleep_count(key))
        loop = self._targets.get(key)
        decision = loop.decision if loop is not None else None
        if decision is None or self.idle_since(key) is not None or warm.asleep_count(key) == 0:
            return
        if decision.desired > len(self._awake_ready(snap)) and key not in self._waking:
            self._waking.add(key)
            self._spawn(self._wake_more(key), f"tidal-scaler-wake:{key}")

    def learn(self, now: float) -> None:
        """After a tick: the tier learns the models' GPU memory footprints (leader only)."""
        if self._leader.is_leader:
            self.tier.learn(now)

    async def activated(self, key: str) -> None:
        """An activation for ``key`` was decided: wake a sleeping replica, waiting at
        most :data:`ACTIVATE_WAIT_S` for it.

        The wake runs on its own: an activator that stops waiting for the answer
        (its timeout is shorter than a wake that first makes room) cannot cancel
        it; it learns the outcome from the next answer."""
        task = self._spawn(self._wake(key), f"tidal-scaler-wake:{key}")
        await asyncio.wait({task}, timeout=ACTIVATE_WAIT_S)

    async def stop(self) -> None:
        """Cancel the background wakes and Events still running."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- waking ---------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _awake_ready(self, snap: TargetSnapshot) -> list[PodInfo]:
        phase_of = self.tier.phase_of
        return [
            p
            for p in snap.pods
            if p.ready and not p.terminating and phase_of(f"{p.namespace}/{p.name}") is None
        ]

    async def _wake_more(self, key: str) -> None:
        try:
            await self.tier.wake(key, lru=self._lru_on)
        except Exception:
            log.exception("%s: waking another replica failed", key)
        finally:
            self._waking.discard(key)

    def _lru_on(self, node: str | None, target: str) -> list[tuple[str, str, int]]:
        """Idle awake pods of other warm-tier models on ``node``, least recently used first."""
        pods: dict[str, tuple[PodInfo, ...]] = {}
        levels: dict[str, int] = {}
        for key, snap in self._book.snapshots().items():
            entry = self._book.get(key)
            config = entry.config if entry is not None else None
            if config is None or config.sleep_after_s is None:
                continue  # only models opted in to the warm tier are put to sleep
            pods[key] = snap.pods
            levels[key] = config.sleep_level
        ranked = self.tier.idle_awake_on(node, exclude_target=target, pods=pods)
        return [(t, pod, levels[t]) for _, t, pod in ranked]

    async def _wake(self, key: str) -> None:
        """Wake one sleeping replica of ``key`` unless one is awake; else add one from zero."""
        warm = self.tier
        entry = self._book.get(key)
        snap = self._book.snapshots().get(key)
        if entry is None or entry.config is None or snap is None:
            return
        if not self._leader.is_leader or warm.asleep_count(key) == 0:
            return
        if self._awake_ready(snap):
            return
        outcome = await warm.wake(key, lru=self._lru_on)
        if outcome.woke is not None or outcome.reason in ("waking already", "nothing sleeps"):
            return
        # The path from zero: one more replica beside the sleeping ones, within
        # max-scale (at max-scale the activator's retry tries again).
        entry = self._book.get(key)
        snap = self._book.snapshots().get(key)
        if entry is None or entry.config is None or snap is None:
            return
        spec = snap.deployment.spec_replicas
        if spec >= entry.config.max_scale:
            return
        await self._add_replica(
            key,
            Decision(
                desired=spec + 1,
                reason=Reason.ACTIVATED,
                mode=Mode.STABLE,
                message=f"waking from sleep failed ({outcome.reason}); adding a replica from zero",
            ),
        )
