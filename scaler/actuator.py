"""Every write the scaler makes, in one place (docs/architecture.md, "The scaler").

A target's reconciler decides; this module acts. A decision that needs
writes becomes a :class:`WritePlan` (:func:`plan_writes`, pure, from the
:class:`Decided` values and the target's :class:`StatusRecord`), and
:meth:`Actuator.carry_out` performs it against the Kubernetes API:

1. for a rejected config, one ``InvalidAnnotation`` Warning Event, nothing else;
2. before a scale-down (not to zero), pod-deletion-cost on the pods, so the
   ReplicaSet removes the idlest first (:mod:`scaler.policy.deletion`);
3. ``spec.replicas`` through ``/scale``; with a spot placement policy the
   user's Deployment gets the on-demand share, then the placement writes
   follow (:mod:`scaler.placement.actuation`: the companion ``<name>-spot``,
   the on-demand pin, the spot scale, ``SpotFallback``/``SpotRecovered``),
   each fenced like the rest (a decision made again after a conflict, on
   the same Deployment object, does not pin or announce the rollout twice);
4. when the scale changed (of a spot pair: its total), an Event
   (:mod:`scaler.policy.events`) and an INFO log line with target, from -> to,
   reason, mode and signals;
5. the status annotation, when its content changed
   (:mod:`scaler.policy.status_doc`; with placement, the spot/on-demand split).

The only other write of the scaler, the Lease renewal of leader election,
belongs to :mod:`scaler.kube.leader`. An import contract keeps the write
helpers of :mod:`scaler.kube.writer` and :mod:`scaler.kube.companion_writes`
out of every other scaler module: :func:`kube_actuator` builds the actuator
over them for the service. Companions whose Deployment is no longer opted in
are removed through :meth:`Actuator.remove_orphan`.

The actuator keeps a target's write bookkeeping and nothing else of it: its
write backoff, the deletion costs to put back after a half-done plan, and
its :class:`StatusRecord` (what the status annotation holds, what is still
to be written, the Warnings already raised), kept in one
:class:`StatusRecords`: a plan is made from it (:meth:`Actuator.plan`) and
the record a plan leaves is kept there; no caller carries it. This is also
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

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
    PodInfo,
    PodLabels,
    ScaleState,
    ScaleTarget,
    TargetSnapshot,
)
from scaler.kube.writer import KubeEvents, KubeScaleTarget
from scaler.metrics import Metrics
from scaler.placement.actuation import PlacementActuation
from scaler.policy.api import Decision, Reason, SignalKind, SignalReading
from scaler.policy.deletion import deletion_costs
from scaler.policy.events import (
    INVALID_ANNOTATION,
    WRITES_FAILING,
    change_message,
    change_reason,
)
from scaler.policy.placement.plan import PlacementPlan
from scaler.policy.placement.providers import ProviderPreset
from scaler.policy.status_doc import (
    StatusDocument,
    encode_status,
    same_status,
    status_document,
)

__all__ = [
    "WRITES_FAILING",
    "Actuator",
    "ActuatorSettings",
    "Decided",
    "StatusRecord",
    "StatusRecords",
    "WriteOutcome",
    "WritePlan",
    "kube_actuator",
    "plan_writes",
    "wall_time",
]

log = logging.getLogger(__name__)


def wall_time() -> str:
    """Now as the status annotation's ``lastChangeTime`` says it (UTC, RFC 3339)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True, slots=True)
class StatusRecord:
    """What a target's status annotation holds and what is still to be written.

    ``status``: the annotation as far as this replica knows; ``intended``: a
    status whose write failed after its change took (its reason and time win
    over the previous ones at the next write); ``last_change_wall``: when the
    scale last changed (``lastChangeTime``); ``problem_reported``: the
    ``InvalidAnnotation`` Warning of these annotations was raised;
    ``warnings_reported``: so were the Warnings that leave scaling on
    (``InvalidRouting``).
    """

    status: StatusDocument | None = None
    intended: StatusDocument | None = None
    last_change_wall: str | None = None
    problem_reported: bool = False
    warnings_reported: bool = False

    @property
    def last_desired(self) -> object:
        """The last target decided: the one a failed status write still intends, if
        any, else the one the annotation holds."""
        return (self.intended or self.status or {}).get("desired")


