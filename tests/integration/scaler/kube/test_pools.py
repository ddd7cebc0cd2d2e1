"""InferencePool targets through the scaler's watches, against the sandbox's emulated API server.

Covers: an opted-in pool (by label, or by annotation) makes the Deployment
it selects a target although the Deployment carries no opt-in label, with
its pods; a pool that is not opted in makes none; relabelling the
Deployment's pod template away from the selector, or deleting the pool,
takes the target away, while a Deployment that is opted in by its own
label stays a target whatever its pool does; a cluster without the
InferencePool CRD logs one warning and keeps the Deployments' path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from groundwork.kube.connection import KubeAccess, connect
from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.resources import RESOURCES, by_group_version_plural
from loadtests.sandbox.cluster.store import Store
from loadtests.sandbox.example import ExampleModel
from scaler.kube.cluster import KubeCluster
from tests.integration.scaler.support import eventually

DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
PODS = by_group_version_plural("", "v1", "pods")
POOLS = by_group_version_plural("inference.networking.k8s.io", "v1", "inferencepools")
assert DEPLOYMENTS and PODS and POOLS
ENABLED = "autoscaling.tidal.dev/enabled"


def inference_pool(
    name: str, app: str, *, label: bool = True, annotation: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if label:
        meta["labels"] = {ENABLED: "true"}
    if annotation:
        meta["annotations"] = {ENABLED: "true"}
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": 9002}},
        },
    }


def model_deployment(name: str, *, opted_in: bool = False) -> dict[str, Any]:
    d = ExampleModel(name=name).deployment()
    labels = d["metadata"].setdefault("labels", {})
    if opted_in:
        labels[ENABLED] = "true"
    else:
        labels.pop(ENABLED, None)
    apply_defaults(d, "Deployment", creating=True)
    return d


def ready_pod(app: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{app}-0", "namespace": "default", "labels": {"app": app}},
        "spec": {"containers": [{"name": "vllm", "image": "vllm"}]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with ApiServer(Store(), certs_dir=tmp_path / "pki") as srv:
        yield srv


@pytest.fixture
async def access(server: ApiServer, tmp_path: Path) -> AsyncIterator[KubeAccess]:
    got = await connect(kubeconfig=str(server.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        yield got
    finally:
        await got.close()


@contextlib.asynccontextmanager
async def watching(access: KubeAccess) -> AsyncIterator[KubeCluster]:
    cluster = KubeCluster(access.api, pools=True, watch_timeout_s=30)
    task = asyncio.create_task(cluster.run())
    try:
        yield cluster
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_pool_makes_the_deployment_it_selects_a_target(
    server: ApiServer, access: KubeAccess
) -> None:
    store = server.store
    store.create(DEPLOYMENTS, model_deployment("llama"))
    store.create(DEPLOYMENTS, model_deployment("mistral"))
    store.create(PODS, ready_pod("llama"))
    store.create(POOLS, inference_pool("llama-pool", "llama"))
    store.create(POOLS, inference_pool("mistral-pool", "mistral", label=False))
    async with watching(access) as cluster:
        await eventually(
            lambda: (
                "default/llama" in cluster.targets()
                and [p.name for p in cluster.targets()["default/llama"].ready_pods] == ["llama-0"]
            ),
            "the pool's Deployment, with its pod",
        )
        assert list(cluster.targets()) == ["default/llama"]  # mistral's pool is not opted in
        assert cluster.pools()["default/llama-pool"].bound_to == "default/llama"

        # Opted in by annotation instead, the other pool scales its Deployment too.
        mistral = store.get(POOLS, "default", "mistral-pool")
        mistral["metadata"]["annotations"] = {ENABLED: "true"}
        store.update(POOLS, mistral)
        await eventually(lambda: "default/mistral" in cluster.targets(), "the annotated pool")

        # The pod template relabelled away from the selector: no longer the pool's.
        moved = store.get(DEPLOYMENTS, "default", "llama")
        moved["spec"]["template"]["metadata"]["labels"]["app"] = "llama-v2"
        moved["spec"]["selector"]["matchLabels"]["app"] = "llama-v2"
        store.update(DEPLOYMENTS, moved)
        await eventually(lambda: "default/llama" not in cluster.targets(), "llama let go")
        assert cluster.pools()["default/llama-pool"].selected == ()

        store.delete(POOLS, "default", "mistral-pool")
        await eventually(lambda: not cluster.targets(), "the deleted pool's Deployment let go")


async def test_a_deployment_opted_in_by_its_own_label_stays_whatever_its_pool_does(
    server: ApiServer, access: KubeAccess
) -> None:
    store = server.store
    store.create(DEPLOYMENTS, model_deployment("llama", opted_in=True))
    store.create(POOLS, inference_pool("llama-pool", "llama"))
    async with watching(access) as cluster:
        await eventually(
            lambda: (
                cluster.pools().get("default/llama-pool") is not None
                and cluster.pools()["default/llama-pool"].bound_to == "default/llama"
            ),
            "the pool bound",
        )
        store.delete(POOLS, "default", "llama-pool")
        await eventually(lambda: not cluster.pools(), "the pool gone")
        await asyncio.sleep(0.2)
        assert list(cluster.targets()) == ["default/llama"]


async def test_without_the_crd_one_warning_and_the_deployments_path_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    without = tuple(r for r in RESOURCES if r is not POOLS)
    async with ApiServer(Store(), certs_dir=tmp_path / "pki", resources=without) as srv:
        srv.store.create(DEPLOYMENTS, model_deployment("llama", opted_in=True))
        access = await connect(kubeconfig=str(srv.write_kubeconfig(tmp_path / "kubeconfig")))
        try:
            with caplog.at_level(logging.WARNING, logger="scaler.kube.pools"):
                async with watching(access) as cluster:
                    await eventually(lambda: "default/llama" in cluster.targets(), "llama")
                    await eventually(lambda: caplog.records, "the warning")
        finally:
            await access.close()
    (record,) = caplog.records
    assert (
        "InferencePool CRD (inference.networking.k8s.io/v1) is not installed" in record.getMessage()
    )
