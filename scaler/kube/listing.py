"""One-shot reads for ``tidal status``: the opted-in Deployments, their spot and shape
companions, and those whose opt-in label has a value that opts nothing in."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from groundwork.kube.raw import call_json
from scaler.kube.cluster import deployment_from_raw
from scaler.kube.placement_watch import companion_from_raw
from scaler.kube.types import ENABLED_LABEL, CompanionInfo, DeploymentInfo
from scaler.policy.placement.companion import CAPACITY_TYPE_LABEL
from scaler.policy.shapes.template import SHAPE_LABEL

__all__ = ["list_companions", "list_not_opted_in", "list_opted_in", "list_shape_companions"]


async def list_opted_in(
    api: client.ApiClient, *, namespace: str | None = None, request_timeout_s: float = 10.0
) -> list[DeploymentInfo]:
    """Opted-in Deployments in ``namespace`` (``None``: every namespace), sorted by key."""
    items = await _list(
        api,
        selector=f"{ENABLED_LABEL}=true",
        namespace=namespace,
        what="opted-in deployments",
        request_timeout_s=request_timeout_s,
    )
    found = [deployment_from_raw(obj) for obj in items]
    return sorted(found, key=lambda d: d.key)


async def list_not_opted_in(
    api: client.ApiClient, *, namespace: str | None = None, request_timeout_s: float = 10.0
) -> list[tuple[str, str]]:
    """``(namespace/name, value)`` of Deployments that carry the opt-in label with a value
    other than ``true`` (``"yes"``, ``"True"``...), which opts nothing in; sorted."""
    items = await _list(
        api,
        selector=f"{ENABLED_LABEL},{ENABLED_LABEL}!=true",
        namespace=namespace,
        what="deployments labelled but not opted in",
        request_timeout_s=request_timeout_s,
    )
    found = []
    for obj in items:
        meta = obj.get("metadata") or {}
        value = str((meta.get("labels") or {}).get(ENABLED_LABEL, ""))
        found.append((f"{meta.get('namespace', '')}/{meta.get('name', '')}", value))
    return sorted(found)


async def list_companions(
    api: client.ApiClient, *, namespace: str | None = None, request_timeout_s: float = 10.0
) -> dict[str, CompanionInfo]:
    """Spot companions by ``namespace/<user's Deployment>``."""
    items = await _list(
        api,
        selector=f"{CAPACITY_TYPE_LABEL}=spot",
        namespace=namespace,
        what="spot companion deployments",
        request_timeout_s=request_timeout_s,
    )
    found = (companion_from_raw(obj) for obj in items)
    return {f"{c.namespace}/{c.companion_of}": c for c in found if c is not None}


async def list_shape_companions(
    api: client.ApiClient, *, namespace: str | None = None, request_timeout_s: float = 10.0
) -> dict[str, dict[str, CompanionInfo]]:
    """Shape companions by ``namespace/<user's Deployment>``, then by shape."""
    items = await _list(
        api,
        selector=SHAPE_LABEL,
        namespace=namespace,
        what="shape companion deployments",
        request_timeout_s=request_timeout_s,
    )
    found: dict[str, dict[str, CompanionInfo]] = {}
    for obj in items:
        companion = companion_from_raw(obj)
        shape = ((obj.get("metadata") or {}).get("labels") or {}).get(SHAPE_LABEL)
        if companion is not None and shape:
            key = f"{companion.namespace}/{companion.companion_of}"
            found.setdefault(key, {})[str(shape)] = companion
    return found


async def _list(
    api: client.ApiClient,
    *,
    selector: str,
    namespace: str | None,
    what: str,
    request_timeout_s: float,
) -> list[dict[str, Any]]:
    apps: Any = client.AppsV1Api(api)
    doing = f"list {what} in {namespace or 'all namespaces'}"
    if namespace is None:
        data = await call_json(
            apps.list_deployment_for_all_namespaces,
            doing=doing,
            request_timeout_s=request_timeout_s,
            label_selector=selector,
        )
    else:
        data = await call_json(
            apps.list_namespaced_deployment,
            namespace,
            doing=doing,
            request_timeout_s=request_timeout_s,
            label_selector=selector,
        )
    return list(data.get("items") or ())
