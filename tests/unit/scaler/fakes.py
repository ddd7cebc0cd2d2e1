"""Fakes for the scaler's seams: cluster view, scale target, events, leader, sources, ticker,
timers; and :func:`wire`, the controller, hub and actuator put together as the service does.

Each records what was done to it so that tests assert on calls, and can be told
to fail (``fail_with``) the way the API server would during an outage.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from groundwork.kube.errors import Conflict, KubeError
from scaler.actuator import Actuator
from scaler.controller import Controller, ControllerSettings
from scaler.kube.types import (
    DeploymentInfo,
    EventSink,
    LabelSelector,
    LeaderElector,
    PodInfo,
    PoolState,
    ScaleState,
    ScaleTarget,
    TargetSnapshot,
)
from scaler.metrics import Metrics
from scaler.policy.api import SignalKind
from scaler.policy.protocol import Policy, PurePolicy
from scaler.signals.base import COUNTS, DemandSource, SourceReading
from scaler.signals.hub import SignalHub
from scaler.targets.book import TargetBook
from scaler.ticking import CallLater
from scaler.warm.tier import ReplicaCalls, WarmSettings, WarmTier
from scaler.warm.views import ActuatorEvents, ModelBoard


def deployment(
    name: str = "llama",
    namespace: str = "default",
    *,
    replicas: int = 0,
    ready: int | None = None,
    annotations: Mapping[str, str] | None = None,
) -> DeploymentInfo:
    return DeploymentInfo(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        annotations=dict(annotations or {}),
        spec_replicas=replicas,
        ready_replicas=replicas if ready is None else ready,
        selector=LabelSelector(match_labels={"app": name}),
        resource_version="1",
    )


def pod(name: str, *, app: str = "llama", ip: str = "10.0.0.1", cost: int | None = None) -> PodInfo:
    return PodInfo(
        namespace="default",
        name=name,
        labels={"app": app},
        ip=ip,
        ready=True,
        terminating=False,
        deletion_cost=cost,
    )


class FakeCluster:
    def __init__(self, *snapshots: TargetSnapshot, synced: bool = True) -> None:
        self.snapshots = {s.deployment.key: s for s in snapshots}
        self.synced = synced
        self.rv = 100
        # Opted-in InferencePools, by key, as the pool index would state them.
        self.pool_states: dict[str, PoolState] = {}

    def targets(self) -> Mapping[str, TargetSnapshot]:
        # A new mapping at every call, as a real view's is after every change (tests
        # change ``snapshots`` in place).
        return dict(self.snapshots)

    def pools(self) -> Mapping[str, PoolState]:
        return self.pool_states

    def put(self, d: DeploymentInfo, pods: tuple[PodInfo, ...] = ()) -> None:
        self.snapshots[d.key] = TargetSnapshot(deployment=d, pods=pods)

    def set_replicas(self, key: str, replicas: int, *, ready: int | None = None) -> None:
        snap = self.snapshots[key]
        d = replace(
            snap.deployment,
            spec_replicas=replicas,
            ready_replicas=replicas if ready is None else ready,
        )
        self.snapshots[key] = replace(snap, deployment=self.bumped(d))

    def bumped(self, d: DeploymentInfo) -> DeploymentInfo:
        """``d`` with a new resourceVersion, as the API server gives every write."""
        self.rv += 1
        return replace(d, resource_version=str(self.rv))

    def touch(self, key: str) -> None:
        """Someone else wrote the Deployment (a status update): a new resourceVersion."""
        snap = self.snapshots[key]
        self.snapshots[key] = replace(snap, deployment=self.bumped(snap.deployment))


@dataclass
class FakeScaleTarget:
    """Applies writes to a :class:`FakeCluster` as the API server would: a stale
    ``resourceVersion`` is a 409, every write bumps it (readiness follows a scale at
    once unless told), and so does the Deployment controller's status update right
    after a scale (``controller_follows``); a status whose ``replicas`` are no longer
    the Deployment's is a 409 too. ``fail_with`` fails every call; ``fail_next[call]`` fails the
    next calls of one kind (``scale``, ``costs``, ``status``) in order."""

    cluster: FakeCluster
    ready_follows: bool = True
    controller_follows: bool = True
    fail_with: KubeError | None = None
    fail_next: dict[str, list[KubeError]] = field(default_factory=dict)
    scales: list[tuple[str, int]] = field(default_factory=list)
    costs: list[tuple[str, dict[str, int | None]]] = field(default_factory=list)
    statuses: list[tuple[str, str]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    # Called before each write is applied (a test takes the Lease away here).
    before_write: Callable[[str], None] | None = None

    def _call(self, kind: str) -> None:
        self.calls.append(kind)
        if self.before_write is not None:
            self.before_write(kind)
        if self.fail_with is not None:
            raise self.fail_with
        queued = self.fail_next.get(kind)
        if queued:
            raise queued.pop(0)

    def _check(self, key: str, resource_version: str | None) -> DeploymentInfo:
        d = self.cluster.snapshots[key].deployment
        if resource_version and resource_version != d.resource_version:
            raise Conflict(f"{key}: the object has been modified", status=409)
        return d

    async def read_scale(self, namespace: str, name: str) -> ScaleState:
        self.calls.append("read")
        d = self.cluster.snapshots[f"{namespace}/{name}"].deployment
        return ScaleState(replicas=d.spec_replicas, resource_version=d.resource_version)

    async def scale(
        self, namespace: str, name: str, replicas: int, *, resource_version: str
    ) -> str:
        self._call("scale")
        key = f"{namespace}/{name}"
        d = self._check(key, resource_version)
        self.scales.append((key, replicas))
        ready = None if self.ready_follows else d.ready_replicas
        self.cluster.set_replicas(key, replicas, ready=ready)
        version = self.cluster.snapshots[key].deployment.resource_version
        if self.controller_follows:
            self.cluster.touch(key)  # the Deployment controller records the new generation
        return version

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int | None]) -> None:
        self._call("costs")
        self.costs.append((namespace, dict(costs)))

    async def write_status(
        self,
        namespace: str,
        name: str,
        status_json: str,
        *,
        replicas: int,
        has_annotations: bool = True,
    ) -> str:
        self._call("status")
        key = f"{namespace}/{name}"
        if self.cluster.snapshots[key].deployment.spec_replicas != replicas:
            raise Conflict(f"{key}: testing value /spec/replicas failed", status=409)
        self.statuses.append((key, status_json))
        self.cluster.touch(key)
        return self.cluster.snapshots[key].deployment.resource_version


@dataclass
class FakeEvents:
    events: list[tuple[str, str, str, bool]] = field(default_factory=list)

    async def emit(
        self, target: DeploymentInfo, *, reason: str, message: str, warning: bool = False
    ) -> None:
        self.events.append((target.key, reason, message, warning))

    def reasons(self) -> list[str]:
        return [e[1] for e in self.events]


@dataclass
class FakeLeader:
    is_leader: bool = True
    identity: str = "test-scaler"


# What each real source measures, by the name a fake takes from it.
FEEDS = {
    "activator": COUNTS,
    "scrape": frozenset(SignalKind),
    "prometheus": frozenset({SignalKind.GPU_UTILIZATION}),
}


def reading(
    *,
    fresh: bool,
    reporters: int = 1,
    concurrency: float | None = None,
    queue_depth: float | None = None,
    kv_cache_utilization: float | None = None,
    gpu_utilization: float | None = None,
    **rest: Any,
) -> SourceReading:
    """A source's reading, its signals given by name (``None``: not measured now)."""
    named = {
        SignalKind.CONCURRENCY: concurrency,
        SignalKind.QUEUE_DEPTH: queue_depth,
        SignalKind.KV_CACHE_UTILIZATION: kv_cache_utilization,
        SignalKind.GPU_UTILIZATION: gpu_utilization,
    }
    signals = {kind: value for kind, value in named.items() if value is not None}
    return SourceReading(fresh=fresh, reporters=reporters, signals=signals, **rest)


