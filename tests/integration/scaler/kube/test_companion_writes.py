"""scaler.kube.companion_writes against the sandbox's API server, over HTTPS.

Covers: reading the user's Deployment (``None`` when missing); creating the
companion, a second ensure with the same template changes nothing, a user
template change replaces it (template updated, an env var the user removed
is gone, its scale kept); the on-demand pin and its removal as merge
patches; deleting the companion (and again: already gone); deleting the
user's Deployment garbage-collects the companion (its owner reference).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from groundwork.kube.connection import KubeAccess, connect
from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS
from scaler.kube.companion_writes import KubeCompanions
from scaler.policy.placement.companion import build_companion, is_pinned, pin_patch, unpin_patch
from scaler.policy.placement.providers import PRESETS
from tests.integration.scaler.support import eventually

KARPENTER = PRESETS["karpenter"]


@pytest_asyncio.fixture
async def access(tmp_path: Path) -> AsyncIterator[tuple[SandboxCluster, KubeAccess]]:
    sandbox = SandboxCluster(tmp_path / "sandbox")
    try:
        await sandbox.start()
        kube = await connect(kubeconfig=str(sandbox.kubeconfig))
        try:
            yield sandbox, kube
        finally:
            await kube.api.close()
    finally:
        await sandbox.stop()


def user_deployment() -> dict[str, Any]:
    return {
        "metadata": {"name": "llama", "namespace": "default"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {
                    "labels": {"app": "llama"},
                    "annotations": {"sandbox.tidal.dev/process": "none"},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.6.3",
                            "env": [{"name": "OLD", "value": "1"}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            },
        },
    }


async def test_companion_lifecycle(access: tuple[SandboxCluster, KubeAccess]) -> None:
    cluster, kube = access
    writes = KubeCompanions(kube.api)
    assert await writes.read_deployment("default", "llama") is None
    cluster.store.create(DEPLOYMENTS, user_deployment())
    user = await writes.read_deployment("default", "llama")
    assert user is not None and user["metadata"]["uid"]

    assert await writes.ensure_companion(build_companion(user, preset=KARPENTER, replicas=2)) == (
        "created"
    )
    assert await writes.ensure_companion(build_companion(user, preset=KARPENTER, replicas=5)) == (
        "unchanged"
    )
    companion = cluster.store.get(DEPLOYMENTS, "default", "llama-spot")
    assert companion["spec"]["replicas"] == 2

    # The user drops the env var and changes the image: the companion follows.
    changed = cluster.store.get(DEPLOYMENTS, "default", "llama")
    container = changed["spec"]["template"]["spec"]["containers"][0]
    del container["env"]
    container["image"] = "vllm/vllm-openai:v0.7.0"
    cluster.store.update(DEPLOYMENTS, changed)
    user = await writes.read_deployment("default", "llama")
    assert user is not None
    assert await writes.ensure_companion(build_companion(user, preset=KARPENTER, replicas=9)) == (
        "replaced"
    )
    companion = cluster.store.get(DEPLOYMENTS, "default", "llama-spot")
    new_container = companion["spec"]["template"]["spec"]["containers"][0]
    assert new_container["image"] == "vllm/vllm-openai:v0.7.0"
    assert "env" not in new_container
    assert companion["spec"]["replicas"] == 2  # the scale is not this write's business

    patch = pin_patch(user, KARPENTER)
    assert patch is not None
    await writes.patch_deployment("default", "llama", patch)
    pinned = await writes.read_deployment("default", "llama")
    assert pinned is not None and is_pinned(pinned, KARPENTER)
    assert pinned["spec"]["template"]["spec"]["nodeSelector"] == {
        "karpenter.sh/capacity-type": "on-demand"
    }
    undo = unpin_patch(pinned)
    assert undo is not None
    await writes.patch_deployment("default", "llama", undo)
    unpinned = await writes.read_deployment("default", "llama")
    assert unpinned is not None and "nodeSelector" not in unpinned["spec"]["template"]["spec"]

    assert await writes.delete_companion("default", "llama-spot") is True
    await eventually(
        lambda: cluster.store.peek(DEPLOYMENTS, "default", "llama-spot") is None, "deletion"
    )
    assert await writes.delete_companion("default", "llama-spot") is False

    # Owned by the user's Deployment: deleting that removes the companion too.
    await writes.ensure_companion(build_companion(unpinned, preset=KARPENTER, replicas=1))
    cluster.store.delete(DEPLOYMENTS, "default", "llama")
    await eventually(lambda: cluster.store.peek(DEPLOYMENTS, "default", "llama-spot") is None, "GC")
