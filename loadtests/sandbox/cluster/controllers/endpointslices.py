"""EndpointSlices for Services, as the real EndpointSlice controller writes them.

For each Service with a selector, the pods it selects (in its namespace,
with an IP, not Succeeded or Failed; terminating pods included) become
endpoints of ``discovery.k8s.io/v1`` EndpointSlices:

- ``addressType: IPv4``; labels ``kubernetes.io/service-name`` and
  ``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io``
  (plus the Service's own labels, as the real controller copies them);
  ``ownerReferences`` to the Service (``controller: true``), so deleting the
  Service removes them; names ``<service>-<random>``;
- ports: each Service port's ``targetPort`` resolved against the pod's
  containers (a number as is, a name looked up among the containerPorts with
  the same protocol, absent meaning the Service port). Pods whose ports
  resolve differently go to different slices, one slice per port set, at
  most 100 endpoints each;
- each endpoint: ``addresses: [podIP]``, ``conditions`` exactly as
  ``podToEndpoint`` sets them: ``serving`` = pod Ready, ``terminating`` =
  ``deletionTimestamp`` set, ``ready`` = serving and not terminating (or
  ``publishNotReadyAddresses``); ``targetRef`` to the pod; ``nodeName``;
  ``zone`` from the node's ``topology.kubernetes.io/zone`` label.

A Service that selects nothing gets one empty slice (``endpoints: []``, no
ports), as the real controller's placeholder. A Service without a selector
gets none (its slices are the user's to write), and slices left over when a
selector is removed are deleted. Unchanged slices are not rewritten, so a
watcher sees a change only when an endpoint or port really changed.
"""

from __future__ import annotations

import contextlib
from typing import Any

from loadtests.sandbox.cluster.controllers.base import (
    ENDPOINTSLICES,
    NODES,
    PODS,
    SERVICES,
    Cache,
    Controller,
    Key,
    Obj,
    controller_ref,
    is_pod_ready,
)
from loadtests.sandbox.cluster.errors import NotFound
from loadtests.sandbox.cluster.selectors import LabelSelector, selector_from_object
from loadtests.sandbox.cluster.store import Store

__all__ = ["MANAGED_BY", "MAX_ENDPOINTS_PER_SLICE", "EndpointSliceController", "endpoint_ports"]

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
ZONE = "topology.kubernetes.io/zone"
MAX_ENDPOINTS_PER_SLICE = 100


