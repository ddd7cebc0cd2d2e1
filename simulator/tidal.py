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

Nothing of the policy is copied. With an objective set (``slo-ttft``) a
second source, :class:`ServerMetrics`, stands in for the pod scrape: each
second it hands the hub what vLLM would publish over the serving replicas
(sequences running and waiting, the mean KV-cache usage, the new prompt and
generated tokens, the new first tokens' TTFT histogram), the counters
SLO-first scaling learns the two phases and measures attainment from.
Without one the activator view carries the same concurrency, since every
request passes through the one simulated activator, and the scrape is left
out.

``scale-to-zero-grace-period: adaptive`` needs nothing here: ``PurePolicy``
learns the grace period in the policy state (:mod:`scaler.policy.idle.grace`), as
in the scaler; the simulator only tells it the cold start, to time a
pre-warm. Pre-warms show in the decisions' messages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from groundwork.rules.stats_report import ActivatorReport, TargetStats
from scaler.policy import Reason, ScalingConfig
from scaler.policy.api import SignalKind
from scaler.policy.idle.adaptive import GracePlan
from scaler.policy.protocol import PurePolicy
from scaler.signals.activator_reports import ActivatorReports
from scaler.signals.base import Brought, DemandSource, Levels, SourceReading
from scaler.signals.hub import SignalHub
from scaler.signals.scrape import SCRAPE
from simulator.world import View

__all__ = ["ServerMetrics", "TidalAutoscaler"]

# vLLM's time_to_first_token_seconds histogram bounds (+inf last).
_TTFT_BOUNDS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf,
)  # fmt: skip


class ServerMetrics:
    """The pod scrape of the simulated replicas: the last second's server view."""

    name = SCRAPE

    def __init__(self) -> None:
        self._reading: SourceReading | None = None

    @property
    def feeds(self) -> frozenset[SignalKind]:
        """What a vLLM scrape measures: running and waiting requests, KV-cache use."""
        return frozenset(
            (SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH, SignalKind.KV_CACHE_UTILIZATION)
        )

    def update(self, view: View) -> None:
        running, waiting = float(view.running), float(view.server_waiting)
        buckets = tuple(
            (bound, float(sum(1 for t in view.server_ttfts if t <= bound)))
            for bound in _TTFT_BOUNDS
        )
        prefilled, generated = float(view.prefilled_tokens), float(view.generated_tokens)
        brought = None
        if prefilled > 0 or generated > 0 or view.server_ttfts:
            brought = Brought(
                served_prompt_tokens=prefilled,
                generated_tokens=generated,
                ttft_new=buckets if view.server_ttfts else (),
            )
        signals = {SignalKind.CONCURRENCY: running + waiting, SignalKind.QUEUE_DEPTH: waiting}
        if view.ready:
            signals[SignalKind.KV_CACHE_UTILIZATION] = view.kv_cache_utilization
        self._reading = SourceReading(
            fresh=True,
            reporters=view.ready,
            signals=signals,
            busy=running + waiting > 0,
            levels=Levels(
                running=running,
                server_waiting=waiting,
                awaiting_first_token=waiting,
                kv_cache_utilization=view.kv_cache_utilization,
                running_least=float(view.running_least) if view.ready else None,
                waiting_least=float(view.waiting_least) if view.ready else None,
            ),
            brought=brought,
            observed={
                "server_running": running,
                "server_waiting": waiting,
                "server_kv_cache_utilization": view.kv_cache_utilization,
            },
        )

    def read(self, key: str, *, now: float) -> SourceReading | None:
        return self._reading


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
        # With an objective, the servers' metrics too (see the module docstring).
        self.servers = ServerMetrics() if self.config.slo_ttft_s is not None else None
        self.reports = ActivatorReports()
        sources: list[DemandSource] = [self.reports]
        if self.servers is not None:
            sources.append(self.servers)
        self.hub = SignalHub(sources=sources, catalog=_OneTarget(self.config))
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
                prompts_over=view.prompts_over,
            )
            self.reports.record(
                ActivatorReport(activator="sim", period_s=_REPORT_PERIOD_S, targets={_KEY: stats}),
                now=now,
            )
            self.hub.arrived(self.reports.name, now=now)
            if self.servers is not None:
                self.servers.update(view)
                self.hub.arrived(SCRAPE, now=now)
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
