"""The sandbox's spot pool: capacity running out, zone spreading, preemption and return.

Covers:
- the cloud's spot capacity: past the limit spot pods stay Pending with
  "Insufficient nvidia.com/gpu" (on-demand unaffected); lifting the limit
  (spot capacity coming back) schedules them at once; a bad limit;
- the spot companion as Tidal builds it (``build_companion``) spreads over
  zones with its ``ScheduleAnyway`` constraint, even when one zone has more
  nodes; a ``DoNotSchedule`` constraint keeps a pod Pending with the real
  message rather than exceed ``maxSkew``;
- preemption taints the node with the default provider's (Karpenter's)
  notice key among every provider's, removes it, and with
  ``return_after_s`` the node registers again; ``restore`` of a node that is
  there does nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, NODES, PODS, condition
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.nodes import INTERRUPTION_TAINTS, NodeSpec
from loadtests.sandbox.cluster.store import Store
from scaler.policy.placement.companion import build_companion
from scaler.policy.placement.providers import PRESETS
from tests.unit.loadtests.sandbox.cluster.controllers.support import (
    Changes,
    deployment,
    items,
    make_plane,
)

Obj = dict[str, Any]
SPOT = {"karpenter.sh/capacity-type": "spot"}
LOPSIDED = (
    NodeSpec("od-a", "on-demand", "us-east-1a"),
    NodeSpec("spot-a1", "spot", "us-east-1a"),
    NodeSpec("spot-a2", "spot", "us-east-1a"),
    NodeSpec("spot-a3", "spot", "us-east-1a"),
    NodeSpec("spot-b1", "spot", "us-east-1b"),
)


@pytest_asyncio.fixture
async def lopsided(store: Store, tmp_path: Path) -> AsyncIterator[ControlPlane]:
    """Three spot nodes in one zone, one in the other."""
    cp = make_plane(store, tmp_path)
    cp.add_nodes(LOPSIDED)
    try:
        async with cp:
            yield cp
    finally:
        cp.addresses.release()


def unschedulable(pod: Obj) -> str | None:
    cond = condition(pod, "PodScheduled")
    if cond and cond.get("reason") == "Unschedulable":
        return str(cond.get("message"))
    return None


def zones(store: Store, app: str) -> Counter[str]:
    zone_of = {
        n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for n in items(store, NODES)
    }
    return Counter(
        zone_of[p["spec"]["nodeName"]]
        for p in items(store, PODS)
        if p["metadata"]["labels"].get("app") == app and p["spec"].get("nodeName")
    )


async def test_spot_runs_out_and_comes_back(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    plane.scheduler.set_spot_capacity(2)
    store.create(DEPLOYMENTS, deployment("s", replicas=3, node_selector=SPOT))
    store.create(
        DEPLOYMENTS,
        deployment("od", replicas=2, node_selector={"karpenter.sh/capacity-type": "on-demand"}),
    )

    def settled() -> str | None:
        spot = [p for p in items(store, PODS) if p["metadata"]["labels"]["app"] == "s"]
        od = [p for p in items(store, PODS) if p["metadata"]["labels"]["app"] == "od"]
        bound = [p for p in spot if p["spec"].get("nodeName")]
        waiting = [m for p in spot if (m := unschedulable(p))]
        if (
            len(spot) == 3
            and len(bound) == 2
            and waiting
            and all(p["spec"].get("nodeName") for p in od)
            and len(od) == 2
        ):
            return waiting[0]
        return None

    message = await changes.until(settled)
    assert "4 Insufficient nvidia.com/gpu" in message  # the four spot nodes, as if gone
    assert plane.scheduler.spot_gpus_in_use() == 2
    plane.scheduler.set_spot_capacity(None)
    await changes.until(lambda: all(p["spec"].get("nodeName") for p in items(store, PODS)))
    assert plane.scheduler.spot_gpus_in_use() == 3


def test_bad_spot_capacity(plane: ControlPlane) -> None:
    with pytest.raises(ValueError, match="spot capacity must be >= 0 GPUs"):
        plane.scheduler.set_spot_capacity(-1)


async def test_companion_spreads_over_zones(
    lopsided: ControlPlane, store: Store, changes: Changes
) -> None:
    user = deployment("llama", replicas=0)
    user["metadata"]["uid"] = "uid-llama"
    companion = build_companion(user, preset=PRESETS["karpenter"], replicas=4)
    store.create(DEPLOYMENTS, companion)
    await changes.until(lambda: sum(zones(store, "llama").values()) == 4)
    assert zones(store, "llama") == {"us-east-1a": 2, "us-east-1b": 2}
    for pod in items(store, PODS):
        assert pod["spec"]["nodeName"].startswith("spot-")


async def test_do_not_schedule_spread_keeps_the_skew(
    lopsided: ControlPlane, store: Store, changes: Changes
) -> None:
    body = deployment("strict", replicas=4, node_selector=SPOT, gpus=8)
    body["spec"]["template"]["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "strict"}},
        }
    ]
    store.create(DEPLOYMENTS, body)

    # Zone b holds one 8-GPU pod; zone a may then hold two, never three.
    def done() -> list[str] | None:
        waiting = [m for p in items(store, PODS) if (m := unschedulable(p))]
        return waiting if sum(zones(store, "strict").values()) == 3 and waiting else None

    waiting = await changes.until(done)
    assert zones(store, "strict") == {"us-east-1a": 2, "us-east-1b": 1}
    assert "didn't match pod topology spread constraints" in waiting[0]


async def test_preemption_taints_removes_and_returns(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    assert "karpenter.sh/disrupted" in INTERRUPTION_TAINTS
    assert plane.nodes.restore("gpu-spot-1") is False  # it is there
    result = await plane.nodes.preempt("gpu-spot-1", notice_s=0.05, return_after_s=0.2)
    assert result.return_after_s == 0.2
    assert store.peek(NODES, "", "gpu-spot-1") is None
    node = await changes.until(lambda: store.peek(NODES, "", "gpu-spot-1"))
    assert not node["spec"].get("unschedulable")
    assert not node["spec"].get("taints")
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert plane.nodes.restore("no-such-node") is False