def _find_container_port(pod: Obj, name: str, protocol: str) -> int | None:
    for container in pod.get("spec", {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == name and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: Obj, pod: Obj) -> tuple[tuple[str, str, int, str | None], ...]:
    """(name, protocol, port, appProtocol) per Service port that resolves for ``pod``."""
    ports = []
    for sp in service.get("spec", {}).get("ports") or ():
        protocol = sp.get("protocol", "TCP")
        target: Any = sp.get("targetPort", sp.get("port"))
        number: int | None
        if isinstance(target, int):
            number = target
        elif isinstance(target, str) and target.isdigit():
            number = int(target)
        elif isinstance(target, str):
            number = _find_container_port(pod, target, protocol)
        else:
            number = None
        if number is None:
            continue  # a named port the pod lacks: this port is left out for it
        ports.append((sp.get("name", ""), protocol, number, sp.get("appProtocol")))
    return tuple(ports)


def _port_objects(ports: tuple[tuple[str, str, int, str | None], ...]) -> list[Obj]:
    out = []
    for name, protocol, number, app in ports:
        port: Obj = {"name": name, "protocol": protocol, "port": number}
        if app:
            port["appProtocol"] = app
        out.append(port)
    return out


class EndpointSliceController(Controller):
    name = "endpointslice-controller"

    def __init__(self, store: Store, cache: Cache) -> None:
        super().__init__(store, cache)
        self._selectors: dict[Key, LabelSelector] = {}
        cache.on(SERVICES, self._on_service)
        cache.on(PODS, self._on_pod)
        cache.on(ENDPOINTSLICES, self._on_slice)
        cache.on(NODES, self._on_node)
        for svc in store.list(SERVICES, copy=False)[0]:
            self._on_service("ADDED", None, svc)

    def _on_service(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if new is None:
            self._selectors.pop(key, None)
        else:
            selector = new.get("spec", {}).get("selector")
            if selector:
                self._selectors[key] = selector_from_object(selector)
            else:
                self._selectors.pop(key, None)
        self.queue.add(key)

    def _on_pod(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        namespace = (new or old or {}).get("metadata", {}).get("namespace")
        labels = [(p["metadata"].get("labels") or {}) for p in (old, new) if p is not None]
        for svc in self.cache.by(SERVICES, "namespace", namespace or ""):
            key = (namespace or "", svc["metadata"]["name"])
            selector = self._selectors.get(key)
            if selector is not None and any(selector.matches(ls) for ls in labels):
                self.queue.add(key)

    def _on_slice(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        # Someone else changed or removed one of our slices: put it right.
        obj = new or old
        assert obj is not None
        labels = obj["metadata"].get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(SERVICE_NAME):
            self.queue.add((obj["metadata"]["namespace"], labels[SERVICE_NAME]))

    def _on_node(self, event: str, old: Obj | None, new: Obj | None) -> None:
        zone_old = ((old or {}).get("metadata", {}).get("labels") or {}).get(ZONE)
        zone_new = ((new or {}).get("metadata", {}).get("labels") or {}).get(ZONE)
        if event == "MODIFIED" and zone_old != zone_new:
            for key in self._selectors:
                self.queue.add(key)

    def _endpoint(self, service: Obj, pod: Obj) -> Obj:
        meta = pod["metadata"]
        serving = is_pod_ready(pod)
        terminating = bool(meta.get("deletionTimestamp"))
        publish = bool(service.get("spec", {}).get("publishNotReadyAddresses"))
        endpoint: Obj = {
            "addresses": [pod["status"]["podIP"]],
            "conditions": {
                "ready": publish or (serving and not terminating),
                "serving": serving,
                "terminating": terminating,
            },
            "targetRef": {
                "kind": "Pod",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        }
        node_name = pod.get("spec", {}).get("nodeName")
        if node_name:
            endpoint["nodeName"] = node_name
            node = self.store.peek(NODES, "", node_name)
            zone = ((node or {}).get("metadata", {}).get("labels") or {}).get(ZONE)
            if zone:
                endpoint["zone"] = zone
        return endpoint

    def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        service = self.store.peek(SERVICES, namespace, name)
        existing = [
            s
            for s in self.cache.by(ENDPOINTSLICES, "service", f"{namespace}/{name}")
            if (s["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
        ]
        selector = self._selectors.get(key)
        if service is None or selector is None or service["metadata"].get("deletionTimestamp"):
            if service is not None:  # selector removed: our slices go
                for s in existing:
                    with contextlib.suppress(NotFound):
                        self.store.delete(ENDPOINTSLICES, namespace, s["metadata"]["name"])
            return None
        groups: dict[tuple[Any, ...], list[Obj]] = {}
        pods = sorted(
            (
                p
                for p in self.cache.by(PODS, "namespace", namespace)
                if selector.matches(p["metadata"].get("labels"))
                and (p.get("status") or {}).get("podIP")
                and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
            ),
            key=lambda p: p["metadata"]["name"],
        )
        for pod in pods:
            groups.setdefault(endpoint_ports(service, pod), []).append(self._endpoint(service, pod))
        desired: list[tuple[list[Obj] | None, list[Obj]]] = []
        for ports, endpoints in sorted(groups.items()):
            for i in range(0, len(endpoints), MAX_ENDPOINTS_PER_SLICE):
                desired.append((_port_objects(ports), endpoints[i : i + MAX_ENDPOINTS_PER_SLICE]))
        if not desired:
            desired.append((None, []))  # the placeholder
        self._apply(service, existing, desired)
        return None

    def _apply(
        self, service: Obj, existing: list[Obj], desired: list[tuple[list[Obj] | None, list[Obj]]]
    ) -> None:
        meta = service["metadata"]
        labels = {
            **{
                k: v
                for k, v in (meta.get("labels") or {}).items()
                if k not in (SERVICE_NAME, MANAGED_BY_LABEL)
            },
            SERVICE_NAME: meta["name"],
            MANAGED_BY_LABEL: MANAGED_BY,
        }
        owner = controller_ref(service, kind="Service", api_version="v1")
        # Reuse slices with the same ports first, so an endpoint change is one update.
        remaining = sorted(existing, key=lambda s: s["metadata"]["name"])
        plan: list[tuple[Obj | None, list[Obj] | None, list[Obj]]] = []
        for ports, endpoints in desired:
            match = next((s for s in remaining if s.get("ports") == ports), None)
            if (
                match is None
                and remaining
                and not any(s.get("ports") == p for s in remaining for p, _ in desired)
            ):
                match = remaining[0]
            if match is not None:
                remaining.remove(match)
            plan.append((match, ports, endpoints))
        for match, ports, endpoints in plan:
            body: Obj = {
                "addressType": "IPv4",
                "endpoints": endpoints,
            }
            if ports is not None:
                body["ports"] = ports
            if match is None:
                self.store.create(
                    ENDPOINTSLICES,
                    {
                        "metadata": {
                            "generateName": f"{meta['name'][:57]}-",
                            "namespace": meta["namespace"],
                            "labels": labels,
                            "ownerReferences": [owner],
                        },
                        **body,
                    },
                    namespace=meta["namespace"],
                )
                continue
            wanted = {
                **{k: v for k, v in match.items() if k not in ("endpoints", "ports")},
                **body,
                "metadata": {**match["metadata"], "labels": labels, "ownerReferences": [owner]},
            }
            if wanted != match:
                self.store.update(ENDPOINTSLICES, wanted)
        for stale in remaining:
            with contextlib.suppress(NotFound):
                self.store.delete(ENDPOINTSLICES, meta["namespace"], stale["metadata"]["name"])
