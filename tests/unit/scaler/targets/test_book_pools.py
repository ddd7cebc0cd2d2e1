"""The target book for Deployments an InferencePool scales, with a fake cluster view.

Covers: a bound pool's annotations fill in under the Deployment's (the
Deployment wins); a bad value from the pool leaves the target without a
config, its problem names the pool, and the pool keeps only its own
problems (an unknown key likewise); a bad picker key is such a problem
too; the pods to poll carry the pool's picker (its Service URL) and, when
no metrics-port is said, the pool's target port; a change of the pool's
status alone re-parses nothing and starts no new revision; a pool that
stops selecting the Deployment takes its annotations away.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from scaler.kube.types import PoolInfo, PoolState, TargetSnapshot
from scaler.policy.api import ScalingConfig
from scaler.policy.protocol import PurePolicy
from scaler.signals.base import PickerEndpoint
from scaler.targets.book import TargetBook
from tests.unit.scaler.fakes import FakeCluster, deployment, pod

A = "autoscaling.tidal.dev/"
KEY = "default/llama"


class CountingPolicy(PurePolicy):
    def __init__(self) -> None:
        self.parsed = 0

    def parse(self, annotations: Mapping[str, str]) -> ScalingConfig:
        self.parsed += 1
        return super().parse(annotations)


def pool(annotations: Mapping[str, str], *, rv: str = "1") -> PoolInfo:
    return PoolInfo(
        namespace="default",
        name="llama-pool",
        uid="uid-pool",
        labels={A + "enabled": "true"},
        annotations=dict(annotations),
        selector={"app": "llama"},
        target_ports=(8000,),
        picker=("llama-epp", 9002),
        opted_in=True,
        resource_version=rv,
    )


def bound(cluster: FakeCluster, p: PoolInfo) -> None:
    cluster.pool_states = {p.key: PoolState(p, selected=(KEY,))}


def test_the_pool_fills_in_under_the_deployment() -> None:
    cluster = FakeCluster()
    book = TargetBook(cluster, PurePolicy())
    cluster.put(deployment(annotations={A + "max-scale": "4"}))
    bound(cluster, pool({A + "max-scale": "8", A + "min-scale": "1"}))
    entry = book.entries()[KEY]
    assert entry.config is not None
    assert (entry.config.max_scale, entry.config.min_scale) == (4, 1)
    assert entry.pool is not None and entry.pool.key == "default/llama-pool"
    assert entry.pool.picker.metrics_url == "http://llama-epp.default.svc:9090/metrics"


def test_a_bad_value_from_the_pool_is_reported_on_both_and_scales_nothing() -> None:
    cluster = FakeCluster()
    book = TargetBook(cluster, PurePolicy())
    cluster.put(deployment(annotations={A + "window": "1s", A + "max-scal": "3"}))
    bound(
        cluster,
        pool({A + "max-scale": "0", A + "epp-no-endpoint-request-ttl": "soon", A + "colour": "x"}),
    )
    entry = book.entries()[KEY]
    assert entry.config is None and entry.pool is not None
    assert entry.problem is not None
    assert f'{A}max-scale: "0" is not allowed' in entry.problem
    assert "(on InferencePool default/llama-pool)" in entry.problem
    assert f"{A}window" in entry.problem  # the Deployment's own, not tagged
    pool_problem = entry.pool.problem
    assert pool_problem is not None
    assert f"{A}max-scale" in pool_problem and f"{A}epp-no-endpoint-request-ttl" in pool_problem
    assert f"{A}window" not in pool_problem
    assert entry.pool.unknown_keys is not None and f"{A}colour" in entry.pool.unknown_keys
    assert entry.unknown_keys is not None and f"{A}max-scal" in entry.unknown_keys
    assert f"{A}colour" not in entry.unknown_keys


def test_pods_to_poll_carry_the_picker_and_the_pools_port() -> None:
    cluster = FakeCluster()
    book = TargetBook(cluster, PurePolicy())
    cluster.snapshots[KEY] = TargetSnapshot(deployment(replicas=1), pods=(pod("llama-0"),))
    bound(cluster, pool({A + "epp-metrics-url": "http://127.0.0.9:9090/metrics"}))
    (listed,) = book.poll_targets()
    assert listed.picker == PickerEndpoint(
        pool="llama-pool", metrics_url="http://127.0.0.9:9090/metrics"
    )
    assert [p.metrics_port for p in listed.pods] == [8000]
    bound(cluster, replace(pool({}), target_ports=(8100,)))
    (listed,) = book.poll_targets()
    assert [p.metrics_port for p in listed.pods] == [8100]
    cluster.put(deployment(replicas=1, annotations={A + "metrics-port": "9100"}), (pod("llama-0"),))
    (listed,) = book.poll_targets()
    assert [p.metrics_port for p in listed.pods] == [9100]


def test_the_pools_status_alone_changes_nothing_and_unbinding_takes_its_keys() -> None:
    cluster = FakeCluster()
    policy = CountingPolicy()
    book = TargetBook(cluster, policy)
    cluster.put(deployment())
    bound(cluster, pool({A + "max-scale": "8"}))
    first = book.entries()[KEY]
    bound(cluster, pool({A + "max-scale": "8"}, rv="2"))  # a status write by its controller
    again = book.entries()[KEY]
    assert (policy.parsed, again.revision) == (1, first.revision)
    assert again.pool is not None and again.pool.info is not None
    assert again.pool.info.resource_version == "2"
    cluster.pool_states = {}
    alone = book.entries()[KEY]
    assert alone.pool is None and alone.config is not None and alone.config.max_scale == 10
    assert alone.revision == first.revision + 1


class CopyOnWrite(FakeCluster):
    """A view that hands out one mapping until something changes, as the real one does."""

    def __init__(self) -> None:
        super().__init__()
        self.view: dict[str, TargetSnapshot] = {}

    def targets(self) -> dict[str, TargetSnapshot]:
        return self.view


def test_the_pods_to_poll_are_listed_once_per_change() -> None:
    cluster = CopyOnWrite()
    book = TargetBook(cluster, PurePolicy())
    cluster.view = {KEY: TargetSnapshot(deployment(replicas=1), pods=(pod("llama-0"),))}
    first = book.poll_targets()
    assert book.poll_targets() is first  # nothing changed: not listed again
    cluster.view = {**cluster.view, KEY: TargetSnapshot(deployment(replicas=1), pods=())}
    second = book.poll_targets()
    assert second is not first and list(second[0].pods) == []
    bound(cluster, pool({A + "epp-metrics-url": "http://127.0.0.9:9090/metrics"}))
    third = book.poll_targets()  # the config changed (a pool now scales it)
    assert third is not second and third[0].picker is not None
