"""kubectl 1.32, as installed, against the emulated API server.

Covers: version and discovery (short names, ``get all``); ``apply -f`` that
creates then configures (strategic merge from /openapi/v3, no client-side
validation warnings); server-side Strict validation (400 unknown field) and
422 Invalid wording; ``get`` columns for deployments, pods (and ``-o wide``),
nodes, services, events; ``describe`` showing Events found by
involvedObject field selectors; ``annotate``, ``label``, ``scale``,
``delete`` (with ownerReference garbage collection of dependents);
``get -w`` printing a change as it happens; ``wait --for=condition=Ready``
and ``rollout status`` finishing once /status says so; the typed ``create``
commands that send protobuf bodies (namespace, secret, configmap,
serviceaccount) store what was asked.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store

from .conftest import KubectlResult

Kubectl = Callable[..., Any]

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama
  labels: {app: llama}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.6.0
        ports: [{containerPort: 8000}]
        env: [{name: A, value: "1"}]
"""

PODS = by_group_version_plural("", "v1", "pods")
DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
NODES = by_group_version_plural("", "v1", "nodes")
EVENTS = by_group_version_plural("", "v1", "events")
assert PODS and DEPLOYMENTS and NODES and EVENTS


def ok(result: KubectlResult) -> str:
    assert result.code == 0, f"kubectl failed ({result.code}): {result.err}"
    return result.out


def header(out: str) -> list[str]:
    return out.splitlines()[0].split()


async def test_version_reports_1_32_and_discovery_resolves_short_names(kubectl: Kubectl) -> None:
    out = ok(await kubectl("version", "-o", "json"))
    assert json.loads(out)["serverVersion"]["gitVersion"].startswith("v1.32.")
    out = ok(await kubectl("api-resources", "--api-group=apps"))
    assert "deployments" in out and "deploy" in out
    ok(await kubectl("get", "deploy,po,svc,no,ev,ns,sa,lease,endpointslices"))


async def test_apply_creates_then_configures_with_strategic_merge(kubectl: Kubectl) -> None:
    result = await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "2"))
    assert "deployment.apps/llama created" in ok(result)
    changed = DEPLOYMENT.replace("REPLICAS", "3").replace('value: "1"', 'value: "2"')
    result = await kubectl("apply", "-f", "-", stdin=changed)
    assert "deployment.apps/llama configured" in ok(result)
    assert "warning" not in result.err.lower(), result.err
    obj = json.loads(ok(await kubectl("get", "deploy", "llama", "-o", "json")))
    assert obj["spec"]["replicas"] == 3
    assert obj["metadata"]["generation"] == 2
    container = obj["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "A", "value": "2"}]
    assert container["imagePullPolicy"] == "IfNotPresent"  # a default the server filled


async def test_strict_validation_and_invalid_values(kubectl: Kubectl) -> None:
    unknown = DEPLOYMENT.replace("REPLICAS", "1").replace("  replicas:", "  bogus: 1\n  replicas:")
    result = await kubectl("apply", "-f", "-", stdin=unknown)
    assert result.code == 1
    assert (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.bogus"'
    ) in result.err
    negative = DEPLOYMENT.replace("REPLICAS", "-1")
    result = await kubectl("apply", "-f", "-", stdin=negative)
    assert result.code == 1
    assert 'The Deployment "llama" is invalid' in result.err
    assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in result.err


async def test_get_columns(kubectl: Kubectl, store: Store) -> None:
    ok(await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "2")))
    assert header(ok(await kubectl("get", "deployments"))) == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
    ]
    out = ok(await kubectl("get", "deploy"))
    assert out.splitlines()[1].split()[:4] == ["llama", "0/2", "0", "0"]
    store.create(
        NODES,
        {
            "metadata": {"name": "gpu-1", "labels": {"node-role.kubernetes.io/worker": ""}},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.32.4"},
            },
        },
    )
    out = ok(await kubectl("get", "nodes"))
    assert header(out) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert out.splitlines()[1].split()[:3] == ["gpu-1", "Ready", "worker"]
    store.create(
        PODS,
        {
            "metadata": {"name": "llama-1", "namespace": "default"},
            "spec": {"nodeName": "gpu-1", "containers": [{"name": "vllm", "image": "x"}]},
            "status": {
                "phase": "Running",
                "podIP": "127.0.10.2",
                "containerStatuses": [
                    {"name": "vllm", "ready": True, "restartCount": 0, "state": {"running": {}}}
                ],
            },
        },
    )
    out = ok(await kubectl("get", "pods"))
    assert header(out) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert out.splitlines()[1].split()[:4] == ["llama-1", "1/1", "Running", "0"]
    out = ok(await kubectl("get", "pods", "-o", "wide"))
    assert header(out)[5:7] == ["IP", "NODE"]
    assert out.splitlines()[1].split()[5:7] == ["127.0.10.2", "gpu-1"]


