"""The official clients against the emulated API server, unmodified.

Covers: kubernetes-asyncio through the generated kubeconfig (create, read,
patch the scale subresource, a 409 raised as ApiException, a watch stream
with its ``Watch`` helper) and through its in-cluster loader reading the
token and CA files a pod would have, with RBAC on: the ServiceAccount may do
what its Role grants and gets 403 for the rest; the official synchronous
``kubernetes`` client through the kubeconfig (in a worker thread, so the
test's loop keeps serving): list with a label selector, a strategic merge
patch, the events.k8s.io API, and a watch that ends on timeoutSeconds; the
official client reads back a Deployment whose quantities were sent as
numbers (they come back as canonical strings, as from a real server).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig
from kubernetes_asyncio import watch as awatch
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

from loadtests.sandbox.cluster.apiserver import ApiServer

from .conftest import Api


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": {"app": name, "autoscaling.tidal.dev/enabled": "true"},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "vllm", "image": "vllm:1"}]},
            },
        },
    }


async def test_kubernetes_asyncio_through_kubeconfig(kubeconfig: Path) -> None:
    configuration = aclient.Configuration()
    await aconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with aclient.ApiClient(configuration) as api_client:
        apps = aclient.AppsV1Api(api_client)
        created = await apps.create_namespaced_deployment("default", deployment("llama"))
        assert created.metadata.uid and created.spec.replicas == 1
        scale = await apps.patch_namespaced_deployment_scale(
            "llama", "default", {"spec": {"replicas": 3}}
        )
        assert scale.spec.replicas == 3 and scale.status.selector == "app=llama"
        read = await apps.read_namespaced_deployment("llama", "default")
        assert read.spec.replicas == 3 and read.metadata.generation == 2
        stale = read
        stale.metadata.resource_version = created.metadata.resource_version
        with pytest.raises(aclient.ApiException) as conflict:
            await apps.replace_namespaced_deployment("llama", "default", stale)
        assert conflict.value.status == 409
        listing = await apps.list_namespaced_deployment(
            "default", label_selector="autoscaling.tidal.dev/enabled=true"
        )
        watcher = awatch.Watch()
        seen: list[tuple[str, int]] = []
        async with watcher.stream(
            apps.list_namespaced_deployment,
            "default",
            resource_version=listing.metadata.resource_version,
            timeout_seconds=5,
        ) as stream:
            await apps.patch_namespaced_deployment("llama", "default", {"spec": {"replicas": 5}})
            async for event in stream:
                seen.append((event["type"], event["object"].spec.replicas))
                watcher.stop()
        assert seen == [("MODIFIED", 5)]


async def test_kubernetes_asyncio_in_cluster_with_rbac(
    rbac_server: ApiServer, tmp_path: Path
) -> None:
    server = rbac_server
    admin = aclient.Configuration()
    kubeconfig = server.write_kubeconfig(tmp_path / "admin.kubeconfig")
    await aconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=admin)
    async with aclient.ApiClient(admin) as admin_client:
        await aclient.CoreV1Api(admin_client).create_namespace({"metadata": {"name": "tidal"}})
        await aclient.AppsV1Api(admin_client).create_namespaced_deployment(
            "tidal", deployment("llama")
        )
        rbac = aclient.RbacAuthorizationV1Api(admin_client)
        await rbac.create_namespaced_role(
            "tidal",
            {
                "metadata": {"name": "scaler"},
                "rules": [
                    {
                        "apiGroups": ["apps"],
                        "resources": ["deployments"],
                        "verbs": ["get", "list", "watch"],
                    },
                    {
                        "apiGroups": ["apps"],
                        "resources": ["deployments/scale"],
                        "verbs": ["patch"],
                        "resourceNames": ["llama"],
                    },
                ],
            },
        )
        await rbac.create_namespaced_role_binding(
            "tidal",
            {
                "metadata": {"name": "scaler"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "scaler",
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": "tidal-scaler", "namespace": "tidal"}
                ],
            },
        )

    mount = tmp_path / "serviceaccount"
    env = server.write_in_cluster_dir(mount, namespace="tidal", service_account="tidal-scaler")
    assert (mount / "namespace").read_text() == "tidal"
    configuration = aclient.Configuration()
    InClusterConfigLoader(
        token_filename=str(mount / "token"), cert_filename=str(mount / "ca.crt"), environ=env
    ).load_and_set(configuration)
    async with aclient.ApiClient(configuration) as api_client:
        apps = aclient.AppsV1Api(api_client)
        listing = await apps.list_namespaced_deployment("tidal")
        assert [d.metadata.name for d in listing.items] == ["llama"]
        scale = await apps.patch_namespaced_deployment_scale(
            "llama", "tidal", {"spec": {"replicas": 2}}
        )
        assert scale.spec.replicas == 2
        with pytest.raises(aclient.ApiException) as denied:
            await apps.patch_namespaced_deployment("llama", "tidal", {"spec": {"replicas": 4}})
        assert denied.value.status == 403
        assert json.loads(denied.value.body)["message"] == (
            'deployments.apps "llama" is forbidden: '
            'User "system:serviceaccount:tidal:tidal-scaler" cannot patch resource "deployments" '
            'in API group "apps" in the namespace "tidal"'
        )
        with pytest.raises(aclient.ApiException) as other_ns:
            await apps.list_namespaced_deployment("default")
        assert other_ns.value.status == 403
        with pytest.raises(aclient.ApiException) as cluster_wide:
            await aclient.CoreV1Api(api_client).list_node()
        assert cluster_wide.value.status == 403
        assert json.loads(cluster_wide.value.body)["message"].endswith(
            'cannot list resource "nodes" in API group "" at the cluster scope'
        )


def _sync_client_session(kubeconfig: Path) -> dict[str, Any]:
    api_client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    try:
        apps = kubernetes.client.AppsV1Api(api_client)
        core = kubernetes.client.CoreV1Api(api_client)
        events = kubernetes.client.EventsV1Api(api_client)
        apps.create_namespaced_deployment("default", deployment("a"))
        apps.create_namespaced_deployment("default", deployment("b", replicas=2))
        selected = apps.list_namespaced_deployment("default", label_selector="app=b")
        patched = apps.patch_namespaced_deployment(
            "a",
            "default",
            {"spec": {"template": {"spec": {"containers": [{"name": "vllm", "image": "vllm:2"}]}}}},
        )
        events.create_namespaced_event(
            "default",
            {
                "metadata": {"name": "a.1"},
                "eventTime": "2025-01-01T00:00:00.000000Z",
                "regarding": {"kind": "Deployment", "name": "a", "namespace": "default"},
                "reason": "ScaledUp",
                "note": "up",
                "action": "Scale",
                "type": "Normal",
                "reportingController": "tidal",
                "reportingInstance": "t-0",
            },
        )
        core_events = core.list_namespaced_event("default", field_selector="involvedObject.name=a")
        watcher = kubernetes.watch.Watch()
        streamed = [
            (e["type"], e["object"].metadata.name)
            for e in watcher.stream(apps.list_namespaced_deployment, "default", timeout_seconds=1)
        ]
        return {
            "selected": [d.metadata.name for d in selected.items],
            "image": patched.spec.template.spec.containers[0].image,
            "containers": len(patched.spec.template.spec.containers),
            "event_messages": [e.message for e in core_events.items],
            "streamed": streamed,
        }
    finally:
        api_client.close()


async def test_official_sync_client_through_kubeconfig(kubeconfig: Path) -> None:
    result = await asyncio.to_thread(_sync_client_session, kubeconfig)
    assert result["selected"] == ["b"]
    assert result["image"] == "vllm:2" and result["containers"] == 1  # merged by name
    assert result["event_messages"] == ["up"]
    assert result["streamed"] == [("ADDED", "a"), ("ADDED", "b")]


def _read_resources(kubeconfig: Path, name: str) -> dict[str, dict[str, str]]:
    api_client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    try:
        read = kubernetes.client.AppsV1Api(api_client).read_namespaced_deployment(name, "default")
        resources = read.spec.template.spec.containers[0].resources
        return {"limits": dict(resources.limits), "requests": dict(resources.requests)}
    finally:
        api_client.close()


async def test_official_client_reads_quantities_back_as_canonical_strings(
    api: Api, kubeconfig: Path
) -> None:
    # Sent as a user writes them in YAML (kubectl passes numbers through);
    # the official client (37) refuses a number where a quantity is, so it
    # can read the Deployment back only if the server answers with the
    # canonical strings a real one returns.
    body = deployment("gpu")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1, "memory": "1024Mi"},
        "requests": {"cpu": 0.5, "memory": "1.5Gi"},
    }
    code, _, _ = await api.call("POST", "/apis/apps/v1/namespaces/default/deployments", body=body)
    assert code == 201
    read = await asyncio.to_thread(_read_resources, kubeconfig, "gpu")
    assert read == {
        "limits": {"nvidia.com/gpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "1536Mi"},
    }
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": 2}}}]
                }
            }
        }
    }
    code, _, _ = await api.call(
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/gpu",
        body=patch,
        content_type="application/strategic-merge-patch+json",
    )
    assert code == 200
    read = await asyncio.to_thread(_read_resources, kubeconfig, "gpu")
    assert read["limits"] == {"nvidia.com/gpu": "2", "memory": "1Gi"}
