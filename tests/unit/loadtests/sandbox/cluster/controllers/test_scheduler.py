"""The scheduler, driven on the store with the default node pool.

Covers: pods land on the capacity type their nodeSelector names (Karpenter,
EKS and GKE keys), on nodes with enough GPUs, spread across nodes; required
node affinity (In/NotIn) and tolerations (Equal/Exists) are honoured; a pod
that fits nowhere stays Pending with PodScheduled=False/Unschedulable, the
real message and a FailedScheduling event, and is scheduled once capacity
frees up; a cordoned node takes nothing; the filters' wording one by one; a preferred
node affinity draws a pod to its node, and a template that comes to prefer
another node moves the one replica there by a rollout (the warm tier's move).
"""

from __future__ import annotations

from typing import Any

from loadtests.sandbox.cluster.controllers.base import (
    DEPLOYMENTS,
    EVENTS,
    NODES,
    PODS,
    condition,
)
from loadtests.sandbox.cluster.controllers.scheduler import node_filter_failures, tolerates
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.nodes import DEFAULT_POOL, NodeSpec, node_object
from loadtests.sandbox.cluster.store import Store
from scaler.policy.warm_tier.node_preference import prefer_node
from tests.unit.loadtests.sandbox.cluster.controllers.support import Changes, deployment, items

Obj = dict[str, Any]
SPOT_NODES = {s.name for s in DEFAULT_POOL if s.capacity_type == "spot"}
ON_DEMAND_NODES = {s.name for s in DEFAULT_POOL if s.capacity_type == "on-demand"}


def nodes_of(store: Store) -> list[str]:
    return [p["spec"].get("nodeName", "") for p in items(store, PODS)]


def all_bound(store: Store, count: int) -> bool:
    return len(items(store, PODS)) == count and all(nodes_of(store))


async def test_capacity_type_selectors(plane: ControlPlane, store: Store, changes: Changes) -> None:
    store.create(
        DEPLOYMENTS,
        deployment("a", replicas=4, node_selector={"karpenter.sh/capacity-type": "spot"}),
    )
    store.create(
        DEPLOYMENTS,
        deployment("b", replicas=2, node_selector={"eks.amazonaws.com/capacityType": "ON_DEMAND"}),
    )
    store.create(
        DEPLOYMENTS,
        deployment("c", replicas=2, node_selector={"cloud.google.com/gke-spot": "true"}),
    )
    await changes.until(lambda: all_bound(store, 8))
    by_app: dict[str, set[str]] = {}
    for pod in items(store, PODS):
        by_app.setdefault(pod["metadata"]["labels"]["app"], set()).add(pod["spec"]["nodeName"])
    assert by_app["a"] <= SPOT_NODES and len(by_app["a"]) == 4  # spread: one per node
    assert by_app["b"] == ON_DEMAND_NODES
    assert by_app["c"] <= SPOT_NODES
    scheduled = condition(items(store, PODS)[0], "PodScheduled")
    assert scheduled is not None and scheduled["status"] == "True"


