"""Support for the activator's tests against the emulated cluster.

- :func:`running_cluster`: a :class:`SandboxCluster` in a directory, always
  stopped (pod processes included), even when the test fails;
- :class:`Api`: a few calls to the cluster's API server over HTTPS with a
  bearer token (the admin's unless told), the way a user or kubectl would
  make them, so every change reaches the activator through its watches;
- :class:`Snapshots`: a TargetSink that keeps every snapshot a source hands
  it, so a test waits for a state instead of sleeping;
- :class:`SliceReadiness`: the store's listener that notes (on the loop's
  clock) when a Service's EndpointSlice first lists a ready endpoint;
- manifest builders: an opted-in Deployment (process-less pods by default, a
  fake vLLM with ``vllm=True``) and its Service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from activator.targets import Discovered
from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.cluster.resources import ResourceType

Obj = dict[str, Any]

MERGE = "application/merge-patch+json"


@contextlib.asynccontextmanager
async def running_cluster(directory: Path, *, rbac: bool = False) -> AsyncIterator[SandboxCluster]:
    cluster = SandboxCluster(directory, rbac=rbac)
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


class Api:
    """HTTPS calls to the emulated API server, as one bearer token."""

    def __init__(self, cluster: SandboxCluster, token: str | None = None) -> None:
        assert cluster.api is not None
        self.base = cluster.api.url
        self.token = token or cluster.api.admin_token
        self._ssl = ssl.create_default_context(cafile=str(cluster.api.ca_path))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=aiohttp.ClientTimeout(total=10),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> Any:
        """The decoded answer; a status >= 400 raises :class:`ApiError` with the Status body."""
        assert self._session is not None
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self._session.request(
            method, self.base + path, data=data, headers=headers, ssl=self._ssl
        ) as resp:
            text = await resp.text()
            try:
                answer = json.loads(text) if text else None
            except ValueError:
                answer = text
            if resp.status >= 400:
                raise ApiError(resp.status, answer)
            return answer

    async def status_of(self, method: str, path: str, body: Any = None, **kw: Any) -> int:
        """Only the status code (for "is this allowed?" checks)."""
        try:
            await self.call(method, path, body, **kw)
        except ApiError as exc:
            return exc.status
        return 200

    # --- the few writes the tests make ---------------------------------------------------

    async def create(self, obj: Obj) -> Obj:
        """POST ``obj`` to its collection (the kinds these tests write)."""
        meta = obj["metadata"]
        ns = meta.get("namespace", "default")
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        path = {
            "Deployment": f"/apis/apps/v1/namespaces/{ns}/deployments",
            "Service": f"/api/v1/namespaces/{ns}/services",
            "ConfigMap": f"/api/v1/namespaces/{ns}/configmaps",
            "ServiceAccount": f"/api/v1/namespaces/{ns}/serviceaccounts",
            "Namespace": "/api/v1/namespaces",
            "Lease": f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            "Role": f"{rbac}/namespaces/{ns}/roles",
            "RoleBinding": f"{rbac}/namespaces/{ns}/rolebindings",
            "ClusterRole": f"{rbac}/clusterroles",
            "ClusterRoleBinding": f"{rbac}/clusterrolebindings",
        }[obj["kind"]]
        result: Obj = await self.call("POST", path, obj)
        return result

    async def patch_deployment(self, name: str, patch: Obj, namespace: str = "default") -> Obj:
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        result: Obj = await self.call("PATCH", path, patch, content_type=MERGE)
        return result

    async def scale(self, name: str, replicas: int, namespace: str = "default") -> None:
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"
        await self.call("PATCH", path, {"spec": {"replicas": replicas}}, content_type=MERGE)

    async def delete(self, path: str) -> None:
        await self.call("DELETE", path)

    async def pods(self, app: str, namespace: str = "default") -> list[Obj]:
        answer = await self.call(
            "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{app}"
        )
        return list(answer["items"])


class Snapshots:
    """A TargetSink that keeps every snapshot and wakes waiters on each one."""

    def __init__(self) -> None:
        self.history: list[dict[str, Discovered]] = []
        self._changed = asyncio.Event()

    @property
    def latest(self) -> dict[str, Discovered]:
        return self.history[-1] if self.history else {}

    def apply(self, targets: Mapping[str, Discovered]) -> None:
        self.history.append(dict(targets))
        self._changed.set()

    async def wait_for(
        self, predicate: Callable[[dict[str, Discovered]], bool], timeout_s: float = 20.0
    ) -> dict[str, Discovered]:
        """The first snapshot (the latest one included) for which ``predicate`` holds."""
        async with asyncio.timeout(timeout_s):
            while True:
                self._changed.clear()
                if self.history and predicate(self.latest):
                    return self.latest
                await self._changed.wait()


def ready_hosts(spec: Discovered | None) -> set[str]:
    return {e.host for e in (spec.endpoints if spec else ()) if e.ready}


class SliceReadiness:
    """When (loop time) each Service's EndpointSlices first listed a ready endpoint."""

    def __init__(self, cluster: SandboxCluster) -> None:
        self.first_ready: dict[str, float] = {}
        self._loop = asyncio.get_running_loop()
        cluster.store.add_listener(self._on_change)

    def _on_change(self, rtype: ResourceType, event: str, old: Obj | None, new: Obj) -> None:
        if rtype.plural != "endpointslices" or event == "DELETED":
            return
        meta = new.get("metadata") or {}
        service = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if not service:
            return
        key = f"{meta.get('namespace')}/{service}"
        if key in self.first_ready:
            return
        for ep in new.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready"):
                self.first_ready[key] = self._loop.time()
                return


def deployment(
    name: str,
    *,
    replicas: int,
    annotations: Mapping[str, str] | None = None,
    opted_in: bool = True,
    vllm: bool = False,
    model: str = "llama-3-8b",
    startup_delay: str = "0s",
    namespace: str = "default",
) -> Obj:
    """An inference Deployment; process-less pods unless ``vllm`` (a real fake vLLM)."""
    labels = {"app": name}
    pod_notes = {"sandbox.tidal.dev/startup-delay": startup_delay}
    container: Obj = {
        "name": "server",
        "image": "vllm/vllm-openai:latest",
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    if vllm:
        pod_notes |= {"sandbox.tidal.dev/engine": "vllm", "sandbox.tidal.dev/model": model}
        container["args"] = ["--served-model-name", model]
        container["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": 1,
        }
    else:
        pod_notes["sandbox.tidal.dev/process"] = "none"
    meta_labels = dict(labels)
    if opted_in:
        meta_labels["autoscaling.tidal.dev/enabled"] = "true"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": pod_notes},
                "spec": {"terminationGracePeriodSeconds": 2, "containers": [container]},
            },
        },
    }


def service(
    name: str,
    *,
    app: str,
    ports: list[Obj] | None = None,
    namespace: str = "default",
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"app": app},
            "ports": ports or [{"name": "http", "port": 8000, "targetPort": "http"}],
        },
    }
