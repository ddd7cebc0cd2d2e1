"""Targets from Kubernetes: watches of opted-in Deployments, Services, EndpointSlices, Nodes.

The only module of the activator (with its package) that imports
kubernetes_asyncio. Four (or five) :class:`~groundwork.kube.reflector.Reflector`
loops, the scaler's own, keep local stores (an
:class:`~groundwork.kube.reflector.ObjectCache` each):

- Deployments with the label selector (``autoscaling.tidal.dev/enabled=true``);
- Services (to map a ``routing.tidal.dev/port`` number to the port name the
  EndpointSlices carry);
- EndpointSlices that belong to a Service (``kubernetes.io/service-name``);
- ConfigMaps with the same label selector as the Deployments: the LoRA
  adapter lists that ``routing.tidal.dev/adapters-configmap`` names (a
  ConfigMap without the label is not seen, so none of a cluster's other
  ConfigMaps is watched);
- Nodes (cluster-wide, read only), for their interruption-notice taints:
  endpoints on a node under notice drain (:mod:`activator.kube.notice_taints`).
  A node event schedules a rebuild only when the set of nodes under notice
  changes, so node status updates cost a set comparison. With no notice
  taint keys configured, Nodes are not watched at all.

Any change schedules one rebuild on the next loop turn (a burst of events
costs one), which joins the stores with the pure
:func:`~activator.kube.translate.build_targets` and hands the snapshot to the
sink. The first snapshot goes out once every watch has listed.

The connection is the scaler's too (:func:`groundwork.kube.connection.connect`):
an explicit kubeconfig path (``--kubeconfig``), else ``$KUBECONFIG``, else
in-cluster when ``KUBERNETES_SERVICE_HOST`` is set, else ``~/.kube/config``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from activator.kube.notice_taints import DEFAULT_NOTICE_TAINTS, nodes_under_notice
from activator.kube.translate import SERVICE_NAME_LABEL, build_targets
from activator.targets import TargetSink
from groundwork.kube.connection import connect
from groundwork.kube.reflector import ObjectCache, Reflector

__all__ = ["KubeSource"]

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 300


def _reflector(
    what: str,
    cache: ObjectCache,
    list_all: Callable[..., Any],
    list_namespaced: Callable[..., Any],
    *,
    namespace: str | None,
    label_selector: str,
) -> Reflector:
    kwargs: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
    if namespace:
        kwargs["namespace"] = namespace
    return Reflector(
        list_call=list_namespaced if namespace else list_all,
        what=what,
        on_reset=cache.reset,
        on_event=cache.event,
        list_kwargs=kwargs,
        watch_timeout_s=WATCH_TIMEOUT_S,
    )


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

    async def run(self, sink: TargetSink) -> None:
        access = await connect(kubeconfig=str(self.kubeconfig) if self.kubeconfig else None)
        try:
            await self._watch(access.api, sink)
        finally:
            await access.close()

    def _object_reflectors(
        self,
        apps: Any,
        core: Any,
        disc: Any,
        deployments: ObjectCache,
        services: ObjectCache,
        slices: ObjectCache,
        configmaps: ObjectCache,
    ) -> tuple[Reflector, ...]:
        """The watches of the namespaced objects targets are built from."""
        ns = self.namespace
        return (
            _reflector(
                "Deployment",
                deployments,
                apps.list_deployment_for_all_namespaces,
                apps.list_namespaced_deployment,
                namespace=ns,
                label_selector=self.label_selector,
            ),
            _reflector(
                "Service",
                services,
                core.list_service_for_all_namespaces,
                core.list_namespaced_service,
                namespace=ns,
                label_selector="",
            ),
            _reflector(
                "EndpointSlice",
                slices,
                disc.list_endpoint_slice_for_all_namespaces,
                disc.list_namespaced_endpoint_slice,
                namespace=ns,
                label_selector=SERVICE_NAME_LABEL,
            ),
            # LoRA adapter lists (routing.tidal.dev/adapters-configmap): only the
            # ConfigMaps opted in with the Deployments' label, never all of them.
            _reflector(
                "ConfigMap",
                configmaps,
                core.list_config_map_for_all_namespaces,
                core.list_namespaced_config_map,
                namespace=ns,
                label_selector=self.label_selector,
            ),
        )

    async def _watch(self, api: client.ApiClient, sink: TargetSink) -> None:
        apps: Any = client.AppsV1Api(api)
        core: Any = client.CoreV1Api(api)
        disc: Any = client.DiscoveryV1Api(api)
        loop = asyncio.get_running_loop()
        pending = False

        def rebuild() -> None:
            nonlocal pending
            pending = False
            if not all(r.synced for r in reflectors):
                return
            targets, problems = build_targets(
                deployments.store.values(),
                services.store,
                slices.store.values(),
                nodes_under_notice=self.nodes_under_notice,
                configmaps=configmaps.store,
            )
            for problem in problems:
                log.warning("%s", problem)
            sink.apply(targets)

        def changed() -> None:
            nonlocal pending
            if not pending:
                pending = True
                loop.call_soon(rebuild)

        deployments, services, slices, configmaps = (
            ObjectCache(changed),
            ObjectCache(changed),
            ObjectCache(changed),
            ObjectCache(changed),
        )
        reflectors = self._object_reflectors(
            apps, core, disc, deployments, services, slices, configmaps
        )
        if self.notice_taints:

            def nodes_changed() -> None:
                noticed = nodes_under_notice(nodes.store.values(), self.notice_taints)
                if noticed == self.nodes_under_notice:
                    return
                log.info(
                    "nodes under interruption notice: %s", ", ".join(sorted(noticed)) or "none"
                )
                self.nodes_under_notice = noticed
                changed()

            def nodes_listed(items: list[dict[str, Any]]) -> None:
                # A (re-)list always rebuilds: the first one may be the last
                # watch to sync, which the first snapshot waits for.
                nodes.reset(items)
                changed()

            nodes = ObjectCache(nodes_changed)
            node_reflector = Reflector(
                list_call=core.list_node,
                what="Node",
                on_reset=nodes_listed,
                on_event=nodes.event,
                watch_timeout_s=WATCH_TIMEOUT_S,
            )
            reflectors = (*reflectors, node_reflector)
        self.reflectors = reflectors
        await asyncio.gather(*(r.run() for r in reflectors))
