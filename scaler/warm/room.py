"""Room on a GPU for a wake: the models put to sleep first, or after a wake failed for memory.

Before a wake, with GPU memory learned from DCGM
(:class:`~scaler.policy.warm_tier.MemoryBook`),
:func:`~scaler.policy.warm_tier.make_room` names the least recently used
idle models on the same physical GPU that must sleep for the woken one to
fit (:meth:`RoomMaker.before_wake`); a sleep already under way there
(keeping room to wake) is let end first, as the plan counts it asleep.

After a wake that failed for want of memory (no memory learned, or it was
wrong), :meth:`RoomMaker.after_out_of_memory` puts the idle model the LRU
ranks first on the node to sleep; when none is idle, it waits for a sleep
already under way, then for a busy model there to finish its requests, up
to ``busy_wait_s``, rather than fall back to a cold start.

Main decision: room is made only through the tier's own sleep call
(:meth:`~scaler.warm.tier.WarmTier.sleep_now`), so a model put to sleep for
room is announced first and checked idle after the handoff like any other;
this part reads the pool's books and writes none of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from scaler.warm.calls import ReplicaCallFailed
from scaler.warm.choices import WarmChoices
from scaler.warm.pool import Phase, PoolEntry, WarmPool

__all__ = ["Lru", "RoomMaker", "SleepNow"]

log = logging.getLogger(__name__)

# (target, pod, sleep level) of idle awake replicas on a node, least recently used first.
Lru = Callable[[str | None, str], list[tuple[str, str, int]]]
# The tier's sleep call for another model's idle replica: (target, pod, level).
SleepNow = Callable[[str, str, int], Awaitable[None]]

#: The longest a sleep call is waited for once its handoff is over (a level-1
#: sleep of a large model moves its weights to host RAM: seconds), and how often.
_SLEEP_CALL_S = 10.0
_POLL_S = 0.1


class RoomMaker:
    """Makes room for a wake on its GPU, through the tier's sleep call."""

    def __init__(
        self,
        pool: WarmPool,
        choices: WarmChoices,
        *,
        sleep_now: SleepNow,
        clock: Callable[[], float],
        handoff_s: float,
        busy_wait_s: float,
    ) -> None:
        self._pool = pool
        self._choices = choices
        self._sleep_now = sleep_now
        self._clock = clock
        self._handoff_s = handoff_s
        self._busy_wait_s = busy_wait_s

    async def before_wake(self, entry: PoolEntry, target: str) -> list[str]:
        """Before the wake: put to sleep what the memory learned says must make room;
        the pods that went to sleep."""
        # A sleep under way on the same GPU (keeping room to wake) frees memory:
        # let it end before the plan, which counts that pod as asleep.
        await self._sleeps_done(self._choices.draining_beside(entry.name, self._clock()))
        first, _ = self._choices.plan_room(entry.name, target, self._clock())
        owners = [self._pool.targets.get(v, "") for v in first]  # make_room picks warm-tier pods
        results = await asyncio.gather(
            *(
                self._sleep_now(owner, v, self._pool.levels.get(owner, 1))
                for owner, v in zip(owners, first, strict=True)
            ),
            return_exceptions=True,
        )
        evicted = []
        for victim, result in zip(first, results, strict=True):
            if isinstance(result, BaseException):
                log.info("%s: %s could not make room: %s", target, victim, result)
            else:
                evicted.append(victim)
        return evicted

    async def after_out_of_memory(self, entry: PoolEntry, target: str, lru: Lru) -> str | None:
        """Make room for ``entry``'s wake after one failed for memory: put the idle
        model ``lru`` ranks first on its node to sleep; when none is idle, wait for
        a sleep already under way (one that keeps room to wake), then for a busy
        model there to finish its requests, up to ``busy_wait_s``, rather than fall
        back to a cold start. The pod that went to sleep; None: nothing can."""
        victim = await self._sleep_first(lru(entry.node, target), target)
        if victim is not None:
            return victim
        draining = [e for e in self._pool.entries.values() if e.phase is Phase.DRAINING]
        done = await self._sleeps_done([e for e in draining if e is not entry])
        if done:
            return done[0]
        for _ in range(round(self._busy_wait_s / _POLL_S)):
            await asyncio.sleep(_POLL_S)
            victim = await self._sleep_first(lru(entry.node, target), target)
            if victim is not None:
                return victim
        return None

    async def _sleep_first(
        self, candidates: Sequence[tuple[str, str, int]], target: str
    ) -> str | None:
        for victim_target, victim, level in candidates:
            try:
                await self._sleep_now(victim_target, victim, level)
            except ReplicaCallFailed as exc:
                log.info("%s: %s could not make room: %s", target, victim, exc)
                continue
            return victim
        return None

    async def _sleeps_done(self, draining: list[PoolEntry]) -> list[str]:
        """Wait for the sleeps under way of ``draining`` (within their handoff and the
        sleep call); the pods that went to sleep."""
        pool = self._pool
        for _ in range(round((self._handoff_s + _SLEEP_CALL_S) / _POLL_S)):
            if not any(
                pool.entries.get(e.name) is e and e.phase is Phase.DRAINING for e in draining
            ):
                break
            await asyncio.sleep(_POLL_S)
        return [e.name for e in draining if pool.entries.get(e.name) is e]
