"""A small fake of the Kubernetes API, just enough for scaler.kube's calls.

Not the sandbox's emulated API server (that one is a separate, much larger
piece): this fake serves the handful of paths the scaler's kube package uses,
in the wire format kubernetes_asyncio expects, so that our real client code
(watches with 410 and cut streams, /scale with 409 conflicts, Lease updates
with resourceVersion checks, merge patches, Events) is exercised over HTTP.

Faults: ``unavailable`` answers 503 everywhere; ``conflicts_to_inject`` makes
someone else write the Deployment before each of the next /scale patches;
``fail_next[kind]`` answers the next writes of one kind (``scale``,
``status``, ``pods``, ``events``) with the listed HTTP statuses (409, 422,
500...), one per write, before touching anything.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer


def status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


@dataclass
class FakeKubeApi:
    rv: int = 100
    deployments: dict[str, dict[str, Any]] = field(default_factory=dict)  # ns/name -> object
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    patches: list[tuple[str, str, Any]] = field(default_factory=list)  # path, content type, body
    conflicts_to_inject: int = 0
    unavailable: bool = False
    fail_next: dict[str, list[int]] = field(default_factory=dict)
    watch_queues: dict[str, list[asyncio.Queue[Any]]] = field(default_factory=dict)
    watch_requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    list_requests: list[str] = field(default_factory=list)

    def injected(self, kind: str) -> web.Response | None:
        """The failure queued for the next write of ``kind``, if any."""
        if self.unavailable:
            return status(503, "ServiceUnavailable", "down")
        queued = self.fail_next.get(kind)
        if not queued:
            return None
        code = queued.pop(0)
        reasons = {409: "Conflict", 422: "Invalid", 403: "Forbidden"}
        return status(code, reasons.get(code, "InternalError"), f"injected {code}")

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    # -- object helpers ------------------------------------------------------

    def add_deployment(
        self,
        ns: str,
        name: str,
        *,
        replicas: int,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        obj = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "namespace": ns,
                "name": name,
                "uid": f"uid-{name}",
                "labels": labels or {"autoscaling.tidal.dev/enabled": "true"},
                "annotations": annotations or {},
                "resourceVersion": self.next_rv(),
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": []}},
            },
            "status": {"readyReplicas": replicas},
        }
        self.deployments[f"{ns}/{name}"] = obj
        return obj

    def add_pod(
        self, ns: str, name: str, *, app: str, ip: str, ready: bool = True
    ) -> dict[str, Any]:
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "namespace": ns,
                "name": name,
                "labels": {"app": app},
                "resourceVersion": self.next_rv(),
            },
            "spec": {
                "containers": [{"name": "srv", "ports": [{"name": "http", "containerPort": 8000}]}]
            },
            "status": {
                "podIP": ip,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
        self.pods[f"{ns}/{name}"] = obj
        return obj

    def emit(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        """Push a watch event (or "CUT" / "GONE") to every open watch of ``resource``."""
        for q in self.watch_queues.get(resource, []):
            q.put_nowait((kind, copy.deepcopy(obj)))

    def watches_of(self, resource: str) -> list[dict[str, str]]:
        return [q for r, q in self.watch_requests if r == resource]

    def open_watches(self, resource: str) -> int:
        return len(self.watch_queues.get(resource, []))

    # -- handlers ------------------------------------------------------------

    async def _list_or_watch(
        self, request: web.Request, resource: str, items: list[dict[str, Any]]
    ) -> web.StreamResponse:
        if self.unavailable:
            return status(503, "ServiceUnavailable", "down")
        if request.query.get("watch") not in ("true", "True", "1"):
            self.list_requests.append(resource)
            return web.json_response(
                {
                    "kind": "List",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self.rv)},
                    "items": items,
                }
            )
        self.watch_requests.append((resource, dict(request.query)))
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        q: asyncio.Queue[Any] = asyncio.Queue()
        self.watch_queues.setdefault(resource, []).append(q)
        try:
            while True:
                kind, obj = await q.get()
                if kind == "CUT":
                    break
                if kind == "GONE":
                    err = {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": "too old resource version",
                        "reason": "Expired",
                        "code": 410,
                    }
                    await resp.write(json.dumps({"type": "ERROR", "object": err}).encode() + b"\n")
                    break
                await resp.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        finally:
            self.watch_queues[resource].remove(q)
        return resp

    async def deployments_all(self, request: web.Request) -> web.StreamResponse:
        selector = request.query.get("labelSelector", "")
        key, _, value = selector.partition("=")
        items = [d for d in self.deployments.values() if d["metadata"]["labels"].get(key) == value]
        return await self._list_or_watch(request, "deployments", items)

    async def pods_ns(self, request: web.Request) -> web.StreamResponse:
        ns = request.match_info["ns"]
        items = [p for p in self.pods.values() if p["metadata"]["namespace"] == ns]
        return await self._list_or_watch(request, f"pods/{ns}", items)

    def _deployment(self, request: web.Request) -> dict[str, Any] | None:
        return self.deployments.get(f"{request.match_info['ns']}/{request.match_info['name']}")

    async def scale(self, request: web.Request) -> web.Response:
        if self.unavailable:
            return status(503, "ServiceUnavailable", "down")
        d = self._deployment(request)
        if d is None:
            return status(404, "NotFound", "deployments.apps not found")
        if request.method == "PATCH":
            body = await request.json()
            failed = self.injected("scale")
            if failed is not None:
                return failed
            self.patches.append((request.path, request.content_type, body))
            if self.conflicts_to_inject > 0:
                self.conflicts_to_inject -= 1
                d["metadata"]["resourceVersion"] = self.next_rv()  # someone else wrote
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if sent_rv is not None and sent_rv != d["metadata"]["resourceVersion"]:
                return status(409, "Conflict", "the object has been modified")
            d["spec"]["replicas"] = body["spec"]["replicas"]
            d["metadata"]["resourceVersion"] = self.next_rv()
            answered = d["metadata"]["resourceVersion"]
            # The Deployment controller records the new generation at once: the
            # version this answer carries is stale by the time the caller reads it.
            d["metadata"]["resourceVersion"] = self.next_rv()
            return web.json_response(
                {
                    "apiVersion": "autoscaling/v1",
                    "kind": "Scale",
                    "metadata": {
                        "namespace": d["metadata"]["namespace"],
                        "name": d["metadata"]["name"],
                        "resourceVersion": answered,
                    },
                    "spec": {"replicas": d["spec"]["replicas"]},
                    "status": {"replicas": d["status"]["readyReplicas"], "selector": "app=x"},
                }
            )
        return web.json_response(
            {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {
                    "namespace": d["metadata"]["namespace"],
                    "name": d["metadata"]["name"],
                    "resourceVersion": d["metadata"]["resourceVersion"],
                },
                "spec": {"replicas": d["spec"]["replicas"]},
                "status": {"replicas": d["status"]["readyReplicas"], "selector": "app=x"},
            }
        )

    async def patch_deployment(self, request: web.Request) -> web.Response:
        d = self._deployment(request)
        if d is None:
            return status(404, "NotFound", "not found")
        body = await request.json()
        failed = self.injected("status")
        if failed is not None:
            return failed
        if request.content_type == "application/json-patch+json":
            return self._json_patch(request, d, body)
        sent_rv = body["metadata"].get("resourceVersion")
        if sent_rv is not None and sent_rv != d["metadata"]["resourceVersion"]:
            return status(409, "Conflict", "the object has been modified")
        self.patches.append((request.path, request.content_type, body))
        d["metadata"]["annotations"].update(body["metadata"]["annotations"])
        d["metadata"]["resourceVersion"] = self.next_rv()
        return web.json_response(d)

    async def read_deployment(self, request: web.Request) -> web.Response:
        d = self._deployment(request)
        if d is None:
            return status(404, "NotFound", "not found")
        return web.json_response(d)

    def _json_patch(self, request: web.Request, d: dict[str, Any], ops: Any) -> web.Response:
        """RFC 6902, as much as the status write uses: ``test`` and ``add`` under metadata."""
        self.patches.append((request.path, request.content_type, ops))
        doc = copy.deepcopy(d)
        for op in ops:
            tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"][1:].split("/")]
            parent = doc
            for token in tokens[:-1]:
                if not isinstance(parent, dict) or token not in parent:
                    return status(422, "Invalid", f'doc is missing path: "{op["path"]}"')
                parent = parent[token]
            if op["op"] == "test":
                if parent.get(tokens[-1]) != op["value"]:
                    return status(422, "Invalid", f"testing value {op['path']} failed: test failed")
            elif op["op"] == "add":
                parent[tokens[-1]] = copy.deepcopy(op["value"])
            else:
                return status(422, "Invalid", f"op {op['op']} is not in this fake")
        d.clear()
        d.update(doc)
        d["metadata"]["resourceVersion"] = self.next_rv()
        return web.json_response(d)

    async def patch_pod(self, request: web.Request) -> web.Response:
        key = f"{request.match_info['ns']}/{request.match_info['name']}"
        body = await request.json()
        failed = self.injected("pods")
        if failed is not None:
            return failed
        self.patches.append((request.path, request.content_type, body))
        pod = self.pods.get(key)
        if pod is None:
            return status(404, "NotFound", "pods not found")
        annotations = pod["metadata"].setdefault("annotations", {})
        for name, value in body["metadata"]["annotations"].items():
            if value is None:  # a merge patch's null removes the key
                annotations.pop(name, None)
            else:
                annotations[name] = value
        return web.json_response(pod)

    async def create_event(self, request: web.Request) -> web.Response:
        failed = self.injected("events")
        if failed is not None:
            return failed
        body = await request.json()
        self.events.append(body)
        return web.json_response(body, status=201)

    async def lease(self, request: web.Request) -> web.Response:
        if self.unavailable:
            return status(503, "ServiceUnavailable", "down")
        ns = request.match_info["ns"]
        name = request.match_info.get("name")
        if request.method == "POST":
            body = await request.json()
            key = f"{ns}/{body['metadata']['name']}"
            if key in self.leases:
                return status(409, "AlreadyExists", "leases already exists")
            body["metadata"]["resourceVersion"] = self.next_rv()
            self.leases[key] = body
            return web.json_response(body, status=201)
        key = f"{ns}/{name}"
        current = self.leases.get(key)
        if current is None:
            return status(404, "NotFound", "leases not found")
        if request.method == "PUT":
            body = await request.json()
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return status(409, "Conflict", "the object has been modified")
            body["metadata"]["resourceVersion"] = self.next_rv()
            self.leases[key] = body
            return web.json_response(body)
        return web.json_response(current)

    def app(self) -> web.Application:
        app = web.Application()
        r = app.router
        r.add_get("/apis/apps/v1/deployments", self.deployments_all)
        r.add_get("/api/v1/namespaces/{ns}/pods", self.pods_ns)
        r.add_route("*", "/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale", self.scale)
        r.add_patch("/apis/apps/v1/namespaces/{ns}/deployments/{name}", self.patch_deployment)
        r.add_get("/apis/apps/v1/namespaces/{ns}/deployments/{name}", self.read_deployment)
        r.add_patch("/api/v1/namespaces/{ns}/pods/{name}", self.patch_pod)
        r.add_post("/api/v1/namespaces/{ns}/events", self.create_event)
        r.add_post("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", self.lease)
        r.add_route("*", "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}", self.lease)
        return app


async def start(api: FakeKubeApi) -> AsyncIterator[str]:
    server = TestServer(api.app(), host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        for queues in api.watch_queues.values():
            for q in queues:
                q.put_nowait(("CUT", None))
        await server.close()
