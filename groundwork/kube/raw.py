"""Calling the Kubernetes API for raw JSON, with the HTTP status checked.

Every read Tidal makes asks kubernetes_asyncio for the unparsed answer
(``_preload_content=False``) rather than its models: the callers want a
handful of fields, and deserializing thousands of full objects into models
per re-list costs more than the scaler's whole decision loop. But
kubernetes_asyncio does not check the HTTP status of an unpreloaded
response, so :func:`check_response` does, and :func:`call_json` is the one
place that makes such a call, parses it and turns every failure into a
:mod:`groundwork.kube.errors` type (the Reflector's lists, ``tidal
status``'s listings, the actuator's reads of spot companions, and
:func:`read_deployment`).

:func:`read_deployment` serves tools outside the services: the load tests'
replica sampler reads one Deployment every second while a load test runs,
connected as the services are (:func:`groundwork.kube.connection.connect`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from groundwork.kube.errors import KubeError, error_for_status, translate

__all__ = ["RawObject", "call_json", "check_response", "read_deployment"]

RawObject = dict[str, Any]


async def check_response(resp: Any, doing: str) -> None:
    """Raise our error for a non-2xx unpreloaded response (kubernetes_asyncio does not)."""
    status = int(resp.status)
    if 200 <= status < 300:
        return
    body = await resp.read()
    resp.release()
    try:
        message = json.loads(body).get("message", "")
    except (ValueError, AttributeError):
        message = body[:300].decode("utf-8", "replace")
    raise error_for_status(status, f"{doing}: HTTP {status}: {message}")


async def call_json(
    call: Callable[..., Awaitable[Any]],
    *args: Any,
    doing: str,
    request_timeout_s: float,
    **kwargs: Any,
) -> RawObject:
    """``call(*args, **kwargs)`` unparsed, checked and parsed; ``doing`` names it in errors."""
    try:
        resp = await call(
            *args, **kwargs, _preload_content=False, _request_timeout=request_timeout_s
        )
        try:
            await check_response(resp, doing)
            data = json.loads(await resp.read())
        finally:
            resp.release()
    except KubeError:
        raise
    except (ApiException, aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        raise translate(exc, doing=doing) from exc
    if not isinstance(data, dict):
        raise KubeError(f"{doing}: the answer is not a JSON object: {str(data)[:300]}")
    return data


async def read_deployment(
    api: client.ApiClient, *, namespace: str, name: str, request_timeout_s: float = 10.0
) -> RawObject:
    """The Deployment ``namespace/name`` as the API server returns it."""
    apps: Any = client.AppsV1Api(api)
    return await call_json(
        apps.read_namespaced_deployment,
        name,
        namespace,
        doing=f"read Deployment {namespace}/{name}",
        request_timeout_s=request_timeout_s,
    )
