"""The scheduler on modelled GPUs: MIG profiles and GPU products are found by count, or wait.

Covers, on the ``gpu-mix`` pool: a pod asking for ``nvidia.com/mig-3g.40gb``
lands only on nodes with a free one, and with the GFD product selector only
on that product's node; once the profile is used up the next pod stays
Pending with ``Insufficient nvidia.com/mig-3g.40gb`` and a FailedScheduling
event, and is placed as soon as one is freed; a whole-GPU pod never lands on
a partitioned node (it advertises ``nvidia.com/gpu: 0``) and follows its
product selector to the L4 nodes; pods of one profile spread across the
nodes that have it, least allocated first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, EVENTS, PODS, condition
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.node_pools import GPU_MIX_POOL
from loadtests.sandbox.cluster.store import Store
from tests.unit.loadtests.sandbox.cluster.controllers.support import (
    Changes,
    deployment,
    items,
    make_plane,
)

Obj = dict[str, Any]
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}
MIG_3G = "nvidia.com/mig-3g.40gb"


@pytest_asyncio.fixture
async def mix(store: Store, tmp_path: Path) -> AsyncIterator[ControlPlane]:
    cp = make_plane(store, tmp_path)
    cp.add_nodes(GPU_MIX_POOL)
    try:
        async with cp:
            yield cp
    finally:
        cp.addresses.release()


def asking(name: str, resource: str, *, replicas: int, selector: dict[str, str] | None) -> Obj:
    body = deployment(name, replicas=replicas, gpus=0, node_selector=selector)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {resource: "1"}}
    return body


def placed(store: Store, app: str) -> list[str]:
    return [
        p["spec"].get("nodeName", "")
        for p in items(store, PODS)
        if p["metadata"]["labels"]["app"] == app
    ]


def unschedulable(store: Store, app: str) -> Obj | None:
    for pod in items(store, PODS):
        cond = condition(pod, "PodScheduled")
        if (
            pod["metadata"]["labels"]["app"] == app
            and cond
            and cond.get("reason") == "Unschedulable"
        ):
            return pod
    return None


async def test_a_mig_pod_waits_for_a_free_profile_of_its_product(
    mix: ControlPlane, store: Store, changes: Changes
) -> None:
    # The H100 node cut all-balanced has one 3g.40gb per GPU: 8 in all.
    store.create(DEPLOYMENTS, asking("first", MIG_3G, replicas=8, selector=H100))
    await changes.until(lambda: all(placed(store, "first")) and len(placed(store, "first")) == 8)
    assert set(placed(store, "first")) == {"h100-mig"}
    store.create(DEPLOYMENTS, asking("late", MIG_3G, replicas=1, selector=H100))
    pod = await changes.until(lambda: unschedulable(store, "late"))
    message = condition(pod, "PodScheduled")["message"]  # type: ignore[index]
    # The three H100 nodes match the selector; only one has the profile, used up.
    assert message.startswith(
        "0/6 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb, "
        "3 node(s) didn't match Pod's node affinity/selector."
    )
    events = [e for e in items(store, EVENTS) if e.get("reason") == "FailedScheduling"]
    assert any(MIG_3G in e.get("message", "") for e in events)
    # One slice is given back: the waiting pod takes it.
    first = store.get(DEPLOYMENTS, "default", "first")
    store.update(DEPLOYMENTS, {**first, "spec": {**first["spec"], "replicas": 7}})
    await changes.until(lambda: placed(store, "late") == ["h100-mig"])


async def test_a_profile_without_a_product_spreads_over_every_node_that_has_it(
    mix: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(DEPLOYMENTS, asking("any", MIG_3G, replicas=4, selector=None))
    await changes.until(lambda: all(placed(store, "any")) and len(placed(store, "any")) == 4)
    assert sorted(placed(store, "any")) == ["a100-mig", "a100-mig", "h100-mig", "h100-mig"]


async def test_whole_gpus_follow_the_product_and_skip_partitioned_nodes(
    mix: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(
        DEPLOYMENTS,
        asking(
            "l4",
            "nvidia.com/gpu",
            replicas=3,
            selector={**L4, "karpenter.sh/capacity-type": "on-demand"},
        ),
    )
    store.create(
        DEPLOYMENTS,
        asking(
            "h100",
            "nvidia.com/gpu",
            replicas=17,
            selector={**H100, "karpenter.sh/capacity-type": "on-demand"},
        ),
    )
    await changes.until(lambda: all(placed(store, "l4")) and unschedulable(store, "h100"))
    assert set(placed(store, "l4")) <= {"l4-1", "l4-2"} and len(set(placed(store, "l4"))) == 2
    # 8 whole H100s on demand; the partitioned H100 node has none to give.
    assert sorted(n for n in placed(store, "h100") if n) == ["h100"] * 8
    pod = unschedulable(store, "h100")
    message = condition(pod, "PodScheduled")["message"]  # type: ignore[arg-type,index]
    assert "2 Insufficient nvidia.com/gpu" in message  # h100 is full, h100-mig has 0
