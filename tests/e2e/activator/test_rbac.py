"""The RBAC in deploy/ is enough for both services, and no more.

In an emulated cluster with RBAC enforced, the objects of
``deploy/base/scaler-rbac.yaml`` and ``deploy/base/activator-rbac.yaml`` are
created in ``tidal-system`` (as kustomize would place them), tokens are
minted for the two ServiceAccounts, and the real ``tidal scaler`` and
``tidal activator`` processes run with kubeconfigs holding those tokens.

Covers, *enough*:
- the activator discovers an opted-in model and proxies a request to it;
- that request, held at zero replicas, makes the scaler wake the Deployment
  (``/scale``), write its ``autoscaling.tidal.dev/status`` annotation and an
  Event, and hold the ``tidal-scaler`` Lease in ``tidal-system``;
- a second model idle at two replicas with ``min-scale: 1`` is scaled down
  by the scaler, which first writes ``controller.kubernetes.io/pod-deletion-cost``
  on its pods;
- neither process's log mentions a refusal (403 / Forbidden).

*No more*: with each token, what the service must not do is refused with 403
(and a few things it must do are allowed, so the 403s mean RBAC, not a
broken request): the activator (which reads Nodes for interruption
notices) cannot patch or delete Deployments, scale them, read Secrets or
pods, patch or delete Nodes, write Events or touch Leases; the scaler (which
lists InferencePools) cannot patch or delete them, nor update (PUT)
Deployments (it creates and deletes only spot companions, and patches the
rest), PUT their ``/scale``, write nodes, patch
core Events or create ``events.k8s.io`` Events, read Secrets, delete pods, or
read, update or delete Leases other than ``tidal-scaler`` in
``tidal-system``, nor create or read Leases in any other namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import TidalProcess
from tests.e2e.activator.kube_support import Api, running_cluster
from tests.integration.activator.helpers import free_port

# A 403 as the Kubernetes clients write a refusal into a log line.
REFUSED = re.compile(r"(?:http |status[ =:]|\()403\b")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
RBAC_FILES = (ROOT / "deploy/base/scaler-rbac.yaml", ROOT / "deploy/base/activator-rbac.yaml")
NS = "tidal-system"
NAMESPACED = {"ServiceAccount", "Role", "RoleBinding"}
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
STATUS = "autoscaling.tidal.dev/status"
POOLS = "/apis/inference.networking.k8s.io/v1/inferencepools"
POOLS_IN = "/apis/inference.networking.k8s.io/v1/namespaces/default/inferencepools"


async def apply_rbac(api: Api) -> list[str]:
    """Create the namespace and every object of the deploy/ RBAC files in it."""
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    created = []
    for path in RBAC_FILES:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc["kind"] in NAMESPACED:
                doc["metadata"]["namespace"] = NS
            await api.create(doc)
            created.append(f"{doc['kind']}/{doc['metadata']['name']}")
    return created


def _env(kubeconfig: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDAL_")}
    env["KUBECONFIG"] = str(kubeconfig)
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def _wait_ready(process: TidalProcess, url: str, timeout_s: float = 60.0) -> None:
    async with (
        asyncio.timeout(timeout_s),
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session,
    ):
        while True:
            if not process.running:
                pytest.fail(f"tidal {process.name} exited; its log ends with:\n{process.tail()}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def tidal_with_service_accounts(
    cluster: SandboxCluster, directory: Path
) -> AsyncIterator[tuple[str, str, TidalProcess, TidalProcess]]:
    """Scaler and activator processes, each with its ServiceAccount's token only."""
    assert cluster.api is not None
    scaler_token = cluster.api.mint_token(NS, "tidal-scaler")
    activator_token = cluster.api.mint_token(NS, "tidal-activator")
    scaler_kc = cluster.api.write_kubeconfig(
        directory / "scaler.kubeconfig", token=scaler_token, namespace=NS
    )
    activator_kc = cluster.api.write_kubeconfig(
        directory / "activator.kubeconfig", token=activator_token, namespace=NS
    )
    shared = secrets.token_urlsafe(16)
    scaler_port, port, admin = free_port(), free_port(), free_port()
    scaler = TidalProcess(
        "scaler",
        ["scaler", "--host", "127.0.0.1", "--port", str(scaler_port),
         "--kubeconfig", str(scaler_kc), "--tick-interval-s", "1"],
        env={**_env(scaler_kc), "TIDAL_SCALER_TOKEN": shared},
        log=directory / "logs" / "tidal-scaler.log",
    )  # fmt: skip
    activator = TidalProcess(
        "activator",
        ["activator", "--host", "127.0.0.1", "--port", str(port),
         "--admin-host", "127.0.0.1", "--admin-port", str(admin),
         "--scaler-url", f"http://127.0.0.1:{scaler_port}",
         "--kubeconfig", str(activator_kc)],
        env={**_env(activator_kc), "TIDAL_ACTIVATOR_SCALER_TOKEN": shared},
        log=directory / "logs" / "tidal-activator.log",
    )  # fmt: skip
    try:
        await scaler.start()
        await activator.start()
        await _wait_ready(scaler, f"http://127.0.0.1:{scaler_port}/readyz")
        await _wait_ready(activator, f"http://127.0.0.1:{admin}/readyz")
        yield scaler_token, activator_token, scaler, activator
    finally:
        for process in (activator, scaler):
            await process.stop(15.0)


