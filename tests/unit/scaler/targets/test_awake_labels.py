"""The awake label of a pool target's pods follows the warm tier (scaler.targets.awake_labels).

Covers: for a pool whose selector requires the awake label, a pod the warm
tier has not awake gets "false" and every other "true", only where the
label differs, terminating pods left alone; through the actuator, on the
leader only; a pool whose selector does not name the label, a Deployment
whose own selector names it (its pods would be orphaned), and a Deployment
behind no pool, get no label written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from prometheus_client import CollectorRegistry

from scaler.actuator import Actuator
from scaler.kube.types import PodInfo, PoolInfo, PoolState, TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.pool_annotations import AWAKE_LABEL
from scaler.policy.protocol import PurePolicy
from scaler.targets.awake_labels import AwakeLabels, awake_changes
from scaler.targets.book import TargetBook
from tests.unit.scaler.fakes import FakeCluster, FakeEvents, FakeLeader, FakeScaleTarget, deployment

KEY = "default/llama"


def pod(name: str, awake: str | None, *, terminating: bool = False) -> PodInfo:
    labels = {"app": "llama", **({AWAKE_LABEL: awake} if awake is not None else {})}
    return PodInfo(
        namespace="default", name=name, labels=labels, ip="10.0.0.1", ready=True,
        terminating=terminating,
    )  # fmt: skip


def pool(selector: Mapping[str, str]) -> PoolInfo:
    return PoolInfo(
        namespace="default", name="llama-pool", uid="u", labels={}, annotations={},
        selector=dict(selector), target_ports=(8000,), picker=("epp", 9002), opted_in=True,
    )  # fmt: skip


@dataclass
class Labels:
    written: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    async def set_pod_labels(self, namespace: str, key: str, values: Mapping[str, str]) -> None:
        self.written.append((namespace, key, dict(values)))


def test_changes_follow_the_warm_tier_where_they_differ() -> None:
    pods = (
        pod("a", "true"),  # awake, labelled so
        pod("b", "true"),  # asleep now
        pod("c", None),  # new, not labelled yet: awake
        pod("d", "false"),  # woke
        pod("e", "true", terminating=True),
    )
    not_awake = {"default/b", "default/e"}
    assert awake_changes(pods, not_awake) == {"b": "false", "c": "true", "d": "true"}


async def test_written_through_the_actuator_on_the_leader_for_pools_that_ask() -> None:
    cluster = FakeCluster()
    cluster.snapshots[KEY] = TargetSnapshot(
        deployment(replicas=2), pods=(pod("llama-0", "true"), pod("llama-1", "true"))
    )
    awake_pool = pool({"app": "llama", AWAKE_LABEL: "true"})
    cluster.pool_states = {awake_pool.key: PoolState(awake_pool, selected=(KEY,))}
    book = TargetBook(cluster, PurePolicy())
    leader, labels = FakeLeader(), Labels()
    actuator = Actuator(
        scale_target=FakeScaleTarget(cluster), events=FakeEvents(), leader=leader,
        metrics=Metrics(CollectorRegistry()), pod_labels=labels,
    )  # fmt: skip
    awake = AwakeLabels(actuator)
    sleeping = {"default/llama-1"}
    await awake.sync(book.entries(), book.snapshots(), sleeping)
    assert labels.written == [("default", AWAKE_LABEL, {"llama-1": "false"})]
    leader.is_leader = False
    await awake.sync(book.entries(), book.snapshots(), set())
    assert len(labels.written) == 1  # a follower writes nothing
    leader.is_leader = True
    own = deployment(replicas=2)
    own = replace(
        own, selector=replace(own.selector, match_labels={"app": "llama", AWAKE_LABEL: "true"})
    )
    cluster.snapshots[KEY] = replace(cluster.snapshots[KEY], deployment=own)
    await awake.sync(book.entries(), book.snapshots(), sleeping)
    assert len(labels.written) == 1  # the Deployment's own selector names it
    cluster.snapshots[KEY] = replace(cluster.snapshots[KEY], deployment=deployment(replicas=2))
    plain = replace(awake_pool, selector={"app": "llama"})
    cluster.pool_states = {plain.key: PoolState(plain, selected=(KEY,))}
    await awake.sync(book.entries(), book.snapshots(), sleeping)
    cluster.pool_states = {}
    await awake.sync(book.entries(), book.snapshots(), sleeping)
    assert len(labels.written) == 1  # no pool asks for the label: none written
