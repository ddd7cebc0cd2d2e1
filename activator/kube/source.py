"""Targets from Kubernetes: watches of opted-in Deployments, Services, EndpointSlices, Nodes.

The only module of the activator (with its package) that imports
kubernetes_asyncio. Three :class:`~activator.kube.watch.Reflector` loops keep
local stores:

- Deployments with the label selector (``autoscaling.tidal.dev/enabled=true``);
- Services (to map a ``routing.tidal.dev/port`` number to the port name the
  EndpointSlices carry);
- EndpointSlices that belong to a Service (``kubernetes.io/service-name``);
- Nodes (cluster-wide, read only), for their interruption-notice taints:
  endpoints on a node under notice drain (:mod:`activator.notice_taints`).
  A node event schedules a rebuild only when the set of nodes under notice
  changes, so node status updates cost a set comparison. With no notice
  taint keys configured, Nodes are not watched at all.

Any change schedules one rebuild on the next loop turn (a burst of events
costs one), which joins the stores with the pure
:func:`~activator.kube.translate.build_targets` and hands the snapshot to the
sink. The first snapshot goes out once every watch has listed.

Configuration, in the scaler's order: an explicit kubeconfig path
(``--kubeconfig``), else ``$KUBECONFIG``, else in-cluster when
``KUBERNETES_SERVICE_HOST`` is set, else ``~/.kube/config``. The client gets a
``Configuration`` of its own rather than the library's process-wide default,
so two sources in one process (tests) never share credentials.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from activator.kube.translate import SERVICE_NAME_LABEL, build_targets
from activator.kube.watch import Gone, Lister, Obj, Reflector, Watcher
from activator.notice_taints import DEFAULT_NOTICE_TAINTS, nodes_under_notice
from activator.targets import TargetSink

__all__ = ["KubeSource"]

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 300


class ApiError(Exception):
    """The API server refused a list or watch; the message says what it answered."""

    def __init__(self, exc: ApiException) -> None:
        super().__init__(f"API server answered {exc.status} {exc.reason}")


def _bind(
    list_all: Callable[..., Any],
    list_namespaced: Callable[..., Any],
    *,
    namespace: str | None,
    label_selector: str,
) -> tuple[Lister, Watcher]:
    def call(**kwargs: Any) -> Any:
        if namespace:
            return list_namespaced(namespace, label_selector=label_selector, **kwargs)
        return list_all(label_selector=label_selector, **kwargs)

    async def lister() -> tuple[list[Obj], str]:
        try:
            resp = await call(_preload_content=False)
        except ApiException as exc:
            raise ApiError(exc) from exc
        try:
            data = json.loads(await resp.read())
        finally:
            resp.release()
        return list(data.get("items") or []), str(data["metadata"]["resourceVersion"])

    async def watcher(version: str) -> AsyncIterator[Obj]:
        func = list_namespaced if namespace else list_all
        args = (namespace,) if namespace else ()
        w = watch.Watch()
        try:
            async with w.stream(
                func,
                *args,
                label_selector=label_selector,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_TIMEOUT_S,
            ) as stream:
                async for event in stream:
                    yield {"type": event["type"], "object": event["raw_object"]}
        except ApiException as exc:
            if exc.status == 410:
                raise Gone() from exc
            raise ApiError(exc) from exc

    return lister, watcher


class KubeSource:
    """A TargetSource backed by the Kubernetes API."""

    def __init__(
        self,
        *,
        label_selector: str,
        namespace: str | None = None,
        kubeconfig: Path | None = None,
        notice_taints: tuple[str, ...] = DEFAULT_NOTICE_TAINTS,
    ) -> None:
        self.label_selector = label_selector
        self.notice_taints = notice_taints
        #: Names of the nodes under interruption notice, as of the last node event.
        self.nodes_under_notice: frozenset[str] = frozenset()
        self.namespace = namespace
        self.kubeconfig = kubeconfig
        self.reflectors: tuple[Reflector, ...] = ()

    async def _load_config(self) -> client.Configuration:
        cfg = client.Configuration()
        path = str(self.kubeconfig or "") or os.environ.get("KUBECONFIG") or None
        if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            await config.load_kube_config(config_file=path, client_configuration=cfg)
        return cfg

    async def run(self, sink: TargetSink) -> None:
        cfg = await self._load_config()
        async with client.ApiClient(configuration=cfg) as api:
            apps = client.AppsV1Api(api)
            core = client.CoreV1Api(api)
            disc = client.DiscoveryV1Api(api)
            loop = asyncio.get_running_loop()
            pending = False

            def rebuild() -> None:
                nonlocal pending
                pending = False
                if not all(r.synced.is_set() for r in reflectors):
                    return
                targets, problems = build_targets(
                    deployments.store.values(),
                    services.store,
                    slices.store.values(),
                    nodes_under_notice=self.nodes_under_notice,
                )
                for problem in problems:
                    log.warning("%s", problem)
                sink.apply(targets)

            def changed() -> None:
                nonlocal pending
                if not pending:
                    pending = True
                    loop.call_soon(rebuild)

            ns = self.namespace
            lister, watcher = _bind(
                apps.list_deployment_for_all_namespaces,
                apps.list_namespaced_deployment,
                namespace=ns,
                label_selector=self.label_selector,
            )
            deployments = Reflector("Deployment", lister=lister, watcher=watcher, on_change=changed)
            lister, watcher = _bind(
                core.list_service_for_all_namespaces,
                core.list_namespaced_service,
                namespace=ns,
                label_selector="",
            )
            services = Reflector("Service", lister=lister, watcher=watcher, on_change=changed)
            lister, watcher = _bind(
                disc.list_endpoint_slice_for_all_namespaces,
                disc.list_namespaced_endpoint_slice,
                namespace=ns,
                label_selector=SERVICE_NAME_LABEL,
            )
            slices = Reflector("EndpointSlice", lister=lister, watcher=watcher, on_change=changed)
            reflectors: tuple[Reflector, ...] = (deployments, services, slices)
            if self.notice_taints:
                node_lists = 0

                def nodes_changed() -> None:
                    # A (re-)list always rebuilds: the first one may be the
                    # last watch to sync, which the first snapshot waits for.
                    nonlocal node_lists
                    noticed = nodes_under_notice(nodes.store.values(), self.notice_taints)
                    if noticed == self.nodes_under_notice and nodes.lists == node_lists:
                        return
                    if noticed != self.nodes_under_notice:
                        log.info(
                            "nodes under interruption notice: %s",
                            ", ".join(sorted(noticed)) or "none",
                        )
                    node_lists = nodes.lists
                    self.nodes_under_notice = noticed
                    changed()

                lister, watcher = _bind(
                    core.list_node, core.list_node, namespace=None, label_selector=""
                )
                nodes = Reflector("Node", lister=lister, watcher=watcher, on_change=nodes_changed)
                reflectors = (*reflectors, nodes)
            self.reflectors = reflectors
            await asyncio.gather(*(r.run() for r in reflectors))
