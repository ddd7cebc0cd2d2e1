"""The opted-in InferencePools and the Deployments they select, kept current by watches.

An ``InferencePool`` (``inference.networking.k8s.io/v1``, the Gateway API
Inference Extension) opts in as a Deployment does: the label
``autoscaling.tidal.dev/enabled: "true"``, or the same key as an annotation
(a pool is often made by a chart whose labels are hard to add to; pools
are few, so they are watched across the cluster and filtered here, and
either form is read). For each namespace that holds an opted-in pool, one
watch of all its Deployments (they need not carry the opt-in label: the
pool opts them in). :class:`~scaler.kube.pool_index.PoolIndex` says which
pool scales which Deployment, and ``on_change`` is called after every
change so the cluster view can follow.

Main decision, a cluster without the InferencePool CRD (or an install
without the RBAC to read it) is not an error of the scaler's: the first
list is tried every ``probe_every_s`` (60 s) until it is answered, with one
log line saying why, and the Deployments' own path runs as it did. Once
pools are served, the watch runs as every other does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio import client

from groundwork.kube.errors import KubeError, NotFound
from groundwork.kube.raw import RawObject, call_json
from groundwork.kube.reflector import Reflector
from scaler.kube.objects import deployment_from_raw
from scaler.kube.pool_index import PoolIndex
from scaler.kube.types import ENABLED_LABEL, DeploymentInfo, PoolInfo, PoolState

__all__ = ["POOL_GROUP", "POOL_PLURAL", "POOL_VERSION", "PoolWatch", "pool_from_raw"]

log = logging.getLogger(__name__)

POOL_GROUP = "inference.networking.k8s.io"
POOL_VERSION = "v1"
POOL_PLURAL = "inferencepools"


def _opted_in(meta: Mapping[str, Any]) -> bool:
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return "true" in (labels.get(ENABLED_LABEL), annotations.get(ENABLED_LABEL))


def _port(value: Any) -> int | None:
    number = (value or {}).get("number") if isinstance(value, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def pool_from_raw(obj: RawObject) -> PoolInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ref = spec.get("endpointPickerRef") or {}
    picker = None
    port = _port(ref.get("port"))
    if ref.get("name") and ref.get("kind", "Service") == "Service" and port is not None:
        picker = (str(ref["name"]), port)
    ports = tuple(p for p in (_port(t) for t in spec.get("targetPorts") or ()) if p is not None)
    match_labels = (spec.get("selector") or {}).get("matchLabels") or {}
    return PoolInfo(
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        selector={str(k): str(v) for k, v in match_labels.items()},
        target_ports=ports,
        picker=picker,
        opted_in=_opted_in(meta),
        resource_version=str(meta.get("resourceVersion", "")),
    )


class PoolWatch:
    """Watches InferencePools and the Deployments of their namespaces (module docstring)."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        on_change: Callable[[], None],
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
        probe_every_s: float = 60.0,
    ) -> None:
        custom: Any = client.CustomObjectsApi(api)
        self._apps: Any = client.AppsV1Api(api)
        self._list_pools = custom.list_cluster_custom_object
        self._pool_args = {"group": POOL_GROUP, "version": POOL_VERSION, "plural": POOL_PLURAL}
        self._on_change = on_change
        self._watch_timeout_s = watch_timeout_s
        self._request_timeout_s = request_timeout_s
        self._probe_every_s = probe_every_s
        self.index = PoolIndex()
        self.served = False  # the cluster answered a list of InferencePools
        self._deployment_tasks: dict[str, asyncio.Task[None]] = {}

    def states(self) -> Mapping[str, PoolState]:
        return self.index.states()

    def bound(self) -> Mapping[str, tuple[DeploymentInfo, PoolInfo]]:
        return self.index.bound()

    # -- pools --------------------------------------------------------------------

    def _reset_pools(self, items: list[RawObject]) -> None:
        self.index.reset_pools(pool_from_raw(obj) for obj in items)
        self._changed()

    def _pool_event(self, kind: str, obj: RawObject) -> None:
        pool = pool_from_raw(obj)
        if kind == "DELETED":
            self.index.delete_pool(pool.key)
        else:
            self.index.put_pool(pool)
        self._changed()

    def _changed(self) -> None:
        self._watch_namespaces()
        self._on_change()

    def _watch_namespaces(self) -> None:
        """One Deployment watch per namespace holding an opted-in pool, and no other."""
        wanted = self.index.namespaces()
        for ns in list(self._deployment_tasks):
            if ns not in wanted:
                self._deployment_tasks.pop(ns).cancel()
                self.index.forget_namespace(ns)
        for ns in wanted - self._deployment_tasks.keys():
            self._deployment_tasks[ns] = asyncio.get_running_loop().create_task(
                self._deployment_reflector(ns).run(), name=f"tidal-pool-deployments-{ns}"
            )

    # -- the Deployments of the pools' namespaces ----------------------------------

    def _deployment_reflector(self, namespace: str) -> Reflector:
        def reset(items: list[RawObject]) -> None:
            self.index.reset_deployments(namespace, (deployment_from_raw(o) for o in items))
            self._on_change()

        def event(kind: str, obj: RawObject) -> None:
            d = deployment_from_raw(obj)
            if kind == "DELETED":
                self.index.delete_deployment(namespace, d.name)
            else:
                self.index.put_deployment(d)
            self._on_change()

        return Reflector(
            list_call=self._apps.list_namespaced_deployment,
            what=f"deployments in {namespace} (InferencePools)",
            on_reset=reset,
            on_event=event,
            list_kwargs={"namespace": namespace},
            watch_timeout_s=self._watch_timeout_s,
            request_timeout_s=self._request_timeout_s,
        )

    async def _served(self) -> None:
        """Return once the cluster answers a list of InferencePools (module docstring)."""
        said = False
        while True:
            try:
                await call_json(
                    self._list_pools,
                    **self._pool_args,
                    limit=1,
                    doing="list InferencePools",
                    request_timeout_s=self._request_timeout_s,
                )
                self.served = True
                return
            except KubeError as exc:
                if not said:
                    why = (
                        "the InferencePool CRD (inference.networking.k8s.io/v1) is not installed"
                        if isinstance(exc, NotFound)
                        else str(exc)
                    )
                    log.warning(
                        "no InferencePool is scaled: %s; trying again every %.0fs",
                        why,
                        self._probe_every_s,
                    )
                    said = True
            await asyncio.sleep(self._probe_every_s)

    async def run(self) -> None:
        """Watch until cancelled."""
        try:
            await self._served()
            log.info("watching InferencePools across the cluster")
            await Reflector(
                list_call=self._list_pools,
                what="inferencepools",
                on_reset=self._reset_pools,
                on_event=self._pool_event,
                list_kwargs=dict(self._pool_args),
                watch_timeout_s=self._watch_timeout_s,
                request_timeout_s=self._request_timeout_s,
                backoff_max_s=self._probe_every_s,
            ).run()
        finally:
            tasks = list(self._deployment_tasks.values())
            self._deployment_tasks.clear()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
