"""The opted-in Deployments and their pods, kept current by watches.

One watch of Deployments across all namespaces with the label selector
``autoscaling.tidal.dev/enabled=true``, and one watch of pods per namespace
that holds at least one such Deployment (started and stopped as Deployments
come and go). A pod belongs to a target when the Deployment's selector
matches its labels, as the ReplicaSet controller decides it. With
``pools=True``, the Deployments an opted-in InferencePool scales are
targets too (:mod:`scaler.kube.pools` watches the pools and their
namespaces' Deployments); a Deployment both watches deliver is kept at the
newer of the two versions they saw.

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
from typing import Any

from kubernetes_asyncio import client

from groundwork.kube.raw import RawObject
from groundwork.kube.reflector import Reflector
from scaler.kube.index import TargetIndex
from scaler.kube.objects import deployment_from_raw, pod_from_raw
from scaler.kube.pools import PoolWatch
from scaler.kube.types import ENABLED_LABEL, DeploymentInfo, PoolState, TargetSnapshot

__all__ = ["KubeCluster", "newer"]

log = logging.getLogger(__name__)


def newer(a: DeploymentInfo | None, b: DeploymentInfo | None) -> DeploymentInfo | None:
    """The later of two versions of one Deployment that two watches delivered: the
    higher ``resourceVersion`` (the API server's are integers; opaque ones keep ``a``)."""
    if a is None or b is None:
        return a or b
    rv_a, rv_b = a.resource_version, b.resource_version
    if rv_a.isdigit() and rv_b.isdigit() and int(rv_b) > int(rv_a):
        return b
    return a


class KubeCluster:
    """A :class:`~scaler.kube.types.ClusterView` fed by watches."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        label_selector: str = f"{ENABLED_LABEL}=true",
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
        pools: bool = False,
    ) -> None:
        self._apps: Any = client.AppsV1Api(api)
        self._core: Any = client.CoreV1Api(api)
        self._label_selector = label_selector
        self._watch_timeout_s = watch_timeout_s
        self._request_timeout_s = request_timeout_s
        self._index = TargetIndex()
        self._pod_tasks: dict[str, asyncio.Task[None]] = {}
        # The label-selector watch's Deployments, and those a pool scales.
        self._labelled: dict[str, DeploymentInfo] = {}
        self._pooled: dict[str, DeploymentInfo] = {}
        self._held: dict[str, DeploymentInfo] = {}  # what the index holds, by key
        self._pool_watch: PoolWatch | None = None
        if pools:
            self._pool_watch = PoolWatch(
                api,
                on_change=self._pools_changed,
                watch_timeout_s=watch_timeout_s,
                request_timeout_s=request_timeout_s,
            )
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

    def pools(self) -> Mapping[str, PoolState]:
        """The opted-in InferencePools and what each selects (``{}`` without pools)."""
        return self._pool_watch.states() if self._pool_watch is not None else {}

    # -- deployments --------------------------------------------------------

    def _reset_deployments(self, items: list[RawObject]) -> None:
        self._labelled = {d.key: d for d in map(deployment_from_raw, items)}
        self._held = {
            key: d
            for key in self._labelled.keys() | self._pooled.keys()
            if (d := newer(self._labelled.get(key), self._pooled.get(key))) is not None
        }
        self._index.reset_deployments(self._held.values())
        self._watch_namespaces()

    def _deployment_event(self, kind: str, obj: RawObject) -> None:
        d = deployment_from_raw(obj)
        if kind == "DELETED":
            self._labelled.pop(d.key, None)
        else:
            self._labelled[d.key] = d
        self._follow(d.key)
        self._watch_namespaces()

    def _pools_changed(self) -> None:
        """The pools or their namespaces' Deployments changed: follow what they scale."""
        assert self._pool_watch is not None
        was = self._pooled
        self._pooled = {key: d for key, (d, _) in self._pool_watch.bound().items()}
        for key in was.keys() | self._pooled.keys():
            self._follow(key)
        self._watch_namespaces()

    def _follow(self, key: str) -> None:
        """Hand the index the newer version of ``key`` either watch holds (none: gone)."""
        d = newer(self._labelled.get(key), self._pooled.get(key))
        if d is self._held.get(key):
            return
        if d is None:
            del self._held[key]
            self._index.delete_deployment(key)
        else:
            self._held[key] = d
            self._index.put_deployment(d)

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
            async with asyncio.TaskGroup() as group:
                group.create_task(self._deploy_reflector.run(), name="tidal-deployment-watch")
                if self._pool_watch is not None:
                    group.create_task(self._pool_watch.run(), name="tidal-pool-watch")
        finally:
            tasks = list(self._pod_tasks.values())
            self._pod_tasks.clear()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
