"""The warm tier's one owner: the leading scaler sleeps and wakes replicas.

For targets with ``autoscaling.tidal.dev/sleep-after`` (see
:mod:`scaler.policy.warm` for the ladder), this module makes the HTTP calls
to the replicas' vLLM development endpoints and keeps which replicas sleep.
Only the leader calls it, one call at a time per pod, so a sleep and an
arriving request never race inside Tidal and several activators never wake
one replica twice.

**Where "sleeping" is recorded**: in the answers of this scaler's
``/v1/stats`` and ``/v1/activate`` (``{"sleeping": {target: ["ip:port"]},
"leader": true}``), not in a pod annotation. Activators already exchange
with every scaler replica every report period, so they learn a sleep within
one period without watching pods (no pod watch per activator, no RBAC for
pods, no API write per sleep and wake); the truth also lives in the replicas
themselves (``GET /is_sleeping``), which a new leader asks (:meth:`reconcile`)
instead of trusting anything written before.

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

**Making room on a shared GPU**: with GPU memory from DCGM (through
Prometheus, :mod:`scaler.warm.gpu_memory`), each model's awake and asleep
footprint is learned (:class:`~scaler.policy.warm.MemoryBook`) and, before a
wake, :func:`~scaler.policy.warm.make_room` picks the least recently used
idle models on the same physical GPU to put to sleep first. Without it, or
when it was wrong, a wake that fails for want of memory puts the least
recently used idle model on the same node to sleep and tries again (at most
``max_evictions`` times). Any other failure, or no room, returns no woken
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
import enum
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

import aiohttp

from scaler.kube.types import PodInfo
from scaler.policy.api import ScalingConfig
from scaler.policy.events import SLEEP_MODE_UNAVAILABLE, SLEPT, WAKE_FAILED, WOKE
from scaler.policy.warm import MemoryBook, Replica, Resident, choose_wake, make_room
from scaler.warm.gpu_memory import GpuMemory
from scaler.warm.views import ModelView, WarmEvents

__all__ = [
    "HttpReplicaCalls",
    "Phase",
    "ReplicaCallFailed",
    "ReplicaCalls",
    "WakeOutcome",
    "WarmSettings",
    "WarmTier",
]

log = logging.getLogger(__name__)


class ReplicaCallFailed(Exception):
    """A call to a replica's development endpoint failed; ``out_of_memory`` when CUDA said so."""

    def __init__(
        self, message: str, *, out_of_memory: bool = False, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory
        self.status = status  # the replica's HTTP status, when it answered


class ReplicaCalls(Protocol):
    """The replica endpoints the warm tier uses (``base`` is ``http://ip:port``)."""

    async def sleep(self, base: str, level: int) -> None: ...

    async def wake_up(self, base: str, tags: tuple[str, ...] = ()) -> None: ...

    async def reload_weights(self, base: str) -> None: ...

    async def warm_up(self, base: str) -> None: ...

    async def is_sleeping(self, base: str) -> bool: ...


class HttpReplicaCalls:
    """:class:`ReplicaCalls` over HTTP, as vLLM serves them with VLLM_SERVER_DEV_MODE=1."""

    def __init__(self, session: aiohttp.ClientSession, *, timeout_s: float = 60.0) -> None:
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def _call(
        self, method: str, url: str, *, json_body: Any = None, params: Any = None
    ) -> Any:
        try:
            async with self._session.request(
                method, url, json=json_body, params=params, timeout=self._timeout
            ) as resp:
                text = await resp.text()
                if resp.status >= 300:
                    oom = "out of memory" in text.lower()
                    raise ReplicaCallFailed(
                        f"{method} {url} answered {resp.status}: {text[:200]}",
                        out_of_memory=oom,
                        status=resp.status,
                    )
                return text
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ReplicaCallFailed(f"{method} {url} failed: {exc!r}") from exc

    async def sleep(self, base: str, level: int) -> None:
        await self._call("POST", f"{base}/sleep", params={"level": str(level)})

    async def wake_up(self, base: str, tags: tuple[str, ...] = ()) -> None:
        params = [("tags", t) for t in tags]
        await self._call("POST", f"{base}/wake_up", params=params or None)

    async def reload_weights(self, base: str) -> None:
        await self._call("POST", f"{base}/collective_rpc", json_body={"method": "reload_weights"})

    async def warm_up(self, base: str) -> None:
        # The served model's name, as vLLM lists it; one token is enough to
        # re-warm the caches and allocator.
        models = json.loads(await self._call("GET", f"{base}/v1/models"))
        data = models.get("data") if isinstance(models, dict) else None
        name = data[0].get("id") if isinstance(data, list) and data else None
        body: dict[str, Any] = {"prompt": "hi", "max_tokens": 1}
        if isinstance(name, str):
            body["model"] = name
        await self._call("POST", f"{base}/v1/completions", json_body=body)

    async def is_sleeping(self, base: str) -> bool:
        answer = json.loads(await self._call("GET", f"{base}/is_sleeping"))
        return bool(isinstance(answer, dict) and answer.get("is_sleeping"))


class Phase(enum.StrEnum):
    DRAINING = "draining"  # announced as not routable; the sleep call comes next
    SLEEPING = "sleeping"
    WAKING = "waking"


@dataclass(slots=True)
class _Pod:
    target: str
    name: str  # namespace/pod
    base: str  # http://ip:port
    endpoint: str  # ip:port, as the activators key endpoints
    node: str | None
    phase: Phase
    level: int
    since: float
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True, slots=True)
class WarmSettings:
    # How long a pod is announced as not routable before it is put to sleep.
    handoff_s: float = 2.0
    # Wakes that fail for memory: at most this many idle models are slept to make room.
    max_evictions: int = 3


