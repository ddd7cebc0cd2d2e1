"""One target's warm-tier intents: the wakes its decisions ask for, run in the background.

A target's reconciler owns one :class:`Wakes`. It asks the shared
:class:`~scaler.warm.tier.WarmTier` for what its decisions need:

- at a tick, the tier tends the model's replicas (the sleeps due start),
  and when the decision wants more replicas than are awake another sleeping
  one is woken in the background (the policy counts sleeping replicas as
  ready);
- an activation wakes one sleeping replica; its answer waits at most
  :data:`ACTIVATE_WAIT_S` (short of the activator's 2 s timeout) and the
  wake goes on in the background, the activator learning its outcome from
  the next answer;
- a failed wake falls back to the path from zero: one more replica,
  cold-started beside the sleeping ones, within max-scale, decided here
  (``Activated``) and handed to the reconciler to carry out under its lock
  like any other decision.

Main decision: the tier, not this module, knows whether this replica
leads: a follower's tier keeps nothing asleep in its books (the replicas
themselves are the truth a new leader reads back) and wakes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from groundwork.background_tasks import BackgroundTasks
from scaler.kube.types import TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.api import Decision, Mode, Reason, ScalingConfig
from scaler.targets.book import TargetBook
from scaler.warm.tier import WarmTier

__all__ = ["ACTIVATE_WAIT_S", "Wakes"]

log = logging.getLogger(__name__)

# How long an activation's answer waits for a wake from sleep: long enough for a
# plain level-1 wake, short of the activator's 2 s timeout.
ACTIVATE_WAIT_S = 1.5


class Wakes:
    """One target's background wakes and their fallback to a cold start."""

    def __init__(
        self,
        key: str,
        *,
        warm: WarmTier | None,
        book: TargetBook,
        metrics: Metrics,
        add_replica: Callable[[Decision, float], Awaitable[None]],
        clock: Callable[[], float],
    ) -> None:
        self._key = key
        self._warm = warm
        self._book = book
        self._metrics = metrics
        self._add_replica = add_replica  # carries out the fallback, under the target's lock
        self._clock = clock
        self._waking = False  # a background wake for more replicas is under way
        # Background wakes (and their fallback): stop() cancels what is left.
        self._tasks = BackgroundTasks()

    def tend(
        self,
        snap: TargetSnapshot,
        config: ScalingConfig,
        decision: Decision | None,
        *,
        idle: bool,
        now: float,
    ) -> None:
        """After a tick's decision: the tier tends the model's replicas, and another
        is woken when the decision wants more awake than there are."""
        warm = self._warm
        if warm is None or config.sleep_after_s is None:
            return
        # SLO-first scaling's count awake: the rest of its count is headroom the
        # tier holds asleep (one plan: a wake within the objective meets a burst).
        report = decision.slo if decision is not None else None
        awake_needed = report.awake_needed if report is not None else None
        tended = warm.tend(self._key, config, snap.pods, now, awake_needed)
        if tended is None:
            return  # not the leader: the tier keeps nothing
        self._metrics.set_sleeping(self._key, tended.asleep)
        if decision is None or idle or self._waking:
            return
        if tended.wake_wanted(decision.desired if awake_needed is None else awake_needed):
            self._waking = True
            self._tasks.spawn(self._wake_more(warm), name=f"tidal-scaler-wake:{self._key}")

    async def for_activation(self) -> None:
        """An activation was decided: wake a sleeping replica, waiting at most
        :data:`ACTIVATE_WAIT_S` for it.

        The wake runs on its own: an activator that stops waiting for the answer
        (its timeout is shorter than a wake that first makes room) cannot cancel
        it; it learns the outcome from the next answer."""
        warm = self._warm
        if warm is None:
            return
        task = self._tasks.spawn(self._wake(warm), name=f"tidal-scaler-wake:{self._key}")
        if task is not None:
            await asyncio.wait({task}, timeout=ACTIVATE_WAIT_S)

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel the background wakes still running (the target is gone); the tasks."""
        return self._tasks.cancel()

    async def _wake_more(self, warm: WarmTier) -> None:
        try:
            await warm.wake(self._key)
        except Exception:
            log.exception("%s: waking another replica failed", self._key)
        finally:
            self._waking = False

    async def _wake(self, warm: WarmTier) -> None:
        """Wake one sleeping replica unless one is awake; else add one from zero."""
        key, book = self._key, self._book
        entry, snap = book.get(key), book.snapshots().get(key)
        if entry is None or entry.config is None or snap is None:
            return
        outcome = await warm.wake_one(key, snap.pods)
        if outcome is None or outcome.settled:
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
        await self._add_replica(decision, self._clock())
