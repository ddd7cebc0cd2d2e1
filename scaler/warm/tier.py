"""The warm tier's calls: the leading scaler sleeps and wakes replicas.

For targets with ``autoscaling.tidal.dev/sleep-after`` (see
:mod:`scaler.policy.warm_tier` for the ladder), this module makes the HTTP calls
to the replicas' vLLM development endpoints and keeps which replicas sleep.
Only the leader calls it, one call at a time per pod, so a sleep and an
arriving request never race inside Tidal and several activators never wake
one replica twice.

**Where "sleeping" is recorded**: in the answers of this scaler's
``/v1/stats`` and ``/v1/activate`` (``{"sleeping": {target: ["ip:port"]},
"leader": true}``, :class:`groundwork.rules.stats_report.ScalerAnswer`), not
in a pod annotation. Activators already exchange
with every scaler replica every report period, so they learn a sleep within
one period without watching pods (no pod watch per activator, no RBAC for
pods, no API write per sleep and wake); the truth also lives in the replicas
themselves (``GET /is_sleeping``), which a new leader asks
(:meth:`WarmTier.tend`) instead of trusting anything written before.

**Three parts, one job each**: this module makes the calls and hands each
target's reconciler what it needs at a tick (:meth:`WarmTier.tend`: the
sleeps due are started, and a :class:`Tended` says whether another replica
should be woken) and at an activation (:meth:`WarmTier.wake_one`);
:mod:`scaler.warm.pool` keeps the books (which pods are not awake, their
addresses, the counters, the memory footprints); :mod:`scaler.warm.choices`
decides from the pool and the models' views (what to sleep, what to wake,
what makes room). The HTTP calls themselves are :mod:`scaler.warm.calls`.

**Putting a replica to sleep** (:meth:`WarmTier.consider_sleep`): the pod is
first announced as not routable (``draining``), then after ``handoff_s``
(two report periods: every activator has had the answer) the target must
still be idle and the pod carry no load before ``POST /sleep?level=N``. An
activation in between cancels it.

**Waking** (:meth:`WarmTier.wake`): level 1 is ``POST /wake_up``; level 2
follows vLLM's sequence ``/wake_up?tags=weights``, ``/collective_rpc``
``reload_weights``, ``/wake_up?tags=kv_cache``. Then a one-token warm-up
(the first request after a wake is several times slower without it), then
the pod is routable again.

**Making room on a shared GPU** (:mod:`scaler.warm.room`): with GPU memory
from DCGM (through Prometheus, :mod:`scaler.warm.gpu_memory`), each model's
awake and asleep footprint is learned
(:class:`~scaler.policy.warm_tier.MemoryBook`) and, before a wake, the least
recently used idle models on the same physical GPU are put to sleep first.
Without it, or when it was wrong, a wake that fails for want of memory puts
the least recently used idle model on the same node to sleep and tries again
(at most ``max_evictions`` times). Any other failure, or no room, returns no woken
pod and the target's reconciler falls back to the path from zero (one more replica).

A server without sleep mode (vLLM started without ``VLLM_SERVER_DEV_MODE=1``
and ``--enable-sleep-mode``) answers ``/sleep`` with 404: that pod is not
asked again while it runs, and the target gets one ``SleepModeUnavailable``
Warning Event (and a line in ``tidal status``) instead of a log line every
few seconds.

Main decision: the scaler never guesses a replica's state. A call that
fails leaves the pod in the state the replica reports next (``/is_sleeping``),
and a pod it cannot reach is not routed by the warm tier's answer at all
(its readiness is the EndpointSlice's business).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus

from groundwork.background_tasks import BackgroundTasks
from scaler.kube.types import PodInfo
from scaler.policy.api import ScalingConfig
from scaler.policy.events import SLEEP_MODE_UNAVAILABLE, SLEPT, WAKE_FAILED, WOKE
from scaler.policy.warm_tier import BUSY_WAIT_S
from scaler.warm.calls import HttpReplicaCalls, ReplicaCallFailed, ReplicaCalls
from scaler.warm.choices import WarmChoices
from scaler.warm.gpu_memory import GpuMemory
from scaler.warm.moves import MoveSettings, WarmMoves
from scaler.warm.pool import Phase, PoolEntry, WarmPool, address_of
from scaler.warm.room import Lru, RoomMaker
from scaler.warm.views import ModelView, WarmEvents

__all__ = [
    "HttpReplicaCalls",
    "Phase",
    "ReplicaCallFailed",
    "ReplicaCalls",
    "Tended",
    "WakeOutcome",
    "WarmSettings",
    "WarmTier",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WarmSettings:
    # How long a pod is announced as not routable before it is put to sleep.
    handoff_s: float = 2.0
    # Wakes that fail for memory: at most this many idle models are slept to make room.
    max_evictions: int = 3
    # A wake that finds only busy models beside it waits this long for one to
    # finish its requests before it falls back to a cold start.
    busy_wait_s: float = BUSY_WAIT_S


@dataclass(frozen=True, slots=True)
class WakeOutcome:
    """What :meth:`WarmTier.wake` did: ``woke`` a pod, or why not (``reason``)."""

    woke: str | None
    duration_s: float = 0.0
    reason: str = ""
    evicted: tuple[str, ...] = ()

    @property
    def settled(self) -> bool:
        """Nothing is left to do: a pod woke, one is waking, or none sleeps. Any
        other failure sends the target down the path from zero."""
        return self.woke is not None or self.reason in ("waking already", "nothing sleeps")


@dataclass(frozen=True, slots=True)
class Tended:
    """What tending a model at a tick leaves for its reconciler: how many of its
    replicas are not awake, and how many are awake and ready."""

    asleep: int
    awake_ready: int

    def wake_wanted(self, desired: int) -> bool:
        """A decision wants more replicas than are awake, and one sleeps."""
        return self.asleep > 0 and desired > self.awake_ready


async def wake_sequence(calls: ReplicaCalls, entry: PoolEntry) -> None:
    """vLLM's wake: level 1 at once; level 2 the weights, reloaded, then the KV cache."""
    if entry.level == 2:
        await calls.wake_up(entry.base, ("weights",))
        await calls.reload_weights(entry.base)
        await calls.wake_up(entry.base, ("kv_cache",))
    else:
        await calls.wake_up(entry.base)


