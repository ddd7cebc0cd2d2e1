"""Every write the scaler makes, in one place (DESIGN §4 "Acting").

The controller decides; this module acts. A decision that needs writes
becomes a :class:`WritePlan` (:func:`plan_writes`, pure), and
:meth:`Actuator.carry_out` performs it against the Kubernetes API:

1. for a rejected config, one ``InvalidAnnotation`` Warning Event, nothing else;
2. before a scale-down (not to zero), pod-deletion-cost on the pods, so the
   ReplicaSet removes the idlest first (:mod:`scaler.policy.deletion`);
3. ``spec.replicas`` through ``/scale``;
4. when the scale changed, an Event (:mod:`scaler.policy.events`) and an INFO
   log line with target, from -> to, reason, mode and signals;
5. the status annotation, when its discrete content changed
   (:mod:`scaler.policy.status_doc`).

The only other write of the scaler, the Lease renewal of leader election,
belongs to :mod:`scaler.kube.leader`. An import contract keeps the write
helpers of :mod:`scaler.kube.writer` out of every other scaler module:
:func:`kube_actuator` builds the actuator over them for the service.

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
from scaler.kube.errors import KubeError
from scaler.kube.types import DeploymentInfo, EventSink, PodInfo, ScaleTarget
from scaler.kube.writer import KubeEvents, KubeScaleTarget
from scaler.metrics import Metrics
from scaler.policy.api import Decision, SignalKind, SignalReading
from scaler.policy.deletion import deletion_costs
from scaler.policy.events import INVALID_ANNOTATION, change_message, change_reason
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
) -> WritePlan | None:
    """The writes ``decision`` needs, or ``None`` when it needs none (pure).

    Without a decision (a rejected config) only an unreported problem needs a
    write. With one: a scale that differs, or a status whose discrete content
    would change even if the scale did not.
    """
    if decision is None:
        if problem is None or problem_reported:
            return None
        return WritePlan(deployment=deployment, problem=problem)
    scaling = decision.desired != deployment.spec_replicas
    unchanged = status_document(
        decision, status, changed=False, now_wall="", last_change_wall=last_change_wall
    )
    if not scaling and same_status(unchanged, status):
        return None
    costs: Mapping[str, int] = {}
    if 0 < decision.desired < deployment.spec_replicas:
        costs = deletion_costs(pods, pod_load or {})
    return WritePlan(
        deployment=deployment,
        decision=decision,
        deletion_costs=costs,
        previous_status=status,
        last_change_wall=last_change_wall,
        readings=dict(readings or {}),
    )


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
    ) -> None:
        if max_concurrent_writes < 1:
            raise ValueError(f"max_concurrent_writes must be >= 1, got {max_concurrent_writes}")
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
                if decision.desired != d.spec_replicas:
                    if plan.deletion_costs:
                        await self._scale.set_deletion_costs(d.namespace, plan.deletion_costs)
                    before = await self._scale.scale(d.namespace, d.name, decision.desired)
                    changed = before != decision.desired
                    if changed:
                        last_change = self._wall_time()
                        await self._announce(plan, decision, before)
                document = status_document(
                    decision,
                    status,
                    changed=changed,
                    now_wall=self._wall_time(),
                    last_change_wall=last_change,
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

    async def note(
        self, deployment: DeploymentInfo, *, reason: str, message: str, warning: bool = False
    ) -> None:
        """An Event about ``deployment`` that goes with no scale write (the warm tier's
        sleeps and wakes); best effort, like the Event after a change."""
        try:
            async with self._slots:
                await self._events.emit(deployment, reason=reason, message=message, warning=warning)
        except KubeError as exc:
            log.warning("%s: could not record event %s: %s", deployment.key, reason, exc)

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


def kube_actuator(
    access: KubeAccess,
    *,
    identity: str,
    metrics: Metrics,
    request_timeout_s: float = 10.0,
    max_concurrent_writes: int = 16,
) -> Actuator:
    """An :class:`Actuator` writing to the API server of ``access``."""
    api = access.api
    return Actuator(
        scale_target=KubeScaleTarget(api, request_timeout_s=request_timeout_s),
        events=KubeEvents(api, instance=identity, request_timeout_s=request_timeout_s),
        metrics=metrics,
        max_concurrent_writes=max_concurrent_writes,
    )
