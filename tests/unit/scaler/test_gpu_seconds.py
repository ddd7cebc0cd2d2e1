"""GPU-seconds by capacity type with a placer (scaler.gpu_seconds).

Covers: each ready pod counts under its node's capacity type with its own
GPU request (a pod not ready counts nothing); the first tick adds nothing;
sleeping replicas are split out by state; the placer's cost meter advances
on the wall clock at the same ticks. (Without a placer:
tests/unit/scaler/test_targets.py.)
"""

from __future__ import annotations

import copy

from prometheus_client import CollectorRegistry

from scaler.gpu_seconds import GpuSeconds
from scaler.kube.cluster import deployment_from_raw
from scaler.kube.types import TargetSnapshot
from scaler.metrics import Metrics
from scaler.placing import Placer
from scaler.policy.cost import DEFAULT_PRICES
from tests.unit.scaler.test_placing import KARPENTER, RAW, T0, View, pod


def test_gpu_seconds_by_capacity_type_and_state_with_a_placer() -> None:
    metrics = Metrics(CollectorRegistry())
    placer = Placer(view=View(), preset=KARPENTER, prices=DEFAULT_PRICES)
    wall = [T0]
    gpu = GpuSeconds(metrics, placer=placer, wall_clock=lambda: wall[0])
    pods = (
        pod("s0", "spot-1"),
        pod("o0", "od-1", gpus=2),
        pod("o1", "od-1", ready=False),
    )
    raw = copy.deepcopy(RAW)
    raw["status"] = {"readyReplicas": 2}
    snaps = {"ml/llama": TargetSnapshot(deployment_from_raw(raw), pods)}
    assert gpu.tick(10.0, snaps, asleep=lambda _: 1) == 0.0  # no interval yet
    wall[0] = T0 + 10
    assert gpu.tick(20.0, snaps, asleep=lambda _: 1) == 3 * 10.0

    def sample(name: str, labels: dict[str, str]) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    by_capacity = "tidal_scaler_gpu_seconds_total"
    assert sample(by_capacity, {"capacity_type": "spot"}) == 10.0
    assert sample(by_capacity, {"capacity_type": "on-demand"}) == 20.0
    by_state = "tidal_scaler_gpu_seconds_by_state_total"
    # One ready replica asleep, at the Deployment's GPUs per replica (1).
    assert sample(by_state, {"state": "asleep"}) == 10.0
    assert sample(by_state, {"state": "awake"}) == 20.0
    cost = placer.cost("ml/llama")
    assert cost is not None
    assert cost.meter.gpu_seconds["spot"] == 10.0
