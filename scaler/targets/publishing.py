"""What a target's decision shows to others: gauges, and the model's view for the warm tier.

:class:`Publisher` is where each reconciler puts what it decided and saw,
for readers that must not reach into it: the decision's gauges (desired
and ready replicas, panic, the readings, by capacity type with a spot
plan), and, for a model in the warm tier, a frozen
:class:`~scaler.warm.views.ModelView` on the board the tier reads.

Main decision: a model that may not sleep is taken off the board, so the
tier never ranks or evicts the pods of a model outside the warm tier.
"""

from __future__ import annotations

from scaler.kube.types import TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.api import Mode, ScalingConfig
from scaler.policy.warm_tier import mean_gap_s
from scaler.targets.deciding import Made
from scaler.warm.views import ModelBoard, ModelView

__all__ = ["Publisher"]


class Publisher:
    """The decisions' gauges, and the models' views on the warm tier's board."""

    def __init__(self, metrics: Metrics, board: ModelBoard | None) -> None:
        self.metrics = metrics
        self._board = board

    def decision(self, key: str, snap: TargetSnapshot, made: Made) -> None:
        """The decision's gauges: desired and ready replicas, by capacity type with a plan."""
        view, placement, decision = made.view, made.placement, made.decision
        self.metrics.observe_decision(
            key,
            desired=decision.desired,
            ready=made.ready,
            panic=decision.mode is Mode.PANIC,
            readings=view.readings,
            observed=view.combined.observed,
            spot_fallback=placement.split.covering if placement is not None else 0,
        )
        if placement is None:
            return
        companion = made.companion
        self.metrics.observe_split(
            key,
            desired={"on-demand": placement.split.on_demand, "spot": placement.split.spot},
            ready={
                "on-demand": snap.deployment.ready_replicas,
                "spot": companion.ready_replicas if companion is not None else 0,
            },
        )

    def model(
        self,
        key: str,
        snap: TargetSnapshot,
        config: ScalingConfig,
        made: Made,
        last_used: float | None,
    ) -> None:
        """The model as this decision saw it, for the warm tier (only models that may sleep)."""
        board = self._board
        if board is None:
            return
        if config.sleep_after_s is None:
            board.forget(key)  # the tier reads only the models it may put to sleep (or wake)
            return
        board.publish(
            key,
            ModelView(
                idle_since=made.state.idle_since_s,
                last_used=last_used,
                pod_load=made.view.combined.pod_load,
                pods=snap.pods,
                sleep_level=config.sleep_level,
                mean_gap_s=None if made.state.slo is None else mean_gap_s(made.state.slo.gaps),
                gaps=None if made.state.slo is None else made.state.slo.gaps,
            ),
        )

    def forget(self, key: str) -> None:
        """``key`` is no longer a target."""
        if self._board is not None:
            self._board.forget(key)
        self.metrics.forget_target(key)
