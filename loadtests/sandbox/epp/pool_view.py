"""An InferencePool and its pods, seen as the endpoint picker sees them: the ready endpoints.

What llm-d's router keeps in its datastore (``pkg/epp/datastore``), in
miniature: the pool's ``spec.selector.matchLabels`` picks pods in the
pool's namespace; a pod is an endpoint when its ``Ready`` condition is
``True`` and it has an address; each of the pool's ``targetPorts`` makes
one endpoint of it, named ``<pod>-rank-<i>`` as the router names them (the
name the in-flight metrics carry).

Main decision: no pool object, or one whose spec cannot be read, is a view
with no endpoints, so requests are held (the waiting room) rather than sent
anywhere; the view says why in ``problem``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Endpoint", "PoolView", "pool_view"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One pod at one target port."""

    name: str  # "<pod>-rank-<i>"
    namespace: str
    address: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"


@dataclass(frozen=True, slots=True)
class PoolView:
    """The pool's ready endpoints (sorted by name), or why there are none."""

    namespace: str
    name: str
    endpoints: tuple[Endpoint, ...] = ()
    problem: str = ""  # "": the pool was read


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _selected(labels: Obj, match: Obj) -> bool:
    return all(labels.get(key) == value for key, value in match.items())


def pool_view(namespace: str, name: str, pool: Obj | None, pods: Iterable[Obj]) -> PoolView:
    """The endpoints of pool ``namespace/name`` (``pool`` its object, None when absent)."""
    if pool is None:
        return PoolView(namespace, name, problem=f"InferencePool {namespace}/{name} not found")
    spec = pool.get("spec") or {}
    match = (spec.get("selector") or {}).get("matchLabels")
    ports = [p.get("number") for p in spec.get("targetPorts") or [] if isinstance(p, dict)]
    if not isinstance(match, dict) or not match or not ports:
        return PoolView(
            namespace, name, problem="the pool has no spec.selector.matchLabels or targetPorts"
        )
    endpoints = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        address = (pod.get("status") or {}).get("podIP")
        if meta.get("namespace", namespace) != namespace or not address:
            continue
        if not _selected(meta.get("labels") or {}, match) or not _ready(pod):
            continue
        for rank, port in enumerate(ports):
            if isinstance(port, int) and not isinstance(port, bool):
                pod_name = str(meta.get("name", ""))
                endpoints.append(Endpoint(f"{pod_name}-rank-{rank}", namespace, address, port))
    return PoolView(namespace, name, tuple(sorted(endpoints, key=lambda e: e.name)))