class StatusRecords:
    """Every target's :class:`StatusRecord`, with one owner: the actuator.

    A plan is made from the target's record (:meth:`Actuator.plan`) and the
    actuator keeps the record a plan leaves (:meth:`keep`); each target's
    reconciler tells it what the Deployment carries at each sync (:meth:`seen`): a
    changed config may report its problems again, and a follower copies the
    status annotation the leader wrote, so that on taking over it rewrites it
    only if its decision differs.
    """

    def __init__(self, leader: LeaderElector) -> None:
        self._leader = leader
        self._records: dict[str, StatusRecord] = {}

    def get(self, key: str) -> StatusRecord:
        return self._records.get(key, StatusRecord())

    def start(self, key: str, status: StatusDocument | None) -> None:
        """A new target: its status annotation as the Deployment carries it."""
        self._records[key] = StatusRecord(status=status)

    def seen(self, key: str, status: StatusDocument | None, *, changed: bool) -> None:
        """The target as synced: ``changed`` config (its problems are reported
        again); on a follower, the status annotation the leader wrote."""
        record = self.get(key)
        if changed:
            record = replace(record, problem_reported=False, warnings_reported=False)
        if not self._leader.is_leader:
            record = replace(record, status=status)
        self._records[key] = record

    def warnings_due(self, key: str) -> bool:
        """True once per set of annotations, on the leader: raise the Warnings that
        leave scaling on now (marked raised even if the Events are lost)."""
        record = self.get(key)
        if record.warnings_reported or not self._leader.is_leader:
            return False
        self._records[key] = replace(record, warnings_reported=True)
        return True

    def keep(self, plan: WritePlan, after: StatusRecord) -> None:
        """The record as ``plan`` left it. A config change while it ran may have
        cleared the problems already reported, and that clearing stands."""
        key = plan.deployment.key
        current = self.get(key)
        reported_now = after.problem_reported and not plan.record.problem_reported
        self._records[key] = replace(
            after,
            problem_reported=current.problem_reported or reported_now,
            warnings_reported=current.warnings_reported,
        )

    def forget(self, key: str) -> None:
        self._records.pop(key, None)


@dataclass(frozen=True, slots=True)
class Decided:
    """One decision and what it was based on, as :func:`plan_writes` needs it.

    ``decision`` ``None`` with a ``problem``: the annotations are invalid.
    ``pod_load`` ranks pods for a scale-down; ``readings`` go into the log
    line of a change. With a spot placement policy, ``placement`` is this
    decision's plan, ``companion_replicas`` the companion's scale now
    (``None``: no companion) and ``total_before`` the pair's previous target.
    """

    decision: Decision | None
    problem: str | None = None
    readings: Mapping[SignalKind, SignalReading] = field(default_factory=dict)
    pod_load: Mapping[str, float] = field(default_factory=dict)
    placement: PlacementPlan | None = None
    companion_replicas: int | None = None
    total_before: int | None = None


