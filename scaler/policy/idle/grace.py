"""The grace period a decision uses: the fixed one, or the one learned per target.

:func:`decide_with_grace` is :func:`~scaler.policy.decide.decide` for every
config; with ``scale-to-zero-grace-period: adaptive`` it first updates the
target's :class:`~scaler.policy.idle.adaptive.AdaptiveGrace` (kept in
``PolicyState.adaptive``), passes the learned grace period in through the
config, and turns a due pre-warm into an activation. ``decide`` itself is
unchanged and knows nothing of it.

Main decision: the adaptive state rides in the policy state, so the
controller (through :class:`~scaler.policy.protocol.PurePolicy`) and the
simulator get adaptive grace with no code of their own. The one input the
scaler cannot observe directly, how long a cold start takes, is a
parameter (used only to time a pre-warm).
"""

from __future__ import annotations

from dataclasses import replace

from scaler.policy.api import Decision, Observation, ScalingConfig
from scaler.policy.decide import PolicyState, decide
from scaler.policy.idle.adaptive import AdaptiveGrace
from scaler.policy.slo.decide import decide_slo

__all__ = ["DEFAULT_COLD_START_ESTIMATE_S", "decide_with_grace"]

#: Cold start assumed when timing a pre-warm, unless told otherwise: model
#: loads of 23 s to 84 s are reported for 8B to 70B models (the traces'
#: README), plus node and image time.
DEFAULT_COLD_START_ESTIMATE_S = 60.0


def decide_with_grace(
    *,
    config: ScalingConfig,
    observation: Observation,
    state: PolicyState,
    now: float,
    cold_start_s: float = DEFAULT_COLD_START_ESTIMATE_S,
) -> tuple[Decision, PolicyState]:
    """``decide``, with the adaptive grace period applied when configured; with an
    SLO (``slo-ttft``), :func:`~scaler.policy.slo.decide.decide_slo` instead."""
    if config.slo_ttft_s is not None:
        return decide_slo(
            config=config, observation=observation, state=state, now=now, cold_start_s=cold_start_s
        )
    if not config.scale_to_zero_grace_adaptive:
        return decide(config=config, observation=observation, state=state, now=now)
    grace = state.adaptive
    if grace is None or grace.cold_start_s != cold_start_s:
        grace = AdaptiveGrace.start(
            now, fallback_s=config.scale_to_zero_grace_s, cold_start_s=cold_start_s
        )
    grace = grace.observe(busy=observation.demand.busy, now=now)
    effective, prewarm = grace.effective(
        config,
        now=now,
        spec_replicas=observation.spec_replicas,
        policy_idle_since_s=state.idle_since_s,
    )
    if prewarm and not observation.activation_requested:
        observation = replace(observation, activation_requested=True)
    decision, new_state = decide(config=effective, observation=observation, state=state, now=now)
    if prewarm:
        decision = replace(decision, message=f"pre-warm ({grace.plan.why}): {decision.message}")
    return decision, replace(new_state, adaptive=grace)
