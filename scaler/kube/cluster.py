"""The opted-in Deployments and their pods, kept current by watches.

One watch of Deployments across all namespaces with the label selector
``autoscaling.tidal.dev/enabled=true``, and one watch of pods per namespace
that holds at least one such Deployment (started and stopped as Deployments
come and go). A pod belongs to a target when the Deployment's selector
matches its labels, as the ReplicaSet controller decides it.

Main decision, per-namespace pod watches rather than one per Deployment or one
for the whole cluster: a thousand models in a few namespaces cost a few
streams, and the scaler never needs to read pods in namespaces it does not
manage.

The snapshots are kept by :class:`~scaler.kube.index.TargetIndex`, updated
per watch event rather than rebuilt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubernetes_asyncio import client

from groundwork.kube.raw import RawObject
from groundwork.kube.reflector import Reflector
from scaler.kube.index import TargetIndex
from scaler.kube.types import (
    ENABLED_LABEL,
    POD_DELETION_COST,
    DeploymentInfo,
    LabelRequirement,
    LabelSelector,
    PodInfo,
    TargetSnapshot,
)
from scaler.policy.placement.cost import gpu_requests, gpus_requested

__all__ = ["KubeCluster", "deployment_from_raw", "pod_from_raw"]

log = logging.getLogger(__name__)


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


GPU_RESOURCE = "nvidia.com/gpu"


def _epoch(text: Any) -> float:
    """Seconds since the epoch of an RFC 3339 timestamp (0 when missing or bad)."""
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _gpus(spec: RawObject) -> int:
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    total = 0
    for c in pod_spec.get("containers") or ():
        res = c.get("resources") or {}
        got = (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(
            GPU_RESOURCE
        )
        total += _int(got, 0)
    return total or 1


def deployment_from_raw(obj: RawObject) -> DeploymentInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    sel = spec.get("selector") or {}
    exprs = tuple(
        LabelRequirement(
            key=str(e.get("key", "")),
            operator=str(e.get("operator", "")),
            values=tuple(str(v) for v in e.get("values") or ()),
        )
        for e in sel.get("matchExpressions") or ()
    )
    return DeploymentInfo(
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        annotations=dict(meta.get("annotations") or {}),
        # apps/v1 defaults an omitted spec.replicas to 1.
        spec_replicas=_int(spec.get("replicas", 1), 1),
        ready_replicas=_int(status.get("readyReplicas", 0), 0),
        selector=LabelSelector(
            match_labels=dict(sel.get("matchLabels") or {}), match_expressions=exprs
        ),
        resource_version=str(meta.get("resourceVersion", "")),
        gpus_per_replica=_gpus(spec),
        raw=obj,
    )


def pod_from_raw(obj: RawObject) -> PodInfo:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    ports: dict[str, int] = {}
    for container in spec.get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") and port.get("containerPort"):
                ports.setdefault(str(port["name"]), _int(port["containerPort"], 0))
    cost = (meta.get("annotations") or {}).get(POD_DELETION_COST)
    evicted = status.get("reason") == "Evicted" or any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return PodInfo(
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        ip=status.get("podIP") or None,
        ready=ready,
        terminating=meta.get("deletionTimestamp") is not None,
        ports=ports,
        deletion_cost=_int(cost, 0) if cost is not None else None,
        node=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        created_at=_epoch(meta.get("creationTimestamp")),
        evicted=evicted,
        gpus=gpus_requested(spec),
        gpu_resource=min(gpu_requests(spec), default=GPU_RESOURCE),
    )


class KubeCluster:
    """A :class:`~scaler.kube.types.ClusterView` fed by watches."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        label_selector: str = f"{ENABLED_LABEL}=true",
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
    ) -> None:
        self._apps: Any = client.AppsV1Api(api)
        self._core: Any = client.CoreV1Api(api)
        self._label_selector = label_selector
        self._watch_timeout_s = watch_timeout_s
        self._request_timeout_s = request_timeout_s
        self._index = TargetIndex()
        self._pod_tasks: dict[str, asyncio.Task[None]] = {}
        self._deploy_reflector = Reflector(
            list_call=self._apps.list_deployment_for_all_namespaces,
            what="deployments",
            on_reset=self._reset_deployments,
            on_event=self._deployment_event,
            list_kwargs={"label_selector": label_selector},
            watch_timeout_s=watch_timeout_s,
            request_timeout_s=request_timeout_s,
        )

    @property
    def synced(self) -> bool:
        return self._deploy_reflector.synced

    def targets(self) -> Mapping[str, TargetSnapshot]:
        return self._index.targets()

    # -- deployments --------------------------------------------------------

    def _reset_deployments(self, items: list[RawObject]) -> None:
        self._index.reset_deployments(deployment_from_raw(obj) for obj in items)
        self._watch_namespaces()

    def _deployment_event(self, kind: str, obj: RawObject) -> None:
        d = deployment_from_raw(obj)
        if kind == "DELETED":
            self._index.delete_deployment(d.key)
        else:
            self._index.put_deployment(d)
        self._watch_namespaces()

    def _watch_namespaces(self) -> None:
        """One pod watch per namespace that holds a target, and no other."""
        wanted = self._index.namespaces()
        for ns in list(self._pod_tasks):
            if ns not in wanted:
                self._pod_tasks.pop(ns).cancel()
                self._index.forget_namespace(ns)
        for ns in wanted - self._pod_tasks.keys():
            self._pod_tasks[ns] = asyncio.get_running_loop().create_task(
                self._pod_reflector(ns).run(), name=f"tidal-pod-watch-{ns}"
            )

    # -- pods -----------------------------------------------------------------

    def _pod_reflector(self, namespace: str) -> Reflector:
        def reset(items: list[RawObject]) -> None:
            self._index.reset_pods(namespace, (pod_from_raw(obj) for obj in items))

        def event(kind: str, obj: RawObject) -> None:
            p = pod_from_raw(obj)
            if kind == "DELETED":
                self._index.delete_pod(namespace, p.name)
            else:
                self._index.put_pod(p)

        return Reflector(
            list_call=self._core.list_namespaced_pod,
            what=f"pods in {namespace}",
            on_reset=reset,
            on_event=event,
            list_kwargs={"namespace": namespace},
            watch_timeout_s=self._watch_timeout_s,
            request_timeout_s=self._request_timeout_s,
        )

    async def run(self) -> None:
        """Watch until cancelled."""
        try:
            await self._deploy_reflector.run()
        finally:
            tasks = list(self._pod_tasks.values())
            self._pod_tasks.clear()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
