"""What the controller remembers of each target between decisions, and shows of it.

:class:`TargetLoop` is one target's mutable loop state, owned by the
controller: the policy state it passes back to ``decide``, the per-target
lock, the last decision and signal view, and what the status annotation
holds (or should hold, after a failed write). :class:`TargetState` is the
read-only picture of it that ``GET /v1/targets`` serves
(:func:`scaler.app.target_view` formats it). :func:`sync_loops` keeps the
loops in step with the opted-in targets.

Main decision: the view is a copy of plain values taken when asked, so the
HTTP app never reaches into the controller's records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scaler.gpu_ledger import CostView
from scaler.kube.types import TargetSnapshot
from scaler.policy.api import Decision, SignalKind, SignalReading
from scaler.policy.decide import PolicyState
from scaler.policy.placement_plan import PlacementPlan
from scaler.policy.status_doc import StatusDocument
from scaler.signals.combine import CombinedSignals
from scaler.signals.hub import SignalView
from scaler.targets import TargetConfig

__all__ = ["TargetLoop", "TargetState", "sync_loops"]


@dataclass(frozen=True, slots=True)
class TargetState:
    """One target as the controller last saw and decided it (for ``/v1/targets``)."""

    key: str
    problem: str | None
    spec_replicas: int | None
    ready_replicas: int | None
    decision: Decision | None
    readings: Mapping[SignalKind, SignalReading]
    combined: CombinedSignals | None
    decided_at: float | None
    # Spot placement (when the scaler has a placer): the last plan and the cost.
    placement: PlacementPlan | None = None
    cost: CostView | None = None


@dataclass(slots=True)
class TargetLoop:
    """One target's state across decisions (the controller's own)."""

    key: str
    state: PolicyState
    revision: int  # the TargetConfig revision last seen
    status: StatusDocument | None  # what the status annotation holds, as far as we know
    intended: StatusDocument | None = None  # a status whose write failed, still to write
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    problem_reported: bool = False
    routing_reported: bool = False  # the InvalidRouting Event of this revision was raised
    activation_pending: bool = False
    decision: Decision | None = None
    view: SignalView | None = None
    last_change_wall: str | None = None
    decided_at: float | None = None
    last_busy_s: float | None = None  # the last decision that saw work (warm tier's LRU)
    placement: PlacementPlan | None = None  # this decision's, when a placer is set

    def snapshot(
        self,
        snap: TargetSnapshot | None,
        entry: TargetConfig | None,
        cost: CostView | None = None,
    ) -> TargetState:
        """The read-only picture of this target, with its Deployment, config and cost."""
        view = self.view
        return TargetState(
            key=self.key,
            problem=entry.problem if entry is not None else None,
            spec_replicas=snap.deployment.spec_replicas if snap else None,
            ready_replicas=snap.deployment.ready_replicas if snap else None,
            decision=self.decision,
            readings=view.readings if view is not None else {},
            combined=view.combined if view is not None else None,
            decided_at=self.decided_at,
            placement=self.placement,
            cost=cost,
        )


def sync_loops(
    loops: dict[str, TargetLoop],
    entries: Mapping[str, TargetConfig],
    *,
    leading: bool,
    initial_state: Callable[[], PolicyState],
) -> list[str]:
    """Bring ``loops`` in step with the opted-in targets; the keys removed.

    A new target starts from ``initial_state()``; a changed config may report
    its problem again. A follower copies the status annotation the leader
    wrote, so that on taking over it rewrites it only if its decision differs.
    """
    gone = [key for key in loops if key not in entries]
    for key in gone:
        del loops[key]
    for key, entry in entries.items():
        loop = loops.get(key)
        if loop is None:
            loops[key] = TargetLoop(
                key=key, state=initial_state(), revision=entry.revision, status=entry.seen_status
            )
            continue
        if loop.revision != entry.revision:
            loop.revision = entry.revision
            loop.problem_reported = False
            loop.routing_reported = False
        if not leading:
            loop.status = entry.seen_status
    return gone
