"""Every write the scaler makes, in one place (docs/architecture.md, "The scaler").

A target's reconciler decides; this module acts. A decision that needs
writes becomes a :class:`~scaler.writes.plan.WritePlan`
(:func:`~scaler.writes.plan.plan_writes`, pure, from the
:class:`~scaler.writes.plan.Decided` values and the target's
:class:`~scaler.writes.status_records.StatusRecord`), and
:meth:`Actuator.carry_out` performs it against the Kubernetes API, in this
order:

1. for a rejected config, one ``InvalidAnnotation`` Warning Event, nothing else;
2. before a scale-down (not to zero), pod-deletion-cost on the pods, so the
   ReplicaSet removes the idlest first (:mod:`scaler.policy.deletion`);
3. ``spec.replicas`` through ``/scale``; with a spot placement policy the
   user's Deployment gets the on-demand share, then the placement writes
   follow (:mod:`scaler.placement.actuation`: the companion ``<name>-spot``,
   the on-demand pin, the spot scale, ``SpotFallback``/``SpotRecovered``),
   each fenced like the rest (a decision made again after a conflict, on
   the same Deployment object, does not pin or announce the rollout twice);
   with GPU shapes the user's Deployment gets its shape's part, then the
   shapes' writes follow (:mod:`scaler.placement.shape_actuation`: the
   companions ``<name>-<shape>``, their scale, the shape Events);
4. when the scale changed (of a spot pair, or of a model's shapes: its total), an Event
   (:mod:`scaler.policy.events`) and an INFO log line with target, from -> to,
   reason, mode and signals;
5. the status annotation, when its content changed
   (:mod:`scaler.policy.status_doc`; with placement, the spot/on-demand split;
   with shapes, the replicas per shape and their hourly cost).

The only other write of the scaler, the Lease renewal of leader election,
belongs to :mod:`scaler.kube.leader`. An import contract keeps the write
helpers of :mod:`scaler.kube.writer` and :mod:`scaler.kube.companion_writes`
out of every other scaler module: :func:`kube_actuator` builds the actuator
over them for the service. Companions whose Deployment is no longer opted in
are removed through :meth:`Actuator.remove_orphan`.

The actuator keeps a target's write bookkeeping and nothing else of it: its
failed writes in a row and their backoff (:mod:`scaler.writes.failures`),
the deletion costs to put back after a half-done plan, and its status
record (what the status annotation holds, what is still to be written, the
Warnings already raised), kept in one
:class:`~scaler.writes.status_records.StatusRecords`: a plan is made from it
(:meth:`Actuator.plan`) and the record a plan leaves is kept there; no
caller carries it. What each part of a spot placement writes is
:mod:`scaler.placement.actuation`; the actuator calls it in its place in
the sequence, fenced like the rest. This is also
where leadership is checked for every write: a follower plans nothing,
raises no Warning and removes no companion.

Main decisions (only the Lease holder writes):

- **Fenced.** The Lease is checked before *each* write, not once per
  decision: a replica that lost it stops the sequence where it is
  (:attr:`WriteOutcome.fenced`). The scale write carries the
  ``resourceVersion`` the decision was based on; a 409 means the Deployment
  changed since, so the old value is never re-applied: the actuator re-reads
  ``/scale`` and hands the fresh state back (:attr:`WriteOutcome.fresh`) for
  the target's reconciler to decide again (its next plan re-checks the
  Lease). The status write tests ``spec.replicas`` instead (the scale it records): the Deployment
  controller moves the ``resourceVersion`` on right after every scale, so a
  version precondition there would conflict with Tidal's own scale every
  time (:mod:`scaler.kube.writer`).
- **All or nothing in effect.** Deletion costs set for a scale-down that then
  fails (conflict, refusal, outage) are put back as they were, so they
  cannot steer a later, unrelated scale-down; if that undo fails too it is
  retried before the target's next write. A status write that fails after a
  successful scale is kept as *intended* (:attr:`StatusRecord.intended`):
  the next write records that change's reason and time, not the old ones.
- **A conflict resolved is no failure.** A 409 is logged at INFO and the
  controller decides again on the re-read Deployment; only when that does
  not get the writes through either (:meth:`Actuator.conflicted`) is it
  logged as a WARNING and counted in ``tidal_scaler_write_failures_total``,
  whose alert must not page for a retry that worked.
- **Backoff, then a Warning.** A failure other than a conflict (4xx such as
  422 or 403, 5xx, an unreachable API server) puts the target in backoff
  (doubling from ``backoff_base_s`` to ``backoff_max_s``) instead of being
  retried at every tick; an activation (waking from zero) is not held back.
  After ``warn_after_failures`` failures in a row a ``WritesFailing`` Warning
  Event says so, once per streak (best effort: the API may be what fails).
- **A lost Event does not undo a scale**: the Event after a change is best
  effort.
- **A bounded number of writes in flight** across targets
  (``max_concurrent_writes``), so a thousand targets changing at once do not
  open a thousand connections.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from groundwork.kube.connection import KubeAccess
from groundwork.kube.errors import Conflict, KubeError
from scaler.kube.companion_writes import KubeCompanions
from scaler.kube.types import (
    CompanionInfo,
    DeploymentInfo,
    EventSink,
    EventSubject,
    LeaderElector,
    NodePreference,
    PodLabels,
    ScaleState,
    ScaleTarget,
    TargetSnapshot,
)
from scaler.kube.writer import KubeEvents, KubeScaleTarget
from scaler.metrics import Metrics
from scaler.placement.actuation import PlacementActuation
from scaler.placement.shape_actuation import ShapeActuation
from scaler.policy.api import Reason
from scaler.policy.events import (
    INVALID_ANNOTATION,
    WRITES_FAILING,
)
from scaler.policy.placement.providers import ProviderPreset
from scaler.policy.status_doc import StatusDocument, encode_status, same_status
from scaler.writes.announcements import Announcements, LeaseLost
from scaler.writes.failures import WriteFailures
from scaler.writes.node_moves import NodeMoves
from scaler.writes.plan import (
    Decided,
    WriteOutcome,
    WritePlan,
    change_of,
    plan_writes,
    shapes_status,
    status_for,
)
from scaler.writes.status_records import StatusRecord, StatusRecords

__all__ = [
    "WRITES_FAILING",
    "Actuator",
    "ActuatorSettings",
    "kube_actuator",
    "wall_time",
]

log = logging.getLogger(__name__)


def wall_time() -> str:
    """Now as the status annotation's ``lastChangeTime`` says it (UTC, RFC 3339)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True, slots=True)
