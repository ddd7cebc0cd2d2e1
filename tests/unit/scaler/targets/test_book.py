"""The target book, with a fake cluster view.

Covers:
- a target's config is parsed once per change of its annotations (the status
  annotation changing does not re-parse, but is read); a bad annotation is
  kept as the problem; a GPU target without GPU metrics is a problem;
- removed Deployments are forgotten; nothing is listed before the cluster
  view has synced;
- the pods to poll: ready pods with an IP and the config's metrics port;
  engine ``generic`` for an invalid config.
(GPU-seconds: tests/unit/scaler/test_gpu_ledger.py.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from scaler.policy.api import ScalingConfig
from scaler.policy.protocol import PurePolicy
from scaler.targets.book import TargetBook
from tests.unit.scaler.fakes import FakeCluster, deployment, pod

KEY = "default/llama"


class CountingPolicy(PurePolicy):
    def __init__(self) -> None:
        self.parsed = 0

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        self.parsed += 1
        return super().parse(annotations)


def test_config_parsed_once_per_change() -> None:
    cluster = FakeCluster()
    policy = CountingPolicy()
    book = TargetBook(cluster, policy)
    cluster.put(deployment(annotations={"autoscaling.tidal.dev/max-scale": "4"}))
    first = book.entries()[KEY]
    assert first.config is not None
    assert first.config.max_scale == 4
    book.entries()
    assert policy.parsed == 1
    status = {"desired": 1, "reason": "ScaledUp"}
    cluster.put(
        deployment(
            annotations={
                "autoscaling.tidal.dev/max-scale": "4",
                "autoscaling.tidal.dev/status": json.dumps(status),
            }
        )
    )
    entry = book.entries()[KEY]
    assert policy.parsed == 1  # our own status annotation does not re-parse
    assert entry.seen_status == status
    assert entry.revision == first.revision
    cluster.put(deployment(annotations={"autoscaling.tidal.dev/max-scale": "0"}))
    bad = book.entries()[KEY]
    assert bad.config is None
    assert bad.problem is not None
    assert "autoscaling.tidal.dev/max-scale" in bad.problem
    assert bad.revision == first.revision + 1
    assert book.configs() == {KEY: None}


def test_gpu_target_needs_gpu_metrics() -> None:
    cluster = FakeCluster()
    cluster.put(deployment(annotations={"autoscaling.tidal.dev/target-gpu-utilization": "70"}))
    without = TargetBook(cluster, PurePolicy()).entries()[KEY]
    assert without.problem is not None
    assert "allowed" in without.problem
    with_gpu = TargetBook(cluster, PurePolicy(), gpu_metrics=True).entries()[KEY]
    assert with_gpu.problem is None


def test_removed_and_unsynced() -> None:
    cluster = FakeCluster(synced=False)
    cluster.put(deployment())
    book = TargetBook(cluster, PurePolicy())
    assert book.entries() == {}
    assert book.poll_targets() == []
    cluster.synced = True
    assert set(book.entries()) == {KEY}
    del cluster.snapshots[KEY]
    assert book.entries() == {}
    assert book.get(KEY) is None


def test_poll_targets_lists_ready_pods_on_the_metrics_port() -> None:
    cluster = FakeCluster()
    not_ready = replace(pod("p3", ip="10.0.0.3"), ready=False)
    cluster.put(
        deployment(annotations={"autoscaling.tidal.dev/metrics-port": "9400"}),
        (pod("p1", ip="10.0.0.1"), pod("p2", ip="10.0.0.2"), not_ready),
    )
    [listed] = TargetBook(cluster, PurePolicy()).poll_targets()
    assert (listed.key, listed.engine) == (KEY, "vllm")
    assert [(p.name, p.ip, p.metrics_port) for p in listed.pods] == [
        ("p1", "10.0.0.1", 9400),
        ("p2", "10.0.0.2", 9400),
    ]
    cluster.put(deployment(annotations={"autoscaling.tidal.dev/max-scale": "x"}))
    [invalid] = TargetBook(cluster, PurePolicy()).poll_targets()
    assert invalid.engine == "generic"