@dataclass(frozen=True, slots=True)
class WritePlan:
    """What one decision asks to be written for one target.

    ``decision`` ``None`` with a ``problem``: report the problem only. Otherwise
    ``deletion_costs`` go first (a scale-down; ``previous_costs`` are the pods'
    costs before, for the undo), then the scale when the decided replicas
    differ from the Deployment's, then the status. ``record`` is the target's
    status record the plan was made from.
    """

    deployment: DeploymentInfo
    decided: Decided
    record: StatusRecord = field(default_factory=StatusRecord)
    deletion_costs: Mapping[str, int] = field(default_factory=dict)
    previous_costs: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def decision(self) -> Decision | None:
        return self.decided.decision

    @property
    def placement(self) -> PlacementPlan | None:
        return self.decided.placement

    @property
    def scale_to(self) -> int | None:
        """The replicas the user's Deployment should have."""
        if self.placement is not None:
            return self.placement.on_demand_replicas
        return self.decision.desired if self.decision is not None else None

    @property
    def split(self) -> tuple[int, int] | None:
        """``(on_demand, spot)`` for the status document (``None``: all on demand)."""
        if self.placement is None:
            return None
        return self.placement.split.on_demand, self.placement.split.spot


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """How far a plan got.

    ``record``: the target's status record after the plan (already kept in
    :attr:`Actuator.records`); ``fresh``: after a conflict, the Deployment's scale as re-read
    (decide again on it); ``fenced``: the Lease was lost, the sequence
    stopped; ``deferred``: not attempted (backoff, or an undo just ran and the
    plan's ranking is stale); ``conflict``: the 409 behind ``fresh``, not
    counted as a failure yet.
    """

    ok: bool
    record: StatusRecord = field(default_factory=StatusRecord)
    fresh: ScaleState | None = None
    fenced: bool = False
    deferred: bool = False
    conflict: Conflict | None = None


def plan_writes(
    deployment: DeploymentInfo,
    pods: Sequence[PodInfo],
    decided: Decided,
    record: StatusRecord = StatusRecord(),
) -> WritePlan | None:
    """The writes ``decided`` needs, or ``None`` when it needs none (pure).

    Without a decision (a rejected config) only an unreported problem needs a
    write. With one: a scale that differs, a status whose content would
    change, or an intended status not yet written. With a placement plan the
    user's Deployment is compared with the on-demand share, and any
    companion, pin or spot-scale write or placement Event needs writes too.
    """
    decision, placement = decided.decision, decided.placement
    if decision is None:
        if decided.problem is None or record.problem_reported:
            return None
        return WritePlan(deployment=deployment, decided=decided, record=record)
    scale_to = placement.on_demand_replicas if placement is not None else decision.desired
    split = (placement.split.on_demand, placement.split.spot) if placement is not None else None
    scaling = scale_to != deployment.spec_replicas
    if (
        not scaling
        and not _status_due(decision, record, split=split)
        and not _placement_writes(placement, decided.companion_replicas)
    ):
        return None
    costs: Mapping[str, int] = {}
    previous: dict[str, int | None] = {}
    if 0 < scale_to < deployment.spec_replicas:
        costs = deletion_costs(pods, decided.pod_load)
        previous = {p.name: p.deletion_cost for p in pods if p.name in costs}
    return WritePlan(
        deployment=deployment,
        decided=decided,
        record=record,
        deletion_costs=costs,
        previous_costs=previous,
    )


def _placement_writes(placement: PlacementPlan | None, companion_replicas: int | None) -> bool:
    if placement is None:
        return False
    p = placement
    if p.ensure_companion or p.pin or p.delete_companion or p.unpin or p.events:
        return True
    return p.companion_replicas is not None and companion_replicas != p.companion_replicas


def _document(
    decision: Decision,
    record: StatusRecord,
    *,
    changed: bool,
    now_wall: str,
    split: tuple[int, int] | None = None,
) -> StatusDocument:
    base = record.intended if record.intended is not None else record.status
    last_change_wall = now_wall if changed else record.last_change_wall
    return status_document(
        decision,
        base,
        changed=changed,
        now_wall=now_wall,
        last_change_wall=last_change_wall,
        split=split,
    )


def _status_due(
    decision: Decision, record: StatusRecord, *, split: tuple[int, int] | None = None
) -> bool:
    document = _document(decision, record, changed=False, now_wall="", split=split)
    if record.intended is not None:
        return document != record.status
    return not same_status(document, record.status)


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


