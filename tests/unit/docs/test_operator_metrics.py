"""The metrics that deploy/monitoring's alerts and dashboard need, beyond docs/metrics.md's list.

Covers (cost by capacity type at the configured prices:
tests/unit/scaler/test_gpu_ledger.py):
- the scaler exports on-demand replicas standing in for spot per target,
  and forgets them with the target;
- the activator exports each target's buffer capacity and cold-start
  timeout beside what it holds;
- merging workers' expositions sums the capacity and keeps the timeout.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from activator.holding.target import Target
from activator.metrics import Metrics as ActivatorMetrics
from activator.metrics import merge_expositions
from activator.targets import TargetSpec
from scaler.metrics import Metrics as ScalerMetrics


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_spot_fallback_per_target_and_forgotten_with_it() -> None:
    registry = CollectorRegistry()
    metrics = ScalerMetrics(registry)
    metrics.observe_decision(
        "ns/a", desired=3, ready=2, panic=False, readings={}, observed={}, spot_fallback=2
    )
    metrics.observe_decision("ns/b", desired=1, ready=1, panic=False, readings={}, observed={})
    assert _value(registry, "tidal_scaler_spot_fallback_replicas", target="ns/a") == 2
    assert _value(registry, "tidal_scaler_spot_fallback_replicas", target="ns/b") == 0
    metrics.forget_target("ns/a")
    assert _value(registry, "tidal_scaler_spot_fallback_replicas", target="ns/a") is None


def _target(max_buffered: int, timeout_s: float) -> Target:
    return Target(
        TargetSpec(name="ns/t", max_buffered=max_buffered, cold_start_timeout_s=timeout_s),
        clock=lambda: 0.0,
    )


def test_activator_exports_each_targets_limits() -> None:
    registry = CollectorRegistry()
    ActivatorMetrics(registry, targets=lambda: {"ns/t": _target(50, 120.0)})
    assert _value(registry, "tidal_activator_buffer_capacity", target="ns/t") == 50
    assert _value(registry, "tidal_activator_cold_start_timeout_seconds", target="ns/t") == 120
    assert _value(registry, "tidal_activator_requests_buffered", target="ns/t") == 0


def test_workers_merge_sums_capacity_and_keeps_the_timeout() -> None:
    texts = []
    for capacity in (30, 20):
        registry = CollectorRegistry()
        ActivatorMetrics(registry, targets=lambda c=capacity: {"ns/t": _target(c, 600.0)})  # type: ignore[misc]
        texts.append(generate_latest(registry).decode())
    merged = merge_expositions(texts)
    assert 'tidal_activator_buffer_capacity{target="ns/t"} 50.0' in merged
    assert 'tidal_activator_cold_start_timeout_seconds{target="ns/t"} 600.0' in merged


def test_counters_of_a_target_start_at_zero() -> None:
    registry = CollectorRegistry()
    metrics = ScalerMetrics(registry)
    metrics.observe_decision("ns/a", desired=0, ready=0, panic=False, readings={}, observed={})
    assert _value(registry, "tidal_scaler_write_failures_total", target="ns/a") == 0
    for direction in ("up", "down"):
        assert (
            _value(
                registry, "tidal_scaler_scaling_events_total", target="ns/a", direction=direction
            )
            == 0
        )
    metrics.write_failed("ns/a")
    metrics.observe_decision("ns/a", desired=0, ready=0, panic=False, readings={}, observed={})
    assert _value(registry, "tidal_scaler_write_failures_total", target="ns/a") == 1
    metrics.forget_target("ns/a")
    assert _value(registry, "tidal_scaler_write_failures_total", target="ns/a") is None
