"""The scaler's Prometheus metrics (docs/metrics.md), around an injected registry.

Names start with ``tidal_scaler_`` and carry their unit; label values come
from closed sets (signal names, directions, capacity types, results) or from
the opted-in Deployments (``target``), whose series are removed when the
Deployment is no longer opted in, so cardinality follows the managed models.
The decider's internals (stable and panic averages per signal, freshness,
panic mode) are exported so that a dashboard shows why a model is sized as it
is, as Knative's autoscaler does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scaler.policy.api import SignalKind, SignalReading
from scaler.policy.placement.availability import CapacityType
from scaler.policy.placement.cost import CostMeter, CostRate
from scaler.policy.warm_tier.gpu_use import GpuSeconds, GpuUse

__all__ = ["CAPACITY_TYPES", "OBSERVED_SIGNALS", "Metrics"]

CAPACITY_TYPES = ("on-demand", "spot")
# Raw values the sources hand over (scaler.signals.*: ``observed``).
OBSERVED_SIGNALS = (
    "activator_concurrency",
    "activator_in_flight",
    "activator_buffered",
    "activator_arrivals",
    "server_running",
    "server_waiting",
    "server_kv_cache_utilization",
    "server_gpu_utilization",
    "server_queue_to_compute_ratio",
    "dcgm_gpu_utilization",
    "epp_queued_requests",
    "epp_queued_bytes",
    "epp_running_requests",
    "epp_ready_endpoints",
    "epp_saturation",
    "epp_inflight_tokens",
    "epp_no_endpoint_misses",
)
DIRECTIONS = ("up", "down")
REPORT_RESULTS = ("accepted", "rejected", "unauthorized")
PREFIX = "tidal_scaler_"
ACTIVATION_RESULTS = ("accepted", "unknown_target", "not_woken", "rejected", "unauthorized")


class Metrics:
    """The scaler's instruments.

    The GPU and cost series are fed by the GPU ledger
    (:mod:`scaler.gpu_ledger`) alone, through :meth:`account_cost` and
    :meth:`add_gpu_seconds_by_state`, at its one price table.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._decision_series(registry)
        self._cost_series(registry)
        self._service_series(registry)
        # Every labelled series per target, so that forgetting a target removes them all.
        self._by_target: dict[str, dict[tuple[Any, tuple[str, ...]], Any]] = {}
        for capacity in CAPACITY_TYPES:
            self.gpu_seconds.labels(capacity)
            self.gpu_cost.labels(capacity)
        for state in GpuUse:
            self.gpu_seconds_by_state.labels(state.value)
        for result in REPORT_RESULTS:
            self.reports.labels(result)
        for result in ACTIVATION_RESULTS:
            self.activations.labels(result)

    def _decision_series(self, registry: CollectorRegistry) -> None:
        """What each decision saw and did, and the writes it made."""
        p = PREFIX
        self.desired = Gauge(
            p + "desired_replicas",
            "Replicas the scaler wants, by target and capacity type",
            ["target", "capacity_type"],
            registry=registry,
        )
        self.ready = Gauge(
            p + "ready_replicas",
            "Ready replicas, by target and capacity type",
            ["target", "capacity_type"],
            registry=registry,
        )
        self.panic = Gauge(
            p + "panic_mode", "1 while the target is in panic mode", ["target"], registry=registry
        )
        self.observed = Gauge(
            p + "observed_signal",
            "Latest raw value per source signal (requests; utilizations as fractions 0..1)",
            ["target", "signal"],
            registry=registry,
        )
        self.stable = Gauge(
            p + "signal_stable_average",
            "Signal averaged over the stable window",
            ["target", "signal"],
            registry=registry,
        )
        self.panic_avg = Gauge(
            p + "signal_panic_average",
            "Signal averaged over the panic window",
            ["target", "signal"],
            registry=registry,
        )
        self.fresh = Gauge(
            p + "signal_fresh",
            "1 when every source behind the signal is fresh (it may lower the scale)",
            ["target", "signal"],
            registry=registry,
        )
        self.scaling_events = Counter(
            p + "scaling_events",
            "Scale changes written, by direction",
            ["target", "direction"],
            registry=registry,
        )
        self.write_failures = Counter(
            p + "write_failures",
            "Kubernetes writes that failed (a conflict is decided again; others back off)",
            ["target"],
            registry=registry,
        )
        self.leader = Gauge(
            p + "leader", "1 when this replica holds the tidal-scaler Lease", registry=registry
        )

    def _cost_series(self, registry: CollectorRegistry) -> None:
        """GPU-seconds and cost (the GPU ledger's), and spot cover."""
        p = PREFIX
        self.gpu_seconds = Counter(
            p + "gpu_seconds",
            "GPU-seconds of replicas bound to nodes (Ready or not), by capacity type",
            ["capacity_type"],
            registry=registry,
        )
        self.gpu_cost = Counter(
            p + "gpu_cost",
            "Dollars those GPU-seconds cost at the configured prices, by capacity type",
            ["capacity_type"],
            registry=registry,
        )
        self.target_gpu_seconds = Counter(
            p + "target_gpu_seconds",
            "GPU-seconds of replicas bound to nodes, by target and capacity type",
            ["target", "capacity_type"],
            registry=registry,
        )
        self.target_dollars = Counter(
            p + "cost_dollars",
            "Dollars those GPU-seconds cost at the configured prices, by target and capacity type",
            ["target", "capacity_type"],
            registry=registry,
        )
        self.target_equivalent_dollars = Counter(
            p + "on_demand_equivalent_dollars",
            "Dollars the same GPU-seconds would cost all on demand",
            ["target"],
            registry=registry,
        )
        self.cost_rate = Gauge(
            p + "cost_dollars_per_hour",
            "Cost rate now, by target and capacity type",
            ["target", "capacity_type"],
            registry=registry,
        )
        self.saving_rate = Gauge(
            p + "savings_dollars_per_hour",
            "All-on-demand cost rate minus the cost rate, now",
            ["target"],
            registry=registry,
        )
        self.spot_fallback = Gauge(
            p + "spot_fallback_replicas",
            "On-demand replicas standing in for spot replicas that are not ready",
            ["target"],
            registry=registry,
        )

    def _service_series(self, registry: CollectorRegistry) -> None:
        """The HTTP API, the warm tier and the loop itself."""
        p = PREFIX
        self.reports = Counter(
            p + "reports", "POST /v1/stats by result", ["result"], registry=registry
        )
        self.activations = Counter(
            p + "activations", "POST /v1/activate by result", ["result"], registry=registry
        )
        self.activators = Gauge(
            p + "activators_reporting", "Activators whose reports count", registry=registry
        )
        self.gpu_seconds_by_state = Counter(
            p + "gpu_seconds_by_state",
            "Device-seconds held (each GPU or MIG instance whole, however many pods share "
            "it), by what its pods did: serving (one awake or waking), starting (none awake, "
            "one loading) or sleeping-only (every pod there asleep: paid for nothing)",
            ["state"],
            registry=registry,
        )
        # The warm tier (scaler.warm.tier).
        self.warm_sleeping = Gauge(
            p + "sleeping_replicas",
            "Replicas asleep or being put to sleep",
            ["target"],
            registry=registry,
        )
        self.warm_wakes = Counter(
            p + "wakes", "Wakes from sleep by result", ["target", "result"], registry=registry
        )
        self.warm_sleeps = Counter(
            p + "sleeps", "Replicas put to sleep", ["target"], registry=registry
        )
        self.warm_wake_duration = Histogram(
            p + "wake_duration_seconds",
            "Wake from sleep, warm-up included",
            ["target"],
            buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30),
            registry=registry,
        )
        self.tick_duration = Histogram(
            p + "tick_duration_seconds",
            "Time to decide for every target once",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=registry,
        )

    def _child(self, target: str, metric: Any, *labels: str) -> Any:
        """The labelled child of ``metric`` for ``target``, cached: ``.labels()`` costs
        more than the whole policy decision, and a tick touches a dozen per target."""
        values = (target, *labels)
        children = self._by_target.setdefault(target, {})
        child = children.get((metric, values))
        if child is None:
            child = children[(metric, values)] = metric.labels(*values)
        return child

    def observe_decision(
        self,
        target: str,
        *,
        desired: int,
        ready: int,
        panic: bool,
        readings: Mapping[SignalKind, SignalReading],
        observed: Mapping[str, float],
        spot_fallback: int = 0,
    ) -> None:
        # All on demand unless a placement plan splits it (observe_split, after
        # this); ``spot_fallback``: on-demand replicas standing in for spot.
        c = self._child
        c(target, self.desired, "on-demand").set(desired)
        c(target, self.ready, "on-demand").set(ready)
        c(target, self.spot_fallback).set(spot_fallback)
        if (self.write_failures, (target,)) not in self._by_target[target]:
            # Counters start at 0 with the target, so rate() and alerts see a
            # series before the first failure or scale change, not nothing.
            c(target, self.write_failures)
            for direction in DIRECTIONS:
                c(target, self.scaling_events, direction)
        c(target, self.panic).set(1 if panic else 0)
        for kind, r in readings.items():
            if r.stable is not None:
                c(target, self.stable, kind.value).set(r.stable)
            if r.panic is not None:
                c(target, self.panic_avg, kind.value).set(r.panic)
            c(target, self.fresh, kind.value).set(1 if r.fresh else 0)
        for name, value in observed.items():
            if name in OBSERVED_SIGNALS:
                c(target, self.observed, name).set(value)

    def observe_split(
        self, target: str, *, desired: Mapping[str, int], ready: Mapping[str, int]
    ) -> None:
        """Desired and ready replicas per capacity type of a target with a placement plan."""
        for capacity in CAPACITY_TYPES:
            self._child(target, self.desired, capacity).set(desired.get(capacity, 0))
            self._child(target, self.ready, capacity).set(ready.get(capacity, 0))

    def forget_target(self, target: str) -> None:
        """Remove every series of a target that is no longer opted in."""
        for metric, labels in self._by_target.pop(target, {}):
            metric.remove(*labels)

    def scaled(self, target: str, *, direction: str) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self._child(target, self.scaling_events, direction).inc()

    def write_failed(self, target: str) -> None:
        self._child(target, self.write_failures).inc()

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def account_cost(
        self, target: str, *, before: CostMeter, after: CostMeter, rate: CostRate
    ) -> None:
        """Add what ``after`` has over ``before`` (per target and in the totals); set the rates."""
        for capacity in CapacityType:
            used = after.gpu_seconds[capacity] - before.gpu_seconds[capacity]
            if used > 0:
                self._child(target, self.target_gpu_seconds, capacity.value).inc(used)
                self.gpu_seconds.labels(capacity.value).inc(used)
            spent = after.dollars[capacity] - before.dollars[capacity]
            if spent > 0:
                self._child(target, self.target_dollars, capacity.value).inc(spent)
                self.gpu_cost.labels(capacity.value).inc(spent)
            self._child(target, self.cost_rate, capacity.value).set(rate.per_hour[capacity])
        extra = after.on_demand_equivalent_dollars - before.on_demand_equivalent_dollars
        if extra > 0:
            self._child(target, self.target_equivalent_dollars).inc(extra)
        self._child(target, self.saving_rate).set(rate.saving_per_hour)

    def add_gpu_seconds_by_state(self, seconds: GpuSeconds) -> None:
        for state, value in (
            (GpuUse.SERVING, seconds.serving),
            (GpuUse.STARTING, seconds.starting),
            (GpuUse.SLEEPING_ONLY, seconds.sleeping_only),
        ):
            if value > 0:
                self.gpu_seconds_by_state.labels(state.value).inc(value)

    def woke(self, target: str, seconds: float, ok: bool) -> None:
        self._child(target, self.warm_wakes, "ok" if ok else "failed").inc()
        if ok:
            self._child(target, self.warm_wake_duration).observe(seconds)

    def slept(self, target: str) -> None:
        self._child(target, self.warm_sleeps).inc()

    def set_sleeping(self, target: str, count: int) -> None:
        self._child(target, self.warm_sleeping).set(count)

    def report(self, result: str) -> None:
        self.reports.labels(result).inc()

    def activation(self, result: str) -> None:
        self.activations.labels(result).inc()
