"""Every write the scaler makes, in one place (DESIGN §4 "Acting").

The controller decides; this module acts. A decision that needs writes
becomes a :class:`WritePlan` (:func:`plan_writes`, pure), and
:meth:`Actuator.carry_out` performs it against the Kubernetes API:

1. for a rejected config, one ``InvalidAnnotation`` Warning Event, nothing else;
2. before a scale-down (not to zero), pod-deletion-cost on the pods, so the
   ReplicaSet removes the idlest first (:mod:`scaler.policy.deletion`);
3. ``spec.replicas`` through ``/scale``; with a spot placement policy, the
   user's Deployment gets the on-demand share, then the placement writes
   follow (:mod:`scaler.placement_actuation`: the companion ``<name>-spot``,
   the on-demand pin, the spot scale, ``SpotFallback``/``SpotRecovered``);
4. when the scale changed (of a spot pair: its total), an Event
   (:mod:`scaler.policy.events`) and an INFO log line with target, from -> to,
   reason, mode and signals;
5. the status annotation, when its discrete content changed
   (:mod:`scaler.policy.status_doc`; with placement, the spot/on-demand split).

The only other write of the scaler, the Lease renewal of leader election,
belongs to :mod:`scaler.kube.leader`. An import contract keeps the write
helpers of :mod:`scaler.kube.writer` and :mod:`scaler.kube.companion_writes`
out of every other scaler module: :func:`kube_actuator` builds the actuator
over them for the service. Companions whose Deployment is no longer opted in
are removed through :meth:`Actuator.remove_orphan`.

Main decisions:

- **A failed write is not fatal.** An outage, a conflict storm or a refusal
  is logged, counted (``tidal_scaler_write_failures_total``) and left for the
  next decision; the outcome says how far the plan got.
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
from dataclasses import dataclass, field

from scaler.kube.client import KubeAccess
from scaler.kube.companion_writes import KubeCompanions
from scaler.kube.errors import KubeError
from scaler.kube.types import CompanionInfo, DeploymentInfo, EventSink, PodInfo, ScaleTarget
from scaler.kube.writer import KubeEvents, KubeScaleTarget
from scaler.metrics import Metrics
from scaler.placement_actuation import PlacementActuation
from scaler.policy.api import Decision, SignalKind, SignalReading
from scaler.policy.deletion import deletion_costs
from scaler.policy.events import INVALID_ANNOTATION, change_message, change_reason
from scaler.policy.placement_plan import PlacementPlan
from scaler.policy.providers import ProviderPreset
from scaler.policy.status_doc import (
    StatusDocument,
    encode_status,
    same_status,
    status_document,
)

__all__ = ["Actuator", "WriteOutcome", "WritePlan", "kube_actuator", "plan_writes", "wall_time"]

log = logging.getLogger(__name__)


def wall_time() -> str:
    """Now as the status annotation's ``lastChangeTime`` says it (UTC, RFC 3339)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True, slots=True)
class WritePlan:
    """What one decision asks to be written for one target.

    ``decision`` ``None`` with a ``problem``: report the problem only. Otherwise
    ``deletion_costs`` go first (a scale-down), then the scale when
    ``decision.desired`` differs from the Deployment's, then the status.
    ``previous_status`` and ``last_change_wall`` are what the annotation said
    before, so a decision that changes nothing keeps its reason and time.
    """

    deployment: DeploymentInfo
    decision: Decision | None = None
    problem: str | None = None
    deletion_costs: Mapping[str, int] = field(default_factory=dict)
    previous_status: StatusDocument | None = None
    last_change_wall: str | None = None
    readings: Mapping[SignalKind, SignalReading] = field(default_factory=dict)
    # Spot placement (scaler.placing): the user's Deployment is scaled to the
    # plan's on-demand share and the placement writes follow; ``total_before``
    # is the pair's previous target, for the Event and the change time.
    placement: PlacementPlan | None = None
    total_before: int | None = None

    @property
    def scale_to(self) -> int | None:
        """The replicas the user's Deployment should have."""
        if self.placement is not None:
            return self.placement.on_demand_replicas
        return self.decision.desired if self.decision is not None else None


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """How far a plan got: what the status annotation holds now as far as this
    replica knows, when the scale last changed, whether the problem was reported."""

    ok: bool
    status: StatusDocument | None = None
    last_change_wall: str | None = None
    problem_reported: bool = False


def plan_writes(
    *,
    deployment: DeploymentInfo,
    pods: Sequence[PodInfo],
    decision: Decision | None,
    problem: str | None = None,
    problem_reported: bool = False,
    status: StatusDocument | None = None,
    last_change_wall: str | None = None,
    pod_load: Mapping[str, float] | None = None,
    readings: Mapping[SignalKind, SignalReading] | None = None,
    placement: PlacementPlan | None = None,
    companion_replicas: int | None = None,
    total_before: int | None = None,
) -> WritePlan | None:
    """The writes ``decision`` needs, or ``None`` when it needs none (pure).

    Without a decision (a rejected config) only an unreported problem needs a
    write. With one: a scale that differs, or a status whose discrete content
    would change even if the scale did not. With a ``placement`` plan the
    user's Deployment is compared with the on-demand share, and any companion,
    pin or spot-scale write (``companion_replicas``: the companion's scale
    now, ``None`` when it does not exist) or placement Event needs writes too.
    """
    if decision is None:
        if problem is None or problem_reported:
            return None
        return WritePlan(deployment=deployment, problem=problem)
    scale_to = placement.on_demand_replicas if placement is not None else decision.desired
    scaling = scale_to != deployment.spec_replicas
    unchanged = status_document(
        decision,
        status,
        changed=False,
        now_wall="",
        last_change_wall=last_change_wall,
        split=_split(placement),
    )
    if (
        not scaling
        and same_status(unchanged, status)
        and not _placement_writes(placement, companion_replicas)
    ):
        return None
    costs: Mapping[str, int] = {}
    if 0 < scale_to < deployment.spec_replicas:
        costs = deletion_costs(pods, pod_load or {})
    return WritePlan(
        deployment=deployment,
        decision=decision,
        deletion_costs=costs,
        previous_status=status,
        last_change_wall=last_change_wall,
        readings=dict(readings or {}),
        placement=placement,
        total_before=total_before,
    )


