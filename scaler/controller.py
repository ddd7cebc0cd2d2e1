"""The control loop: per target, read the signals, decide, act.

Samples go into the windows **when they arrive** (DESIGN §4): the HTTP
server calls :meth:`Controller.record_arrival` as an activator report comes in
(every target, since a report lists every target its activator knows, idle
ones at zero), and the poll loops call it as a scrape or a Prometheus answer
completes. Each arrival records, at its arrival time, the combined value
(:mod:`scaler.signals.combine`) of the signals that source feeds, so a second
in which nothing arrived is *missing* in the windows, never a zero.

At every tick (default 2 s, from an injectable :class:`Ticker`), at once on an
activation, and at the ``recheck_after_s`` a decision asked for when that comes
before the next tick, for each opted-in Deployment the controller

1. asks every demand source for its current reading and combines them (for
   freshness and "is anything busy", not to record);
2. evaluates the windows at ``now`` into :class:`SignalReading` values, marking
   a signal not fresh when any source behind it is stale (so stale data can
   raise the scale but never lower it);
3. calls the pure policy (``decide``) with the target's state and keeps the
   state it returns;
4. acts, only when this replica holds the Lease: pod-deletion-cost on the
   idlest pods before a scale-down, the ``/scale`` patch, an Event and an INFO
   log line when the scale changed, and the status annotation when its
   discrete content changed.

Every replica records and does 1-3, so a follower that takes over has warm
windows and a policy state that has long left its warm-up; :meth:`poke` (called
when this replica wins the Lease) decides for every target at once instead of
waiting for the next tick. A follower keeps its copy of the status annotation
in step with what the leader wrote, so on taking over it rewrites nothing that
did not change.

Main decisions:

- **No data is not zero load.** Until the Deployment list has synced, nothing
  is decided. When the API server is unreachable the last known Deployments
  and pods are kept; writes fail and are retried at the next tick (and a
  leader that cannot renew its Lease stops writing). Nothing in this module
  turns a missing answer into a zero.
- **A bad annotation leaves the Deployment alone.** Its config is rejected
  whole, an ``InvalidAnnotation`` Warning Event (naming key, value and what is
  allowed) is written once per distinct set of annotations, and no write
  touches its scale until the annotations change.
- **One decision at a time per target.** An activation and a tick can race;
  a per-target lock is taken (without yielding) right after a decision that
  needs writes and held until they are done, and a tick skips a target whose
  writes are still in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from scaler.kube.errors import KubeError
from scaler.kube.types import (
    STATUS_ANNOTATION,
    ClusterView,
    DeploymentInfo,
    EventSink,
    LeaderElector,
    ScaleTarget,
    TargetSnapshot,
)
from scaler.metrics import Metrics
from scaler.placement_actuation import PlacementActuation
from scaler.placing import Placer
from scaler.policy.annotations import InvalidAnnotation, parse_scaling_config
from scaler.policy.api import (
    Decision,
    Demand,
    Mode,
    Observation,
    Reason,
    ScalingConfig,
    SignalKind,
    SignalReading,
)
from scaler.policy.decide import PolicyState, decide
from scaler.policy.placement_plan import PlacementPlan
from scaler.policy.windows import SignalWindows
from scaler.signals.base import DemandSource, PodEndpoint, TargetPods
from scaler.signals.combine import PROMETHEUS, CombinedSignals, combine, fed_by

__all__ = [
    "CallLater",
    "Controller",
    "ControllerSettings",
    "IntervalTicker",
    "InvalidTargetConfig",
    "Policy",
    "PurePolicy",
    "Ticker",
    "Timer",
]

log = logging.getLogger(__name__)

CHANGE_REASONS = {
    Reason.ACTIVATED,
    Reason.SCALED_UP,
    Reason.SCALED_DOWN,
    Reason.SCALED_TO_ZERO,
}
INVALID_ANNOTATION = "InvalidAnnotation"


class InvalidTargetConfig(ValueError):
    """A target's annotations cannot be used; the message names key, value and what is allowed."""


