"""One-shot reads for ``tidal status``: the opted-in Deployments, their spot companions,
those whose opt-in label has a value that opts nothing in, and the opted-in
InferencePools with the Deployment each scales (as the scaler's pool index binds them)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from groundwork.kube.errors import NotFound
from groundwork.kube.raw import call_json
from scaler.kube.objects import deployment_from_raw
from scaler.kube.placement_watch import companion_from_raw
from scaler.kube.pool_index import PoolIndex
from scaler.kube.pools import POOL_GROUP, POOL_PLURAL, POOL_VERSION, pool_from_raw
from scaler.kube.types import ENABLED_LABEL, CompanionInfo, DeploymentInfo, PoolInfo, PoolState
from scaler.policy.placement.companion import CAPACITY_TYPE_LABEL

__all__ = ["list_companions", "list_not_opted_in", "list_opted_in", "list_pools"]


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


async def list_pools(
    api: client.ApiClient, *, namespace: str | None = None, request_timeout_s: float = 10.0
) -> tuple[dict[str, PoolState], dict[str, tuple[DeploymentInfo, PoolInfo]]]:
    """The opted-in InferencePools by key, and by Deployment key the Deployment a pool
    scales with that pool; ``({}, {})`` where the InferencePool CRD is not installed."""
    custom: Any = client.CustomObjectsApi(api)
    gvp = {"group": POOL_GROUP, "version": POOL_VERSION, "plural": POOL_PLURAL}
    doing = f"list InferencePools in {namespace or 'all namespaces'}"
    try:
        if namespace is None:
            data = await call_json(
                custom.list_cluster_custom_object,
                **gvp,
                doing=doing,
                request_timeout_s=request_timeout_s,
            )
        else:
            data = await call_json(
                custom.list_namespaced_custom_object,
                **gvp,
                namespace=namespace,
                doing=doing,
                request_timeout_s=request_timeout_s,
            )
    except NotFound:
        return {}, {}
    index = PoolIndex()
    index.reset_pools(pool_from_raw(obj) for obj in data.get("items") or ())
    for ns in sorted(index.namespaces()):
        items = await _list(
            api,
            selector="",
            namespace=ns,
            what="deployments",
            request_timeout_s=request_timeout_s,
        )
        index.reset_deployments(ns, (deployment_from_raw(obj) for obj in items))
    return dict(index.states()), dict(index.bound())