class ActuatorSettings:
    # Writes in flight at once across targets.
    max_concurrent_writes: int = 16
    # Backoff after a failed write (not a conflict): base, doubling, capped (seconds).
    backoff_base_s: float = 2.0
    backoff_max_s: float = 60.0
    # Failures in a row before a WritesFailing Warning Event.
    warn_after_failures: int = 3

    def __post_init__(self) -> None:
        if self.max_concurrent_writes < 1:
            raise ValueError(
                f"max_concurrent_writes must be >= 1, got {self.max_concurrent_writes}"
            )


class Actuator:
    """Carries out :class:`WritePlan` values through a scale target and an event sink,
    fenced by the Lease."""

    def __init__(
        self,
        *,
        scale_target: ScaleTarget,
        events: EventSink,
        leader: LeaderElector,
        metrics: Metrics,
        wall_time: Callable[[], str] = wall_time,
        settings: ActuatorSettings | None = None,
        placement: PlacementActuation | None = None,
        pod_labels: PodLabels | None = None,
        shapes: ShapeActuation | None = None,
        node_preference: NodePreference | None = None,
    ) -> None:
        self._placement = placement
        self._pod_labels = pod_labels
        self._shapes = shapes
        self._settings = settings or ActuatorSettings()
        self._scale = scale_target
        self._events = events
        self._leader = leader
        self._metrics = metrics
        self._wall_time = wall_time
        self._slots = asyncio.Semaphore(self._settings.max_concurrent_writes)
        self._announcements = Announcements(events, metrics)
        self._failures = WriteFailures(
            metrics,
            backoff_base_s=self._settings.backoff_base_s,
            backoff_max_s=self._settings.backoff_max_s,
            warn_after=self._settings.warn_after_failures,
        )
        self._undo: dict[str, dict[str, int | None]] = {}  # target -> pod -> cost to restore
        self.records = StatusRecords(leader)
        # The warm tier's moves: a template that prefers a node (scaler.warm.moves).
        self.moves = NodeMoves(leader, self._slots, node_preference, self._fence)

    def backing_off(self, key: str, now: float) -> bool:
        """True while ``key``'s writes wait out a backoff after failures."""
        return self._failures.backing_off(key, now)

    def forget(self, key: str) -> None:
        """``key`` is no longer a target."""
        self._failures.forget(key)
        self._undo.pop(key, None)
        self.records.forget(key)

    def plan(self, snap: TargetSnapshot, decided: Decided, *, now: float) -> WritePlan | None:
        """The writes ``decided`` needs, from the target's status record; ``None``
        when it needs none, when this replica does not lead, or while the target
        backs off (a wake from zero does not wait for a backoff)."""
        if not self._leader.is_leader:
            return None
        decision = decided.decision
        waking = decision is not None and decision.reason is Reason.ACTIVATED
        key = snap.deployment.key
        if self.backing_off(key, now) and not waking:
            return None
        return plan_writes(snap.deployment, snap.pods, decided, self.records.get(key))

    def _fence(self) -> None:
        if not self._leader.is_leader:
            raise LeaseLost

    async def carry_out(self, plan: WritePlan, *, now: float) -> WriteOutcome:
        """Perform ``plan`` at ``now`` and keep the status record it leaves; failures
        are logged and counted, never raised."""
        outcome = await self._attempt(plan, now)
        self.records.keep(plan.deployment.key, plan.record, outcome.record)
        return outcome

    async def _attempt(self, plan: WritePlan, now: float) -> WriteOutcome:
        d = plan.deployment
        activation = plan.decision is not None and plan.decision.reason is Reason.ACTIVATED
        if self.backing_off(d.key, now) and not activation:
            return _Progress(plan).outcome(ok=False, deferred=True)
        async with self._slots:
            progress = _Progress(plan)
            try:
                self._fence()
                if await self._undo_costs(d) and plan.deletion_costs:
                    # The plan ranked pods from a view that still shows the costs just
                    # undone: rank again at the next decision, on a fresh view.
                    return progress.outcome(ok=False, deferred=True)
                await self._carry_out(plan, progress)
            except LeaseLost:
                log.warning("%s: lost the Lease; stopped before the next write", d.key)
                return progress.outcome(ok=False, fenced=True)
            except KubeError as exc:
                return await self._failed(plan, progress, exc, now)
        self._failures.succeeded(d.key)
        return progress.outcome(ok=True)

    async def _carry_out(self, plan: WritePlan, progress: _Progress) -> None:
        d = plan.deployment
        decision = plan.decision
        if decision is None:
            if plan.decided.problem is not None:
                self._fence()
                await self._events.emit(
                    d, reason=INVALID_ANNOTATION, message=plan.decided.problem, warning=True
                )
                progress.problem_reported = True
            return
        scale_to = plan.scale_to
        assert scale_to is not None
        scaling = scale_to != d.spec_replicas
        if scaling:
            # With placement this is the on-demand share, written first so that
            # cover for lost spot comes before anything else.
            if plan.deletion_costs:
                self._fence()
                self._undo[d.key] = dict(plan.previous_costs)
                await self._scale.set_deletion_costs(d.namespace, plan.deletion_costs)
            self._fence()
            await self._scale.scale(
                d.namespace, d.name, scale_to, resource_version=d.resource_version
            )
            self._undo.pop(d.key, None)  # the scale took: the ranking did its job
        if plan.placement is not None and self._placement is not None:
            # Before the status: a conflict on the status write (the Deployment
            # moves on as it rolls) must not hold back the companion, the pin,
            # the spot scale or the Events. Cover came first, with the scale.
            await self._placement.carry_out(d, plan.placement, fence=self._fence)
        if plan.decided.shapes is not None and self._shapes is not None:
            await self._shapes.carry_out(d, plan.decided.shapes, fence=self._fence)
        before, changed = change_of(plan, decision, scaling=scaling)
        now_wall = self._wall_time()
        if changed:
            progress.last_change_wall = now_wall
        document = status_for(
            decision,
            plan.record,
            changed=changed,
            now_wall=now_wall,
            split=plan.split,
            shapes=shapes_status(plan.decided),
        )
        progress.intended = document
        if changed:
            await self._announcements.changed(plan, decision, before, fence=self._fence)
        if changed or plan.record.intended is not None:
            due = document != progress.status  # a new reason or time to record
        else:
            due = not same_status(document, progress.status)
        if due:
            self._fence()
            await self._scale.write_status(
                d.namespace,
                d.name,
                encode_status(document),
                replicas=scale_to,
                has_annotations=bool(d.annotations),
            )
            progress.status = document
        progress.intended = None

    async def remove_orphan(self, companion: CompanionInfo, *, shape: bool = False) -> None:
        """A spot (``shape``: a shape's) companion whose Deployment is no longer opted
        in: the spot one's owner unpinned, then deleted (fenced)."""
        writes = self._shapes if shape else self._placement
        if writes is None or not self._leader.is_leader:
            return  # a follower leaves it to the leader
        key, kind = f"{companion.namespace}/{companion.companion_of}", companion.name
        async with self._slots:
            try:
                await writes.remove_orphan(companion, fence=self._fence)
            except LeaseLost:
                log.warning("%s: lost the Lease; companion %s left for the next leader", key, kind)
            except KubeError as exc:
                log.warning("%s: could not remove companion %s, will retry: %s", key, kind, exc)
                self._metrics.write_failed(key)

    async def _undo_costs(self, d: DeploymentInfo) -> bool:
        """Put back the deletion costs a failed plan left on ``d``'s pods; True if any."""
        costs = self._undo.get(d.key)
        if not costs:
            return False
        self._fence()
        await self._scale.set_deletion_costs(d.namespace, costs)
        del self._undo[d.key]
        log.info("%s: put back the deletion costs of a scale that did not happen", d.key)
        return True

    async def _failed(
        self, plan: WritePlan, progress: _Progress, exc: KubeError, now: float
    ) -> WriteOutcome:
        d = plan.deployment
        try:
            await self._undo_costs(d)
        except (KubeError, LeaseLost) as undo_exc:
            log.warning("%s: deletion costs not put back yet: %s", d.key, undo_exc)
        if isinstance(exc, Conflict):
            # The Deployment changed since the decision: never re-apply it; re-read
            # so that the controller decides again on what is there now. Not a
            # failure yet: the decision made again usually writes (conflicted()
            # counts one that does not).
            try:
                fresh = await self._scale.read_scale(d.namespace, d.name)
            except KubeError as read_exc:
                log.warning("%s: write conflicted, and the re-read failed: %s", d.key, read_exc)
                await self._count_failure(d, exc, now)
                return progress.outcome(ok=False)
            log.info("%s: %s; deciding again on the Deployment as it is now", d.key, exc)
            return progress.outcome(ok=False, fresh=fresh, conflict=exc)
        log.warning("%s: write failed: %s", d.key, exc)
        await self._count_failure(d, exc, now)
        return progress.outcome(ok=False)

    async def conflicted(self, deployment: DeploymentInfo, exc: Conflict, now: float) -> None:
        """Deciding again after conflicts did not get the writes through: a failure."""
        log.warning(
            "%s: write failed: still conflicting after deciding again: %s", deployment.key, exc
        )
        await self._count_failure(deployment, exc, now)

    async def _count_failure(self, d: DeploymentInfo, exc: KubeError, now: float) -> None:
        """Count a failed write; warn once its streak is long enough."""
        if self._failures.failed(d.key, exc, now):
            await self._announcements.writes_failing(
                d, self._failures.failures(d.key), exc, fence=self._fence
            )

    async def note(
        self, subject: EventSubject, *, reason: str, message: str, warning: bool = False
    ) -> bool:
        """An Event about ``subject`` (a Deployment, or an InferencePool) that goes with
        no scale write (the warm tier's sleeps and wakes, refused adapter loads, what is
        wrong with a pool); fenced like every write, best effort like the Event after a
        change. A follower raises none, and that is no failure. True when it was written."""
        if not self._leader.is_leader:
            return False
        try:
            async with self._slots:
                self._fence()
                await self._events.emit(subject, reason=reason, message=message, warning=warning)
        except (KubeError, LeaseLost) as exc:
            log.warning("%s: could not record event %s: %s", subject.key, reason, exc)
            return False
        return True

    async def label_pods(self, namespace: str, key: str, values: Mapping[str, str]) -> bool:
        """Set label ``key`` on pods (the warm tier's awake label, docs/gateway-api.md);
        fenced, leader only, best effort. True when every label was written."""
        if not self._leader.is_leader or self._pod_labels is None or not values:
            return False
        try:
            async with self._slots:
                self._fence()
                await self._pod_labels.set_pod_labels(namespace, key, values)
        except (KubeError, LeaseLost) as exc:
            log.warning("%s: could not label pods %s: %s", namespace, sorted(values), exc)
            return False
        return True


