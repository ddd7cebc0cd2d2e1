"""Placement's Prometheus metrics: GPU-seconds, dollars and savings by target and capacity type.

Beside :mod:`scaler.metrics` on the same registry (names ``tidal_scaler_``,
units in the names, ``_total`` for counters, label values bounded by the
opted-in targets and the two capacity types):

- ``tidal_scaler_target_gpu_seconds_total{target, capacity_type}``: GPUs of
  every replica bound to a node, times seconds;
- ``tidal_scaler_cost_dollars_total{target, capacity_type}``: the same,
  priced per GPU-hour by capacity type and GPU model;
- ``tidal_scaler_on_demand_equivalent_dollars_total{target}``: what those
  GPU-seconds would have cost on demand (saved = this - the sum above);
- ``tidal_scaler_cost_dollars_per_hour{target, capacity_type}`` and
  ``tidal_scaler_savings_dollars_per_hour{target}``: the rate now.

The on-demand replicas standing in for spot are
``tidal_scaler_spot_fallback_replicas{target}`` of :mod:`scaler.metrics`,
which the controller feeds from the plan.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from scaler.policy.availability import CapacityType
from scaler.policy.cost import CostMeter, CostRate

__all__ = ["PlacementMetrics"]


class PlacementMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        p = "tidal_scaler_"
        self.gpu_seconds = Counter(
            p + "target_gpu_seconds",
            "GPU-seconds of replicas bound to nodes, by target and capacity type",
            ["target", "capacity_type"],
            registry=registry,
        )
        self.dollars = Counter(
            p + "cost_dollars",
            "Dollars those GPU-seconds cost at the configured prices",
            ["target", "capacity_type"],
            registry=registry,
        )
        self.equivalent = Counter(
            p + "on_demand_equivalent_dollars",
            "Dollars the same GPU-seconds would cost all on demand",
            ["target"],
            registry=registry,
        )
        self.rate = Gauge(
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
        self._series: dict[str, list[tuple[Any, tuple[str, ...]]]] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        series = self._series.setdefault(labels[0], [])
        if (metric, labels) not in series:
            series.append((metric, labels))
        return metric.labels(*labels)

    def account(self, target: str, *, before: CostMeter, after: CostMeter, rate: CostRate) -> None:
        """Add what ``after`` has over ``before`` and set the rates."""
        for capacity in CapacityType:
            added = after.gpu_seconds[capacity] - before.gpu_seconds[capacity]
            if added > 0:
                self._child(self.gpu_seconds, target, capacity.value).inc(added)
            spent = after.dollars[capacity] - before.dollars[capacity]
            if spent > 0:
                self._child(self.dollars, target, capacity.value).inc(spent)
            self._child(self.rate, target, capacity.value).set(rate.per_hour[capacity])
        extra = after.on_demand_equivalent_dollars - before.on_demand_equivalent_dollars
        if extra > 0:
            self._child(self.equivalent, target).inc(extra)
        self._child(self.saving_rate, target).set(rate.saving_per_hour)

    def forget_target(self, target: str) -> None:
        for metric, labels in self._series.pop(target, []):
            metric.remove(*labels)
