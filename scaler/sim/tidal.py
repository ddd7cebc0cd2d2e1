"""Tidal in the simulator: the scaler's own signal hub, policy and adaptive grace.

:class:`TidalAutoscaler` does for one simulated model what the controller
does for one Deployment, with the same pieces:

- :class:`~scaler.policy.protocol.PurePolicy` parses the Deployment's
  annotations (a bad knob fails here as it would in the cluster), makes the
  initial state and decides;
- a :class:`~scaler.signals.hub.SignalHub` with an
  :class:`~scaler.signals.activator_reports.ActivatorReports` source receives,
  every simulated second, the report the activator would post to
  ``/v1/stats`` (its period's mean concurrency, in flight, held, arrivals,
  and for SLO-first scaling the arrivals' prompt and output tokens, the
  first tokens and their prompt tokens, the requests awaiting a first token)
  and gives back the readings and the demand the controller builds its
  :class:`~scaler.policy.Observation` from;
- ``decide`` runs every controller tick (2 s by default), at once on an
  activation, and at the ``recheck_after_s`` a decision asks for.

Nothing of the policy is copied. What the simulator leaves out is the pod
scrape (server view): the activator view carries the same concurrency here,
since every request passes through the one simulated activator.

``scale-to-zero-grace-period: adaptive`` needs nothing here: ``PurePolicy``
learns the grace period in the policy state (:mod:`scaler.policy.grace`), as
in the scaler; the simulator only tells it the cold start, to time a
pre-warm. Pre-warms show in the decisions' messages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from scaler.policy import Reason, ScalingConfig
from scaler.policy.adaptive import GracePlan
from scaler.policy.protocol import PurePolicy
from scaler.signals.activator_reports import ActivatorReport, ActivatorReports, TargetStats
from scaler.signals.hub import SignalHub
from scaler.sim.world import View

__all__ = ["TidalAutoscaler"]

# The controller's default tick (scaler settings) and the activator's report
# period: one report per simulated second.
DEFAULT_TICK_S = 2.0
_REPORT_PERIOD_S = 1.0
_KEY = "sim/model"


class _OneTarget:
    """The hub's catalog: the one simulated target and its config."""

    def __init__(self, config: ScalingConfig) -> None:
        self._configs: dict[str, ScalingConfig | None] = {_KEY: config}

    def configs(self) -> Mapping[str, ScalingConfig | None]:
        return self._configs


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
        self.policy = PurePolicy(cold_start_estimate_s=cold_start_s)
        self.config: ScalingConfig = self.policy.parse(self.annotations)
        self.tick_s = tick_s
        self.cold_start_s = cold_start_s
        if warm_start < 0:
            raise ValueError(f"warm start must be >= 0 replicas, got {warm_start}")
        # Replicas already serving at time 0, as if the trace window began
        # in the middle of a day of traffic (a steady-load comparison should
        # not be decided by one start from zero).
        self.warm_start = min(warm_start, self.config.max_scale)
        self.hub = SignalHub(sources=[ActivatorReports()], catalog=_OneTarget(self.config))
        # A scaler that has run for a while: no warm-up hold at time 0.
        self.state = self.policy.initial_state(-self.config.window_s)
        self.next_decision_s = 0.0
        self.decisions = 0
        self.prewarms = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def initial(self) -> int:
        return max(self.config.min_scale, self.warm_start)

    def plan(self) -> GracePlan | None:
        """The adaptive grace period's current plan (None without ``adaptive``)."""
        return None if self.state.adaptive is None else self.state.adaptive.plan

    def tick(self, view: View, *, activation: bool) -> int | None:
        now = view.now
        if not activation:
            stats = TargetStats(
                concurrency=view.concurrency,
                in_flight=view.in_flight,
                buffered=view.held,
                arrivals=view.arrivals,
                prompt_tokens=view.arrival_prompt_tokens,
                output_tokens=view.arrival_output_tokens,
                first_tokens=view.first_tokens,
                prefilled_tokens=view.prefilled_tokens,
                awaiting_first_token=view.awaiting_first_token,
                best_prefill_tokens_per_s=view.best_prefill_tokens_per_s,
            )
            self.hub.report(
                ActivatorReport(activator="sim", period_s=_REPORT_PERIOD_S, targets={_KEY: stats}),
                now=now,
            )
        if not activation and now < self.next_decision_s:
            return None
        config = self.config
        signals = self.hub.observe(_KEY, config, now=now)
        observation = signals.observation(ready=view.ready, spec=view.spec, activation=activation)
        decision, self.state = self.policy.decide(
            config=config, observation=observation, state=self.state, now=now
        )
        self.decisions += 1
        if decision.reason is Reason.ACTIVATED and decision.message.startswith("pre-warm"):
            self.prewarms += 1
        if not activation or now >= self.next_decision_s:
            self.next_decision_s = now + self.tick_s
        if decision.recheck_after_s is not None:
            # The controller decides again when a delay expires, if that is
            # before its next tick (whole seconds here: ticks are 1 s apart).
            self.next_decision_s = min(
                self.next_decision_s, now + max(1.0, math.ceil(decision.recheck_after_s))
            )
        return decision.desired