class Policy(Protocol):
    """The pure policy, as the controller uses it (:class:`PurePolicy`; tests script one).

    The policy state is opaque to the controller: it keeps what ``decide``
    returns and passes it back at the next decision.
    """

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        """The target's config; :class:`InvalidTargetConfig` when an annotation is bad."""
        ...

    def initial_state(self, now: float) -> object: ...

    def decide(
        self, *, config: ScalingConfig, observation: Observation, state: object, now: float
    ) -> tuple[Decision, object]: ...


class PurePolicy:
    """:class:`Policy` with :mod:`scaler.policy`.

    Its :class:`~scaler.policy.annotations.InvalidAnnotation` becomes an
    :class:`InvalidTargetConfig`, message unchanged (it names every bad key,
    its value and what is allowed); the state must be the policy's own type.
    """

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        try:
            return parse_scaling_config(annotations)
        except InvalidAnnotation as exc:
            raise InvalidTargetConfig(str(exc)) from exc

    def initial_state(self, now: float) -> object:
        return PolicyState.initial(now)

    def decide(
        self, *, config: ScalingConfig, observation: Observation, state: object, now: float
    ) -> tuple[Decision, object]:
        if not isinstance(state, PolicyState):
            raise TypeError(f"policy state must be a PolicyState, got {type(state).__name__}")
        return decide(config=config, observation=observation, state=state, now=now)


class Timer(Protocol):
    """A scheduled callback that can be called off (``asyncio.TimerHandle``)."""

    def cancel(self) -> None: ...


#: Schedules ``callback`` after ``delay_s`` seconds (``loop.call_later``; tests step one).
CallLater = Callable[[float, Callable[[], None]], Timer]


class Ticker(Protocol):
    """Yields the time of each tick; tests push ticks themselves."""

    def __aiter__(self) -> AsyncIterator[float]: ...


class IntervalTicker:
    """A tick every ``interval_s`` on the event loop's monotonic clock."""

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"tick interval must be > 0 seconds, got {interval_s}")
        self._interval_s = interval_s

    async def __aiter__(self) -> AsyncIterator[float]:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            yield loop.time()
            next_at += self._interval_s
            # A slow tick does not cause a burst of catch-up ticks.
            next_at = max(next_at, loop.time())
            await asyncio.sleep(next_at - loop.time())


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    # A window sample older than this no longer counts as fresh (seconds).
    fresh_within_s: float = 5.0
    # Writes in flight at once across targets.
    max_concurrent_writes: int = 16
    # Sources that may feed GPU utilization (for validating target-gpu-utilization).
    prometheus_configured: bool = False
    # Per signal, a longer freshness bound than fresh_within_s, for signals fed only by
    # a slower poll (GPU utilization from a Prometheus queried every 5 s).
    fresh_within_s_by_kind: Mapping[SignalKind, float] = field(default_factory=dict)
    # The tick interval: a recheck due before the next tick gets a decision of its own.
    tick_interval_s: float = 2.0


@dataclass(slots=True)
class _Target:
    key: str
    annotations: Mapping[str, str]
    config: ScalingConfig | None
    problem: str | None
    windows: SignalWindows | None
    state: object
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    problem_reported: bool = False
    activation_pending: bool = False
    decision: Decision | None = None
    readings: Mapping[SignalKind, SignalReading] = field(default_factory=dict)
    combined: CombinedSignals | None = None
    status: dict[str, Any] | None = None  # discrete status last written or seen
    last_change_wall: str | None = None
    decided_at: float | None = None
    # The Deployment's annotations as last synced (compared by identity) and the
    # status annotation they held, parsed once.
    seen: Mapping[str, str] | None = None
    seen_status: dict[str, Any] | None = None
    # Placement (spot/on-demand): this decision's plan, when a placer is set.
    plan: PlacementPlan | None = None