async def test_describe_shows_events_of_the_object(kubectl: Kubectl, store: Store) -> None:
    ok(await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "1")))
    deployment = store.get(DEPLOYMENTS, "default", "llama")
    store.create(
        EVENTS,
        {
            "metadata": {"name": "llama.1", "namespace": "default"},
            "involvedObject": {
                "kind": "Deployment",
                "apiVersion": "apps/v1",
                "name": "llama",
                "namespace": "default",
                "uid": deployment["metadata"]["uid"],
            },
            "reason": "ScaledUp",
            "message": "scaled from 0 to 1",
            "type": "Normal",
            "source": {"component": "tidal-scaler"},
            "count": 1,
            "firstTimestamp": deployment["metadata"]["creationTimestamp"],
            "lastTimestamp": deployment["metadata"]["creationTimestamp"],
        },
    )
    out = ok(await kubectl("describe", "deployment", "llama"))
    events = out[out.index("Events:") :]
    assert "ScaledUp" in events and "scaled from 0 to 1" in events and "tidal-scaler" in events
    out = ok(await kubectl("get", "events"))
    assert header(out) == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "deployment/llama" in out


async def test_annotate_label_scale_delete(kubectl: Kubectl, store: Store) -> None:
    ok(await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "1")))
    ok(await kubectl("annotate", "deploy", "llama", "autoscaling.tidal.dev/max-scale=4"))
    ok(await kubectl("label", "deploy", "llama", "autoscaling.tidal.dev/enabled=true"))
    ok(await kubectl("scale", "deploy", "llama", "--replicas=3"))
    stored = store.get(DEPLOYMENTS, "default", "llama")
    assert stored["metadata"]["annotations"]["autoscaling.tidal.dev/max-scale"] == "4"
    assert stored["metadata"]["labels"]["autoscaling.tidal.dev/enabled"] == "true"
    assert stored["spec"]["replicas"] == 3
    out = ok(
        await kubectl("get", "deploy", "-l", "autoscaling.tidal.dev/enabled=true", "-o", "name")
    )
    assert out.strip() == "deployment.apps/llama"
    # A pod owned by the Deployment goes with it (garbage collection).
    store.create(
        PODS,
        {
            "metadata": {
                "name": "llama-x",
                "namespace": "default",
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "llama",
                        "uid": stored["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {"containers": [{"name": "vllm", "image": "x"}]},
        },
    )
    assert 'deployment.apps "llama" deleted' in ok(await kubectl("delete", "deploy", "llama"))
    assert store.peek(PODS, "default", "llama-x") is None
    result = await kubectl("get", "deploy", "llama")
    assert result.code == 1
    assert 'deployments.apps "llama" not found' in result.err


async def test_get_watch_prints_changes(
    kubectl: Kubectl, kubeconfig: Any, store: Store, tool_path: Callable[[str], str], tmp_path: Any
) -> None:
    import os

    ok(await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "1")))
    process = await asyncio.create_subprocess_exec(
        tool_path("kubectl"),
        "get",
        "deploy",
        "-w",
        env={
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "HOME": str(tmp_path),
            "KUBECACHEDIR": str(tmp_path / "kube-cache"),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        first = await asyncio.wait_for(process.stdout.readline(), 30)
        assert first.split()[:2] == [b"NAME", b"READY"]
        assert (await asyncio.wait_for(process.stdout.readline(), 30)).split()[:2] == [
            b"llama",
            b"0/1",
        ]
        stored = store.get(DEPLOYMENTS, "default", "llama")
        stored["spec"]["replicas"] = 4
        store.update(DEPLOYMENTS, stored)
        changed = await asyncio.wait_for(process.stdout.readline(), 30)
        assert changed.split()[:2] == [b"llama", b"0/4"]
    finally:
        process.kill()
        await process.communicate()


async def test_wait_for_condition_and_rollout_status(kubectl: Kubectl, api: Any) -> None:
    ok(await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("REPLICAS", "2")))
    waiting = asyncio.create_task(
        kubectl("wait", "--for=condition=Available", "deploy/llama", "--timeout=30s")
    )
    rollout = asyncio.create_task(kubectl("rollout", "status", "deploy/llama", "--timeout=30s"))
    await asyncio.sleep(1.0)  # let both start watching before the status changes
    status = {
        "status": {
            "observedGeneration": 1,
            "replicas": 2,
            "updatedReplicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        }
    }
    code, body, _ = await api.call(
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/llama/status",
        body=status,
        content_type="application/merge-patch+json",
    )
    assert code == 200, body
    assert "condition met" in ok(await waiting)
    assert 'deployment "llama" successfully rolled out' in ok(await rollout)


@pytest.mark.parametrize("resource", ["pods", "deployments.apps", "events.events.k8s.io"])
async def test_get_empty_lists(kubectl: Kubectl, resource: str) -> None:
    result = await kubectl("get", resource)
    assert result.code == 0
    assert "No resources found in default namespace." in result.err


async def test_rbac_denial_reaches_kubectl_with_real_wording(
    server: ApiServer, kubectl: Kubectl, tmp_path: Any, tool_path: Callable[[str], str]
) -> None:
    import os

    server.rbac = True
    token = server.mint_token("default", "reader")
    config = server.write_kubeconfig(tmp_path / "reader.kubeconfig", token=token)
    process = await asyncio.create_subprocess_exec(
        tool_path("kubectl"),
        "get",
        "deploy",
        env={
            **os.environ,
            "KUBECONFIG": str(config),
            "HOME": str(tmp_path),
            "KUBECACHEDIR": str(tmp_path / "kube-cache"),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    assert process.returncode == 1
    assert (
        'deployments.apps is forbidden: User "system:serviceaccount:default:reader" cannot list '
        'resource "deployments" in API group "apps" in the namespace "default"'
    ) in err.decode()


async def test_auth_can_i_follows_rbac(
    server: ApiServer, tmp_path: Any, tool_path: Callable[[str], str], store: Store
) -> None:
    import os

    server.rbac = True
    roles = by_group_version_plural("rbac.authorization.k8s.io", "v1", "roles")
    bindings = by_group_version_plural("rbac.authorization.k8s.io", "v1", "rolebindings")
    assert roles and bindings
    store.create(
        roles,
        {
            "metadata": {"name": "scaler", "namespace": "default"},
            "rules": [
                {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"]}
            ],
        },
    )
    store.create(
        bindings,
        {
            "metadata": {"name": "scaler", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "scaler"},
            "subjects": [{"kind": "ServiceAccount", "name": "scaler", "namespace": "default"}],
        },
    )
    config = server.write_kubeconfig(
        tmp_path / "sa.kubeconfig", token=server.mint_token("default", "scaler")
    )
    env = {
        **os.environ,
        "KUBECONFIG": str(config),
        "HOME": str(tmp_path),
        "KUBECACHEDIR": str(tmp_path / "kube-cache"),
    }

    async def can_i(*args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            tool_path("kubectl"),
            "auth",
            "can-i",
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        return out.decode().strip()

    assert await can_i("patch", "deployments", "--subresource=scale") == "yes"
    assert await can_i("patch", "deployments") == "no"
    assert await can_i("patch", "deployments", "--subresource=scale", "-n", "kube-system") == "no"


async def test_create_commands_that_send_protobuf(kubectl: Kubectl) -> None:
    for args in (
        ("create", "namespace", "tidal-system"),
        (
            *("-n", "tidal-system", "create", "secret", "generic", "tidal-scaler-token"),
            *("--from-literal=token=s3cret", "--from-literal=other=x"),
        ),
        ("-n", "tidal-system", "create", "configmap", "knobs", "--from-literal=window=20s"),
        ("-n", "tidal-system", "create", "serviceaccount", "robot"),
    ):
        created: KubectlResult = await kubectl(*args)
        assert created.code == 0, created.err
    namespace = json.loads((await kubectl("get", "ns", "tidal-system", "-o", "json")).out)
    assert namespace["status"]["phase"] == "Active"
    secret = json.loads(
        (
            await kubectl("-n", "tidal-system", "get", "secret", "tidal-scaler-token", "-o", "json")
        ).out
    )
    assert base64.b64decode(secret["data"]["token"]) == b"s3cret"
    assert secret["type"] == "Opaque"
    config = json.loads(
        (await kubectl("-n", "tidal-system", "get", "configmap", "knobs", "-o", "json")).out
    )
    assert config["data"] == {"window": "20s"}
    accounts = await kubectl("-n", "tidal-system", "get", "serviceaccount", "robot")
    assert accounts.code == 0, accounts.err
