"""``GET pods/{name}/log``: what ``kubectl logs`` reads, from the file the kubelet writes.

Query parameters as kubectl sends them: ``container`` (needed when the pod
has several), ``tailLines``, ``limitBytes`` and ``follow``; ``timestamps``,
``sinceSeconds`` and ``previous`` are accepted and ignored (the file holds
every run of the container, oldest first). Errors use the real server's
wording: a pod with several containers and none named, a container the pod
does not have, a container still waiting to start.

Main decision: ``follow`` polls the file's size every ``FOLLOW_POLL_S``
rather than watching it with inotify: one stat per follower per tick is
nothing next to a model server's output, and it works on every platform.
The stream ends when the pod is gone or has finished (phase ``Succeeded``
or ``Failed``), when the client leaves, or when the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from aiohttp import web

from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.errors import BadRequest
from loadtests.sandbox.cluster.pod_logs import container_log_path, read_tail

__all__ = ["FOLLOW_POLL_S", "serve_pod_log"]

FOLLOW_POLL_S = 0.2
_FINISHED = ("Succeeded", "Failed")


def _non_negative(request: web.Request, name: str) -> int | None:
    text = request.query.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, got {text!r}") from None
    if value < 0:
        raise BadRequest(f"{name} must be >= 0, got {value}")
    return value


def _container(pod: dict[str, Any], request: web.Request) -> str:
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    containers = [str(c.get("name")) for c in spec.get("containers") or []]
    others = [str(c.get("name")) for c in spec.get("initContainers") or []]
    wanted = request.query.get("container")
    if wanted is None:
        if len(containers) == 1:
            return containers[0]
        raise BadRequest(
            f"a container name must be specified for pod {name}, "
            f"choose one of: [{' '.join(containers)}]"
        )
    if wanted not in containers and wanted not in others:
        raise BadRequest(f"container {wanted} is not valid for pod {name}")
    return wanted


async def serve_pod_log(
    ctx: ResourceContext,
    request: web.Request,
    req: ResourceRequest,
    *,
    log_dir: Path | None,
    closing: asyncio.Event,
) -> web.StreamResponse:
    assert req.name is not None
    namespace = req.namespace or "default"
    pod = ctx.store.get(req.rtype, namespace, req.name)
    container = _container(pod, request)
    tail_lines = _non_negative(request, "tailLines")
    limit_bytes = _non_negative(request, "limitBytes")
    path = container_log_path(log_dir, namespace, req.name, container) if log_dir else None
    if path is None or not path.exists():
        if (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            raise BadRequest(
                f'container "{container}" in pod "{req.name}" is waiting to start: '
                "ContainerCreating"
            )
        # A container that runs nothing (a sidecar in the sandbox) has said nothing.
        return web.Response(body=b"", content_type="text/plain")
    data, offset = read_tail(path, lines=tail_lines, limit_bytes=limit_bytes)
    if request.query.get("follow", "").lower() not in ("true", "1"):
        return web.Response(body=data, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    with contextlib.suppress(ConnectionResetError):
        await response.write(data)
        while not closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), FOLLOW_POLL_S)
            offset = await _send_new(response, path, offset)
            current = ctx.store.peek(req.rtype, namespace, req.name)
            if current is None or (current.get("status") or {}).get("phase") in _FINISHED:
                await _send_new(response, path, offset)
                break
            if current["metadata"].get("uid") != pod["metadata"].get("uid"):
                break  # a new pod of the same name: not the one being followed
        await response.write_eof()
    return response


async def _send_new(response: web.StreamResponse, path: Path, offset: int) -> int:
    try:
        with path.open("rb") as file:
            file.seek(offset)
            data = file.read()
    except FileNotFoundError:
        return offset
    if data:
        await response.write(data)
    return offset + len(data)