async def test_pending_when_full_then_scheduled_when_freed(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    # Two on-demand nodes with 8 GPUs each: two pods of 8 fill them.
    selector = {"karpenter.sh/capacity-type": "on-demand"}
    store.create(DEPLOYMENTS, deployment("big", replicas=3, gpus=8, node_selector=selector))

    def pending() -> Obj | None:
        for pod in items(store, PODS):
            if not pod["spec"].get("nodeName"):
                cond = condition(pod, "PodScheduled")
                if cond and cond.get("reason") == "Unschedulable":
                    return pod
        return None

    pod = await changes.until(pending)
    cond = condition(pod, "PodScheduled")
    assert cond is not None and cond["status"] == "False"
    assert pod["status"]["phase"] == "Pending"
    assert cond["message"] == (
        "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, "
        "4 node(s) didn't match Pod's node affinity/selector. preemption: 0/6 nodes are "
        "available: 2 No preemption victims found for incoming pod, "
        "4 Preemption is not helpful for scheduling."
    )
    events = [e for e in items(store, EVENTS) if e["reason"] == "FailedScheduling"]
    assert events and events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["name"] == pod["metadata"]["name"]
    assert events[0]["source"]["component"] == "default-scheduler"
    # Free a node: the pending pod gets it.
    d = store.get(DEPLOYMENTS, "default", "big")
    d["spec"]["replicas"] = 2
    store.update(DEPLOYMENTS, d)
    await changes.until(lambda: all_bound(store, 2))


async def test_taints_and_tolerations(plane: ControlPlane, store: Store, changes: Changes) -> None:
    node = store.get(NODES, "", "gpu-spot-1")
    node["spec"]["taints"] = [
        {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"}
    ]
    store.update(NODES, node)
    only_spot_1 = {"kubernetes.io/hostname": "gpu-spot-1"}
    store.create(DEPLOYMENTS, deployment("no-tol", replicas=1, node_selector=only_spot_1))
    store.create(
        DEPLOYMENTS,
        deployment(
            "tol",
            replicas=1,
            node_selector=only_spot_1,
            tolerations=[
                {
                    "key": "cloud.google.com/gke-spot",
                    "operator": "Equal",
                    "value": "true",
                    "effect": "NoSchedule",
                }
            ],
        ),
    )

    def placed() -> dict[str, str] | None:
        out = {}
        for pod in items(store, PODS):
            app = pod["metadata"]["labels"]["app"]
            if pod["spec"].get("nodeName"):
                out[app] = pod["spec"]["nodeName"]
            elif (condition(pod, "PodScheduled") or {}).get("reason") == "Unschedulable":
                out[app] = (condition(pod, "PodScheduled") or {})["message"]
        return out if len(out) == 2 else None

    result = await changes.until(placed)
    assert result["tol"] == "gpu-spot-1"
    assert "1 node(s) had untolerated taint {cloud.google.com/gke-spot: true}" in result["no-tol"]


async def test_cordoned_node_takes_nothing(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    for name in ON_DEMAND_NODES | {"gpu-spot-1", "gpu-spot-2", "gpu-spot-3"}:
        node = store.get(NODES, "", name)
        node["spec"]["unschedulable"] = True
        store.update(NODES, node)
    store.create(DEPLOYMENTS, deployment("a", replicas=3))
    await changes.until(lambda: all_bound(store, 3))
    assert set(nodes_of(store)) == {"gpu-spot-4"}


async def test_a_preferred_node_draws_the_pod_and_a_new_preference_moves_it(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    selector = {"karpenter.sh/capacity-type": "on-demand"}
    first, second = sorted(ON_DEMAND_NODES)
    obj = deployment("one", replicas=1, node_selector=selector)
    obj["spec"]["template"] = prefer_node(obj["spec"]["template"], second)
    store.create(DEPLOYMENTS, obj)
    await changes.until(lambda: nodes_of(store) == [second])
    current = store.get(DEPLOYMENTS, "default", "one")
    current["spec"]["template"] = prefer_node(current["spec"]["template"], first)
    store.update(DEPLOYMENTS, current)
    # The rollout surges a replacement onto the new node, then removes the old pod.
    await changes.until(lambda: nodes_of(store) == [first])


def test_filters_word_reasons_as_the_real_scheduler() -> None:
    node = node_object(NodeSpec("n", "spot", "us-east-1a", gpus=2), address="127.1.0.10")
    pod: Obj = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
    }
    assert node_filter_failures(pod, node, requested={}, pod_count=0) == [
        "Insufficient nvidia.com/gpu"
    ]
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "NotIn",
                                "values": ["spot"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    assert node_filter_failures(pod, node, requested={}, pod_count=0) == [
        "node(s) didn't match Pod's node affinity/selector"
    ]
    node["spec"]["unschedulable"] = True
    assert node_filter_failures(pod, node, requested={}, pod_count=0) == [
        "node(s) were unschedulable"
    ]
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    assert tolerates([{"operator": "Exists"}], taint)
    assert tolerates([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert not tolerates([{"key": "k", "value": "w"}], taint)
    assert not tolerates([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}], taint)