async def _until(what: str, check: Any, timeout_s: float) -> Any:
    """Poll ``check()`` (an async callable) until it returns something truthy."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                value = await check()
                if value:
                    return value
                await asyncio.sleep(0.25)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


async def test_deploy_rbac_is_enough_and_no_more(tmp_path: Path) -> None:
    llama = ExampleModel(startup_delay_s=1.0, window_s=6.0, cold_start_timeout_s=90.0)
    mistral = ExampleModel(
        name="mistral",
        model="mistral-7b",
        startup_delay_s=0.0,
        min_scale=1,
        max_scale=2,
        window_s=6.0,
        scale_down_delay_s=0.0,
    )
    async with running_cluster(tmp_path / "cluster", rbac=True) as cluster, Api(cluster) as admin:
        created = await apply_rbac(admin)
        assert "ClusterRole/tidal-scaler" in created
        assert "ClusterRole/tidal-activator" in created
        for model, replicas in ((llama, 0), (mistral, 2)):
            await admin.create(model.service())
            dep = model.deployment()
            dep["spec"]["replicas"] = replicas
            await admin.create(dep)
        # A Lease that is not the scaler's, in the scaler's namespace.
        await admin.create(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "someone-else", "namespace": NS},
                "spec": {"holderIdentity": "x"},
            }
        )
        async with tidal_with_service_accounts(cluster, tmp_path) as (
            scaler_token,
            activator_token,
            scaler,
            activator,
        ):
            activator_port = int(activator.argv[activator.argv.index("--port") + 1])

            # --- enough: discover, hold, wake, proxy -----------------------------------
            body = {"model": llama.model, "prompt": "hello", "max_tokens": 3}
            async with (
                aiohttp.ClientSession() as client,
                client.post(
                    f"http://127.0.0.1:{activator_port}/v1/completions",
                    json=body,
                    timeout=aiohttp.ClientTimeout(total=90),
                ) as resp,
            ):
                text = await resp.text()
            assert resp.status == 200, f"{text}\n{activator.tail()}\n{scaler.tail()}"
            assert json.loads(text)["model"] == llama.model

            deployments = "/apis/apps/v1/namespaces/default/deployments"
            dep = await admin.call("GET", f"{deployments}/llama")
            assert dep["spec"]["replicas"] >= 1
            await _until(
                "the status annotation",
                lambda: _annotation(admin, f"{deployments}/llama", STATUS),
                20,
            )
            events = await _until(
                "an Event about llama",
                lambda: _events_about(admin, "llama"),
                20,
            )
            assert {"Activated", "ScaledUp"} & {e["reason"] for e in events}, events
            lease = await admin.call(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/tidal-scaler"
            )
            assert lease["spec"].get("holderIdentity")

            # --- enough: scale down with pod-deletion-cost first ----------------------
            await _until(
                "mistral scaled down to 1",
                lambda: _replicas_is(admin, f"{deployments}/mistral", 1),
                60,
            )
            pods = await admin.pods("mistral")
            assert any(DELETION_COST in (p["metadata"].get("annotations") or {}) for p in pods), (
                "the scaler should have written pod-deletion-cost before scaling down"
            )
            for process in (scaler, activator):
                log = process.log.read_text(errors="replace").lower()
                assert "forbidden" not in log, process.tail(40)
                # A refusal as our clients log it ("HTTP 403", "(403)", "status 403"),
                # not any " 403" (a port such as 40331 or a millisecond field).
                assert REFUSED.search(log) is None, process.tail(40)

            # --- no more ---------------------------------------------------------------
            await check_activator_denied(cluster, activator_token)
            await check_scaler_denied(cluster, scaler_token)


async def _annotation(api: Api, path: str, key: str) -> str | None:
    obj = await api.call("GET", path)
    value = (obj["metadata"].get("annotations") or {}).get(key)
    return str(value) if value else None


async def _events_about(api: Api, name: str) -> list[dict[str, Any]]:
    answer = await api.call("GET", "/api/v1/namespaces/default/events")
    return [e for e in answer["items"] if e.get("involvedObject", {}).get("name") == name]


async def _replicas_is(api: Api, path: str, replicas: int) -> bool:
    obj = await api.call("GET", path)
    return bool(obj["spec"]["replicas"] == replicas)


MERGE = {"content_type": "application/merge-patch+json"}
DEPLOY = "/apis/apps/v1/namespaces/default/deployments/llama"
LEASES = "/apis/coordination.k8s.io/v1/namespaces"


async def check_activator_denied(cluster: SandboxCluster, token: str) -> None:
    async with Api(cluster, token) as api:
        # What it needs (so the 403s below are RBAC, not a broken request).
        assert await api.status_of("GET", "/apis/apps/v1/deployments") == 200
        assert await api.status_of("GET", "/apis/discovery.k8s.io/v1/endpointslices") == 200
        assert await api.status_of("GET", "/api/v1/services") == 200
        # Interruption notices: nodes are read, never written.
        assert await api.status_of("GET", "/api/v1/nodes") == 200
        denied = {
            "patch deployment": await api.status_of(
                "PATCH", DEPLOY, {"metadata": {"labels": {"x": "y"}}}, **MERGE
            ),
            "delete deployment": await api.status_of("DELETE", DEPLOY),
            "patch scale": await api.status_of(
                "PATCH", DEPLOY + "/scale", {"spec": {"replicas": 3}}, **MERGE
            ),
            "list secrets": await api.status_of("GET", "/api/v1/secrets"),
            "get secret": await api.status_of("GET", "/api/v1/namespaces/default/secrets/s"),
            "list pods": await api.status_of("GET", "/api/v1/namespaces/default/pods"),
            "patch node": await api.status_of(
                "PATCH", "/api/v1/nodes/gpu-spot-1", {"spec": {"unschedulable": True}}, **MERGE
            ),
            "delete node": await api.status_of("DELETE", "/api/v1/nodes/gpu-spot-1"),
            "create event": await api.status_of(
                "POST",
                "/api/v1/namespaces/default/events",
                {"metadata": {"name": "e"}, "involvedObject": {"name": "llama"}},
            ),
            "get lease": await api.status_of("GET", f"{LEASES}/{NS}/leases/tidal-scaler"),
        }
    assert all(code == 403 for code in denied.values()), denied


async def check_scaler_denied(cluster: SandboxCluster, token: str) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "tidal-scaler", "namespace": "default"},
        "spec": {},
    }
    async with Api(cluster, token) as api:
        assert await api.status_of("GET", f"{LEASES}/{NS}/leases/tidal-scaler") == 200
        assert await api.status_of("GET", "/api/v1/namespaces/default/pods") == 200
        current = await api.call("GET", DEPLOY)
        # Spot placement reads nodes (capacity type, notice taints).
        assert await api.status_of("GET", "/api/v1/nodes") == 200
        # InferencePools are read, never written (docs/gateway-api.md).
        assert await api.status_of("GET", POOLS) == 200
        denied = {
            "patch inferencepool": await api.status_of(
                "PATCH", f"{POOLS_IN}/llama", {"metadata": {"labels": {"x": "y"}}}, **MERGE
            ),
            "delete inferencepool": await api.status_of("DELETE", f"{POOLS_IN}/llama"),
            "update deployment": await api.status_of("PUT", DEPLOY, current),
            "patch node": await api.status_of(
                "PATCH", "/api/v1/nodes/gpu-spot-1", {"spec": {"unschedulable": True}}, **MERGE
            ),
            "delete node": await api.status_of("DELETE", "/api/v1/nodes/gpu-spot-1"),
            "list secrets": await api.status_of("GET", "/api/v1/secrets"),
            "get secret": await api.status_of("GET", "/api/v1/namespaces/default/secrets/s"),
            "delete pod": await api.status_of("DELETE", "/api/v1/namespaces/default/pods/nothing"),
            "get other lease": await api.status_of("GET", f"{LEASES}/{NS}/leases/someone-else"),
            "update other lease": await api.status_of(
                "PATCH",
                f"{LEASES}/{NS}/leases/someone-else",
                {"spec": {"holderIdentity": "me"}},
                **MERGE,
            ),
            "delete other lease": await api.status_of(
                "DELETE", f"{LEASES}/{NS}/leases/someone-else"
            ),
            "delete own lease": await api.status_of("DELETE", f"{LEASES}/{NS}/leases/tidal-scaler"),
            "update scale": await api.status_of(
                "PUT",
                DEPLOY + "/scale",
                {
                    "apiVersion": "autoscaling/v1",
                    "kind": "Scale",
                    "metadata": {"name": "llama", "namespace": "default"},
                    "spec": {"replicas": 1},
                },
            ),
            "patch event": await api.status_of(
                "PATCH", "/api/v1/namespaces/default/events/e", {"count": 2}, **MERGE
            ),
            "create events.k8s.io event": await api.status_of(
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                {
                    "metadata": {"name": "e2"},
                    "reason": "X",
                    "action": "Y",
                    "eventTime": "2024-01-01T00:00:00.000000Z",
                    "reportingController": "tidal",
                    "reportingInstance": "t",
                },
            ),
            "create lease elsewhere": await api.status_of(
                "POST", f"{LEASES}/default/leases", lease
            ),
            "get lease elsewhere": await api.status_of(
                "GET", f"{LEASES}/default/leases/tidal-scaler"
            ),
        }
    assert all(code == 403 for code in denied.values()), denied
