"""The sandbox's admin endpoint: cloud-side actions a Kubernetes client cannot take.

A cloud preempts a spot VM, and a process crashes, outside the Kubernetes
API; the sandbox exposes those two as a small HTTP endpoint beside the API
server, on the sandbox's own loopback address, guarded by a random bearer
token. ``DIR/admin.json`` (mode 0600) holds ``{"url": ..., "token": ...}``
for ``tidal sandbox preempt`` and for tests.

- ``POST /preempt`` ``{"node": "gpu-spot-1", "notice_s": 30}`` (and
  optionally ``"return_after_s": 60``): the preemption of
  :meth:`NodeLifecycle.preempt`; answers when the node is gone with
  ``{"node", "pods_deleted", "notice_s", "return_after_s"}``; 404 for an
  unknown node, 409 when that node is already being preempted;
- ``POST /nodes/{name}/restore``: a node that went comes back now (404 when
  it never existed, 409 when it is there);
- ``GET /spot-capacity`` and ``POST /spot-capacity`` ``{"gpus": 8}`` (``null``:
  unlimited): the spot GPUs the cloud gives out in all, and those in use;
  lowering it preempts nothing, it only keeps new spot pods Pending;
- ``POST /pods/{namespace}/{name}/crash``: SIGKILL the pod's server process
  (the kubelet restarts it with back-off); 404 when no such pod runs;
- ``GET /healthz``: ``ok``.

API-server faults (unavailable, slow, cut watches) are the API server's own
admin endpoint (``/_sandbox/faults`` on the API URL, admin token).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from aiohttp import web

from loadtests.sandbox.cluster.controllers.base import NODES
from loadtests.sandbox.cluster.controlplane import ControlPlane
from loadtests.sandbox.cluster.errors import NotFound
from loadtests.sandbox.cluster.quantity import parse_duration

__all__ = ["AdminEndpoint", "read_admin_file"]

ADMIN_FILE = "admin.json"


def read_admin_file(directory: Path) -> dict[str, str]:
    path = directory / ADMIN_FILE
    try:
        data: dict[str, str] = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} does not exist: is 'tidal sandbox cluster --dir {directory}' running?"
        ) from None
    return data


class AdminEndpoint:
    def __init__(self, plane: ControlPlane, *, host: str, directory: Path) -> None:
        self.plane = plane
        self.host = host
        self.directory = directory
        self.token = secrets.token_urlsafe(24)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_post("/preempt", self._preempt)
        app.router.add_post("/pods/{namespace}/{name}/crash", self._crash)
        app.router.add_post("/nodes/{name}/restore", self._restore)
        app.router.add_get("/spot-capacity", self._spot_capacity)
        app.router.add_post("/spot-capacity", self._set_spot_capacity)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        port = int(self._runner.addresses[0][1])
        self.url = f"http://{self.host}:{port}"
        path = self.directory / ADMIN_FILE
        path.write_text(json.dumps({"url": self.url, "token": self.token}))
        path.chmod(0o600)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"message": "missing or wrong admin token"}, status=401)
        response: web.StreamResponse = await handler(request)
        return response

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _preempt(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            node = str(body["node"])
            notice_s = parse_duration(body.get("notice_s", 30))
            back = body.get("return_after_s")
            return_after_s = None if back is None else parse_duration(back)
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response(
                {
                    "message": "expected {'node': NAME, 'notice_s': SECONDS, "
                    f"'return_after_s': SECONDS or absent}}: {exc}"
                },
                status=400,
            )
        if node in self.plane.nodes.preempting:
            return web.json_response(
                {"message": f"node {node} is already being preempted"}, status=409
            )
        try:
            result = await self.plane.nodes.preempt(
                node, notice_s=notice_s, return_after_s=return_after_s
            )
        except NotFound as exc:
            return web.json_response({"message": exc.message}, status=404)
        return web.json_response(
            {
                "node": result.node,
                "pods_deleted": list(result.pods_deleted),
                "notice_s": notice_s,
                "return_after_s": return_after_s,
            }
        )

    async def _restore(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if self.plane.store.peek(NODES, "", name) is not None:
            return web.json_response({"message": f"node {name} is there already"}, status=409)
        if not self.plane.nodes.restore(name):
            return web.json_response({"message": f"no node {name} ever existed"}, status=404)
        return web.json_response({"restored": name})

    def _capacity_body(self) -> dict[str, float | None]:
        scheduler = self.plane.scheduler
        return {"gpus": scheduler.spot_capacity_gpus, "in_use": scheduler.spot_gpus_in_use()}

    async def _spot_capacity(self, _request: web.Request) -> web.Response:
        return web.json_response(self._capacity_body())

    async def _set_spot_capacity(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            gpus = body["gpus"]
            if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int | float)):
                raise TypeError(f"gpus must be a number or null, got {gpus!r}")
            self.plane.scheduler.set_spot_capacity(None if gpus is None else float(gpus))
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response(
                {"message": f"expected {{'gpus': NUMBER >= 0 or null}}: {exc}"}, status=400
            )
        return web.json_response(self._capacity_body())

    async def _crash(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        if not self.plane.kubelet.crash(namespace, name):
            return web.json_response(
                {"message": f"no running process for pod {namespace}/{name}"}, status=404
            )
        return web.json_response({"crashed": f"{namespace}/{name}"})
