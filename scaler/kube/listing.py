"""One-shot reads for ``tidal status``: the opted-in Deployments, as values."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio import client

from scaler.kube.cluster import deployment_from_raw
from scaler.kube.errors import KubeError, translate
from scaler.kube.types import ENABLED_LABEL, DeploymentInfo
from scaler.kube.watch import check_response

__all__ = ["list_opted_in"]


async def list_opted_in(
    api: client.ApiClient, *, namespace: str | None = None, request_timeout_s: float = 10.0
) -> list[DeploymentInfo]:
    """Opted-in Deployments in ``namespace`` (``None``: every namespace), sorted by key."""
    apps: Any = client.AppsV1Api(api)
    selector = f"{ENABLED_LABEL}=true"
    doing = f"list opted-in deployments in {namespace or 'all namespaces'}"
    try:
        if namespace is None:
            resp = await apps.list_deployment_for_all_namespaces(
                label_selector=selector, _preload_content=False, _request_timeout=request_timeout_s
            )
        else:
            resp = await apps.list_namespaced_deployment(
                namespace,
                label_selector=selector,
                _preload_content=False,
                _request_timeout=request_timeout_s,
            )
        await check_response(resp, doing)
        try:
            data = json.loads(await resp.read())
        finally:
            resp.release()
    except KubeError:
        raise
    except Exception as exc:
        raise translate(exc, doing=doing) from exc
    found = [deployment_from_raw(obj) for obj in data.get("items") or ()]
    return sorted(found, key=lambda d: d.key)