def _split(placement: PlacementPlan | None) -> tuple[int, int] | None:
    if placement is None:
        return None
    return placement.split.on_demand, placement.split.spot


def _placement_writes(placement: PlacementPlan | None, companion_replicas: int | None) -> bool:
    if placement is None:
        return False
    p = placement
    if p.ensure_companion or p.pin or p.delete_companion or p.unpin or p.events:
        return True
    return p.companion_replicas is not None and companion_replicas != p.companion_replicas


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


class Actuator:
    """Carries out :class:`WritePlan` values through a scale target and an event sink."""

    def __init__(
        self,
        *,
        scale_target: ScaleTarget,
        events: EventSink,
        metrics: Metrics,
        wall_time: Callable[[], str] = wall_time,
        max_concurrent_writes: int = 16,
        placement: PlacementActuation | None = None,
    ) -> None:
        if max_concurrent_writes < 1:
            raise ValueError(f"max_concurrent_writes must be >= 1, got {max_concurrent_writes}")
        self._placement = placement
        self._scale = scale_target
        self._events = events
        self._metrics = metrics
        self._wall_time = wall_time
        self._slots = asyncio.Semaphore(max_concurrent_writes)

    async def carry_out(self, plan: WritePlan) -> WriteOutcome:
        """Perform ``plan``; failures are logged and counted, never raised."""
        d = plan.deployment
        decision = plan.decision
        status = plan.previous_status
        last_change = plan.last_change_wall
        async with self._slots:
            try:
                if decision is None:
                    if plan.problem is None:
                        return WriteOutcome(ok=True, status=status, last_change_wall=last_change)
                    await self._events.emit(
                        d, reason=INVALID_ANNOTATION, message=plan.problem, warning=True
                    )
                    return WriteOutcome(
                        ok=True, status=status, last_change_wall=last_change, problem_reported=True
                    )
                changed = False
                scale_to = plan.scale_to
                assert scale_to is not None
                if scale_to != d.spec_replicas:
                    # With placement: the on-demand share, first, so that cover for
                    # lost spot comes before anything else is written.
                    if plan.deletion_costs:
                        await self._scale.set_deletion_costs(d.namespace, plan.deletion_costs)
                    before = await self._scale.scale(d.namespace, d.name, scale_to)
                    changed = before != scale_to and plan.placement is None
                    if changed:
                        last_change = self._wall_time()
                        await self._announce(plan, decision, before)
                if plan.placement is not None:
                    if self._placement is not None:
                        await self._placement.carry_out(d, plan.placement)
                    before_total = plan.total_before
                    if before_total is not None and before_total != decision.desired:
                        changed = True
                        last_change = self._wall_time()
                        await self._announce(plan, decision, before_total)
                document = status_document(
                    decision,
                    status,
                    changed=changed,
                    now_wall=self._wall_time(),
                    last_change_wall=last_change,
                    split=_split(plan.placement),
                )
                if not same_status(document, status):
                    await self._scale.write_status(d.namespace, d.name, encode_status(document))
                    status = document
                return WriteOutcome(ok=True, status=status, last_change_wall=last_change)
            except KubeError as exc:
                # Outage, conflict storm, RBAC: log, keep the state, try at the next decision.
                log.warning("%s: write failed, will retry: %s", d.key, exc)
                self._metrics.write_failed(d.key)
                return WriteOutcome(ok=False, status=status, last_change_wall=last_change)

    async def _announce(self, plan: WritePlan, decision: Decision, before: int) -> None:
        d = plan.deployment
        reason = change_reason(decision, before).value
        self._metrics.scaled(d.key, direction="up" if decision.desired > before else "down")
        signals = ", ".join(
            f"{kind.value} stable={_fmt(r.stable)} panic={_fmt(r.panic)}"
            + ("" if r.fresh else " (stale)")
            for kind, r in plan.readings.items()
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
            await self._events.emit(d, reason=reason, message=change_message(decision, before))
        except KubeError as exc:  # the scale changed; a lost Event must not undo that
            log.warning("%s: could not record event %s: %s", d.key, reason, exc)

    async def remove_orphan(self, companion: CompanionInfo) -> None:
        """A spot companion whose Deployment is no longer opted in: unpin, delete."""
        if self._placement is None:
            return
        async with self._slots:
            try:
                await self._placement.remove_orphan(companion)
            except KubeError as exc:
                key = f"{companion.namespace}/{companion.companion_of}"
                log.warning("%s: could not remove spot companion, will retry: %s", key, exc)
                self._metrics.write_failed(key)


def kube_actuator(
    access: KubeAccess,
    *,
    identity: str,
    metrics: Metrics,
    request_timeout_s: float = 10.0,
    max_concurrent_writes: int = 16,
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
        metrics=metrics,
        max_concurrent_writes=max_concurrent_writes,
        placement=placement,
    )