class _LeaseLost(Exception):
    """This replica no longer holds the Lease: no more writes."""


@dataclass(frozen=True, slots=True)
class ActuatorSettings:
    # Writes in flight at once across targets.
    max_concurrent_writes: int = 16
    # Backoff after a failed write (not a conflict): base, doubling, capped (seconds).
    backoff_base_s: float = 2.0
    backoff_max_s: float = 60.0
    # Failures in a row before a WritesFailing Warning Event.
    warn_after_failures: int = 3


@dataclass(slots=True)
class _Streak:
    failures: int = 0
    retry_at: float = 0.0
    warned: bool = False


class NodeMoves:
    """The warm tier's one write to a pod template: prefer a node (a rollout that starts
    a replacement there and removes the old pod once it is Ready); fenced by the
    Lease, within the actuator's write slots, best effort."""

    def __init__(
        self,
        leader: LeaderElector,
        slots: asyncio.Semaphore,
        writes: NodePreference | None,
        fence: Callable[[], None],
    ) -> None:
        self._leader = leader
        self._slots = slots
        self._writes = writes
        self._fence = fence  # raises when the Lease was lost

    async def prefer_node(self, deployment: DeploymentInfo, node: str) -> bool:
        """True when ``deployment``'s template was changed to prefer ``node``."""
        if not self._leader.is_leader or self._writes is None:
            return False
        try:
            async with self._slots:
                self._fence()
                return await self._writes.prefer_node(deployment.namespace, deployment.name, node)
        except (KubeError, _LeaseLost) as exc:
            log.warning("%s: could not prefer node %s: %s", deployment.key, node, exc)
            return False


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
        node_preference: NodePreference | None = None,
    ) -> None:
        self._placement = placement
        self._pod_labels = pod_labels
        self._settings = settings or ActuatorSettings()
        if self._settings.max_concurrent_writes < 1:
            raise ValueError(
                f"max_concurrent_writes must be >= 1, got {self._settings.max_concurrent_writes}"
            )
        self._scale = scale_target
        self._events = events
        self._leader = leader
        self._metrics = metrics
        self._wall_time = wall_time
        self._slots = asyncio.Semaphore(self._settings.max_concurrent_writes)
        self._streaks: dict[str, _Streak] = {}
        self._undo: dict[str, dict[str, int | None]] = {}  # target -> pod -> cost to restore
        self.records = StatusRecords(leader)
        # The warm tier's moves: a template that prefers a node (scaler.warm.moves).
        self.moves = NodeMoves(leader, self._slots, node_preference, self._fence)

    def backing_off(self, key: str, now: float) -> bool:
        """True while ``key``'s writes wait out a backoff after failures."""
        streak = self._streaks.get(key)
        return streak is not None and now < streak.retry_at

    def failures(self, key: str) -> int:
        """``key``'s failed writes in a row."""
        streak = self._streaks.get(key)
        return streak.failures if streak is not None else 0

    def forget(self, key: str) -> None:
        """``key`` is no longer a target."""
        self._streaks.pop(key, None)
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
            raise _LeaseLost

    async def carry_out(self, plan: WritePlan, *, now: float) -> WriteOutcome:
        """Perform ``plan`` at ``now`` and keep the status record it leaves; failures
        are logged and counted, never raised."""
        outcome = await self._attempt(plan, now)
        self.records.keep(plan, outcome.record)
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
            except _LeaseLost:
                log.warning("%s: lost the Lease; stopped before the next write", d.key)
                return progress.outcome(ok=False, fenced=True)
            except KubeError as exc:
                return await self._failed(plan, progress, exc, now)
        self._streaks.pop(d.key, None)
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
        before = d.spec_replicas
        changed = scaling
        if plan.placement is not None:
            if self._placement is not None:
                # Before the status: a conflict on the status write (the Deployment
                # moves on as it rolls) must not hold back the companion, the pin,
                # the spot scale or the Events. Cover came first, with the scale.
                await self._placement.carry_out(d, plan.placement, fence=self._fence)
            total_before = plan.decided.total_before
            before = total_before if total_before is not None else before
            changed = decision.desired != before
        now_wall = self._wall_time()
        if changed:
            progress.last_change_wall = now_wall
        document = _document(
            decision, plan.record, changed=changed, now_wall=now_wall, split=plan.split
        )
        progress.intended = document
        if changed:
            await self._announce(plan, decision, before)
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

    async def remove_orphan(self, companion: CompanionInfo) -> None:
        """A spot companion whose Deployment is no longer opted in: unpin, delete (fenced)."""
        if self._placement is None or not self._leader.is_leader:
            return  # a follower leaves it to the leader
        key = f"{companion.namespace}/{companion.companion_of}"
        async with self._slots:
            try:
                await self._placement.remove_orphan(companion, fence=self._fence)
            except _LeaseLost:
                log.warning("%s: lost the Lease; spot companion left for the next leader", key)
            except KubeError as exc:
                log.warning("%s: could not remove spot companion, will retry: %s", key, exc)
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
        except (KubeError, _LeaseLost) as undo_exc:
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
        """Count a failed write, back off (not after a conflict), warn after a streak."""
        self._metrics.write_failed(d.key)
        streak = self._streaks.setdefault(d.key, _Streak())
        streak.failures += 1
        if not isinstance(exc, Conflict):
            delay = min(
                self._settings.backoff_max_s,
                self._settings.backoff_base_s * 2 ** (streak.failures - 1),
            )
            streak.retry_at = now + delay
        if streak.failures >= self._settings.warn_after_failures and not streak.warned:
            streak.warned = True
            await self._warn(d, streak, exc)

    async def _warn(self, d: DeploymentInfo, streak: _Streak, exc: KubeError) -> None:
        message = (
            f"{streak.failures} writes in a row failed; the last: {exc}. "
            "Retrying with backoff; the scale is left as it is meanwhile"
        )
        try:
            self._fence()
            await self._events.emit(d, reason=WRITES_FAILING, message=message, warning=True)
        except (KubeError, _LeaseLost) as warn_exc:
            log.warning("%s: could not record event %s: %s", d.key, WRITES_FAILING, warn_exc)

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
        except (KubeError, _LeaseLost) as exc:
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
        except (KubeError, _LeaseLost) as exc:
            log.warning("%s: could not label pods %s: %s", namespace, sorted(values), exc)
            return False
        return True

    async def _announce(self, plan: WritePlan, decision: Decision, before: int) -> None:
        d = plan.deployment
        reason = change_reason(decision, before).value
        self._metrics.scaled(d.key, direction="up" if decision.desired > before else "down")
        signals = ", ".join(
            f"{kind.value} stable={_fmt(r.stable)} panic={_fmt(r.panic)}"
            + ("" if r.fresh else " (stale)")
            for kind, r in plan.decided.readings.items()
        )
        log.info(
            "%s: scaled %d -> %d, reason %s, mode %s; signals: %s; %s",
            d.key,
            before,
            decision.desired,
            reason,
            decision.mode.value,
            signals or "none",
            decision.message or "-",
        )
        try:
            self._fence()
            await self._events.emit(d, reason=reason, message=change_message(decision, before))
        except KubeError as exc:  # the scale changed; a lost Event must not undo that
            log.warning("%s: could not record event %s: %s", d.key, reason, exc)


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
    placement = None
    if preset is not None:
        placement = PlacementActuation(
            companions=KubeCompanions(api, request_timeout_s=request_timeout_s),
            scale_target=scale_target,
            events=events,
            preset=preset,
        )
    return Actuator(
        scale_target=scale_target,
        events=events,
        leader=leader,
        metrics=metrics,
        settings=settings,
        placement=placement,
        pod_labels=scale_target,
        node_preference=scale_target,
    )
