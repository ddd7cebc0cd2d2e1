"""scaler.kube.placement_watch against the sandbox's API server, over HTTPS.

Covers: the node watch lists every node with its labels, and calls
``on_notice`` once when a preemption taints a spot node with the provider's
notice key (not again for later updates of that node), and forgets the node
when it is removed; the companion watch sees a companion built by
``build_companion`` (its owner, scale, template hash) and not a plain
Deployment; ``pod_facts`` reads a scheduled spot pod as spot with its GPU
model and the notice, and an unscheduled companion pod as spot from its
label.
"""

from __future__ import annotations

import asyncio
import contextlib

from groundwork.kube.connection import connect
from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, PODS
from scaler.kube.objects import pod_from_raw
from scaler.kube.placement_watch import PlacementWatch, pod_facts
from scaler.policy.placement.availability import CapacityType
from scaler.policy.placement.companion import build_companion
from scaler.policy.placement.providers import PRESETS
from tests.integration.scaler.support import eventually, user_deployment

KARPENTER = PRESETS["karpenter"]


async def test_nodes_notices_and_companions(cluster: SandboxCluster) -> None:
    assert cluster.plane is not None
    access = await connect(kubeconfig=str(cluster.kubeconfig))
    noticed: list[str] = []
    watch = PlacementWatch(access.api, preset=KARPENTER, on_notice=noticed.append)
    task = asyncio.create_task(watch.run())
    try:
        await eventually(lambda: watch.synced and len(watch.nodes()) == 6, "six nodes")
        assert KARPENTER.capacity_of(watch.nodes()["gpu-spot-1"].labels) is CapacityType.SPOT

        user = cluster.store.create(DEPLOYMENTS, user_deployment())
        cluster.store.create(DEPLOYMENTS, build_companion(user, preset=KARPENTER, replicas=2))
        await eventually(lambda: "default/llama" in watch.companions(), "the companion")
        seen = watch.companions()["default/llama"]
        assert (seen.name, seen.companion_of, seen.spec_replicas) == ("llama-spot", "llama", 2)
        assert seen.template_hash
        assert len(watch.companions()) == 1  # the user's Deployment is not a companion

        def spot_pods() -> list[dict[str, object]]:
            return [p for p in cluster.store.list(PODS)[0] if p["spec"].get("nodeName")]

        await eventually(lambda: len(spot_pods()) == 2, "two scheduled companion pods")
        pod = pod_from_raw(spot_pods()[0])
        facts = pod_facts(pod, watch.nodes(), KARPENTER)
        assert facts.capacity_type is CapacityType.SPOT
        assert facts.gpus == 1 and facts.gpu_model == "NVIDIA-A100-SXM4-40GB"
        assert not facts.node_under_notice
        unscheduled = pod_facts(
            pod_from_raw({**spot_pods()[0], "spec": {"containers": []}}), watch.nodes(), KARPENTER
        )
        assert unscheduled.capacity_type is CapacityType.SPOT and unscheduled.node is None

        node = str(pod.node)
        preempt = asyncio.create_task(cluster.plane.nodes.preempt(node, notice_s=0.5))
        await eventually(lambda: noticed == [node], "the notice")
        assert pod_facts(pod, watch.nodes(), KARPENTER).node_under_notice
        await preempt
        await eventually(lambda: node not in watch.nodes(), "the node's removal")
        assert noticed == [node]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await access.api.close()
