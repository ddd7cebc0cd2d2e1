"""What placement watches beyond the opted-in Deployments: nodes, and the spot companions.

- **Nodes** (one cluster-wide watch): labels (capacity type, zone, GPU
  model) and taints. When a node gains one of the provider's notice taints
  (:meth:`~scaler.policy.placement.providers.ProviderPreset.under_notice`),
  ``on_notice(node_name)`` is called at once, so the controller decides for
  the targets on that node now rather than at the next tick (docs/placement.md: a
  notice is an event, not a tick).
- **Spot companions** (one watch of Deployments labelled
  ``placement.tidal.dev/capacity-type=spot`` and annotated
  ``placement.tidal.dev/companion-of``): their scale, readiness and template
  hash, keyed ``namespace/<user's Deployment>``. They do not carry the
  opt-in label, so the main Deployment watch never sees them.

:func:`pod_facts` turns a pod and the node it runs on into the plain
:class:`~scaler.policy.placement.availability.PodFacts` the policy counts. A pod's
capacity type comes from its node's labels, or, before it is scheduled,
from the companion's pod label (spot) or its absence (on-demand).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio import client

from groundwork.kube.raw import RawObject
from groundwork.kube.reflector import Reflector
from scaler.kube.types import CompanionInfo, NodeInfo, PodInfo
from scaler.policy.placement.availability import CapacityType, PodFacts
from scaler.policy.placement.companion import CAPACITY_TYPE_LABEL, COMPANION_OF, TEMPLATE_HASH
from scaler.policy.placement.providers import ProviderPreset

__all__ = ["PlacementWatch", "companion_from_raw", "node_from_raw", "pod_facts"]


def node_from_raw(obj: RawObject) -> NodeInfo:
    meta = obj.get("metadata") or {}
    taints = tuple(
        {str(k): str(v) for k, v in t.items()}
        for t in (obj.get("spec") or {}).get("taints") or ()
        if isinstance(t, dict)
    )
    return NodeInfo(
        name=str(meta.get("name", "")), labels=dict(meta.get("labels") or {}), taints=taints
    )


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def companion_from_raw(obj: RawObject) -> CompanionInfo | None:
    """The companion, or ``None`` for a Deployment that is not one of Tidal's."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    owner = annotations.get(COMPANION_OF)
    if not owner:
        return None
    return CompanionInfo(
        namespace=str(meta.get("namespace", "default")),
        name=str(meta.get("name", "")),
        companion_of=str(owner),
        spec_replicas=_int((obj.get("spec") or {}).get("replicas", 1)),
        ready_replicas=_int((obj.get("status") or {}).get("readyReplicas", 0)),
        template_hash=str(annotations.get(TEMPLATE_HASH, "")),
        resource_version=str(meta.get("resourceVersion", "")),
    )


def pod_facts(pod: PodInfo, nodes: Mapping[str, NodeInfo], preset: ProviderPreset) -> PodFacts:
    node = nodes.get(pod.node) if pod.node else None
    capacity = preset.capacity_of(node.labels) if node is not None else None
    if capacity is None:
        spot = pod.labels.get(CAPACITY_TYPE_LABEL) == CapacityType.SPOT.value
        capacity = CapacityType.SPOT if spot else CapacityType.ON_DEMAND
    return PodFacts(
        name=pod.name,
        capacity_type=capacity,
        phase=pod.phase,
        ready=pod.ready,
        created_at=pod.created_at,
        node=pod.node,
        node_under_notice=node is not None and preset.under_notice(node.taints),
        evicted=pod.evicted,
        terminating=pod.terminating,
        gpus=pod.gpus,
        gpu_model=node.labels.get(preset.gpu_product_label) if node is not None else None,
    )


class PlacementWatch:
    """Nodes and spot companions, kept current by two watches (see the module docstring)."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        preset: ProviderPreset,
        on_notice: Callable[[str], None] | None = None,
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.preset = preset
        self._on_notice = on_notice
        self._nodes: dict[str, NodeInfo] = {}
        self._noticed: set[str] = set()
        self._companions: dict[str, CompanionInfo] = {}
        core: Any = client.CoreV1Api(api)
        apps: Any = client.AppsV1Api(api)
        self._node_reflector = Reflector(
            list_call=core.list_node,
            what="nodes",
            on_reset=self._reset_nodes,
            on_event=self._node_event,
            watch_timeout_s=watch_timeout_s,
            request_timeout_s=request_timeout_s,
        )
        self._companion_reflector = Reflector(
            list_call=apps.list_deployment_for_all_namespaces,
            what="spot companion deployments",
            on_reset=self._reset_companions,
            on_event=self._companion_event,
            list_kwargs={"label_selector": f"{CAPACITY_TYPE_LABEL}=spot"},
            watch_timeout_s=watch_timeout_s,
            request_timeout_s=request_timeout_s,
        )

    @property
    def synced(self) -> bool:
        return self._node_reflector.synced and self._companion_reflector.synced

    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes

    def companions(self) -> Mapping[str, CompanionInfo]:
        """By ``namespace/<user's Deployment name>``."""
        return self._companions

    # -- nodes ------------------------------------------------------------------

    def _reset_nodes(self, items: list[RawObject]) -> None:
        self._nodes = {}
        for obj in items:
            self._node_event("ADDED", obj)

    def _node_event(self, kind: str, obj: RawObject) -> None:
        node = node_from_raw(obj)
        if kind == "DELETED":
            self._nodes.pop(node.name, None)
            self._noticed.discard(node.name)
            return
        self._nodes[node.name] = node
        if self.preset.under_notice(node.taints):
            if node.name not in self._noticed:
                self._noticed.add(node.name)
                if self._on_notice is not None:
                    self._on_notice(node.name)
        else:
            self._noticed.discard(node.name)

    # -- companions -------------------------------------------------------------

    def _reset_companions(self, items: list[RawObject]) -> None:
        self._companions = {}
        for obj in items:
            self._companion_event("ADDED", obj)

    def _companion_event(self, kind: str, obj: RawObject) -> None:
        companion = companion_from_raw(obj)
        if companion is None:
            return
        key = f"{companion.namespace}/{companion.companion_of}"
        if kind == "DELETED":
            self._companions.pop(key, None)
        else:
            self._companions[key] = companion

    async def run(self) -> None:
        """Watch until cancelled."""
        tasks = [
            asyncio.create_task(self._node_reflector.run(), name="tidal-node-watch"),
            asyncio.create_task(self._companion_reflector.run(), name="tidal-companion-watch"),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
