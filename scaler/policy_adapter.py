"""The real pure policy behind the controller's :class:`~scaler.controller.Policy` seam.

The one place that names ``scaler.policy``'s functions: annotation parsing
(its :class:`~scaler.policy.annotations.InvalidAnnotation` becomes the
controller's :class:`~scaler.controller.InvalidTargetConfig`, message
unchanged: it names every bad key, its value and what is allowed), the
windows, the initial state and ``decide``. The policy state stays opaque to
the controller; this adapter checks it is the policy's own type.
"""

from __future__ import annotations

from collections.abc import Mapping

from scaler.controller import InvalidTargetConfig, Windows
from scaler.policy.annotations import InvalidAnnotation, parse_scaling_config
from scaler.policy.api import Decision, Observation, ScalingConfig
from scaler.policy.decide import PolicyState, decide
from scaler.policy.windows import SignalWindows

__all__ = ["PurePolicy"]


class PurePolicy:
    """Implements :class:`scaler.controller.Policy` with :mod:`scaler.policy`."""

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        try:
            return parse_scaling_config(annotations)
        except InvalidAnnotation as exc:
            raise InvalidTargetConfig(str(exc)) from exc

    def new_windows(self, config: ScalingConfig) -> Windows:
        return SignalWindows.for_config(config)

    def initial_state(self, now: float) -> object:
        return PolicyState.initial(now)

    def decide(
        self, *, config: ScalingConfig, observation: Observation, state: object, now: float
    ) -> tuple[Decision, object]:
        if not isinstance(state, PolicyState):
            raise TypeError(f"policy state must be a PolicyState, got {type(state).__name__}")
        return decide(config=config, observation=observation, state=state, now=now)