def _wall_time() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _existing_status(deployment: DeploymentInfo) -> dict[str, Any] | None:
    raw = deployment.annotations.get(STATUS_ANNOTATION)
    if not raw:
        return None
    try:
        got = json.loads(raw)
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


def _status_core(status: Mapping[str, Any] | None) -> tuple[Any, ...]:
    if status is None:
        return ()
    return tuple(status.get(k) for k in ("desired", "mode", "onDemand", "spot", "reason"))


class Controller:
    """Decides for every opted-in Deployment; acts when leader."""

    def __init__(
        self,
        *,
        cluster: ClusterView,
        policy: Policy,
        sources: Sequence[DemandSource],
        scale_target: ScaleTarget,
        events: EventSink,
        leader: LeaderElector,
        metrics: Metrics,
        clock: Callable[[], float],
        settings: ControllerSettings | None = None,
        wall_time: Callable[[], str] = _wall_time,
        call_later: CallLater | None = None,
        placer: Placer | None = None,
        placement: PlacementActuation | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._cluster = cluster
        self._policy = policy
        self._sources = list(sources)
        self._scale = scale_target
        self._events = events
        self._leader = leader
        self._metrics = metrics
        self._clock = clock
        self._settings = settings or ControllerSettings()
        self._wall_time = wall_time
        self._call_later = call_later
        # Spot/on-demand placement (scaler.placing): planned on every replica,
        # carried out by the leader; the wall clock measures pending-timeout
        # against the pods' creationTimestamp.
        self._placer = placer
        self._placement = placement
        self._wall_clock = wall_clock
        self._targets: dict[str, _Target] = {}
        self._write_slots = asyncio.Semaphore(self._settings.max_concurrent_writes)
        self._last_tick: float | None = None
        self._has_prometheus = any(s.name == PROMETHEUS for s in self._sources)
        # Per signal, how recent its latest sample must be to count as fresh: fixed
        # for the controller's life, so not recomputed per target and tick.
        by_kind = self._settings.fresh_within_s_by_kind
        self._fresh_within_s = {
            kind: max(self._settings.fresh_within_s, by_kind.get(kind, 0.0)) for kind in SignalKind
        }
        # Extra decisions (rechecks, pokes) run only while run() is active, so a
        # controller driven tick by tick in a test leaves nothing behind.
        self._running = False
        self._rechecks: dict[str, tuple[float, Timer]] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.ticks = 0
        self.rechecks_run = 0

    # -- targets ------------------------------------------------------------

    def _validate(self, config: ScalingConfig) -> None:
        """Checks that need the scaler's own setup, not just the annotations."""
        problems = []
        gpu_ok = self._settings.prometheus_configured or config.engine == "triton"
        if config.target_gpu_utilization is not None and not gpu_ok:
            problems.append(
                "autoscaling.tidal.dev/target-gpu-utilization: "
                f'"{round(config.target_gpu_utilization * 100)}" needs GPU metrics; allowed: '
                "only with engine triton, or when the scaler has a Prometheus URL"
            )
        if config.target_kv_cache_utilization is not None and config.engine != "vllm":
            problems.append(
                "autoscaling.tidal.dev/target-kv-cache-utilization: "
                f'"{round(config.target_kv_cache_utilization * 100)}" needs KV-cache metrics; '
                "allowed: only with engine vllm"
            )
        if problems:
            raise InvalidTargetConfig("; ".join(problems))

    def _sync_targets(self, snapshots: Mapping[str, TargetSnapshot], now: float) -> None:
        for key in list(self._targets):
            if key not in snapshots:
                del self._targets[key]
                self._metrics.forget_target(key)
                if self._placer is not None:
                    self._placer.forget(key)
        for key, snap in snapshots.items():
            d = snap.deployment
            target = self._targets.get(key)
            if target is None or target.seen is not d.annotations:
                self._update_target(key, d, target, now)
            elif not self._leader.is_leader:
                # The leader writes the status; keep our copy in step so that, on
                # taking over, we rewrite it only if our decision differs.
                target.status = target.seen_status

    def _update_target(
        self, key: str, d: DeploymentInfo, target: _Target | None, now: float
    ) -> None:
        """A new target, or one whose Deployment annotations are a new object.

        The cluster view keeps one ``DeploymentInfo`` per version it saw, so an
        unchanged Deployment is skipped by identity at every tick, without
        copying its annotations or parsing its status JSON again.
        """
        seen_status = _existing_status(d)
        if target is not None:
            target.seen = d.annotations
            target.seen_status = seen_status
            if not self._leader.is_leader:
                target.status = seen_status
        # The status annotation is ours: it changing must not re-parse the config.
        annotations = {k: v for k, v in d.annotations.items() if k != STATUS_ANNOTATION}
        if target is not None and target.annotations == annotations:
            return
        config: ScalingConfig | None
        problem: str | None = None
        try:
            config = self._policy.parse(annotations)
            self._validate(config)
        except InvalidTargetConfig as exc:
            config, problem = None, str(exc)
        if target is None:
            self._targets[key] = _Target(
                key=key,
                annotations=annotations,
                config=config,
                problem=problem,
                windows=SignalWindows.for_config(config) if config is not None else None,
                state=self._policy.initial_state(now),
                status=seen_status,
                seen=d.annotations,
                seen_status=seen_status,
            )
        else:
            target.annotations = annotations
            target.config = config
            target.problem = problem
            target.problem_reported = False
            if config is not None and target.windows is None:
                target.windows = SignalWindows.for_config(config)
        if problem is not None:
            log.warning("%s: invalid annotations, leaving it alone: %s", key, problem)

    # -- signals ------------------------------------------------------------

    def _observe(self, target: _Target, now: float) -> CombinedSignals:
        combined = combine({s.name: s.read(target.key, now=now) for s in self._sources})
        target.combined = combined
        return combined

    def record_arrival(self, source: str, *, now: float, keys: Iterable[str] | None = None) -> int:
        """``source`` brought news at ``now``: record the signals it feeds, for ``keys``
        (default: every target), into their windows. Returns the targets recorded.

        The value recorded is the combined one (max of the concurrency views, sum
        of the queue views), from every source's latest reading, so that a window
        holds totals, one sample per arrival.
        """
        kinds = fed_by(source, prometheus=self._has_prometheus)
        if self._cluster.synced:
            snapshots = self._cluster.targets()
            if len(snapshots) != len(self._targets):
                # A target appeared since the last tick: record for it too.
                self._sync_targets(snapshots, now)
        targets = (
            self._targets.values()
            if keys is None
            else [t for t in (self._targets.get(k) for k in keys) if t is not None]
        )
        count = 0
        for target in targets:
            windows = target.windows
            if windows is None or target.config is None:
                continue
            combined = combine({s.name: s.read(target.key, now=now) for s in self._sources})
            for kind, value in combined.values.items():
                if kind in kinds:
                    windows.record(kind, value, now)
            count += 1
        return count

    def _readings(
        self, target: _Target, config: ScalingConfig, combined: CombinedSignals, now: float
    ) -> dict[SignalKind, SignalReading]:
        assert target.windows is not None
        readings = {}
        for kind in config.configured_signals():
            reading = target.windows.reading(
                kind,
                now,
                stable_window_s=config.window_s,
                panic_window_s=config.panic_window_s,
                fresh_within_s=self._fresh_within_s[kind],
            )
            if reading.fresh and not combined.complete.get(kind, False):
                # Recorded recently, but from a partial view: may raise, never lower.
                reading = replace(reading, fresh=False)
            readings[kind] = reading
        return readings

    # -- deciding -------------------------------------------------------------

    def _decide(self, target: _Target, snap: TargetSnapshot, now: float) -> Decision | None:
        combined = self._observe(target, now)
        config = target.config
        if config is None:
            return None
        readings = self._readings(target, config, combined, now)
        d = snap.deployment
        ready, spec = self._pair_counts(target, snap)
        observation = Observation(
            ready_replicas=ready,
            spec_replicas=spec,
            signals=readings,
            demand=combined.demand,
            activation_requested=target.activation_pending,
        )
        decision, target.state = self._policy.decide(
            config=config, observation=observation, state=target.state, now=now
        )
        target.activation_pending = False
        if self._placer is not None:
            target.plan = self._placer.plan(
                deployment=d,
                pods=snap.pods,
                placement=config.placement,
                target=decision.desired,
                now_wall=self._wall_clock(),
            )
        target.decision = decision
        target.readings = readings
        target.decided_at = now
        self._schedule_recheck(target.key, decision, now)
        self._metrics.observe_decision(
            target.key,
            desired=decision.desired,
            ready=ready,
            panic=decision.mode is Mode.PANIC,
            readings=readings,
            observed=combined.observed,
        )
        return decision

    def _pair_counts(self, target: _Target, snap: TargetSnapshot) -> tuple[int, int]:
        """Ready and current replicas of the whole model: with a spot companion, both halves.

        The current scale of a pair is the last target decided (the status
        annotation's ``desired``), not the sum of the two Deployments, which
        includes on-demand cover and spot over-provisioning.
        """
        d = snap.deployment
        companion = self._placer.view.companions().get(d.key) if self._placer else None
        if companion is None:
            return d.ready_replicas, d.spec_replicas
        ready = d.ready_replicas + companion.ready_replicas
        last = (target.status or {}).get("desired")
        if isinstance(last, int) and last >= 0:
            return ready, last
        return ready, d.spec_replicas + companion.spec_replicas

    def _placement_writes(self, snap: TargetSnapshot, plan: PlacementPlan) -> bool:
        if plan.ensure_companion or plan.pin or plan.delete_companion or plan.unpin:
            return True
        if plan.events:
            return True
        if plan.companion_replicas is None or self._placer is None:
            return False
        companion = self._placer.view.companions().get(snap.deployment.key)
        return companion is None or companion.spec_replicas != plan.companion_replicas

    def _needs_writes(
        self, target: _Target, snap: TargetSnapshot, decision: Decision | None
    ) -> bool:
        if not self._leader.is_leader:
            return False
        if decision is None:
            return target.problem is not None and not target.problem_reported
        plan = target.plan
        scale = plan.on_demand_replicas if plan is not None else decision.desired
        if scale != snap.deployment.spec_replicas:
            return True
        if plan is not None and self._placement_writes(snap, plan):
            return True
        return _status_core(self._status_for(target, decision, changed=False)) != _status_core(
            target.status
        )

    def _status_for(self, target: _Target, decision: Decision, *, changed: bool) -> dict[str, Any]:
        previous = target.status or {}
        reason = decision.reason.value if changed else previous.get("reason", decision.reason.value)
        if changed:
            when = self._wall_time()
        else:
            when = previous.get("lastChangeTime") or target.last_change_wall or self._wall_time()
        plan = target.plan
        return {
            "desired": decision.desired,
            "mode": decision.mode.value,
            "onDemand": plan.split.on_demand if plan is not None else decision.desired,
            "spot": plan.split.spot if plan is not None else 0,
            "reason": reason,
            "lastChangeTime": when,
        }

    # -- acting ---------------------------------------------------------------

    async def _write(
        self, target: _Target, snap: TargetSnapshot, decision: Decision | None
    ) -> None:
        """The writes for one decision; the target's lock is held by the caller."""
        d = snap.deployment
        async with self._write_slots:
            try:
                if decision is None:
                    if target.problem is not None and not target.problem_reported:
                        await self._events.emit(
                            d, reason=INVALID_ANNOTATION, message=target.problem, warning=True
                        )
                        target.problem_reported = True
                    return
                changed = False
                plan = target.plan
                if plan is not None:
                    # The user's Deployment runs the on-demand share: scaled first,
                    # so cover for lost spot comes before anything else is written.
                    _, total_before = self._pair_counts(target, snap)
                    if plan.on_demand_replicas != d.spec_replicas:
                        if 0 < plan.on_demand_replicas < d.spec_replicas:
                            await self._rank_pods(target, snap)
                        await self._scale.scale(d.namespace, d.name, plan.on_demand_replicas)
                    if self._placement is not None:
                        await self._placement.carry_out(d, plan)
                    changed = decision.desired != total_before
                    if changed:
                        await self._announce(target, d, decision, total_before)
                elif decision.desired != d.spec_replicas:
                    if 0 < decision.desired < d.spec_replicas:
                        await self._rank_pods(target, snap)
                    before = await self._scale.scale(d.namespace, d.name, decision.desired)
                    changed = before != decision.desired
                    if changed:
                        await self._announce(target, d, decision, before)
                status = self._status_for(target, decision, changed=changed)
                if _status_core(status) != _status_core(target.status):
                    await self._scale.write_status(
                        d.namespace, d.name, json.dumps(status, separators=(",", ":"))
                    )
                    target.status = status
            except KubeError as exc:
                # Outage, conflict storm, RBAC: log, keep the state, try at the next tick.
                log.warning("%s: write failed, will retry: %s", target.key, exc)
                self._metrics.write_failed(target.key)

    async def _rank_pods(self, target: _Target, snap: TargetSnapshot) -> None:
        """Lower pod-deletion-cost on the idlest pods, so the ReplicaSet removes them first."""
        load = target.combined.pod_load if target.combined is not None else {}
        costs = {}
        for pod in snap.pods:
            # Known load wins; a pod we know nothing about ranks as busy as the busiest,
            # so an unmeasured pod is not taken for an idle one.
            by_ip = f"{pod.ip}" if pod.ip else None
            value = load.get(pod.name)
            if value is None and by_ip is not None:
                value = next((v for k, v in load.items() if k.split(":")[0] == by_ip), None)
            if value is None:
                value = max(load.values(), default=0.0)
            cost = math.ceil(value)
            if pod.deletion_cost != cost:
                costs[pod.name] = cost
        if costs:
            await self._scale.set_deletion_costs(snap.deployment.namespace, costs)

    async def _announce(
        self, target: _Target, d: DeploymentInfo, decision: Decision, before: int
    ) -> None:
        if decision.reason in CHANGE_REASONS:
            reason = decision.reason.value
        elif decision.desired == 0:
            reason = Reason.SCALED_TO_ZERO.value
        else:
            reason = (Reason.SCALED_UP if decision.desired > before else Reason.SCALED_DOWN).value
        direction = "up" if decision.desired > before else "down"
        self._metrics.scaled(target.key, direction=direction)
        message = f"scaled from {before} to {decision.desired}"
        if decision.message:
            message += f": {decision.message}"
        signals = ", ".join(
            f"{kind.value} stable={_fmt(r.stable)} panic={_fmt(r.panic)}"
            + ("" if r.fresh else " (stale)")
            for kind, r in target.readings.items()
        )
        log.info(
            "%s: scaled %d -> %d, reason %s, mode %s; signals: %s; %s",
            target.key,
            before,
            decision.desired,
            reason,
            decision.mode.value,
            signals or "none",
            decision.message or "-",
        )
        target.last_change_wall = self._wall_time()
        try:
            await self._events.emit(d, reason=reason, message=message)
        except KubeError as exc:  # the scale changed; a lost Event must not undo that
            log.warning("%s: could not record event %s: %s", target.key, reason, exc)

    async def _locked_write(
        self, target: _Target, snap: TargetSnapshot, decision: Decision | None
    ) -> None:
        try:
            await self._write(target, snap, decision)
        finally:
            target.lock.release()

    # -- entry points -----------------------------------------------------------

    async def tick(self, now: float) -> None:
        """One decision for every target at ``now``; writes when leader."""
        self.ticks += 1
        self._metrics.set_leader(self._leader.is_leader)
        if not self._cluster.synced:
            return
        snapshots = self._cluster.targets()
        if self._placer is not None:
            self._account_placement(snapshots, now)
        elif self._last_tick is not None and now > self._last_tick:
            gpus = sum(
                s.deployment.ready_replicas * s.deployment.gpus_per_replica
                for s in snapshots.values()
            )
            self._metrics.add_gpu_seconds("on-demand", gpus * (now - self._last_tick))
        self._last_tick = now
        self._sync_targets(snapshots, now)
        if self._placer is not None and self._placement is not None and self._leader.is_leader:
            for orphan in self._placer.orphans(snapshots):
                try:
                    await self._placement.remove_orphan(orphan)
                except KubeError as exc:
                    log.warning("%s: orphan spot companion: %s", orphan.name, exc)
        writes = []
        for key, target in self._targets.items():
            if target.lock.locked():
                continue  # an activation is deciding or writing for it right now
            snap = snapshots[key]
            try:
                decision = self._decide(target, snap, now)
            except ValueError:
                log.exception("%s: the policy refused to decide", key)
                continue
            if self._needs_writes(target, snap, decision):
                await target.lock.acquire()  # free: returns without yielding
                writes.append(self._locked_write(target, snap, decision))
        if writes:
            await asyncio.gather(*writes)

    def _account_placement(self, snapshots: Mapping[str, TargetSnapshot], now: float) -> None:
        """GPU-seconds (by capacity type, as placement sees each pod's node) and cost."""
        assert self._placer is not None
        if self._last_tick is not None and now > self._last_tick:
            seconds = now - self._last_tick
            for snap in snapshots.values():
                for facts in self._placer.facts(snap.ready_pods):
                    gpus = facts.gpus or snap.deployment.gpus_per_replica
                    self._metrics.add_gpu_seconds(facts.capacity_type.value, gpus * seconds)
        self._placer.account(
            {key: snap.pods for key, snap in snapshots.items()}, now_wall=self._wall_clock()
        )

    async def activate(self, key: str, *, now: float | None = None) -> bool:
        """An activator asks to wake ``key``: decide for it now. False if the target is unknown."""
        return await self.decide_now(key, now=now, activation=True)

    async def decide_now(
        self, key: str, *, now: float | None = None, activation: bool = False
    ) -> bool:
        """One decision for ``key`` outside the tick (activation, recheck); writes when
        leader. False if the target is unknown."""
        at = self._clock() if now is None else now
        if not self._cluster.synced:
            return False
        snapshots = self._cluster.targets()
        if key not in snapshots:
            return False
        self._sync_targets(snapshots, at)
        target = self._targets[key]
        if activation:
            target.activation_pending = True
        await target.lock.acquire()
        try:
            snap = self._cluster.targets().get(key)
            if snap is None:
                return False
            decision = self._decide(target, snap, at)
            if self._needs_writes(target, snap, decision):
                await self._write(target, snap, decision)
        finally:
            target.lock.release()
        return True

    async def run(self, ticker: Ticker) -> None:
        """Tick until cancelled (rechecks and pokes run only meanwhile)."""
        self._running = True
        try:
            async for now in ticker:
                try:
                    await self.tick(now)
                except Exception:  # one bad tick must not stop the controller
                    log.exception("tick failed")
        finally:
            self._running = False
            for _, handle in self._rechecks.values():
                handle.cancel()
            self._rechecks.clear()
            tasks = list(self._side_tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- extra decisions --------------------------------------------------------------

    def _spawn(self, coro: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    def _schedule_recheck(self, key: str, decision: Decision, now: float) -> None:
        """Act on ``recheck_after_s``: decide again then if that is before the next tick."""
        after = decision.recheck_after_s
        if not self._running or after is None or after <= 0:
            return
        next_tick = (self._last_tick if self._last_tick is not None else now) + (
            self._settings.tick_interval_s
        )
        due = now + after
        if due >= next_tick:
            return  # the tick decides in time
        scheduled = self._rechecks.get(key)
        if scheduled is not None:
            if scheduled[0] <= due:
                return
            scheduled[1].cancel()
        call_later = self._call_later or asyncio.get_running_loop().call_later
        handle = call_later(max(0.0, due - now), lambda: self._recheck_due(key))
        self._rechecks[key] = (due, handle)

    def _recheck_due(self, key: str) -> None:
        self._rechecks.pop(key, None)
        if self._running:
            self._spawn(self._recheck(key), f"tidal-scaler-recheck:{key}")

    async def _recheck(self, key: str) -> None:
        try:
            self.rechecks_run += 1
            await self.decide_now(key)
        except Exception:
            log.exception("%s: recheck failed", key)

    def poke(self) -> None:
        """Decide for every target now, not at the next tick (this replica just became
        leader: its windows are warm, so it acts on them at once)."""
        if self._running:
            self._spawn(self._poked(), "tidal-scaler-poke")

    async def _poked(self) -> None:
        try:
            await self.tick(self._clock())
        except Exception:
            log.exception("decision after becoming leader failed")

    def pull_targets(self) -> list[TargetPods]:
        """Ready pods of every valid target, for the scrape and Prometheus loops."""
        if not self._cluster.synced:
            return []
        out = []
        for key, snap in self._cluster.targets().items():
            target = self._targets.get(key)
            config = target.config if target is not None else None
            engine = config.engine if config is not None else "generic"
            port: int | str = config.metrics_port if config is not None else 8000
            pods = []
            for pod in snap.ready_pods:
                number = pod.port(port)
                if number is not None and pod.ip is not None:
                    pods.append(PodEndpoint(name=pod.name, ip=pod.ip, metrics_port=number))
            d = snap.deployment
            out.append(TargetPods(key=key, namespace=d.namespace, engine=engine, pods=pods))
        return out

    # -- live view ----------------------------------------------------------------

    def _placement_view(self, key: str, target: _Target) -> dict[str, Any]:
        if self._placer is None:
            return {}
        plan = target.plan
        cost = self._placer.cost(key)
        out: dict[str, Any] = {"cost": cost.as_json() if cost is not None else None}
        if plan is not None:
            out["placement"] = {
                "on_demand": plan.split.on_demand,
                "spot": plan.split.spot,
                "covering": plan.split.covering,
                "spot_available": plan.counts.available,
                "spot_ready": plan.counts.ready,
                "spot_unavailable": {k: str(v) for k, v in plan.counts.unavailable.items()},
            }
        return out

    def views(self) -> list[dict[str, Any]]:
        """What ``GET /v1/targets`` serves: live signals and the last decision per target."""
        snapshots = self._cluster.targets() if self._cluster.synced else {}
        out = []
        for key, target in sorted(self._targets.items()):
            snap = snapshots.get(key)
            decision = target.decision
            combined = target.combined
            demand = combined.demand if combined is not None else Demand(False, False)
            out.append(
                {
                    "target": key,
                    "valid": target.problem is None,
                    "problem": target.problem,
                    "spec_replicas": snap.deployment.spec_replicas if snap else None,
                    "ready_replicas": snap.deployment.ready_replicas if snap else None,
                    "desired": decision.desired if decision else None,
                    "mode": decision.mode.value if decision else None,
                    "reason": decision.reason.value if decision else None,
                    "message": decision.message if decision else "",
                    "per_signal_desired": (
                        {k.value: v for k, v in decision.per_signal.items()} if decision else {}
                    ),
                    "signals": {
                        kind.value: {"stable": r.stable, "panic": r.panic, "fresh": r.fresh}
                        for kind, r in target.readings.items()
                    },
                    "observed": dict(combined.observed) if combined else {},
                    "activators": combined.activators if combined else 0,
                    "busy": demand.busy,
                    "all_sources_fresh": demand.all_sources_fresh,
                    "decided_at_s": target.decided_at,
                    **self._placement_view(key, target),
                }
            )
        return out
