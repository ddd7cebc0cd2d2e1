"""Fake vLLM pods on modelled GPUs: each server is told its device and runs as it would there.

Covers, with real fake-vLLM processes: a pod asking for a MIG profile gets
an instance (``NVIDIA_VISIBLE_DEVICES=MIG-...``) and its server reports the
device GPU feature discovery names, with the container's own
``--max-model-len`` honoured; the second pod of the node's two slices gets
the other one; an 8B model on an L4 without a shorter ``--max-model-len``
dies at start as vLLM does, with vLLM's message in its log, and restarts
with back-off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio

from loadtests.sandbox.cluster.addresses import lock_dir
from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, PODS, is_pod_ready
from loadtests.sandbox.cluster.controllers.kubelet import KubeletSettings
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.nodes import parse_nodes
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.servers.launcher import ZygoteLauncher
from tests.unit.loadtests.sandbox.cluster.controllers.support import (
    Changes,
    deployment,
    items,
    make_plane,
)

Obj = dict[str, Any]
POOL = parse_nodes(
    [
        {"name": "h100-mig", "gpu": "H100-80GB", "gpus": 1, "mig": "all-3g.40gb"},
        {"name": "l4", "gpu": "L4", "gpus": 1},
    ]
)


@pytest_asyncio.fixture
async def plane(store: Store, tmp_path: Path) -> AsyncIterator[ControlPlane]:
    launcher = ZygoteLauncher()
    (tmp_path / "logs").mkdir()
    settings = KubeletSettings(
        backoff_base_s=0.2,
        backoff_cap_s=0.8,
        tcp_probe_period_s=0.05,
        log_dir=tmp_path / "logs",
        gpu_dir=tmp_path / "gpus",
    )
    cp = make_plane(store, lock_dir(), launcher=launcher, settings=settings)
    cp.add_nodes(POOL)
    try:
        async with cp:
            yield cp
    finally:
        await launcher.close()
        cp.addresses.release()


def vllm(name: str, resource: str, *args: str, replicas: int = 1) -> Obj:
    container = {
        "resources": {"limits": {resource: "1"}},
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", *args],
    }
    return deployment(name, replicas=replicas, process=True, gpus=0, container=container)


def pods_of(store: Store, app: str) -> list[Obj]:
    return [p for p in items(store, PODS) if p["metadata"]["labels"]["app"] == app]


async def sandbox_gpu(pod: Obj) -> Obj:
    url = f"http://{pod['status']['podIP']}:8000/sandbox/gpu"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        body: Obj = await resp.json()
        return body


async def test_a_mig_pod_serves_on_its_instance(
    plane: ControlPlane, store: Store, changes: Changes
) -> None:
    store.create(
        DEPLOYMENTS, vllm("slices", "nvidia.com/mig-3g.40gb", "--max-model-len", "8192", replicas=2)
    )
    ready = await changes.until(
        lambda: len(p := [x for x in pods_of(store, "slices") if is_pod_ready(x)]) == 2 and p
    )
    seen = [await sandbox_gpu(pod) for pod in ready]
    assert {s["device"] for s in seen} == {"NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"}
    assert all(s["uuid"].startswith("MIG-") for s in seen)
    assert seen[0]["uuid"] != seen[1]["uuid"]  # the node's two instances, one each
    assert {s["fb_total_mib"] for s in seen} == {40_448}


async def test_a_model_too_long_for_an_l4_dies_as_vllm_does(
    plane: ControlPlane, store: Store, changes: Changes, tmp_path: Path
) -> None:
    store.create(DEPLOYMENTS, vllm("small", "nvidia.com/gpu"))

    def crashed() -> Obj | None:
        for pod in pods_of(store, "small"):
            for status in pod.get("status", {}).get("containerStatuses") or ():
                last = (status.get("lastState") or {}).get("terminated")
                if last and status.get("restartCount", 0) >= 1:
                    return pod
        return None

    pod = await changes.until(crashed, timeout_s=20)
    status = pod["status"]["containerStatuses"][0]
    assert status["lastState"]["terminated"]["exitCode"] == 1
    log = (tmp_path / "logs").glob(f"default_{pod['metadata']['name']}_*.log")
    text = "".join(path.read_text() for path in log)
    assert "The model's max seq len (131072) is larger than the maximum number of tokens" in text