async def sleep_call(calls: ReplicaCalls, entry: PoolEntry) -> None:
    """The sleep call at ``entry``'s level; a level-1 sleep the node's host memory cannot
    hold (its pinned allocation failed) sleeps at level 2 instead, which holds none:
    the tier between level 1 and zero (``entry.level`` says which it got)."""
    try:
        await calls.sleep(entry.base, entry.level)
    except ReplicaCallFailed as exc:
        if entry.level != 1 or not exc.host_memory:
            raise
        log.info("%s: no host memory for a level-1 sleep; level 2 instead", entry.name)
        entry.level = 2
        await calls.sleep(entry.base, 2)


async def _logged(call: Awaitable[None], what: str) -> None:
    """Run ``call``; a replica call that fails is logged as ``what``, not raised."""
    try:
        await call
    except ReplicaCallFailed as exc:
        log.info("%s: %s", what, exc)


class WarmTier:
    """The calls that sleep and wake replicas (leader only), over the pool's books."""

    def __init__(
        self,
        calls: ReplicaCalls,
        *,
        clock: Callable[[], float],
        views: Mapping[str, ModelView],
        events: WarmEvents | None = None,
        settings: WarmSettings | None = None,
        observe_wake: Callable[[str, float, bool], None] | None = None,
        memory: GpuMemory | None = None,
        leading: Callable[[], bool] | None = None,
        move_settings: MoveSettings | None = None,
    ) -> None:
        self._calls = calls
        self._clock = clock
        self._events = events
        self._observe_wake = observe_wake or (lambda *_: None)
        # The fence: checked right before every call that changes a replica, and
        # at each tick. A replica that lost the Lease since the decision changes
        # nothing and forgets its books.
        self._leading = leading or (lambda: True)
        self.settings = settings or WarmSettings()
        self.pool = WarmPool(memory)
        self.choices = WarmChoices(self.pool, views)
        self._room = RoomMaker(
            self.pool,
            self.choices,
            sleep_now=lambda target, pod, level: self.sleep_now(target, pod, level=level),
            clock=clock,
            handoff_s=self.settings.handoff_s,
            busy_wait_s=self.settings.busy_wait_s,
        )
        # None: moves are off (scaler setting warm_moves); they are planned while leading.
        self.moves = (
            WarmMoves(self.pool, self.choices, views, move_settings, leading=self._leading)
            if move_settings
            else None
        )
        self._tasks = BackgroundTasks()

    # -- what the reconcilers ask -----------------------------------------------------

    def tend(
        self,
        target: str,
        config: ScalingConfig,
        pods: Sequence[PodInfo],
        now: float,
        awake_needed: int | None = None,
    ) -> Tended | None:
        """A tick, after the target's decision: keep the books in step with its pods,
        ask new pods whether they sleep, start the sleeps due (above ``awake_needed``:
        as headroom). ``None`` when not leading (the books are dropped)."""
        if not self._leading():
            self.pool.clear()
            return None
        self.pool.remember(target, config, pods)
        self.pool.forget_missing(target, pods)
        self.reconcile(target, config, pods)
        self.consider_sleep(target, config, pods, now, awake_needed)
        return Tended(self.pool.asleep_count(target), len(self.pool.awake_ready(pods)))

    async def wake_one(self, target: str, pods: Sequence[PodInfo]) -> WakeOutcome | None:
        """An activation: wake a sleeping replica of ``target`` unless one is awake
        (``None``: nothing to do)."""
        if self.pool.asleep_count(target) == 0 or self.pool.awake_ready(pods):
            return None
        return await self.wake(target)

    def learn(self, now: float) -> int:
        """Feed the memory book from a fresh DCGM snapshot (leader only); the samples taken."""
        return self.pool.learn(now) if self._leading() else 0

    def keep_room(self, now: float) -> list[str]:
        """Leader only: start the sleeps that keep room to wake on each GPU; the pods."""
        keepers = self.choices.room_keepers(now) if self._leading() else []
        for target, pod, level in keepers:
            sleep = _logged(self.sleep_now(target, pod, level=level), f"{pod} stays awake")
            self._tasks.spawn(sleep, name=f"tidal-scaler-sleep:{pod}")
        return [pod for _, pod, _ in keepers]

    def reconcile(self, target: str, config: ScalingConfig, pods: Sequence[PodInfo]) -> None:
        """Ask pods this replica has not asked yet whether they sleep (a new leader)."""
        for pod, base, endpoint in self.pool.unasked(target, config, pods):
            asking = self._ask(target, config, pod, base, endpoint)
            self._tasks.spawn(asking, name=f"tidal-scaler-ask-sleeping:{pod.name}")

    async def _ask(
        self, target: str, config: ScalingConfig, pod: PodInfo, base: str, endpoint: str
    ) -> None:
        name = f"{pod.namespace}/{pod.name}"
        try:
            sleeping = await self._calls.is_sleeping(base)
        except ReplicaCallFailed:
            self.pool.ask_again(name)
            return
        if sleeping and name not in self.pool.entries:
            self.pool.entries[name] = PoolEntry(
                target, name, base, endpoint, pod.node, Phase.SLEEPING, config.sleep_level,
                self._clock(),
            )  # fmt: skip

    async def close(self) -> None:
        await self._tasks.stop()

    def _notify(self, target: str, reason: str, message: str, warning: bool) -> None:
        """An Event about ``target`` (its sink sends it in the background)."""
        if self._events is not None:
            self._events.note(target, reason, message, warning)

    # -- sleeping -----------------------------------------------------------------

    def consider_sleep(
        self,
        target: str,
        config: ScalingConfig,
        pods: Sequence[PodInfo],
        now: float,
        awake_needed: int | None = None,
    ) -> list[str]:
        """Start putting the target's idle replicas to sleep when due, and its replicas
        beyond ``awake_needed`` as headroom; the pods started."""
        by_name = {f"{p.namespace}/{p.name}": p for p in pods}
        started = []
        idle = self.choices.due_sleeps(target, config, pods, now)
        spare = [] if idle else self.choices.headroom_sleeps(target, pods, awake_needed)
        for name in [*idle, *spare]:
            address = address_of(by_name[name], config)
            if address is None:
                continue
            entry = PoolEntry(
                target, name, address[0], address[1], by_name[name].node, Phase.DRAINING,
                config.sleep_level, now, headroom=name in spare,
            )  # fmt: skip
            self.pool.entries[name] = entry
            entry.task = asyncio.ensure_future(self._sleep(entry))
            started.append(name)
        return started

    async def _sleep(self, entry: PoolEntry) -> None:
        try:
            await asyncio.sleep(self.settings.handoff_s)
            async with self.pool.lock(entry.name):
                if (
                    self.pool.entries.get(entry.name) is not entry
                    or entry.phase is not Phase.DRAINING
                ):
                    return
                if not self.choices.still_idle(entry) or not self._leading():
                    self.pool.drop(entry)  # work arrived (or the Lease left): back in rotation
                    return
                try:
                    await sleep_call(self._calls, entry)
                except ReplicaCallFailed as exc:
                    if not self._no_sleep_mode(entry.target, entry.name, exc):
                        log.warning(
                            "%s: could not put %s to sleep: %s", entry.target, entry.name, exc
                        )
                    self.pool.drop(entry)
                    return
                self.pool.slept(entry, self._clock())
                log.info("%s: %s sleeps (level %d)", entry.target, entry.name, entry.level)
                why = f"{entry.name} sleeps (level {entry.level}): idle past sleep-after"
                self._notify(entry.target, SLEPT, why, False)
        finally:
            entry.task = None

    def _no_sleep_mode(self, target: str, pod: str, exc: ReplicaCallFailed) -> bool:
        """True when ``exc`` says ``pod``'s server has no sleep mode (``/sleep`` is not
        served: 404); the first such pod of a target raises one Warning Event."""
        if exc.status != HTTPStatus.NOT_FOUND:
            return False
        message = (
            f"{pod} has no sleep mode ({exc}); its replicas stay awake. Start vLLM with"
            " VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode, or remove"
            " autoscaling.tidal.dev/sleep-after"
        )
        if self.pool.no_sleep_mode_found(target, pod, message):
            log.warning("%s: %s", target, message)
            self._notify(target, SLEEP_MODE_UNAVAILABLE, message, True)
        return True

    async def sleep_now(self, target: str, pod: str, *, level: int = 1) -> None:
        """Put an idle awake replica of another model to sleep now, to make room (announced,
        the handoff waited, then checked that no request reached it meanwhile)."""
        if pod in self.pool.entries:
            raise ReplicaCallFailed(f"{pod} is already asleep or changing")
        address = self.pool.addresses.get(pod)
        if address is None:
            raise ReplicaCallFailed(f"no address known for {pod}")
        entry = PoolEntry(
            target, pod, address[0], address[1], None, Phase.DRAINING, level, self._clock()
        )
        self.pool.entries[pod] = entry
        try:
            await asyncio.sleep(self.settings.handoff_s)
            async with self.pool.lock(pod):
                if self.pool.entries.get(pod) is not entry:
                    raise ReplicaCallFailed(f"{pod} changed state meanwhile")
                if self.choices.pod_load(target, pod.split("/", 1)[1]) > 0:
                    raise ReplicaCallFailed(f"{pod} got work meanwhile")
                if not self._leading():
                    raise ReplicaCallFailed("this scaler no longer leads")
                try:
                    await sleep_call(self._calls, entry)
                except ReplicaCallFailed as exc:
                    self._no_sleep_mode(target, pod, exc)
                    raise
        except BaseException:
            self.pool.drop(entry)
            raise
        entry.phase = Phase.SLEEPING
        entry.since = self._clock()
        self.pool.counter(target).sleeps += 1
        got = entry.level
        log.info("%s: %s sleeps (level %d) to make room on its GPU", target, pod, got)
        self._notify(target, SLEPT, f"{pod} sleeps (level {got}) to make room on its GPU", False)

    # -- waking -------------------------------------------------------------------

    async def wake(self, target: str, *, lru: Lru | None = None) -> WakeOutcome:
        """Wake one sleeping replica of ``target`` (module docstring). ``lru(node, target)``
        lists ``(target, pod, sleep level)`` of idle awake replicas of *other* warm-tier
        models on that node, least recently used first (default: ``choices.lru_on``)."""
        self.pool.cancel_draining(target)  # draining pods go back into rotation
        chosen = self.choices.to_wake(target)
        if isinstance(chosen, str):
            return WakeOutcome(None, reason=chosen)
        entry = chosen
        started = time.monotonic()
        evicted: list[str] = []
        async with self.pool.lock(entry.name):
            if self.pool.entries.get(entry.name) is not entry:
                return WakeOutcome(None, reason="its state changed meanwhile")
            if not self._leading():
                return WakeOutcome(None, reason="waking already")  # the new leader wakes it
            entry.phase = Phase.WAKING
            try:
                evicted += await self._room.before_wake(entry, target)
                evicted += await self._wake_evicting(entry, target, lru or self.choices.lru_on)
                await self._calls.warm_up(entry.base)
            except ReplicaCallFailed as exc:
                entry.phase = Phase.SLEEPING
                took = time.monotonic() - started
                self.pool.counter(target).failed_wakes += 1
                self._observe_wake(target, took, False)
                log.warning("%s: waking %s failed: %s", target, entry.name, exc)
                self._notify(target, WAKE_FAILED, f"waking {entry.name} failed: {exc}", True)
                return WakeOutcome(None, took, reason=str(exc), evicted=tuple(evicted))
            del self.pool.entries[entry.name]
        took = time.monotonic() - started
        counter = self.pool.counter(target)
        counter.wakes += 1
        counter.last_wake_s = took
        self._observe_wake(target, took, True)
        log.info("%s: woke %s in %.2fs (level %d)", target, entry.name, took, entry.level)
        self._notify(
            target,
            WOKE,
            f"woke {entry.name} from level-{entry.level} sleep in {took:.2f}s"
            + (f" after putting {', '.join(evicted)} to sleep" if evicted else ""),
            False,
        )
        return WakeOutcome(entry.name, took, evicted=tuple(evicted))

    async def _wake_evicting(self, entry: PoolEntry, target: str, lru: Lru) -> list[str]:
        """The wake calls; a failure for memory puts the least recently used idle model
        on the node to sleep and tries again. The pods that went to sleep."""
        evicted: list[str] = []
        for attempt in range(self.settings.max_evictions + 1):
            try:
                await wake_sequence(self._calls, entry)
                return evicted
            except ReplicaCallFailed as exc:
                if not exc.out_of_memory or attempt == self.settings.max_evictions:
                    raise
                self.pool.counter(target).oom_retries += 1
                made_room = await self._room.after_out_of_memory(entry, target, lru)
                if made_room is None:
                    raise
                evicted.append(made_room)
        return evicted