class FakeSource:
    """A demand source whose readings the test sets per target; it measures what
    the real source of its name measures (everything, for another name)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.readings: dict[str, SourceReading | None] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def feeds(self) -> frozenset[SignalKind]:
        return FEEDS.get(self._name, frozenset(SignalKind))

    def read(self, key: str, *, now: float) -> SourceReading | None:
        return self.readings.get(key)


class ManualTicker:
    """Ticks only when the test pushes a time."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[float] = asyncio.Queue()

    def push(self, now: float) -> None:
        self._queue.put_nowait(now)

    async def __aiter__(self) -> AsyncIterator[float]:
        while True:
            yield await self._queue.get()


@dataclass
class ManualTimer:
    delay_s: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimers:
    """A ``call_later`` that runs nothing until the test fires what is due."""

    def __init__(self) -> None:
        self.scheduled: list[ManualTimer] = []

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> ManualTimer:
        timer = ManualTimer(delay_s, callback)
        self.scheduled.append(timer)
        return timer

    def pending(self) -> list[ManualTimer]:
        return [t for t in self.scheduled if not t.cancelled]

    def fire_all(self) -> int:
        """Run every callback not cancelled (as if their time had come); returns how many."""
        due, self.scheduled = self.pending(), []
        for timer in due:
            timer.callback()
        return len(due)


@dataclass
class Wired:
    """A controller wired as the service wires it, with fakes at the seams."""

    controller: Controller
    signals: SignalHub
    book: TargetBook
    actuator: Actuator


def wire(
    cluster: FakeCluster,
    *,
    sources: Sequence[DemandSource],
    scale_target: ScaleTarget,
    events: EventSink,
    leader: LeaderElector,
    metrics: Metrics,
    clock: Callable[[], float],
    policy: Policy | None = None,
    gpu_metrics: bool = False,
    tick_interval_s: float = 2.0,
    wall_time: Callable[[], str] | None = None,
    call_later: CallLater | None = None,
    warm_calls: ReplicaCalls | None = None,
    warm_settings: WarmSettings | None = None,
) -> Wired:
    policy = policy or PurePolicy()
    book = TargetBook(cluster, policy, gpu_metrics=gpu_metrics)
    signals = SignalHub(sources=sources, catalog=book)
    actuator = Actuator(
        scale_target=scale_target,
        events=events,
        leader=leader,
        metrics=metrics,
        **({"wall_time": wall_time} if wall_time is not None else {}),
    )
    board = ModelBoard()
    warm = None
    if warm_calls is not None:
        # As the service builds it: the board of views to read, Events through the actuator.
        warm = WarmTier(
            warm_calls,
            clock=clock,
            views=board,
            events=ActuatorEvents(actuator, book, metrics),
            leading=lambda: leader.is_leader,
            settings=warm_settings,
        )
    controller = Controller(
        targets=book,
        signals=signals,
        actuator=actuator,
        policy=policy,
        metrics=metrics,
        clock=clock,
        settings=ControllerSettings(tick_interval_s=tick_interval_s),
        call_later=call_later,
        warm=warm,
        board=board,
    )
    return Wired(controller=controller, signals=signals, book=book, actuator=actuator)
