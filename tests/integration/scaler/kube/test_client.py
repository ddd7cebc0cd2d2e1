"""scaler.kube's kubernetes_asyncio code against a small fake API over loopback HTTP.

Not yet against a real or emulated API server (the sandbox's is not ready);
see fake_kube_api.py for what this fake does and does not do.

Covers:
- /scale: merge patch carrying the caller's resourceVersion as a
  precondition; a 409 conflict is raised, never retried with the old value
  (the caller re-reads and decides again); 503 and 404 become ApiUnavailable
  and NotFound;
- pod-deletion-cost as merge patches (a vanished pod is skipped); the status
  annotation as a JSON patch that tests ``spec.replicas`` (a conflict when the
  scale moved on), adding the annotation map when there is none;
- core/v1 Events naming the Deployment;
- the Lease: first candidate creates it, a second cannot take it while it is
  renewed, takes it once it has looked unchanged for the lease duration; a
  leader that cannot renew stops counting itself leader after the renew
  deadline; releasing on shutdown lets a successor in at once;
- watches: list then watch; events update the snapshot; a cut stream resumes
  from the last resourceVersion without re-listing; 410 Gone re-lists; pods
  are matched to Deployments by selector and watched per namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kubernetes_asyncio import client

from groundwork.kube.errors import ApiUnavailable, Conflict, NotFound
from scaler.kube.cluster import KubeCluster
from scaler.kube.leader import LeaseElector
from scaler.kube.types import DeploymentInfo, LabelSelector
from scaler.kube.writer import KubeEvents, KubeScaleTarget
from tests.integration.scaler.fake_kube_api import FakeKubeApi, start
from tests.integration.scaler.support import eventually


@pytest_asyncio.fixture
async def api() -> AsyncIterator[tuple[FakeKubeApi, client.ApiClient]]:
    fake = FakeKubeApi()
    gen = start(fake)
    url = await gen.__anext__()
    api_client = client.ApiClient(client.Configuration(host=url))
    try:
        yield fake, api_client
    finally:
        await api_client.close()
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()


async def test_scale_with_precondition_and_no_blind_retry(
    api: tuple[FakeKubeApi, client.ApiClient],
) -> None:
    fake, api_client = api
    fake.add_deployment("ml", "llama", replicas=1)
    target = KubeScaleTarget(api_client)
    read = await target.read_scale("ml", "llama")
    assert read.replicas == 1
    rv = await target.scale("ml", "llama", 3, resource_version=read.resource_version)
    assert fake.deployments["ml/llama"]["spec"]["replicas"] == 3
    assert rv != read.resource_version  # the version the scale answered
    path, content_type, body = fake.patches[-1]
    assert path == "/apis/apps/v1/namespaces/ml/deployments/llama/scale"
    assert content_type == "application/merge-patch+json"
    assert body == {"metadata": {"resourceVersion": read.resource_version}, "spec": {"replicas": 3}}
    # Someone else wrote since our read: a 409, and the old value is not re-applied.
    fake.conflicts_to_inject = 1
    with pytest.raises(Conflict):
        await target.scale("ml", "llama", 5, resource_version=rv)
    assert fake.deployments["ml/llama"]["spec"]["replicas"] == 3
    assert target.conflicts == 1
    assert len(fake.patches) == 2
    with pytest.raises(NotFound):
        await target.scale("ml", "missing", 1, resource_version="1")
    fake.unavailable = True
    with pytest.raises(ApiUnavailable) as info:
        await target.scale("ml", "llama", 4, resource_version=rv)
    assert info.value.__cause__ is not None


async def test_annotations_and_events(api: tuple[FakeKubeApi, client.ApiClient]) -> None:
    fake, api_client = api
    fake.add_deployment("ml", "llama", replicas=2)
    fake.add_pod("ml", "llama-a", app="llama", ip="10.0.0.1")
    target = KubeScaleTarget(api_client)
    await target.set_deletion_costs("ml", {"llama-a": -3, "llama-gone": 5})
    assert fake.pods["ml/llama-a"]["metadata"]["annotations"] == {
        "controller.kubernetes.io/pod-deletion-cost": "-3"
    }
    # No annotations yet: the map is added, onto the version just read.
    await target.write_status("ml", "llama", '{"desired":2}', replicas=2, has_annotations=False)
    assert fake.deployments["ml/llama"]["metadata"]["annotations"] == {
        "autoscaling.tidal.dev/status": '{"desired":2}'
    }
    # One key added beside the others, after testing the scale it records.
    await target.write_status("ml", "llama", '{"desired":2,"mode":"panic"}', replicas=2)
    _, content_type, ops = fake.patches[-1]
    assert content_type == "application/json-patch+json"
    assert ops == [
        {"op": "test", "path": "/spec/replicas", "value": 2},
        {
            "op": "add",
            "path": "/metadata/annotations/autoscaling.tidal.dev~1status",
            "value": '{"desired":2,"mode":"panic"}',
        },
    ]
    # The scale moved on since: a conflict, and nothing written.
    with pytest.raises(Conflict):
        await target.write_status("ml", "llama", '{"desired":5}', replicas=5)
    assert fake.deployments["ml/llama"]["metadata"]["annotations"] == {
        "autoscaling.tidal.dev/status": '{"desired":2,"mode":"panic"}'
    }
    info = DeploymentInfo(
        namespace="ml",
        name="llama",
        uid="uid-llama",
        annotations={},
        spec_replicas=2,
        ready_replicas=2,
        selector=LabelSelector({"app": "llama"}),
    )
    await KubeEvents(api_client, instance="scaler-0").emit(
        info, reason="ScaledUp", message="1 -> 2"
    )
    [event] = fake.events
    assert event["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "llama",
        "namespace": "ml",
        "uid": "uid-llama",
    }
    assert (event["reason"], event["type"], event["source"]["component"]) == (
        "ScaledUp",
        "Normal",
        "tidal-scaler",
    )


async def test_lease_election(api: tuple[FakeKubeApi, client.ApiClient]) -> None:
    fake, api_client = api
    clock = [0.0]
    kw = {
        "namespace": "tidal",
        "lease_duration_s": 15.0,
        "renew_deadline_s": 10.0,
        "retry_period_s": 2.0,
        "clock": lambda: clock[0],
    }
    elected: list[str] = []
    a = LeaseElector(
        api_client,
        identity="a",
        on_elected=lambda: elected.append("a"),
        **kw,  # type: ignore[arg-type]
    )
    b = LeaseElector(
        api_client,
        identity="b",
        on_elected=lambda: elected.append("b"),
        **kw,  # type: ignore[arg-type]
    )
    assert await a.try_acquire_or_renew()
    assert a.is_leader
    assert fake.leases["tidal/tidal-scaler"]["spec"]["holderIdentity"] == "a"
    assert not await b.try_acquire_or_renew()
    assert not b.is_leader
    # "a" keeps renewing: "b" never gets it.
    for _ in range(10):
        clock[0] += 2.0
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    # "a" dies. "b" takes over once the lease looked unchanged for 15 s, at its next try.
    died_at = clock[0]
    while not await b.try_acquire_or_renew():
        clock[0] += 2.0
    assert clock[0] - died_at <= 15.0 + 2.0
    assert fake.leases["tidal/tidal-scaler"]["spec"]["holderIdentity"] == "b"
    assert fake.leases["tidal/tidal-scaler"]["spec"]["leaseTransitions"] == 1
    assert elected == ["a", "b"]  # once per election, not per renewal
    # "a" comes back: it is not leader, and must not be after its renew deadline either.
    assert not a.is_leader
    assert not await a.try_acquire_or_renew()
    # "b" loses the API: it stops counting itself leader after the renew deadline.
    fake.unavailable = True
    clock[0] += 9.0
    assert b.is_leader
    clock[0] += 1.5
    assert not b.is_leader
    # The API is back: "b" renews, counts itself leader again, and says so.
    fake.unavailable = False
    assert await b.try_acquire_or_renew()
    assert elected == ["a", "b", "b"]


async def test_lease_released_on_shutdown(api: tuple[FakeKubeApi, client.ApiClient]) -> None:
    fake, api_client = api
    a = LeaseElector(
        api_client,
        namespace="tidal",
        identity="a",
        lease_duration_s=15.0,
        renew_deadline_s=10.0,
        retry_period_s=2.0,
    )
    task = asyncio.create_task(a.run())
    await eventually(lambda: a.is_leader, "a to lead")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fake.leases["tidal/tidal-scaler"]["spec"]["holderIdentity"] == ""
    b = LeaseElector(
        api_client,
        namespace="tidal",
        identity="b",
        lease_duration_s=15.0,
        renew_deadline_s=10.0,
        retry_period_s=2.0,
    )
    assert await b.try_acquire_or_renew()  # no need to wait out the lease


async def test_watches_survive_cuts_and_410(api: tuple[FakeKubeApi, client.ApiClient]) -> None:
    fake, api_client = api
    fake.add_deployment("ml", "llama", replicas=1)
    fake.add_deployment("ml", "ignored", replicas=1, labels={"team": "x"})
    fake.add_pod("ml", "llama-a", app="llama", ip="10.0.0.1")
    fake.add_pod("ml", "other", app="other", ip="10.0.0.9")
    cluster = KubeCluster(api_client, watch_timeout_s=60)
    task = asyncio.create_task(cluster.run())
    try:
        await eventually(
            lambda: fake.open_watches("deployments") == 1 and fake.open_watches("pods/ml") == 1,
            "watches to open",
        )
        assert cluster.synced
        snap = cluster.targets()["ml/llama"]
        assert list(cluster.targets()) == ["ml/llama"]
        assert [p.name for p in snap.pods] == ["llama-a"]
        assert fake.watches_of("deployments")[0]["allowWatchBookmarks"] in ("true", "True")
        # A change arrives on the stream.
        d = fake.deployments["ml/llama"]
        d["spec"]["replicas"] = 4
        d["metadata"]["resourceVersion"] = fake.next_rv()
        fake.emit("deployments", "MODIFIED", d)
        await eventually(
            lambda: cluster.targets()["ml/llama"].deployment.spec_replicas == 4, "update"
        )
        # The stream is cut: resume from the last version, no re-list.
        lists_before = fake.list_requests.count("deployments")
        fake.emit("deployments", "CUT", {})
        await eventually(
            lambda: (
                len(fake.watches_of("deployments")) >= 2 and fake.open_watches("deployments") == 1
            ),
            "re-watch",
        )
        assert (
            fake.watches_of("deployments")[-1]["resourceVersion"]
            == d["metadata"]["resourceVersion"]
        )
        assert fake.list_requests.count("deployments") == lists_before
        # 410 Gone: re-list, and what changed meanwhile shows up.
        fake.deployments["ml/llama"]["spec"]["replicas"] = 6
        fake.emit("deployments", "GONE", {})
        await eventually(
            lambda: fake.list_requests.count("deployments") == lists_before + 1, "re-list"
        )
        await eventually(
            lambda: cluster.targets()["ml/llama"].deployment.spec_replicas == 6, "relisted"
        )
        # A new ready pod of the target shows up through the pod watch.
        fake.emit("pods/ml", "ADDED", fake.add_pod("ml", "llama-b", app="llama", ip="10.0.0.2"))
        await eventually(lambda: len(cluster.targets()["ml/llama"].ready_pods) == 2, "new pod")
        # The Deployment is deleted: target and its namespace's pod watch go away.
        fake.emit("deployments", "DELETED", fake.deployments.pop("ml/llama"))
        await eventually(lambda: "ml/llama" not in cluster.targets(), "deletion")
        await eventually(lambda: fake.open_watches("pods/ml") == 0, "pod watch to stop")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