@dataclass(frozen=True, slots=True)
class WakeOutcome:
    """What :meth:`WarmTier.wake` did: ``woke`` a pod, or why not (``reason``)."""

    woke: str | None
    duration_s: float = 0.0
    reason: str = ""
    evicted: tuple[str, ...] = ()


@dataclass(slots=True)
class _Counters:
    sleeps: int = 0
    wakes: int = 0
    failed_wakes: int = 0
    oom_retries: int = 0  # wakes that failed for memory and were retried after an eviction
    last_wake_s: float | None = None


class WarmTier:
    """Which replicas sleep, and the calls that change it (leader only)."""

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
    ) -> None:
        self._calls = calls
        self._clock = clock
        # The models as their last decisions saw them (read only: the reconcilers
        # publish them); the tier reads them at a handoff and to rank evictions.
        self._views = views
        self._events = events
        self._observe_wake = observe_wake or (lambda *_: None)
        self._memory = memory
        # Checked right before every call that changes a replica: a replica
        # that lost the Lease since the decision changes nothing.
        self._leading = leading or (lambda: True)
        self.book = MemoryBook()
        self._target_of: dict[str, str] = {}  # namespace/pod -> target (warm-tier pods)
        self._levels: dict[str, int] = {}  # target -> sleep level
        self.settings = settings or WarmSettings()
        self._pods: dict[str, _Pod] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._checked: set[str] = set()
        self._known_addresses: dict[str, tuple[str, str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.counters: dict[str, _Counters] = {}
        # Servers without sleep mode: target -> what the first such pod answered,
        # and the pods that answered so (not asked again while they run).
        self._no_sleep_mode: dict[str, str] = {}
        self._no_sleep_pods: set[str] = set()

    # -- what the last decisions saw --------------------------------------------------

    def _idle_since(self, target: str) -> float | None:
        """Start of the target's idle stretch (None: busy, or unknown)."""
        view = self._views.get(target)
        return view.idle_since if view is not None else None

    def _last_used(self, target: str) -> float | None:
        """When the target last had work (None: never): the LRU order of evictions."""
        view = self._views.get(target)
        return view.last_used if view is not None else None

    def _pod_load(self, target: str, pod: str) -> float:
        """Requests running or waiting on one pod (by name), as the last decision saw them."""
        view = self._views.get(target)
        return view.pod_load.get(pod, 0.0) if view is not None else 0.0

    def _notify(self, target: str, reason: str, message: str, warning: bool) -> None:
        """An Event about ``target`` (its sink sends it in the background)."""
        if self._events is not None:
            self._events.note(target, reason, message, warning)

    # -- views --------------------------------------------------------------------

    def not_routable(self) -> dict[str, list[str]]:
        """``{target: [ip:port]}`` of the pods that must not get requests (the answers)."""
        out: dict[str, list[str]] = {}
        for pod in self._pods.values():
            out.setdefault(pod.target, []).append(pod.endpoint)
        return {k: sorted(v) for k, v in out.items()}

    def sleeping_pods(self, target: str) -> list[str]:
        return sorted(p.name for p in self._pods.values() if p.target == target)

    def phase_of(self, pod: str) -> Phase | None:
        entry = self._pods.get(pod)
        return entry.phase if entry is not None else None

    def asleep_count(self, target: str) -> int:
        return sum(1 for p in self._pods.values() if p.target == target)

    def describe(self, target: str) -> dict[str, Any]:
        """The target's warm state for ``/v1/targets`` and ``tidal status``."""
        c = self.counters.get(target, _Counters())
        return {
            "pods": {
                p.name: {"phase": p.phase.value, "level": p.level, "since": p.since}
                for p in self._pods.values()
                if p.target == target
            },
            "sleeps": c.sleeps,
            "wakes": c.wakes,
            "failedWakes": c.failed_wakes,
            "outOfMemoryRetries": c.oom_retries,
            "lastWakeSeconds": c.last_wake_s,
            "sleepModeUnavailable": self._no_sleep_mode.get(target),
        }

    def _counter(self, target: str) -> _Counters:
        return self.counters.setdefault(target, _Counters())

    # -- bookkeeping -------------------------------------------------------------------

    @staticmethod
    def _address(pod: PodInfo, config: ScalingConfig) -> tuple[str, str] | None:
        port = pod.port(config.metrics_port)
        if pod.ip is None or port is None:
            return None
        host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
        return f"http://{host}:{port}", f"{pod.ip}:{port}"

    def forget_missing(self, target: str, pods: Sequence[PodInfo]) -> None:
        """Drop state of pods that are gone or terminating (scaled to zero, deleted)."""
        alive = {f"{p.namespace}/{p.name}" for p in pods if not p.terminating}
        for name in [n for n, p in self._pods.items() if p.target == target and n not in alive]:
            entry = self._pods.pop(name)
            if entry.task is not None:
                entry.task.cancel()
        self._no_sleep_pods -= {
            n for n in self._no_sleep_pods if self._target_of.get(n) == target and n not in alive
        }
        gone = {n for n in self._checked if self._target_of.get(n) == target and n not in alive}
        self._checked -= gone
        for name in gone:
            self._target_of.pop(name, None)
            self._known_addresses.pop(name, None)

    def step_down(self) -> None:
        """This replica lost the Lease: forget everything. A sleep still waiting
        for its handoff is dropped; a new term starts by asking the pods."""
        for entry in self._pods.values():
            if entry.task is not None:
                entry.task.cancel()
        self._pods.clear()
        self._checked.clear()

    def reconcile(self, target: str, config: ScalingConfig, pods: Sequence[PodInfo]) -> None:
        """Ask pods this replica has not asked yet whether they sleep (a new leader)."""
        for pod in pods:
            name = f"{pod.namespace}/{pod.name}"
            if name in self._checked or not pod.ready or pod.terminating:
                continue
            address = self._address(pod, config)
            if address is None:
                continue
            self._checked.add(name)
            self._target_of[name] = target
            self._spawn(self._ask(target, config, pod, *address))

    async def _ask(
        self, target: str, config: ScalingConfig, pod: PodInfo, base: str, endpoint: str
    ) -> None:
        name = f"{pod.namespace}/{pod.name}"
        try:
            sleeping = await self._calls.is_sleeping(base)
        except ReplicaCallFailed:
            self._checked.discard(name)  # ask again next time
            return
        if sleeping and name not in self._pods:
            self._pods[name] = _Pod(
                target, name, base, endpoint, pod.node, Phase.SLEEPING, config.sleep_level,
                self._clock(),
            )  # fmt: skip

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _lock(self, pod: str) -> asyncio.Lock:
        return self._locks.setdefault(pod, asyncio.Lock())

    # -- sleeping -----------------------------------------------------------------

    def consider_sleep(
        self, target: str, config: ScalingConfig, pods: Sequence[PodInfo], now: float
    ) -> list[str]:
        """Start putting the target's idle replicas to sleep when due; the pods started."""
        from scaler.policy.warm import replicas_to_sleep

        replicas = [
            Replica(
                pod=f"{p.namespace}/{p.name}",
                sleeping=f"{p.namespace}/{p.name}" in self._pods,
                level=config.sleep_level,
                busy=self._pod_load(target, p.name) > 0,
                ready=p.ready and not p.terminating,
            )
            for p in pods
        ]
        chosen = replicas_to_sleep(config, replicas, self._idle_since(target), now)
        chosen = tuple(name for name in chosen if name not in self._no_sleep_pods)
        started = []
        by_name = {f"{p.namespace}/{p.name}": p for p in pods}
        for name in chosen:
            address = self._address(by_name[name], config)
            if address is None:
                continue
            entry = _Pod(
                target, name, address[0], address[1], by_name[name].node, Phase.DRAINING,
                config.sleep_level, now,
            )  # fmt: skip
            self._pods[name] = entry
            entry.task = asyncio.ensure_future(self._sleep(entry))
            started.append(name)
        return started

    async def _sleep(self, entry: _Pod) -> None:
        try:
            await asyncio.sleep(self.settings.handoff_s)
            async with self._lock(entry.name):
                if self._pods.get(entry.name) is not entry or entry.phase is not Phase.DRAINING:
                    return
                pod = entry.name.split("/", 1)[1]
                if self._idle_since(entry.target) is None or self._pod_load(entry.target, pod) > 0:
                    del self._pods[entry.name]  # work arrived: back in rotation
                    return
                if not self._leading():
                    del self._pods[entry.name]
                    return
                try:
                    await self._calls.sleep(entry.base, entry.level)
                except ReplicaCallFailed as exc:
                    if not self._no_sleep_mode_on(entry.target, entry.name, exc):
                        log.warning(
                            "%s: could not put %s to sleep: %s", entry.target, entry.name, exc
                        )
                    del self._pods[entry.name]
                    return
                self._no_sleep_mode.pop(entry.target, None)
                entry.phase = Phase.SLEEPING
                entry.since = self._clock()
                self._counter(entry.target).sleeps += 1
                log.info("%s: %s sleeps (level %d)", entry.target, entry.name, entry.level)
                self._notify(
                    entry.target,
                    SLEPT,
                    f"{entry.name} sleeps (level {entry.level}): idle past sleep-after",
                    False,
                )
        except asyncio.CancelledError:
            raise
        finally:
            entry.task = None

    def _no_sleep_mode_on(self, target: str, pod: str, exc: ReplicaCallFailed) -> bool:
        """True when ``exc`` says ``pod``'s server has no sleep mode (``/sleep`` is not
        served: 404). The pod is not asked again while it runs; the first such pod of
        a target raises one Warning Event, until a replica of it sleeps."""
        if exc.status != HTTPStatus.NOT_FOUND:
            return False
        self._no_sleep_pods.add(pod)
        self._target_of.setdefault(pod, target)
        if target not in self._no_sleep_mode:
            message = (
                f"{pod} has no sleep mode ({exc}); its replicas stay awake. Start vLLM with"
                " VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode, or remove"
                " autoscaling.tidal.dev/sleep-after"
            )
            self._no_sleep_mode[target] = message
            log.warning("%s: %s", target, message)
            self._notify(target, SLEEP_MODE_UNAVAILABLE, message, True)
        return True

    def cancel_sleeps(self, target: str) -> int:
        """An activation: pods still draining go back into rotation (no wake needed)."""
        back = 0
        for name, entry in list(self._pods.items()):
            if entry.target == target and entry.phase is Phase.DRAINING:
                if entry.task is not None:
                    entry.task.cancel()
                del self._pods[name]
                back += 1
        return back

    # -- waking -------------------------------------------------------------------

    async def wake(
        self,
        target: str,
        *,
        lru: Callable[[str | None, str], list[tuple[str, str, int]]] | None = None,
    ) -> WakeOutcome:
        """Wake one sleeping replica of ``target``; see the module docstring.

        ``lru(node, target)`` lists ``(target, pod, sleep level)`` of idle awake
        replicas of *other* warm-tier models on that node, least recently used first
        (by default :meth:`lru_on`, from the models' views).
        """
        lru = lru or self.lru_on
        self.cancel_sleeps(target)
        candidates = [
            Replica(pod=p.name, sleeping=True, level=p.level, ready=p.phase is Phase.SLEEPING)
            for p in self._pods.values()
            if p.target == target
        ]
        chosen = choose_wake(candidates)
        if chosen is None:
            waking = [p for p in self._pods.values() if p.target == target]
            return WakeOutcome(None, reason="waking already" if waking else "nothing sleeps")
        entry = self._pods[chosen.pod]
        started = time.monotonic()
        evicted: list[str] = []
        async with self._lock(entry.name):
            if self._pods.get(entry.name) is not entry:
                return WakeOutcome(None, reason="its state changed meanwhile")
            if not self._leading():
                return WakeOutcome(None, reason="waking already")  # the new leader wakes it
            entry.phase = Phase.WAKING
            try:
                first, _ = self.plan_room(entry.name, target, self._clock())
                results = await asyncio.gather(
                    *(
                        self.sleep_now(
                            self._target_of[v], v, level=self._levels.get(self._target_of[v], 1)
                        )
                        for v in first
                    ),
                    return_exceptions=True,
                )
                for victim, result in zip(first, results, strict=True):
                    if isinstance(result, BaseException):
                        log.info("%s: %s could not make room: %s", target, victim, result)
                    else:
                        evicted.append(victim)
                for attempt in range(self.settings.max_evictions + 1):
                    try:
                        await self._wake_sequence(entry)
                        break
                    except ReplicaCallFailed as exc:
                        if not exc.out_of_memory or attempt == self.settings.max_evictions:
                            raise
                        self._counter(target).oom_retries += 1
                        made_room = await self._evict_one(entry, target, lru)
                        if made_room is None:
                            raise
                        evicted.append(made_room)
                await self._calls.warm_up(entry.base)
            except ReplicaCallFailed as exc:
                entry.phase = Phase.SLEEPING
                took = time.monotonic() - started
                self._counter(target).failed_wakes += 1
                self._observe_wake(target, took, False)
                log.warning("%s: waking %s failed: %s", target, entry.name, exc)
                self._notify(target, WAKE_FAILED, f"waking {entry.name} failed: {exc}", True)
                return WakeOutcome(None, took, reason=str(exc), evicted=tuple(evicted))
            del self._pods[entry.name]
        took = time.monotonic() - started
        counter = self._counter(target)
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

    async def _evict_one(
        self,
        entry: _Pod,
        target: str,
        lru: Callable[[str | None, str], list[tuple[str, str, int]]] | None,
    ) -> str | None:
        """Put the least recently used idle model on ``entry``'s node to sleep; its name."""
        for victim_target, victim, level in lru(entry.node, target) if lru is not None else []:
            try:
                await self.sleep_now(victim_target, victim, level=level)
            except ReplicaCallFailed as exc:
                log.info("%s: %s could not make room: %s", target, victim, exc)
                continue
            return victim
        return None

    async def _wake_sequence(self, entry: _Pod) -> None:
        if entry.level == 2:
            await self._calls.wake_up(entry.base, ("weights",))
            await self._calls.reload_weights(entry.base)
            await self._calls.wake_up(entry.base, ("kv_cache",))
        else:
            await self._calls.wake_up(entry.base)

    async def sleep_now(self, target: str, pod: str, *, level: int = 1) -> None:
        """Put an idle awake replica of another model to sleep now, to make room.

        As for any sleep, its endpoint is announced first and the call waits
        the handoff, then checks that no request reached the pod meanwhile.
        """
        if pod in self._pods:
            raise ReplicaCallFailed(f"{pod} is already asleep or changing")
        address = self._known_addresses.get(pod)
        if address is None:
            raise ReplicaCallFailed(f"no address known for {pod}")
        entry = _Pod(
            target, pod, address[0], address[1], None, Phase.DRAINING, level, self._clock()
        )
        self._pods[pod] = entry
        try:
            await asyncio.sleep(self.settings.handoff_s)
            async with self._lock(pod):
                if self._pods.get(pod) is not entry:
                    raise ReplicaCallFailed(f"{pod} changed state meanwhile")
                if self._pod_load(target, pod.split("/", 1)[1]) > 0:
                    raise ReplicaCallFailed(f"{pod} got work meanwhile")
                if not self._leading():
                    raise ReplicaCallFailed("this scaler no longer leads")
                try:
                    await self._calls.sleep(entry.base, entry.level)
                except ReplicaCallFailed as exc:
                    self._no_sleep_mode_on(target, pod, exc)
                    raise
        except BaseException:
            if self._pods.get(pod) is entry:
                del self._pods[pod]
            raise
        entry.phase = Phase.SLEEPING
        entry.since = self._clock()
        self._counter(target).sleeps += 1
        log.info("%s: %s sleeps (level %d) to make room on its GPU", target, pod, level)
        self._notify(target, SLEPT, f"{pod} sleeps (level {level}) to make room on its GPU", False)

    def remember_addresses(
        self, target: str, config: ScalingConfig, pods: Sequence[PodInfo]
    ) -> None:
        """Where a warm-tier target's pods listen, and that they are its (for evictions)."""
        self._levels[target] = config.sleep_level
        for pod in pods:
            name = f"{pod.namespace}/{pod.name}"
            self._target_of[name] = target
            address = self._address(pod, config)
            if address is not None:
                self._known_addresses[name] = address

    def learn(self, now: float) -> int:
        """Feed the memory book from a fresh DCGM snapshot; the samples taken."""
        snap = self._memory.fresh(now) if self._memory is not None else None
        if snap is None:
            return 0
        taken = 0
        for (ns, pod), (_, mib) in snap.pods.items():
            name = f"{ns}/{pod}"
            target = self._target_of.get(name)
            entry = self._pods.get(name)
            if target is None or (entry is not None and entry.phase is not Phase.SLEEPING):
                continue  # not ours, or between states
            self.book.observe(target, mib=mib, sleeping=entry is not None)
            taken += 1
        return taken

    def plan_room(self, entry_name: str, target: str, now: float) -> tuple[list[str], bool]:
        """(pods to put to sleep first, whether the wake then fits); ([], True) when
        memory is unknown (the wake is tried, and room made if it fails)."""
        snap = self._memory.fresh(now) if self._memory is not None else None
        need = self.book.wake_need_mib(target)
        ns, pod = entry_name.split("/", 1)
        placed = snap.pods.get((ns, pod)) if snap is not None else None
        if snap is None or need is None or placed is None:
            return [], True
        uuid = placed[0]
        budget = snap.budget(uuid)
        if budget is None:
            return [], True
        residents = []
        for (r_ns, r_pod), mib in snap.on_gpu(uuid).items():
            name = f"{r_ns}/{r_pod}"
            owner = self._target_of.get(name)
            used = self._last_used(owner) if owner is not None else None
            entry = self._pods.get(name)
            if owner is not None:
                # The sample may predate this tier's own last sleeps and wakes
                # (Prometheus answers every few seconds): hold each pod at the
                # footprint learned for its current state.
                book = self.book.asleep if entry is not None else self.book.awake
                mib = book.get(owner, mib)
            residents.append(
                Resident(
                    target=owner or "",
                    pod=name,
                    awake=entry is None,
                    # Pods outside the warm tier are never put to sleep: count them busy.
                    busy=owner is None or self._pod_load(owner, r_pod) > 0,
                    used_mib=round(mib),
                    idle_since_s=float("-inf") if used is None else used,
                )
            )
        plan = make_room(
            budget_mib=round(budget), residents=residents, waking_pod=entry_name, need_mib=need
        )
        return list(plan.sleep), plan.fits

    def awake_ready(self, pods: Sequence[PodInfo]) -> list[PodInfo]:
        """The ready pods among ``pods`` that are awake (not draining, asleep or waking)."""
        return [
            p
            for p in pods
            if p.ready and not p.terminating and f"{p.namespace}/{p.name}" not in self._pods
        ]

    def lru_on(self, node: str | None, target: str) -> list[tuple[str, str, int]]:
        """Idle awake pods of other warm-tier models on ``node``, least recently used
        first, as ``(target, pod, sleep level)``."""
        pods: dict[str, tuple[PodInfo, ...]] = {}
        levels: dict[str, int] = {}
        for key, view in self._views.items():
            if view.sleep_level is None:
                continue  # only models opted in to the warm tier are put to sleep
            pods[key] = view.pods
            levels[key] = view.sleep_level
        ranked = self.idle_awake_on(node, exclude_target=target, pods=pods)
        return [(t, pod, levels[t]) for _, t, pod in ranked]

    def idle_awake_on(
        self, node: str | None, *, exclude_target: str, pods: Mapping[str, Sequence[PodInfo]]
    ) -> list[tuple[float, str, str]]:
        """(last used, target, pod) of awake pods of other models on ``node`` with no
        request running or waiting, least recently used first."""
        out = []
        for target, target_pods in pods.items():
            if target == exclude_target:
                continue
            used = self._last_used(target)
            for p in target_pods:
                name = f"{p.namespace}/{p.name}"
                if node is not None and p.node != node:
                    continue
                if name in self._pods or not p.ready or p.terminating:
                    continue
                if self._pod_load(target, p.name) > 0:
                    continue
                out.append((float("-inf") if used is None else used, target, name))
        return sorted(out)
