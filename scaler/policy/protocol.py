"""The policy as the controller drives it: parse a target's config, then decide.

:class:`Policy` is the seam between the control loop and the pure decision
logic: the controller parses each target's annotations once per change
(:meth:`Policy.parse`), keeps one :class:`~scaler.policy.decide.PolicyState`
per target, and at every decision passes it in and keeps the one that comes
back. :class:`PurePolicy` is the real one (:mod:`scaler.policy.annotations`
and :func:`scaler.policy.decide.decide`); tests script their own.

Main decision: a bad annotation is one error type for the controller,
:class:`InvalidTargetConfig`, whose message names every bad key, its value and
what is allowed, whatever policy produced it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from scaler.policy.annotations import (
    AnnotationProblem,
    InvalidAnnotation,
    check_supported,
    parse_scaling_config,
)
from scaler.policy.api import Decision, Observation, ScalingConfig
from scaler.policy.decide import PolicyState
from scaler.policy.idle.grace import DEFAULT_COLD_START_ESTIMATE_S, decide_with_grace

__all__ = ["InvalidTargetConfig", "Policy", "PurePolicy", "parse_for_setup"]


class InvalidTargetConfig(ValueError):
    """A target's annotations cannot be used; the message names key, value and what is allowed.

    ``problems``: each bad key on its own, where the policy names them (an
    InferencePool target reports each on the object that carries it)."""

    def __init__(self, message: str, *, problems: tuple[AnnotationProblem, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class Policy(Protocol):
    """The pure policy, as the controller uses it."""

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        """The target's config; :class:`InvalidTargetConfig` when an annotation is bad."""
        ...

    def initial_state(self, now: float) -> PolicyState:
        """The state of a target first seen at ``now``."""
        ...

    def decide(
        self, *, config: ScalingConfig, observation: Observation, state: PolicyState, now: float
    ) -> tuple[Decision, PolicyState]:
        """One decision at ``now`` and the state to pass in at the next."""
        ...


class PurePolicy:
    """:class:`Policy` with :mod:`scaler.policy`: its
    :class:`~scaler.policy.annotations.InvalidAnnotation` becomes an
    :class:`InvalidTargetConfig`, message unchanged. Decisions go through
    :func:`~scaler.policy.idle.grace.decide_with_grace`, so an ``adaptive`` grace
    period is learned per target; ``cold_start_estimate_s`` times its
    pre-warm."""

    def __init__(self, *, cold_start_estimate_s: float = DEFAULT_COLD_START_ESTIMATE_S) -> None:
        if not cold_start_estimate_s >= 0:
            raise ValueError(
                f"the cold-start estimate must be >= 0 s, got {cold_start_estimate_s!r}"
            )
        self.cold_start_estimate_s = cold_start_estimate_s

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        try:
            return parse_scaling_config(annotations)
        except InvalidAnnotation as exc:
            raise InvalidTargetConfig(str(exc), problems=exc.problems) from exc

    def initial_state(self, now: float) -> PolicyState:
        return PolicyState.initial(now)

    def decide(
        self, *, config: ScalingConfig, observation: Observation, state: PolicyState, now: float
    ) -> tuple[Decision, PolicyState]:
        return decide_with_grace(
            config=config,
            observation=observation,
            state=state,
            now=now,
            cold_start_s=self.cold_start_estimate_s,
        )


def parse_for_setup(
    policy: Policy, annotations: Mapping[str, str], *, gpu_metrics: bool
) -> ScalingConfig:
    """``policy.parse``, then the checks that need the scaler's setup
    (:func:`~scaler.policy.annotations.check_supported`); :class:`InvalidTargetConfig`
    naming every problem found."""
    config = policy.parse(annotations)
    try:
        check_supported(config, gpu_metrics=gpu_metrics)
    except InvalidAnnotation as exc:
        raise InvalidTargetConfig(str(exc), problems=exc.problems) from exc
    return config
