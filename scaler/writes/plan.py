"""What a decision asks to be written for one target, and how far the writes got (pure).

:func:`plan_writes` turns a decision and what it was based on
(:class:`Decided`) into a :class:`WritePlan`, or ``None`` when nothing needs
writing, from the Deployment, its pods and the target's status record
(:mod:`scaler.writes.status_records`): without a decision (a rejected config) only
an unreported problem needs a write; with one, a scale that differs, a
status whose content would change, an intended status not yet written, or
placement writes (the companion, the pin, the spot scale, their Events), or
a model's shape writes (its companions ``<name>-<shape>``, their scale).
Before a scale-down (not to zero) the plan ranks the pods' deletion costs
(:mod:`scaler.policy.deletion`) and keeps their costs before, for the undo.
:class:`WriteOutcome` is what the actuator (:mod:`scaler.actuator`) says
of a plan it carried out.

Main decision: the status annotation is compared by content, not by its
time fields (:func:`~scaler.policy.status_doc.same_status`), so an unchanged
decision writes nothing; a status whose write failed after its change took
is *intended* and is written at the next plan, with that change's reason
and time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from groundwork.kube.errors import Conflict
from scaler.kube.types import DeploymentInfo, PodInfo, ScaleState
from scaler.placement.shaper import ShapesMade
from scaler.policy.api import Decision, SignalKind, SignalReading
from scaler.policy.deletion import deletion_costs
from scaler.policy.placement.plan import PlacementPlan
from scaler.policy.shapes.mix import cost_per_hour
from scaler.policy.shapes.plan import CompanionSeen
from scaler.policy.status_doc import StatusDocument, same_status, status_document
from scaler.writes.status_records import StatusRecord

__all__ = [
    "Decided",
    "WriteOutcome",
    "WritePlan",
    "change_of",
    "plan_writes",
    "shapes_status",
    "status_for",
]

# The record of a target nothing was written for yet.
_NEW_TARGET = StatusRecord()


@dataclass(frozen=True, slots=True)
class Decided:
    """One decision and what it was based on, as :func:`plan_writes` needs it.

    ``decision`` ``None`` with a ``problem``: the annotations are invalid.
    ``pod_load`` ranks pods for a scale-down; ``readings`` go into the log
    line of a change. With a spot placement policy, ``placement`` is this
    decision's plan, ``companion_replicas`` the companion's scale now
    (``None``: no companion) and ``total_before`` the pair's previous target.
    With GPU shapes, ``shapes`` is the shape step (its plan, the companions it
    saw) and ``total_before`` the model's previous total over its shapes.
    """

    decision: Decision | None
    problem: str | None = None
    readings: Mapping[SignalKind, SignalReading] = field(default_factory=dict)
    pod_load: Mapping[str, float] = field(default_factory=dict)
    placement: PlacementPlan | None = None
    companion_replicas: int | None = None
    total_before: int | None = None
    shapes: ShapesMade | None = None


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
        return _scale_to(self.decided)

    @property
    def split(self) -> tuple[int, int] | None:
        """``(on_demand, spot)`` for the status document (``None``: all on demand)."""
        if self.placement is None:
            return None
        return self.placement.split.on_demand, self.placement.split.spot


def _scale_to(decided: Decided) -> int | None:
    """The user's Deployment's replicas: its on-demand share with a spot placement,
    its shape's part with shapes, else the decision."""
    if decided.placement is not None:
        return decided.placement.on_demand_replicas
    if decided.shapes is not None:
        return decided.shapes.plan.user_replicas
    return decided.decision.desired if decided.decision is not None else None


def shapes_status(decided: Decided) -> tuple[dict[str, int], float] | None:
    """Replicas per shape and their hourly cost for the status document (``None``: the
    model has no shapes)."""
    made = decided.shapes
    if made is None or made.outcome is None:
        return None
    prices = {c.shape.name: c.shape.prices.on_demand for c in made.shapes}
    replicas = dict(sorted(made.outcome.asks.items()))
    return replicas, cost_per_hour(replicas, prices)


def change_of(plan: WritePlan, decision: Decision, *, scaling: bool) -> tuple[int, bool]:
    """The replicas before ``decision`` and whether it changes them: of a spot pair,
    or of a model's shapes, the total over its Deployments."""
    total_before = plan.decided.total_before
    if total_before is None:
        return plan.deployment.spec_replicas, scaling
    return total_before, decision.desired != total_before


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """How far a plan got.

    ``record``: the target's status record after the plan (already kept in
    :attr:`scaler.actuator.Actuator.records`); ``fresh``: after a conflict,
    the Deployment's scale as re-read (decide again on it); ``fenced``: the
    Lease was lost, the sequence stopped; ``deferred``: not attempted
    (backoff, or an undo just ran and the plan's ranking is stale);
    ``conflict``: the 409 behind ``fresh``, not counted as a failure yet.
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
    record: StatusRecord = _NEW_TARGET,
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
    scale_to = _scale_to(decided)
    assert scale_to is not None
    split = (placement.split.on_demand, placement.split.spot) if placement is not None else None
    scaling = scale_to != deployment.spec_replicas
    shapes = decided.shapes
    if (
        not scaling
        and not _status_due(decision, record, split=split, shapes=shapes_status(decided))
        and not _placement_writes(placement, decided.companion_replicas)
        and not (shapes is not None and shapes.plan.needs_writes(_seen(shapes)))
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


def _seen(made: ShapesMade) -> dict[str, CompanionSeen]:
    return {
        name: CompanionSeen(c.spec_replicas, c.ready_replicas, current=True)
        for name, c in made.companions.items()
    }


def _placement_writes(placement: PlacementPlan | None, companion_replicas: int | None) -> bool:
    if placement is None:
        return False
    p = placement
    if p.ensure_companion or p.pin or p.delete_companion or p.unpin or p.events:
        return True
    return p.companion_replicas is not None and companion_replicas != p.companion_replicas


def status_for(
    decision: Decision,
    record: StatusRecord,
    *,
    changed: bool,
    now_wall: str,
    split: tuple[int, int] | None = None,
    shapes: tuple[dict[str, int], float] | None = None,
) -> StatusDocument:
    """The status document ``decision`` gives, over what the record holds (an intended
    one first); ``changed``: the scale changed now, at ``now_wall``."""
    base = record.intended if record.intended is not None else record.status
    last_change_wall = now_wall if changed else record.last_change_wall
    return status_document(
        decision,
        base,
        changed=changed,
        now_wall=now_wall,
        last_change_wall=last_change_wall,
        split=split,
        shapes=shapes,
    )


def _status_due(
    decision: Decision,
    record: StatusRecord,
    *,
    split: tuple[int, int] | None = None,
    shapes: tuple[dict[str, int], float] | None = None,
) -> bool:
    document = status_for(decision, record, changed=False, now_wall="", split=split, shapes=shapes)
    if record.intended is not None:
        return document != record.status
    return not same_status(document, record.status)