@dataclass(slots=True)
class _Progress:
    """How far one plan got, as it goes: the target's status record, field by field."""

    plan: WritePlan
    status: StatusDocument | None = None
    intended: StatusDocument | None = None
    last_change_wall: str | None = None
    problem_reported: bool = False

    def __post_init__(self) -> None:
        record = self.plan.record
        self.status = record.status
        self.intended = record.intended
        self.last_change_wall = record.last_change_wall
        self.problem_reported = record.problem_reported

    def outcome(
        self,
        *,
        ok: bool,
        fresh: ScaleState | None = None,
        fenced: bool = False,
        deferred: bool = False,
        conflict: Conflict | None = None,
    ) -> WriteOutcome:
        record = StatusRecord(
            status=self.status,
            intended=self.intended,
            last_change_wall=self.last_change_wall,
            problem_reported=self.problem_reported,
        )
        return WriteOutcome(
            ok=ok, record=record, fresh=fresh, fenced=fenced, deferred=deferred, conflict=conflict
        )


def kube_actuator(
    access: KubeAccess,
    *,
    identity: str,
    leader: LeaderElector,
    metrics: Metrics,
    request_timeout_s: float = 10.0,
    settings: ActuatorSettings | None = None,
    preset: ProviderPreset | None = None,
) -> Actuator:
    """An :class:`Actuator` writing to the API server of ``access`` (with ``preset``:
    spot placement's writes too)."""
    api = access.api
    scale_target = KubeScaleTarget(api, request_timeout_s=request_timeout_s)
    events = KubeEvents(api, instance=identity, request_timeout_s=request_timeout_s)
    companions = KubeCompanions(api, request_timeout_s=request_timeout_s)
    placement = None
    if preset is not None:
        placement = PlacementActuation(
            companions=companions, scale_target=scale_target, events=events, preset=preset
        )
    return Actuator(
        scale_target=scale_target,
        events=events,
        leader=leader,
        metrics=metrics,
        settings=settings,
        placement=placement,
        pod_labels=scale_target,
        shapes=ShapeActuation(companions=companions, scale_target=scale_target, events=events),
        node_preference=scale_target,
    )
