"""Tidal in the simulator: the scaler's own windows, ``decide`` and adaptive grace.

:class:`TidalAutoscaler` does for one simulated model what the controller
does for one Deployment: it parses the Deployment's annotations with
``parse_scaling_config`` (so a bad knob fails here as it would in the
cluster), records each second's concurrency into a real
:class:`~scaler.policy.SignalWindows`, and calls :func:`~scaler.policy.decide`
every controller tick (2 s by default), at once on an activation, and at the
``recheck_after_s`` the decision asks for. Nothing of the policy is copied.

With ``scale-to-zero-grace-period: adaptive`` it keeps an
:class:`~scaler.policy.adaptive.AdaptiveGrace` (the same pure state the
controller keeps per target), records each idle stretch when a request ends
it, and passes the learned grace period into ``decide`` through the config
(``decide`` itself knows nothing of it). When the plan says
*pre-warm*, the grace period is 0 (go to zero when idle), and the model is
woken (an activation, as the activator's would be) a cold start before the
likely next request; it then stays up until the keep-alive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from scaler.policy import (
    Demand,
    Observation,
    PolicyState,
    ScalingConfig,
    SignalKind,
    SignalWindows,
    decide,
    parse_scaling_config,
)
from scaler.policy.adaptive import AdaptiveGrace, GracePlan
from scaler.sim.world import View

__all__ = ["TidalAutoscaler"]

# The controller's default tick (scaler settings) and how recent a sample must
# be to count as fresh: samples arrive every simulated second here.
DEFAULT_TICK_S = 2.0
_FRESH_WITHIN_S = 3.0


class TidalAutoscaler:
    """One target under Tidal's policy (see the module docstring)."""

    def __init__(
        self,
        name: str,
        annotations: Mapping[str, str],
        *,
        cold_start_s: float,
        tick_s: float = DEFAULT_TICK_S,
        warm_start: int = 0,
    ) -> None:
        self._name = name
        self.annotations = dict(annotations)
        self.config: ScalingConfig = parse_scaling_config(self.annotations)
        self.tick_s = tick_s
        self.cold_start_s = cold_start_s
        if warm_start < 0:
            raise ValueError(f"warm start must be >= 0 replicas, got {warm_start}")
        # Replicas already serving at time 0, as if the trace window began
        # in the middle of a day of traffic (a steady-load comparison should
        # not be decided by one start from zero).
        self.warm_start = min(warm_start, self.config.max_scale)
        self.windows = SignalWindows.for_config(self.config)
        # A scaler that has run for a while: no warm-up hold at time 0.
        self.state = PolicyState.initial(-self.config.window_s)
        self.next_decision_s = 0.0
        self.grace = AdaptiveGrace.start(0.0, fallback_s=self.config.scale_to_zero_grace_s)
        self._plan: GracePlan | None = None
        self.decisions = 0
        self.prewarms = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def initial(self) -> int:
        return max(self.config.min_scale, self.warm_start)

    def plan(self) -> GracePlan:
        if self._plan is None:
            self._plan = self.grace.history.plan(cold_start_s=self.cold_start_s)
        return self._plan

    def tick(self, view: View, *, activation: bool) -> int | None:
        now = view.now
        if not activation:
            self.windows.record(SignalKind.CONCURRENCY, view.concurrency, now)
            busy = view.busy or view.held > 0 or view.in_flight > 0
            before = self.grace.history
            self.grace = self.grace.observe(busy=busy, now=now)
            if self.grace.history is not before:
                self._plan = None
        config, prewarm = self.config, False
        if self.config.scale_to_zero_grace_adaptive:
            config, prewarm = self.grace.effective(
                self.config,
                now=now,
                spec_replicas=view.spec,
                policy_idle_since_s=self.state.idle_since_s,
                cold_start_s=self.cold_start_s,
                plan=self.plan(),
            )
        if prewarm:
            activation = True
            self.prewarms += 1
        if not activation and now < self.next_decision_s:
            return None
        observation = Observation(
            ready_replicas=view.ready,
            spec_replicas=view.spec,
            signals=self.windows.readings(config, now, fresh_within_s=_FRESH_WITHIN_S),
            demand=Demand(busy=view.busy or view.held > 0, all_sources_fresh=True),
            activation_requested=activation,
        )
        decision, self.state = decide(
            config=config, observation=observation, state=self.state, now=now
        )
        self.decisions += 1
        if not activation or now >= self.next_decision_s:
            self.next_decision_s = now + self.tick_s
        if decision.recheck_after_s is not None:
            # The controller decides again when a delay expires, if that is
            # before its next tick (whole seconds here: ticks are 1 s apart).
            self.next_decision_s = min(
                self.next_decision_s, now + max(1.0, math.ceil(decision.recheck_after_s))
            )
        return decision.desired
