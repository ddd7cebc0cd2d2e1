"""One-shot reads of single objects as raw JSON, for tools outside the services.

The load tests' replica sampler reads one Deployment every second while a
load test runs. It used to carry a kubeconfig parser and an HTTP client of
its own; it now connects as the services do
(:func:`groundwork.kube.connection.connect`, so exec plugins, client
certificates and in-cluster accounts all work) and reads through here.

Raw JSON rather than kubernetes_asyncio models, as the Reflector reads:
the caller wants two fields. Failures come out as
:mod:`groundwork.kube.errors` types.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from groundwork.kube.errors import KubeError, translate
from groundwork.kube.reflector import RawObject, check_response

__all__ = ["read_deployment"]


async def read_deployment(
    api: client.ApiClient, *, namespace: str, name: str, request_timeout_s: float = 10.0
) -> RawObject:
    """The Deployment ``namespace/name`` as the API server returns it."""
    apps: Any = client.AppsV1Api(api)
    doing = f"read Deployment {namespace}/{name}"
    try:
        resp = await apps.read_namespaced_deployment(
            name, namespace, _preload_content=False, _request_timeout=request_timeout_s
        )
        await check_response(resp, doing)
        try:
            data = json.loads(await resp.read())
        finally:
            resp.release()
    except KubeError:
        raise
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        raise translate(exc, doing=doing) from exc
    if not isinstance(data, dict):
        raise KubeError(f"{doing}: the answer is not an object: {str(data)[:300]}")
    return data
