"""What the scaler shows of each target: the read-only picture for ``/v1/targets``.

:class:`TargetState` is the picture of one target's
:class:`~scaler.targets.reconciler.Reconciler` that ``GET /v1/targets``
serves (:func:`scaler.app.target_view` formats it).

Main decision: the view is a copy of plain values taken when asked, so the
HTTP app never reaches into a reconciler's records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaler.gpu_ledger import CostView
from scaler.policy.api import Decision, SignalKind, SignalReading
from scaler.policy.placement.plan import PlacementPlan
from scaler.signals.combine import CombinedSignals

__all__ = ["TargetState"]


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
    # The InferencePool that makes it a target (namespace/name), if one does.
    pool: str | None = None
