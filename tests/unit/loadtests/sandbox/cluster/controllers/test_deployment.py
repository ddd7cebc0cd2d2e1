"""The deployment and ReplicaSet controllers, driven on the store.

Covers: a Deployment gets a ReplicaSet named by its pod-template-hash and
pods owned by it (controller: true); the status fields and the Available /
Progressing conditions with the real reasons; scale-down removes the pods
with the lowest pod-deletion-cost first; the deletion ranking itself
(unscheduled, then not ready, then cost, then newest first); a template
change rolls every pod to a new ReplicaSet and bumps the revision;
Recreate; deleting the Deployment garbage-collects ReplicaSets and pods; a
rollout that cannot progress ends in ProgressDeadlineExceeded.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster.controllers.base import (
    DEPLOYMENTS,
    PODS,
    REPLICASETS,
    is_pod_ready,
)
from loadtests.sandbox.cluster.controllers.deployment_rollout import (
    HASH_LABEL,
    REVISION,
    resolve_int_or_percent,
)
from loadtests.sandbox.cluster.controllers.replicaset import DELETION_COST, deletion_rank
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.store import Store
from tests.unit.loadtests.sandbox.cluster.controllers.support import Changes, deployment, items

Obj = dict[str, Any]


def status_of(store: Store, name: str = "llama") -> Obj:
    return dict(store.get(DEPLOYMENTS, "default", name).get("status") or {})


def rolled_out(store: Store, name: str = "llama") -> bool:
    """What ``kubectl rollout status`` waits for."""
    d = store.get(DEPLOYMENTS, "default", name)
    s = d.get("status") or {}
    want = d["spec"]["replicas"]
    return (
        s.get("observedGeneration", 0) >= d["metadata"]["generation"]
        and s.get("updatedReplicas", 0) == want
        and s.get("replicas", 0) == want
        and s.get("availableReplicas", 0) == want
    )


def live_pods(store: Store) -> list[Obj]:
    return [p for p in items(store, PODS) if not p["metadata"].get("deletionTimestamp")]


async def test_deployment_creates_replicaset_and_pods(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(DEPLOYMENTS, deployment(replicas=3))
    await changes.until(lambda: rolled_out(store))
    (rs,) = items(store, REPLICASETS)
    pth = rs["metadata"]["labels"][HASH_LABEL]
    assert rs["metadata"]["name"] == f"llama-{pth}"
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert rs["metadata"]["annotations"][REVISION] == "1"
    pods = items(store, PODS)
    assert len(pods) == 3
    for pod in pods:
        assert pod["metadata"]["name"].startswith(f"llama-{pth}-")
        assert pod["metadata"]["labels"] == {"app": "llama", HASH_LABEL: pth}
        (ref,) = pod["metadata"]["ownerReferences"]
        assert ref["kind"] == "ReplicaSet" and ref["controller"] is True
        assert ref["uid"] == rs["metadata"]["uid"]
        assert is_pod_ready(pod) and pod["status"]["podIP"].startswith("127.")
    status = status_of(store)
    assert status["observedGeneration"] == 1
    assert (status["replicas"], status["updatedReplicas"]) == (3, 3)
    assert (status["readyReplicas"], status["availableReplicas"]) == (3, 3)
    assert "unavailableReplicas" not in status  # zero is omitted, as by the real API
    available, progressing = status["conditions"]
    assert (available["type"], available["status"], available["reason"]) == (
        "Available",
        "True",
        "MinimumReplicasAvailable",
    )
    assert (progressing["type"], progressing["reason"]) == ("Progressing", "NewReplicaSetAvailable")
    assert progressing["message"] == f'ReplicaSet "llama-{pth}" has successfully progressed.'
    annotations = store.get(DEPLOYMENTS, "default", "llama")["metadata"]["annotations"]
    assert annotations[REVISION] == "1"


async def test_scale_down_honours_pod_deletion_cost(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(DEPLOYMENTS, deployment(replicas=4))
    await changes.until(lambda: rolled_out(store))
    pods = sorted(items(store, PODS), key=lambda p: p["metadata"]["name"])
    costs = {
        pods[0]["metadata"]["name"]: "100",
        pods[1]["metadata"]["name"]: "-5",
        pods[2]["metadata"]["name"]: "7",
        pods[3]["metadata"]["name"]: "-10",
    }
    for pod in pods:
        meta = pod["metadata"]
        meta.setdefault("annotations", {})[DELETION_COST] = costs[meta["name"]]
        store.update(PODS, pod)
    d = store.get(DEPLOYMENTS, "default", "llama")
    d["spec"]["replicas"] = 2
    store.update(DEPLOYMENTS, d)
    await changes.until(lambda: rolled_out(store) and len(items(store, PODS)) == 2)
    kept = {p["metadata"]["name"] for p in items(store, PODS)}
    assert kept == {pods[0]["metadata"]["name"], pods[2]["metadata"]["name"]}
    assert status_of(store)["observedGeneration"] == 2


def _pod(
    name: str,
    *,
    node: str = "n1",
    ready: bool = True,
    cost: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    phase: str = "Running",
) -> Obj:
    annotations = {DELETION_COST: str(cost)} if cost is not None else {}
    return {
        "metadata": {
            "name": name,
            "uid": name,
            "creationTimestamp": created,
            "annotations": annotations,
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": created,
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(_pod("a", node=""), _pod("b"), id="unscheduled-before-scheduled"),
        pytest.param(_pod("a", phase="Pending"), _pod("b"), id="pending-before-running"),
        pytest.param(_pod("a", ready=False), _pod("b", cost=-100), id="unready-before-cheap"),
        pytest.param(_pod("a", cost=-1), _pod("b"), id="lower-cost-first"),
        pytest.param(_pod("a", cost=5), _pod("b", cost=10), id="cost-beats-age"),
        pytest.param(_pod("a", created="2026-01-02T00:00:00Z"), _pod("b"), id="newer-before-older"),
    ],
)
def test_deletion_rank(first: Obj, second: Obj) -> None:
    assert deletion_rank(first, colocated=1) < deletion_rank(second, colocated=1)


def test_int_or_percent() -> None:
    assert resolve_int_or_percent("25%", 3, round_up=True, field="f") == 1
    assert resolve_int_or_percent("25%", 3, round_up=False, field="f") == 0
    assert resolve_int_or_percent(2, 3, round_up=False, field="f") == 2
    with pytest.raises(ValueError, match="f: 'x%' is not an integer or a percentage"):
        resolve_int_or_percent("x%", 3, round_up=False, field="f")


async def test_template_change_rolls_all_pods(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(DEPLOYMENTS, deployment(replicas=3))
    await changes.until(lambda: rolled_out(store))
    old_hash = items(store, REPLICASETS)[0]["metadata"]["labels"][HASH_LABEL]
    d = store.get(DEPLOYMENTS, "default", "llama")
    d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "now"
    store.update(DEPLOYMENTS, d)
    await changes.until(
        lambda: (
            rolled_out(store)
            and all(p["metadata"]["labels"][HASH_LABEL] != old_hash for p in items(store, PODS))
        )
    )
    rss = {rs["metadata"]["labels"][HASH_LABEL]: rs for rs in items(store, REPLICASETS)}
    assert set(rss) == {old_hash, next(h for h in rss if h != old_hash)}
    new_hash = next(h for h in rss if h != old_hash)
    assert rss[old_hash]["spec"]["replicas"] == 0 and rss[new_hash]["spec"]["replicas"] == 3
    assert rss[new_hash]["metadata"]["annotations"][REVISION] == "2"
    status = status_of(store)
    assert status["observedGeneration"] == 2 and status["updatedReplicas"] == 3
    assert len(items(store, PODS)) == 3
    events = [e["message"] for e in items(store, plane.recorder.store.resource_type("events"))]
    assert any(m.startswith(f"Scaled down replica set llama-{old_hash}") for m in events)


async def test_recreate_strategy_empties_old_pods_first(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(DEPLOYMENTS, deployment(replicas=2, strategy={"type": "Recreate"}))
    await changes.until(lambda: rolled_out(store))
    old_hash = items(store, REPLICASETS)[0]["metadata"]["labels"][HASH_LABEL]
    seen_mixed = False

    def watch(*_args: object) -> None:
        nonlocal seen_mixed
        hashes = {p["metadata"]["labels"][HASH_LABEL] for p in items(store, PODS)}
        seen_mixed = seen_mixed or len(hashes) > 1

    store.add_listener(watch)
    d = store.get(DEPLOYMENTS, "default", "llama")
    d["spec"]["template"]["metadata"]["labels"]["version"] = "2"
    d["spec"]["selector"] = {"matchLabels": {"app": "llama"}}
    store.update(DEPLOYMENTS, d)
    await changes.until(
        lambda: (
            rolled_out(store)
            and all(p["metadata"]["labels"][HASH_LABEL] != old_hash for p in items(store, PODS))
        )
    )
    assert not seen_mixed  # old and new pods never ran side by side


async def test_deleting_deployment_collects_everything(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(DEPLOYMENTS, deployment(replicas=2))
    await changes.until(lambda: rolled_out(store))
    store.delete(DEPLOYMENTS, "default", "llama")
    await changes.until(lambda: not items(store, PODS) and not items(store, REPLICASETS))


async def test_progress_deadline_exceeded(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    body = deployment(replicas=1, gpus=64)  # no node has 64 GPUs
    body["spec"]["progressDeadlineSeconds"] = 1
    store.create(DEPLOYMENTS, body)

    def progressing() -> Obj | None:
        for cond in status_of(store).get("conditions") or ():
            if cond["type"] == "Progressing" and cond["status"] == "False":
                return dict(cond)
        return None

    cond = await changes.until(progressing, timeout_s=10)
    assert cond["reason"] == "ProgressDeadlineExceeded"
    assert cond["message"].endswith("has timed out progressing.")
    available = next(c for c in status_of(store)["conditions"] if c["type"] == "Available")
    assert (available["status"], available["reason"]) == ("False", "MinimumReplicasUnavailable")
    assert status_of(store)["unavailableReplicas"] == 1
