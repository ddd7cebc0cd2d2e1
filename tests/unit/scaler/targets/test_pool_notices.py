"""Warnings on InferencePools (scaler.targets.pool_notices), with a fake cluster view.

Covers: a pool whose selector matches no Deployment, several, or one
another opted-in pool selects gets its Warning, naming the selector or the
Deployments and pools; a bad value on the pool gets an InvalidAnnotation
naming the key and what is allowed, and an unknown key of ours an
UnknownAnnotation; a picker TTL under the model's cold start gets a
WaitingRoomTooShort naming both (the cold start measured from the newest
Ready pod, remembered after the pods go; the router's default TTL said so),
none when the TTL covers it or is 0; each notice is raised once, again
after it was fixed and came back, not on a follower (and then raised by
it once it leads); a pool not listed yet says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from scaler.kube.types import PodInfo, PoolInfo, PoolState, TargetSnapshot
from scaler.policy.protocol import PurePolicy
from scaler.targets.book import TargetBook
from scaler.targets.pool_notices import PoolNotices, cold_start_of
from tests.unit.scaler.fakes import FakeCluster, deployment

A = "autoscaling.tidal.dev/"
KEY = "default/llama"


def pool(annotations: Mapping[str, str] | None = None, name: str = "llama-pool") -> PoolInfo:
    return PoolInfo(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        labels={},
        annotations=dict(annotations or {}),
        selector={"app": "llama"},
        target_ports=(8000,),
        picker=("llama-epp", 9002),
        opted_in=True,
    )


def pod(name: str, *, created: float, ready: float | None) -> PodInfo:
    return PodInfo(
        namespace="default",
        name=name,
        labels={"app": "llama"},
        ip="10.0.0.1",
        ready=ready is not None,
        terminating=False,
        created_at=created,
        ready_at=ready,
    )


class Notes:
    def __init__(self) -> None:
        self.leader = True
        self.said: list[tuple[str, str, str]] = []

    async def __call__(self, subject: PoolInfo, reason: str, message: str) -> bool:
        if not self.leader:
            return False
        self.said.append((subject.key, reason, message))
        return True

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.said]


async def tend(notices: PoolNotices, cluster: FakeCluster) -> None:
    book = TargetBook(cluster, PurePolicy())
    await notices.tend(book.pools(), book.entries(), book.snapshots())


async def test_selecting_none_several_or_a_shared_deployment_is_said() -> None:
    cluster = FakeCluster()
    notes = Notes()
    notices = PoolNotices(notes)
    cluster.pool_states = {
        "default/none": PoolState(pool(name="none")),
        "default/two": PoolState(pool(name="two"), selected=("default/a", "default/b")),
        "default/shared": PoolState(
            pool(name="shared"), selected=("default/a",), shared_with=("default/two",)
        ),
        "default/unlisted": PoolState(pool(name="unlisted"), listed=False),
    }
    await tend(notices, cluster)
    by_pool = {k: (r, m) for k, r, m in notes.said}
    assert set(by_pool) == {"default/none", "default/two", "default/shared"}
    reason, message = by_pool["default/none"]
    assert reason == "NoDeploymentSelected" and "selector app=llama" in message
    reason, message = by_pool["default/two"]
    assert reason == "SeveralDeploymentsSelected" and "default/a, default/b" in message
    reason, message = by_pool["default/shared"]
    assert reason == "SeveralDeploymentsSelected" and "default/two" in message
    await tend(notices, cluster)
    assert len(notes.said) == 3  # once each


async def test_bad_and_unknown_keys_on_the_pool_are_said_on_it() -> None:
    cluster = FakeCluster()
    cluster.put(deployment())
    bad = pool({A + "max-scale": "0", A + "max-scal": "3"})
    cluster.pool_states = {bad.key: PoolState(bad, selected=(KEY,))}
    notes = Notes()
    await tend(PoolNotices(notes), cluster)
    said = {r: m for _, r, m in notes.said}
    assert set(said) == {"InvalidAnnotation", "UnknownAnnotation"}
    bad = f'{A}max-scale: "0" is not allowed; allowed: an integer from 1 to 1000'
    assert bad in said["InvalidAnnotation"]
    assert f"did you mean {A}max-scale?" in said["UnknownAnnotation"]


async def test_a_waiting_room_shorter_than_the_cold_start_is_said_once_per_ttl() -> None:
    cluster = FakeCluster()
    cluster.snapshots[KEY] = TargetSnapshot(
        deployment(replicas=2),
        pods=(pod("old", created=100.0, ready=400.0), pod("new", created=1000.0, ready=1095.0)),
    )
    p = pool()
    cluster.pool_states = {p.key: PoolState(p, selected=(KEY,))}
    notes = Notes()
    notices = PoolNotices(notes)
    await tend(notices, cluster)
    ((_, reason, message),) = notes.said
    assert reason == "WaitingRoomTooShort"
    assert "noEndpointRequestTTL, 1m (the router's default" in message
    assert "cold start of default/llama, 95s (its newest replica's" in message
    # At zero the measure is kept; the same TTL says nothing new.
    cluster.snapshots[KEY] = TargetSnapshot(deployment(replicas=0))
    await tend(notices, cluster)
    assert len(notes.said) == 1
    # A TTL that covers it: fixed. Too short again with another TTL: said again.
    covered = pool({A + "epp-no-endpoint-request-ttl": "10m"})
    cluster.pool_states = {p.key: PoolState(covered, selected=(KEY,))}
    await tend(notices, cluster)
    unlimited = pool({A + "epp-no-endpoint-request-ttl": "0s"})
    cluster.pool_states = {p.key: PoolState(unlimited, selected=(KEY,))}
    await tend(notices, cluster)
    assert len(notes.said) == 1
    short = pool({A + "epp-no-endpoint-request-ttl": "30s"})
    cluster.pool_states = {p.key: PoolState(short, selected=(KEY,))}
    await tend(notices, cluster)
    assert len(notes.said) == 2
    assert f"30s (annotation {A}epp-no-endpoint-request-ttl)" in notes.said[1][2]


async def test_a_follower_raises_nothing_and_raises_it_once_it_leads() -> None:
    cluster = FakeCluster()
    cluster.pool_states = {"default/none": PoolState(pool(name="none"))}
    notes = Notes()
    notes.leader = False
    notices = PoolNotices(notes)
    await tend(notices, cluster)
    assert notes.said == []
    notes.leader = True
    await tend(notices, cluster)
    await tend(notices, cluster)
    assert notes.reasons() == ["NoDeploymentSelected"]


def test_the_cold_start_is_the_newest_ready_pods() -> None:
    snap = TargetSnapshot(
        deployment(replicas=2),
        pods=(
            pod("a", created=10.0, ready=40.0),
            pod("b", created=50.0, ready=None),  # starting: not counted
        ),
    )
    assert cold_start_of(snap) == 30.0
    assert cold_start_of(replace(snap, pods=())) is None
